//! Read the machine: the harnesses, their configs, the binaries, the
//! server, the state under `$PRELOOP_HOME`. Nothing here judges; the
//! [`Facts`] are plain data for [`super::judge`].

use super::model::{ConfigState, ProgramState, StateReport};
use crate::context::{Ctx, InstallMethod, Scope};
use crate::dialect::{self, Dialect, EnvFacts, FolderTrust, Trust};
use crate::edit::{self, Owner};
use crate::probe::{self, Health, TokenCheck};
use crate::util;
use preloop_shared::config::{Config, Origin, Secret};
use preloop_shared::session::{self, RunState};
use preloop_shared::{Harness, fsutil};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything doctor looked at.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Where our entries should point.
    pub hook_dir: PathBuf,
    /// Why the executable is not run from where it is (a cargo target dir,
    /// an npm package), if so.
    pub unstable_reason: Option<String>,
    /// The executable the hooks link to exists in the hook dir.
    pub hook_exe_exists: bool,
    /// How the executable was installed (what puts it back).
    pub install_method: Option<InstallMethod>,
    /// This executable and the hooks' copy have the same bytes.
    pub exe_same_as_copy: bool,
    /// Hook commands in the hook dir that are not links to its executable.
    pub stale_links: usize,
    pub harnesses: Vec<HarnessFacts>,
    /// Config and onboarding files that hold a token and others can read.
    pub open_token_files: Vec<PathBuf>,
    pub server: Option<ServerFacts>,
    pub state: StateReport,
    /// The last error lines of the hook log, redacted.
    pub last_errors: Vec<String>,
}

/// One harness.
#[derive(Debug, Clone)]
pub struct HarnessFacts {
    pub harness: Harness,
    /// Its program on PATH.
    pub program: Option<PathBuf>,
    pub version: Option<String>,
    /// The user scope, then the project scope when it is another file that exists.
    pub scopes: Vec<ScopeFacts>,
    /// What its dialect reads about the hooks' environment.
    pub env: Option<EnvFacts>,
}

/// One config file of a harness.
#[derive(Debug, Clone)]
pub struct ScopeFacts {
    pub scope: Scope,
    pub path: PathBuf,
    pub state: ConfigState,
    /// The parsed file (`null` when missing or unparsable).
    pub doc: Value,
    /// Other users can write it (and so make the harness run anything).
    pub writable_by_others: bool,
    /// Per command of an entry of ours: where its program stands.
    pub programs: Vec<(String, ProgramState)>,
    /// The harness's trust per entry of ours, where it has such a thing.
    pub trust: Option<Trust>,
    /// Project scope: whether the harness loads it here.
    pub folder: FolderTrust,
    /// The dialect's other files that may switch hooks off: (shown path, document).
    pub switches: Vec<(String, Value)>,
    /// What is wrong with the files beside the hook file (Pi's extension),
    /// once it holds entries of ours ([`Dialect::companion_problems`]).
    pub companions: Vec<dialect::Concern>,
}

/// The server at the configured URL.
#[derive(Debug, Clone)]
pub struct ServerFacts {
    pub url: String,
    pub url_origin: Origin,
    pub health: Health,
    /// The runtime token's check (None: no runtime token, or not asked).
    pub runtime: Option<TokenCheck>,
    /// The user token's check (None: none, or not asked).
    pub user: Option<TokenCheck>,
}

pub fn collect(ctx: &Ctx, config: &Config, ask_harness: bool) -> Facts {
    let hook_dir = ctx.hook_dir();
    let hook_exe = ctx.hook_exe();
    let secrets = util::secrets(config);
    Facts {
        unstable_reason: ctx.unstable_reason(),
        install_method: Some(ctx.install_method()),
        hook_exe_exists: hook_exe.exists(),
        exe_same_as_copy: hook_exe.exists() && util::same_file_content(&ctx.exe(), &hook_exe),
        stale_links: crate::links::names()
            .into_iter()
            .filter(|n| {
                let p = hook_dir.join(n);
                p.exists() && !crate::links::is_link_to(&p, &hook_exe)
            })
            .count(),
        harnesses: dialect::all().map(|d| harness(ctx, config, d, &hook_dir, ask_harness)).collect(),
        open_token_files: open_token_files(config),
        server: server(config),
        state: state(config),
        last_errors: last_errors(&config.home, 5, &secrets),
        hook_dir,
    }
}

fn harness(ctx: &Ctx, config: &Config, d: &dyn Dialect, hook_dir: &Path, ask_harness: bool) -> HarnessFacts {
    let h = d.harness();
    // The harness the user runs: the one on PATH (no test-only override).
    let program = util::find_program(h.def().program);
    let version = program.as_deref().and_then(|p| d.version(p));
    let mut scopes = Vec::new();
    let user = d.hooks_file(ctx, Scope::User);
    scopes.extend(scope(ctx, d, Scope::User, hook_dir, program.as_deref(), ask_harness));
    if d.hooks_file(ctx, Scope::Project) != user {
        scopes.extend(scope(ctx, d, Scope::Project, hook_dir, program.as_deref(), ask_harness));
    }
    HarnessFacts { harness: h, program, version, scopes, env: d.env_facts(ctx, config) }
}

fn scope(
    ctx: &Ctx,
    d: &dyn Dialect,
    scope: Scope,
    hook_dir: &Path,
    program: Option<&Path>,
    ask_harness: bool,
) -> Option<ScopeFacts> {
    let h = d.harness();
    let path = d.hooks_file(ctx, scope);
    let (state, doc) = match read_doc(&path, h) {
        None if scope == Scope::Project => return None,
        None => (ConfigState::Missing, Value::Null),
        Some(Err(e)) => (ConfigState::Unparsable(e), Value::Null),
        Some(Ok(v)) => (ConfigState::Ok, v),
    };
    let owner = Owner::new(h, hook_dir);
    let found = edit::our_entries(&doc, &owner);
    let programs = found
        .iter()
        .filter_map(|e| {
            let binary = owner.binary_of(&e.command)?;
            Some((e.command.clone(), program_state(Path::new(&edit::program_of(&e.command)), &hook_dir.join(binary))))
        })
        .collect();
    let trust = if found.is_empty() { None } else { d.entry_trust(ctx, &path, &doc, &owner, program, ask_harness) };
    let folder = if scope == Scope::Project { d.folder_trust(ctx) } else { FolderTrust::NotNeeded };
    let switches = d
        .switch_files(ctx)
        .into_iter()
        .filter_map(|f| {
            let v = serde_json::from_str::<Value>(&std::fs::read_to_string(&f).ok()?).ok()?;
            Some((util::tilde(&ctx.env, &f), v))
        })
        .collect();
    let writable_by_others = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&path).is_ok_and(|m| m.mode() & 0o022 != 0)
    };
    let companions = if found.is_empty() { Vec::new() } else { d.companion_problems(ctx, &path) };
    Some(ScopeFacts { scope, path, state, doc, writable_by_others, programs, trust, folder, switches, companions })
}

/// Where the program `prog` of an entry stands against ours, `here`.
fn program_state(prog: &Path, here: &Path) -> ProgramState {
    if !prog.exists() {
        ProgramState::Missing
    } else if !util::is_executable(prog) {
        ProgramState::NotExecutable
    } else if prog == here {
        ProgramState::Ok
    } else if !here.exists() {
        ProgramState::NotBuiltHere
    } else if util::same_file_content(prog, here) {
        ProgramState::ElsewhereIdentical
    } else {
        ProgramState::ElsewhereDiffers
    }
}

fn read_doc(path: &Path, h: Harness) -> Option<Result<Value, String>> {
    let text = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return Some(Err(fsutil::io_text(&e))),
    };
    let text = match String::from_utf8(text) {
        Ok(t) => t,
        Err(_) => return Some(Err("not UTF-8 text".into())),
    };
    Some(edit::parse_config(&text, dialect::of(h).syntax()))
}

/// A token file others can read (ssh refuses such a key; we warn).
fn open_token_files(config: &Config) -> Vec<PathBuf> {
    let mut files = vec![config.home.join("config.json")];
    files.extend(
        fsutil::list_names(&config.home.join("agents"))
            .into_iter()
            .map(|n| config.home.join("agents").join(n).join("permission_hook.json")),
    );
    files
        .into_iter()
        .filter(|f| {
            let has_token = std::fs::read_to_string(f)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .is_some_and(|v| v.get("token").is_some() || v.get("user_token").is_some());
            has_token && fsutil::readable_by_others(f)
        })
        .collect()
}

fn server(config: &Config) -> Option<ServerFacts> {
    let (url, url_origin) = config.url.clone()?;
    let proxy = config.settings.proxy.as_ref();
    let health = probe::health(&url, Duration::from_secs(3), proxy);
    let answers = matches!(health, Health::Preloop | Health::Unhealthy(_));
    let runtime = config
        .server
        .as_ref()
        .filter(|_| answers)
        .map(|s| probe::runtime_token(&s.url, &s.token, Duration::from_secs(5), proxy));
    let user = config.user_token.as_ref().filter(|_| answers).map(|(t, _)| user_check(&url, t, proxy));
    Some(ServerFacts { url, url_origin, health, runtime, user })
}

fn user_check(url: &str, token: &Secret, proxy: Option<&preloop_shared::http::ProxyUrl>) -> TokenCheck {
    probe::user_token(url, token, Duration::from_secs(5), proxy)
}

fn state(config: &Config) -> StateReport {
    let mut s = StateReport::default();
    let day_ago = preloop_shared::time::Timestamp::now().add_secs(-24 * 3600);
    for f in session::all_session_files(&config.home) {
        if let Some(ended) = f.ended_at {
            s.sessions_ended += 1;
            if !f.uncarried_notes.is_empty() && ended.secs() >= day_ago.secs() {
                s.uncarried.push(super::model::Uncarried {
                    session: f.external_session_id.clone(),
                    note_ids: f.uncarried_notes.clone(),
                });
            }
        } else {
            s.sessions_live += 1;
        }
    }
    let run = config.home.join("run");
    for name in fsutil::list_names(&run).into_iter().filter(|n| n.ends_with(".json")) {
        if let Ok(Some(st)) = fsutil::read_json::<RunState>(&run.join(&name)) {
            s.run_states += 1;
            if !st.spool.is_empty() {
                s.spooled_notes += st.spool.len();
                s.sessions_with_spool.push(name.trim_end_matches(".json").to_string());
            }
            s.owed_acks += st.owed_acks.iter().map(|a| a.note_ids.len()).sum::<usize>();
        }
    }
    if config.is_local() && !config.mode_unknown {
        let ib = preloop_shared::local::LocalInbox::new(&config.home, config.settings.note_ttl_secs);
        s.inbox_pending = ib
            .list()
            .ok()
            .map(|l| l.iter().filter(|n| n.state == preloop_shared::operator::ReceiptState::Pending).count());
    }
    s
}

fn last_errors(home: &Path, n: usize, secrets: &[Secret]) -> Vec<String> {
    let mut lines = Vec::new();
    for name in ["hooks.log.1", "hooks.log"] {
        if let Ok(t) = std::fs::read_to_string(home.join("log").join(name)) {
            lines.extend(
                t.lines()
                    .filter(|l| l.contains(" error=") || l.contains("outcome=panic"))
                    .map(|l| util::redact(l, secrets)),
            );
        }
    }
    let skip = lines.len().saturating_sub(n);
    lines.into_iter().skip(skip).collect()
}
