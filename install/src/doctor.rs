//! `doctor`: is everything in place, and what applies here.
//!
//! Checks: the configuration (`$PRELOOP_HOME`, `config.json`, onboarding
//! files: readable, ours, not writable by others), which mode the hooks and
//! the operator commands use and why; each harness (installed? version?),
//! our entries in its config in both scopes, Codex trust per hook, folder
//! trust for project scope, whether each entry's program is the binary we
//! install (or an identical copy), the hook timeouts and Cursor's
//! `loop_limit`; for a server whether it answers, is a Preloop server and
//! accepts the tokens (cheap authenticated calls); the spool and session
//! state, the last errors in the hook log, and (with `--verbose`) the known
//! limits.
//!
//! One problem is one line with one fix that works as written. Exit codes:
//! 0 healthy (warnings allowed); 5 our hooks are installed in no harness;
//! 6 an installation or configuration problem; 7 a server problem. With
//! several, the first in that order wins (5, 6, 7).

use crate::codex_trust;
use crate::edit::{self, Entry, Owner};
use crate::install::{self, Ctx, Scope};
use crate::probe::{self, Health, TokenCheck};
use crate::table;
use crate::util::{self, print_json, print_table};
use preloop_shared::Exit;
use preloop_shared::config::{Config, Origin, Secret, TokenOrigin};
use preloop_shared::registry::{self, Evidence};
use preloop_shared::session::{self, RunState};
use preloop_shared::{Harness, fsutil};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The version of `doctor --json`'s shape (schemas/preloop-hooks/doctor.schema.json).
pub const SCHEMA_VERSION: u32 = 1;

/// The harness version our adapter was proven against (None: documented only).
pub fn proven_version(h: Harness) -> Option<&'static str> {
    let d = h.def();
    (d.evidence == Evidence::RealBinary).then_some(d.version)
}

/// One thing wrong (or worth knowing), with the one fix.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Finding {
    /// What is wrong, one line.
    pub what: String,
    /// What to do, one line that works as written (empty: nothing to do).
    pub fix: String,
}

impl Finding {
    fn new(what: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding { what: what.into(), fix: fix.into() }
    }
    fn line(&self) -> String {
        if self.fix.is_empty() { self.what.clone() } else { format!("{} (fix: {})", self.what, self.fix) }
    }
}

#[derive(Debug, Serialize)]
pub struct EntryReport {
    pub event: String,
    pub binary: String,
    pub present: bool,
    pub command: Option<String>,
    /// ok, missing, not_executable, elsewhere_identical, elsewhere_differs, not_built_here
    pub program: Option<String>,
    pub timeout: Option<u64>,
    pub expected_timeout: u64,
    /// Codex: trusted, untrusted, modified.
    pub trust: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct ScopeReport {
    pub scope: String,
    pub config: String,
    /// ok, missing, or the parse error.
    pub config_state: String,
    pub hooks_present: usize,
    pub hooks_expected: usize,
    pub entries: Vec<EntryReport>,
    /// Codex: where the trust states come from.
    pub trust_source: Option<String>,
    /// Project scope: whether the harness loads this folder's config
    /// (None: cannot tell, or not applicable).
    pub folder_trusted: Option<bool>,
}

#[derive(Debug, Serialize)]
pub struct HarnessReport {
    pub harness: String,
    pub name: String,
    /// Its program is on PATH.
    pub installed: bool,
    pub program: Option<String>,
    pub version: Option<String>,
    pub proven_version: Option<String>,
    /// Our hooks over all scopes.
    pub hooks_present: usize,
    pub hooks_expected: usize,
    /// The user scope, then the project scope when it holds a config.
    pub scopes: Vec<ScopeReport>,
}

#[derive(Debug, Serialize, Default)]
pub struct ServerReport {
    /// A URL is configured (for the hooks or the operator commands).
    pub configured: bool,
    pub url: Option<String>,
    /// Where the URL comes from.
    pub url_from: Option<String>,
    /// preloop, unhealthy, not_preloop, unreachable, unchecked
    pub health: String,
    /// Kept for the old shape: whether anything answered.
    pub reachable: Option<bool>,
    /// accepted, rejected, unchecked, not configured
    pub runtime_token: String,
    pub runtime_token_from: Option<String>,
    pub user_token: String,
    pub user_token_from: Option<String>,
    pub detail: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Modes {
    /// What the hooks on this machine use: server, local, unknown.
    pub hooks: String,
    pub hooks_why: String,
    /// What notes/sessions commands use: server or local.
    pub operator: String,
    pub operator_why: String,
}

#[derive(Debug, Serialize, Default)]
pub struct StateReport {
    pub sessions_live: usize,
    pub sessions_ended: usize,
    pub run_states: usize,
    pub spooled_notes: usize,
    pub sessions_with_spool: Vec<String>,
    pub owed_acks: usize,
    pub inbox_pending: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    /// The shape's version ([`SCHEMA_VERSION`]).
    pub schema: u32,
    pub healthy: bool,
    pub exit_code: u8,
    /// The exit code's name (`ok`, `not_installed`, ...).
    pub exit: &'static str,
    /// The hooks' mode (server, local, unknown); `modes` says why.
    pub mode: String,
    pub modes: Modes,
    pub preloop_home: String,
    /// Where the binaries are.
    pub bin_dir: String,
    /// Where our entries should point (the bin dir, or its stable copy).
    pub hook_dir: String,
    pub harnesses: Vec<HarnessReport>,
    pub server: ServerReport,
    pub state: StateReport,
    pub last_errors: Vec<String>,
    pub limits: Vec<String>,
    pub problems: Vec<Finding>,
    pub warnings: Vec<Finding>,
}

/// Whether `src` exists and is a newer build than its copy `dst` (a hard
/// link is the same file; otherwise size or modification time tell).
fn harness_program(h: Harness) -> Option<PathBuf> {
    let env_key = format!("PRELOOP_E2E_{}", h.slug().replace('-', "_").to_uppercase());
    util::find_program(h.def().program, &[env_key.as_str()], &[])
}

fn version_of(p: &Path) -> Option<String> {
    let out = util::output_with_timeout(Command::new(p).arg("--version"), Duration::from_secs(15))?;
    let line = out.lines().next().unwrap_or("").to_string();
    // "2.1.328 (Claude Code)", "codex-cli 0.169.0", "GitHub Copilot CLI 1.0.102.", "2026.10.01-e373342"
    line.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .map(|w| w.trim_end_matches('.').to_string())
        .or(Some(line))
}

#[derive(Default)]
struct Collector {
    problems: Vec<Finding>,
    warnings: Vec<Finding>,
    install_problem: bool,
    server_problem: bool,
}

impl Collector {
    fn install(&mut self, f: Finding) {
        if !self.problems.contains(&f) {
            self.problems.push(f);
        }
        self.install_problem = true;
    }
    fn server(&mut self, f: Finding) {
        if !self.problems.contains(&f) {
            self.problems.push(f);
        }
        self.server_problem = true;
    }
    fn warn(&mut self, f: Finding) {
        if !self.warnings.contains(&f) {
            self.warnings.push(f);
        }
    }
}

/// `preloop-hooks install` with the flags that reach one harness and scope.
fn install_cmd(h: Option<Harness>, scope: Scope) -> String {
    let mut s = "preloop-hooks install".to_string();
    if let Some(h) = h {
        s.push_str(&format!(" --harness {}", h.slug()));
    }
    if scope == Scope::Project {
        s.push_str(" --scope project");
    }
    s
}

fn scope_label(scope: Scope) -> &'static str {
    match scope {
        Scope::User => "",
        Scope::Project => " (project)",
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
    Some(edit::parse_config(&text, h))
}

/// Codex trust per our entry (command, snake event) → status, from the
/// real `codex app-server` when asked and available, else derived.
fn codex_trust_states(
    ctx: &Ctx,
    path: &Path,
    doc: &Value,
    owner: &Owner,
    program: Option<&PathBuf>,
    deep: bool,
    c: &mut Collector,
) -> (String, Vec<(String, String, String)>) {
    let key_path = codex_trust::canonical_dir(path.parent().unwrap_or(Path::new("/"))).join("hooks.json");
    let listed = if deep {
        program.and_then(|p| {
            codex_trust::list_hooks_via_app_server(
                p,
                &codex_trust::canonical_dir(&ctx.codex_home()),
                &ctx.cwd,
                &[],
                Duration::from_secs(20),
            )
            .ok()
        })
    } else {
        None
    };
    let mut trust = Vec::new();
    match listed {
        Some((hooks, problems)) => {
            for p in problems {
                c.warn(Finding::new(format!("codex reports: {p}"), ""));
            }
            for k in hooks.iter().filter(|k| owner.binary_of(&k.command).is_some()) {
                let ev = k.key.split(':').rev().nth(2).unwrap_or("").to_string();
                trust.push((k.command.clone(), ev, k.trust_status.clone()));
            }
            ("codex app-server hooks/list".to_string(), trust)
        }
        None => {
            let cfg = std::fs::read_to_string(ctx.codex_config()).unwrap_or_default();
            let current = codex_trust::trusted_hashes(&cfg);
            for k in codex_trust::hook_keys(&key_path, doc, owner).into_iter().filter(|k| k.ours) {
                let status = match current.get(&k.key) {
                    Some(v) if *v == k.hash => "trusted",
                    Some(_) => "modified",
                    None => "untrusted",
                };
                trust.push((k.command.clone(), codex_trust::snake(&k.event), status.into()));
            }
            ("derived from config.toml".to_string(), trust)
        }
    }
}

/// Hooks switched off by the harness's own settings: Claude Code's
/// `disableAllHooks`, Gemini's `hooksConfig` (`enabled: false`, or ours in
/// `disabled`), Copilot's `disableAllHooks` in `$COPILOT_HOME/settings.json`
/// or `config.json`.
fn switched_off(ctx: &Ctx, h: Harness, path: &Path, doc: &Value, found: &[Entry], c: &mut Collector) {
    let file = util::tilde(&ctx.env, path);
    match h {
        Harness::ClaudeCode if doc.get("disableAllHooks") == Some(&Value::Bool(true)) => c.install(Finding::new(
            format!("claude-code: {file} sets \"disableAllHooks\": true, so Claude Code runs no hooks"),
            format!("remove disableAllHooks from {file}"),
        )),
        Harness::Gemini => {
            if doc.pointer("/hooksConfig/enabled") == Some(&Value::Bool(false)) {
                c.install(Finding::new(
                    format!("gemini: {file} sets hooksConfig.enabled to false, so Gemini CLI runs no hooks"),
                    format!("set hooksConfig.enabled to true in {file}"),
                ));
            }
            let disabled: Vec<&str> = doc
                .pointer("/hooksConfig/disabled")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|d| {
                    found.iter().any(|e| e.command == *d || e.value.get("name").and_then(Value::as_str) == Some(*d))
                })
                .collect();
            if !disabled.is_empty() {
                c.install(Finding::new(
                    format!("gemini: {file} lists our hooks in hooksConfig.disabled ({})", disabled.join(", ")),
                    format!("remove them from hooksConfig.disabled in {file}"),
                ));
            }
        }
        Harness::Copilot => {
            for name in ["settings.json", "config.json"] {
                let f = ctx.copilot_home().join(name);
                let off = std::fs::read_to_string(&f)
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                    .is_some_and(|v| v.get("disableAllHooks") == Some(&Value::Bool(true)));
                if off {
                    let f = util::tilde(&ctx.env, &f);
                    c.install(Finding::new(
                        format!("copilot: {f} sets \"disableAllHooks\": true, so Copilot CLI runs no hooks"),
                        format!("remove disableAllHooks from {f}"),
                    ));
                }
            }
        }
        _ => {}
    }
}

/// Binaries whose entries point at a directory that no longer holds them:
/// (scope, old dir) → harnesses, reported as one line each.
type Moved = Vec<(Scope, PathBuf, Vec<Harness>)>;

fn check_scope(
    ctx: &Ctx,
    h: Harness,
    scope: Scope,
    program: Option<&PathBuf>,
    deep_codex: bool,
    c: &mut Collector,
    moved: &mut Moved,
) -> Option<ScopeReport> {
    let path = ctx.files(h, scope)[0].clone();
    let hook_dir = ctx.hook_dir();
    let owner = Owner::new(h, &hook_dir);
    let expected: Vec<&table::HookDef> = table::hooks_for(h).collect();
    let mut report = ScopeReport {
        scope: scope.name().into(),
        config: path.display().to_string(),
        config_state: "missing".into(),
        hooks_present: 0,
        hooks_expected: expected.len(),
        entries: Vec::new(),
        trust_source: None,
        folder_trusted: None,
    };
    let doc = match read_doc(&path, h) {
        None if scope == Scope::Project => return None,
        None => Value::Null,
        Some(Err(e)) => {
            report.config_state = format!("does not parse: {e}");
            c.install(Finding::new(
                format!(
                    "{}: {} does not parse ({e}); the harness may ignore it, and install refuses to touch it",
                    h.slug(),
                    util::tilde(&ctx.env, &path)
                ),
                format!("fix or move {}, then run `{}`", util::tilde(&ctx.env, &path), install_cmd(Some(h), scope)),
            ));
            return Some(report);
        }
        Some(Ok(v)) => {
            report.config_state = "ok".into();
            v
        }
    };
    let found: Vec<Entry> = edit::our_entries(&doc, &owner);
    let own = edit::preloop_own_entries(&doc);
    if !own.is_empty() {
        let mut events: Vec<&str> = own.iter().map(|e| e.event.as_str()).collect();
        events.dedup();
        c.install(Finding::new(
            format!(
                "{}: {} also holds Preloop's own hooks ({} on {}): each tool call is checked twice and notes are claimed twice",
                h.slug(),
                util::tilde(&ctx.env, &path),
                edit::program_of(&own[0].command).rsplit('/').next().unwrap_or("preloop"),
                events.join(", ")
            ),
            format!(
                "remove the entries that run `{}` from {} (preloop-hooks does the permission check and carries the notes)",
                own[0].command.chars().take(80).collect::<String>(),
                util::tilde(&ctx.env, &path)
            ),
        ));
    }
    if found.is_empty() && scope == Scope::Project {
        return None;
    }
    if !found.is_empty() {
        switched_off(ctx, h, &path, &doc, &found, c);
    }
    // Codex: trust, the project, the file's shape.
    let mut trust: Vec<(String, String, String)> = Vec::new();
    if h == Harness::Codex && !found.is_empty() {
        let (source, t) = codex_trust_states(ctx, &path, &doc, &owner, program, deep_codex, c);
        report.trust_source = Some(source);
        trust = t;
        if let Some(o) = doc.as_object() {
            let extra: Vec<&String> = o.keys().filter(|k| *k != "hooks" && *k != "description").collect();
            if !extra.is_empty() {
                c.install(Finding::new(
                    format!(
                        "codex: {} has top-level key(s) {extra:?}: Codex rejects the whole file",
                        util::tilde(&ctx.env, &path)
                    ),
                    format!("remove them from {}", util::tilde(&ctx.env, &path)),
                ));
            }
        }
    }
    if scope == Scope::Project {
        let cfg = util::tilde(&ctx.env, &path);
        match h {
            Harness::Codex => {
                let text = std::fs::read_to_string(ctx.codex_config()).unwrap_or_default();
                let ok = install::codex_project_trusted(&text, &ctx.cwd);
                report.folder_trusted = Some(ok);
                if !ok {
                    c.install(Finding::new(
                        format!("codex: {} is not a trusted project, so Codex does not load {cfg}", ctx.cwd.display()),
                        format!(
                            "trust it in Codex (accept its prompt in {}), or add [projects.\"{}\"] trust_level = \"trusted\" to {}",
                            ctx.cwd.display(),
                            ctx.cwd.display(),
                            util::tilde(&ctx.env, &ctx.codex_config())
                        ),
                    ));
                }
            }
            Harness::Gemini => {
                let ok = install::gemini_folder_trusted(ctx);
                report.folder_trusted = Some(ok);
                if !ok {
                    c.install(Finding::new(
                        format!("gemini: {} is not a trusted folder, so Gemini CLI does not load {cfg}", ctx.cwd.display()),
                        "trust the folder in Gemini (its trust prompt), or run headless with GEMINI_CLI_TRUST_WORKSPACE=true",
                    ));
                }
            }
            Harness::Copilot => c.warn(Finding::new(
                format!("copilot: {cfg} is loaded only in a trusted folder (decided per session)"),
                "run `copilot --trust-folder` there, or set COPILOT_ALLOW_ALL=true or GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true for headless runs",
            )),
            _ => {}
        }
    }
    let unit = table::timeout_unit(h);
    let mut missing_programs: Vec<PathBuf> = Vec::new();
    let mut differs: Vec<PathBuf> = Vec::new();
    let mut bad_timeouts: Vec<String> = Vec::new();
    let mut untrusted: Vec<(String, String)> = Vec::new();
    for d in &expected {
        let expected_timeout = table::timeout_value(d, &ctx.settings);
        let mine = found.iter().find(|e| e.event == d.on && owner.binary_of(&e.command) == Some(d.binary));
        let mut e = EntryReport {
            event: d.on.into(),
            binary: d.binary.into(),
            present: mine.is_some(),
            command: mine.map(|m| m.command.clone()),
            program: None,
            timeout: mine.and_then(Entry::timeout),
            expected_timeout,
            trust: None,
        };
        if let Some(m) = mine {
            report.hooks_present += 1;
            let prog = PathBuf::from(edit::program_of(&m.command));
            let here = ctx.binary(d);
            let state = if !prog.exists() {
                "missing"
            } else if !util::is_executable(&prog) {
                "not_executable"
            } else if prog == here {
                "ok"
            } else if !here.exists() {
                "not_built_here"
            } else if util::same_file_content(&prog, &here) {
                "elsewhere_identical"
            } else {
                "elsewhere_differs"
            };
            e.program = Some(state.into());
            match state {
                "missing" | "not_executable" => missing_programs.push(prog.clone()),
                "elsewhere_differs" => differs.push(prog.clone()),
                _ => {}
            }
            if e.timeout != Some(expected_timeout) {
                bad_timeouts.push(format!(
                    "{} {}, expected {expected_timeout} {unit}",
                    d.on,
                    e.timeout.map(|t| format!("{t} {unit}")).unwrap_or_else(|| "unset".into())
                ));
            }
            if h == Harness::Cursor && d.is_stop() {
                let ll = m.value.get("loop_limit").and_then(Value::as_u64);
                if ll != Some(u64::from(registry::CURSOR_LOOP_LIMIT)) {
                    c.install(Finding::new(
                        format!(
                            "cursor stop{}: loop_limit {}, expected {} (the adapter checks loop_count against it)",
                            scope_label(scope),
                            ll.map(|l| l.to_string()).unwrap_or_else(|| "unset".into()),
                            registry::CURSOR_LOOP_LIMIT
                        ),
                        install_cmd(Some(h), scope),
                    ));
                }
            }
            if h == Harness::Codex {
                let snake = codex_trust::snake(d.on);
                let t = trust
                    .iter()
                    .find(|(c2, ev, _)| *c2 == m.command && *ev == snake)
                    .map(|t| t.2.clone())
                    .unwrap_or_else(|| "untrusted".into());
                if t != "trusted" {
                    untrusted.push((d.on.to_string(), t.clone()));
                }
                e.trust = Some(t);
            }
        }
        report.entries.push(e);
    }
    let label = format!("{}{}", h.slug(), scope_label(scope));
    // Programs gone: one directory moved away, or single binaries missing.
    if !missing_programs.is_empty() {
        let mut dirs: Vec<PathBuf> =
            missing_programs.iter().filter_map(|p| p.parent().map(Path::to_path_buf)).collect();
        dirs.dedup();
        let all_gone = dirs.len() == 1 && missing_programs.len() == report.hooks_present;
        if all_gone && dirs[0] != hook_dir {
            match moved.iter_mut().find(|(s, d, _)| *s == scope && *d == dirs[0]) {
                Some((_, _, hs)) => hs.push(h),
                None => moved.push((scope, dirs[0].clone(), vec![h])),
            }
        } else {
            let names: Vec<String> = missing_programs.iter().map(|p| util::tilde(&ctx.env, p)).collect();
            c.install(Finding::new(
                format!("{label}: {} missing or not executable", names.join(", ")),
                format!(
                    "{} (after `cargo build --release --workspace --bins`, or with --bin-dir DIR)",
                    install_cmd(Some(h), scope)
                ),
            ));
        }
    }
    if !differs.is_empty() {
        let mut dirs: Vec<String> =
            differs.iter().filter_map(|p| p.parent()).map(|d| util::tilde(&ctx.env, d)).collect();
        dirs.dedup();
        c.install(Finding::new(
            format!(
                "{label}: {} hook(s) run binaries in {} that differ from this build's in {}",
                differs.len(),
                dirs.join(", "),
                util::tilde(&ctx.env, &hook_dir)
            ),
            install_cmd(Some(h), scope),
        ));
    }
    if !bad_timeouts.is_empty() {
        c.install(Finding::new(
            format!("{label}: timeouts differ from the settings ({})", bad_timeouts.join("; ")),
            install_cmd(Some(h), scope),
        ));
    }
    if !untrusted.is_empty() && report.folder_trusted != Some(false) {
        let events: Vec<String> = untrusted.iter().map(|(e, t)| format!("{e} ({t})")).collect();
        c.install(Finding::new(
            format!(
                "codex{}: {} hook(s) not trusted: {}; Codex skips them silently",
                scope_label(scope),
                untrusted.len(),
                events.join(", ")
            ),
            install_cmd(Some(h), scope),
        ));
    }
    if report.hooks_present > 0 && report.hooks_present < report.hooks_expected {
        let missing: Vec<&str> = report.entries.iter().filter(|e| !e.present).map(|e| e.event.as_str()).collect();
        c.install(Finding::new(
            format!("{label}: hooks missing for {}", missing.join(", ")),
            install_cmd(Some(h), scope),
        ));
    }
    if found.len() > report.hooks_present {
        c.warn(Finding::new(
            format!(
                "{label}: {} extra entries of ours (duplicates or retired events)",
                found.len() - report.hooks_present
            ),
            install_cmd(Some(h), scope),
        ));
    }
    Some(report)
}

fn check_harness(ctx: &Ctx, h: Harness, c: &mut Collector, deep_codex: bool, moved: &mut Moved) -> HarnessReport {
    let program = harness_program(h);
    let version = program.as_deref().and_then(version_of);
    if let (Some(v), Some(p)) = (&version, proven_version(h))
        && v != p
    {
        c.warn(Finding::new(format!("{} {v} is not the version the hooks were proven against ({p})", h.slug()), ""));
    }
    let mut scopes = Vec::new();
    let user_path = ctx.files(h, Scope::User)[0].clone();
    if let Some(r) = check_scope(ctx, h, Scope::User, program.as_ref(), deep_codex, c, moved) {
        scopes.push(r);
    }
    if ctx.files(h, Scope::Project)[0] != user_path
        && let Some(r) = check_scope(ctx, h, Scope::Project, program.as_ref(), deep_codex, c, moved)
    {
        scopes.push(r);
    }
    let present: Vec<&ScopeReport> = scopes.iter().filter(|s| s.hooks_present > 0).collect();
    if present.len() > 1 {
        c.warn(Finding::new(
            format!(
                "{}: both {} and {} hold our hooks: in this project every event runs them twice",
                h.slug(),
                util::tilde(&ctx.env, Path::new(&present[0].config)),
                util::tilde(&ctx.env, Path::new(&present[1].config))
            ),
            format!("preloop-hooks uninstall --harness {} --scope project", h.slug()),
        ));
    }
    let hooks_present = scopes.iter().map(|s| s.hooks_present).max().unwrap_or(0);
    if program.is_some() && hooks_present == 0 {
        c.warn(Finding::new(format!("{} is installed but not hooked up", h.slug()), install_cmd(Some(h), Scope::User)));
    }
    HarnessReport {
        harness: h.slug().into(),
        name: h.name().into(),
        installed: program.is_some(),
        program: program.as_ref().map(|p| p.display().to_string()),
        version,
        proven_version: proven_version(h).map(str::to_string),
        hooks_present,
        hooks_expected: table::hooks_for(h).count(),
        scopes,
    }
}

fn state_report(config: &Config) -> StateReport {
    let mut s = StateReport::default();
    for f in session::all_session_files(&config.home) {
        if f.ended_at.is_some() {
            s.sessions_ended += 1;
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
        s.inbox_pending = ib.list().ok().map(|l| l.iter().filter(|n| n.state == "pending").count());
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

fn limits(config: &Config, harnesses: &[HarnessReport]) -> Vec<String> {
    let hooked = |h: Harness| harnesses.iter().any(|r| r.harness == h.slug() && (r.hooks_present > 0 || r.installed));
    let mut l = Vec::new();
    if config.is_local() {
        l.push("local mode: the hooks never decide a permission (the harness's own flow stays in charge); notes reach sessions on this machine only".into());
    } else {
        l.push(format!(
            "server mode: a permission check may wait up to {} s for a human; on a server error PreToolUse fails {:?}, PermissionRequest/Cursor gates fail {:?}",
            config.settings.permission_timeout_secs, config.settings.pre_tool_use_on_error, config.settings.permission_request_on_error
        ));
    }
    if hooked(Harness::ClaudeCode) {
        l.push(format!("claude-code: a late note continues a finished turn through Stop at most {} times per session; a note sent after the last Stop is reported undeliverable at SessionEnd", config.settings.stop_rescue_cap));
        l.push("claude-code: Cursor (with third-party configs on) also runs ~/.claude/settings.json hooks; ours stand down on Cursor payloads".into());
    }
    if hooked(Harness::Codex) {
        l.push("codex: untrusted hooks are skipped silently; editing an entry or moving CODEX_HOME untrusts it (re-run install)".into());
        l.push("codex: PermissionRequest fires only when Codex asks for approval (never in plain `codex exec`); SessionEnd gets at most 3 s".into());
    }
    if hooked(Harness::Cursor) {
        l.push("cursor: headless `cursor-agent -p` fires no stop and no beforeSubmitPrompt, so a session note that arrives after the run's last tool call ends undeliverable (session_ended) at sessionEnd, and a note to the agent waits for its next run; sessionEnd is unreliable in the IDE; sessionStart context can be dropped by some IDE builds".into());
    }
    if hooked(Harness::Gemini) {
        l.push("gemini: BeforeTool has no context carrier (a note rides SessionStart, BeforeAgent, AfterTool or AfterAgent); additionalContext reaches the model with < and > escaped; with GITHUB_SHA or SURFACE=Github set, Gemini strips PRELOOP_* from the hooks' environment".into());
    }
    if hooked(Harness::Copilot) {
        l.push("copilot: a sub-agent's hooks reach only the sub-agent, so notes wait for the main session; postToolUse context is cut at 10,240 characters; agentStop continues at most 8 times in a row".into());
    }
    l
}

/// Which mode the hooks and the operator commands use, and why.
fn modes(ctx: &Ctx, config: &Config) -> Modes {
    let t = |p: &Path| util::tilde(&ctx.env, p);
    let origin = |o: &Origin| match o {
        Origin::Env => "PRELOOP_URL/PRELOOP_TOKEN in the environment".to_string(),
        Origin::ConfigFile(p) => t(p),
        Origin::Onboarding(p) => format!("{} (Preloop onboarding)", t(p)),
    };
    let (hooks, hooks_why) = match (&config.server, config.mode_unknown) {
        (Some(s), _) => ("server", format!("{} with a runtime token from {}", s.url, origin(&s.origin))),
        (None, true) => (
            "unknown",
            "a config file that may name a server cannot be used (see problems); gates answer by their fail policy"
                .to_string(),
        ),
        (None, false) => match &config.url {
            Some((u, o)) => (
                "local",
                format!(
                    "a URL ({u}, from {}) but no runtime token: the local inbox under {}",
                    origin(o),
                    t(&config.home)
                ),
            ),
            None => ("local", format!("no server configured: the local inbox under {}", t(&config.home))),
        },
    };
    let (operator, operator_why) = match (&config.url, &config.user_token) {
        (Some((u, o)), Some((_, to))) => (
            "server",
            format!(
                "{u} (URL from {}), user token from {}",
                origin(o),
                match to {
                    TokenOrigin::Env => "PRELOOP_USER_TOKEN in the environment".to_string(),
                    TokenOrigin::ConfigFile(p) => t(p),
                }
            ),
        ),
        (Some((u, o)), None) => ("server", format!("{u} (URL from {}), no user token yet", origin(o))),
        (None, _) => ("local", format!("no server URL: the local inbox under {}", t(&config.home))),
    };
    Modes { hooks: hooks.into(), hooks_why, operator: operator.into(), operator_why }
}

fn config_findings(ctx: &Ctx, config: &Config, c: &mut Collector) {
    for p in &config.problems {
        c.install(Finding::new(p.what.clone(), p.fix.clone()));
    }
    for w in &config.warnings {
        // An override the user's own configuration refused (docs/guarantees.md,
        // "A repository cannot move the gate"): say how to take it.
        let fix = match w.split_once(" in the environment ignored") {
            Some((var, _)) => format!(
                "unset {} (a project's .env or .claude/settings.json env may set it), or set \"allow_env_override\": true in ~/.preloop/config.json",
                var.split('=').next().unwrap_or(var)
            ),
            None => String::new(),
        };
        c.warn(Finding::new(w.clone(), fix));
    }
    // A token file others can read (ssh refuses such a key; we warn).
    let mut files = vec![config.home.join("config.json")];
    files.extend(
        fsutil::list_names(&config.home.join("agents"))
            .into_iter()
            .map(|n| config.home.join("agents").join(n).join("permission_hook.json")),
    );
    for f in files {
        let has_token = std::fs::read_to_string(&f)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .is_some_and(|v| v.get("token").is_some() || v.get("user_token").is_some());
        if has_token && fsutil::readable_by_others(&f) {
            c.warn(Finding::new(
                format!("{} holds a token and other users can read it", util::tilde(&ctx.env, &f)),
                format!("chmod 600 {}", util::tilde(&ctx.env, &f)),
            ));
        }
    }
}

fn token_origin_fix(o: &Origin, url: &str) -> String {
    match o {
        Origin::Env => {
            "set PRELOOP_TOKEN to the agent's runtime token (agt_…), or unset PRELOOP_URL/PRELOOP_TOKEN".into()
        }
        Origin::ConfigFile(_) => format!("printf %s \"$AGT_TOKEN\" | preloop-hooks login --url {url}"),
        Origin::Onboarding(p) => format!("onboard the agent again with Preloop's CLI (it rewrites {})", p.display()),
    }
}

fn server_report(ctx: &Ctx, config: &Config, c: &mut Collector) -> ServerReport {
    let mut r = ServerReport {
        health: "unchecked".into(),
        runtime_token: "not configured".into(),
        user_token: "not configured".into(),
        ..Default::default()
    };
    let Some((url, url_origin)) = config.url.clone() else { return r };
    let t = |p: &Path| util::tilde(&ctx.env, p);
    r.configured = true;
    r.url = Some(url.clone());
    r.url_from = Some(match &url_origin {
        Origin::Env => "environment".into(),
        Origin::ConfigFile(p) => t(p),
        Origin::Onboarding(p) => format!("{} (Preloop onboarding)", t(p)),
    });
    r.runtime_token_from = config.server.as_ref().map(|s| match &s.origin {
        Origin::Env => "environment".into(),
        Origin::ConfigFile(p) => t(p),
        Origin::Onboarding(p) => t(p),
    });
    r.user_token_from = config.user_token.as_ref().map(|(_, o)| match o {
        TokenOrigin::Env => "environment".into(),
        TokenOrigin::ConfigFile(p) => t(p),
    });
    let url_fix = match &url_origin {
        Origin::Env => "correct PRELOOP_URL (the server's base URL, without /api/v1)".to_string(),
        _ => "store the right one: preloop-hooks login --url URL".to_string(),
    };
    match probe::health(&url, Duration::from_secs(3)) {
        Health::Preloop => {
            r.health = "preloop".into();
            r.reachable = Some(true);
        }
        Health::Unhealthy(why) => {
            r.health = "unhealthy".into();
            r.reachable = Some(true);
            r.detail.push(why.clone());
            c.server(Finding::new(
                format!("server {url}: the Preloop server reports a problem ({why})"),
                "check the server's own logs (its database, its workers)",
            ));
        }
        Health::NotPreloop(why) => {
            r.health = "not_preloop".into();
            r.reachable = Some(true);
            r.detail.push(why.clone());
            c.server(Finding::new(format!("{url} answers but is not a Preloop server ({why})"), url_fix.clone()));
        }
        Health::Unreachable(why) => {
            r.health = "unreachable".into();
            r.reachable = Some(false);
            r.detail.push(why.clone());
            c.server(Finding::new(format!("server {url} unreachable: {why}"), url_fix.clone()));
        }
    }
    let checked = r.health == "preloop" || r.health == "unhealthy";
    if let Some(s) = &config.server {
        r.runtime_token = if !checked {
            "unchecked".into()
        } else {
            match probe::runtime_token(&s.url, &s.token, Duration::from_secs(5)) {
                TokenCheck::Accepted => "accepted".into(),
                TokenCheck::Rejected(why) => {
                    r.detail.push(why.clone());
                    c.server(Finding::new(
                        format!(
                            "the server rejected the runtime token from {} ({why})",
                            r.runtime_token_from.clone().unwrap_or_default()
                        ),
                        token_origin_fix(&s.origin, &s.url),
                    ));
                    "rejected".into()
                }
                TokenCheck::Unknown(why) => {
                    r.detail.push(why.clone());
                    c.server(Finding::new(
                        format!("server {url}: the runtime token check failed ({why})"),
                        url_fix.clone(),
                    ));
                    "unchecked".into()
                }
            }
        };
    }
    match &config.user_token {
        None => c.warn(Finding::new(
            format!("no user token: notes and sessions commands cannot reach {url}"),
            format!("printf %s \"$API_KEY\" | preloop-hooks login --user --url {url}"),
        )),
        Some((token, origin)) => {
            r.user_token = if !checked {
                "unchecked".into()
            } else {
                match probe::user_token(&url, token, Duration::from_secs(5)) {
                    TokenCheck::Accepted => "accepted".into(),
                    TokenCheck::Rejected(why) => {
                        r.detail.push(why.clone());
                        let fix = match origin {
                            TokenOrigin::Env => {
                                "unset PRELOOP_USER_TOKEN, or set it to a valid personal API key or JWT".to_string()
                            }
                            TokenOrigin::ConfigFile(_) => format!(
                                "store a valid personal API key: printf %s \"$API_KEY\" | preloop-hooks login --user --url {url}"
                            ),
                        };
                        c.server(Finding::new(
                            format!(
                                "the server rejected the user token from {} ({why})",
                                r.user_token_from.clone().unwrap_or_default()
                            ),
                            fix,
                        ));
                        "rejected".into()
                    }
                    TokenCheck::Unknown(why) => {
                        r.detail.push(why);
                        "unchecked".into()
                    }
                }
            };
        }
    }
    if config.server.is_none() && !config.mode_unknown {
        c.warn(Finding::new(
            format!("a server URL ({url}) is set but no runtime token: the hooks on this machine use the local inbox (fine when the agents run elsewhere)"),
            format!("on an agent's machine: printf %s \"$AGT_TOKEN\" | preloop-hooks login --url {url}"),
        ));
    }
    r
}

/// Gemini in CI (GITHUB_SHA / SURFACE=Github) strips PRELOOP_* from its
/// hooks' environment: server settings that exist only there never arrive.
fn gemini_env_warning(ctx: &Ctx, config: &Config, harnesses: &[HarnessReport], c: &mut Collector) {
    let gemini = harnesses.iter().any(|r| r.harness == Harness::Gemini.slug() && (r.hooks_present > 0 || r.installed));
    if !gemini {
        return;
    }
    let env_only_server = config.server.as_ref().is_some_and(|s| s.origin == Origin::Env)
        && Config::load_from(&ctx.env.without(&["PRELOOP_URL", "PRELOOP_TOKEN"]), Some(Harness::Gemini))
            .server
            .is_none();
    let home_from_env = ctx.env.get("PRELOOP_HOME").is_some_and(|h| {
        !h.is_empty() && util::home_dir(&ctx.env).map(|u| u.join(".preloop")) != Some(PathBuf::from(&h))
    });
    if env_only_server || home_from_env {
        c.warn(Finding::new(
            format!(
                "gemini: {} only in the environment; Gemini CLI strips PRELOOP_* from its hooks when GITHUB_SHA or SURFACE=Github is set (CI), so there they use ~/.preloop and its files",
                if env_only_server { "the server (PRELOOP_URL, PRELOOP_TOKEN) is set" } else { "PRELOOP_HOME is set" }
            ),
            "store the server in ~/.preloop with `preloop-hooks login --url URL`, or add the variables to security.environmentVariableRedaction.allowed in ~/.gemini/settings.json",
        ));
    }
}

pub fn run(ctx: &Ctx, config: &Config, json: bool, deep_codex: bool, verbose: bool) -> Exit {
    let mut c = Collector::default();
    config_findings(ctx, config, &mut c);
    let mut moved: Moved = Vec::new();
    let harnesses: Vec<HarnessReport> =
        Harness::all().map(|h| check_harness(ctx, h, &mut c, deep_codex, &mut moved)).collect();
    let hook_dir = ctx.hook_dir();
    for (scope, old, hs) in &moved {
        let names: Vec<&str> = hs.iter().map(|h| h.slug()).collect();
        c.install(Finding::new(
            format!(
                "{}{}: the hooks point at {}, which no longer holds the binaries; they are in {} now",
                names.join(", "),
                scope_label(*scope),
                util::tilde(&ctx.env, old),
                util::tilde(&ctx.env, &hook_dir)
            ),
            install_cmd(if hs.len() == 1 { Some(hs[0]) } else { None }, *scope),
        ));
    }
    let any_installed = harnesses.iter().any(|r| r.hooks_present > 0);
    let server = server_report(ctx, config, &mut c);
    gemini_env_warning(ctx, config, &harnesses, &mut c);
    if let Some(why) = ctx.unstable_reason()
        && any_installed
    {
        let copy = ctx.hook_exe();
        if !copy.exists() {
            c.warn(Finding::new(
                format!("this preloop-hooks is in {why}, and no copy of it is in {}", util::tilde(&ctx.env, &hook_dir)),
                "preloop-hooks install (it copies itself to $PRELOOP_HOME/bin and links the hook commands there)",
            ));
        } else if !util::same_file_content(&ctx.exe(), &copy) {
            c.warn(Finding::new(
                format!(
                    "{} differs from its copy in {}, which the hooks run (an upgrade or a rebuild)",
                    util::tilde(&ctx.env, &ctx.exe()),
                    util::tilde(&ctx.env, &hook_dir)
                ),
                "preloop-hooks install (it copies it again)",
            ));
        }
    }
    // Hook commands that are not links to the executable beside them: an
    // earlier version's own binaries, or a link to an older copy.
    if any_installed && ctx.hook_exe().exists() {
        let stale: Vec<&str> = crate::links::names()
            .into_iter()
            .filter(|n| {
                let p = hook_dir.join(n);
                p.exists() && !crate::links::is_link_to(&p, &ctx.hook_exe())
            })
            .collect();
        if !stale.is_empty() {
            c.warn(Finding::new(
                format!(
                    "{} hook commands in {} are not links to its preloop-hooks (an earlier version's binaries, or an older copy)",
                    stale.len(),
                    util::tilde(&ctx.env, &hook_dir)
                ),
                "preloop-hooks install (it links them again)",
            ));
        }
    }
    if deep_codex && harnesses.iter().any(|r| r.harness == "codex" && r.hooks_present > 0 && r.installed) {
        c.warn(Finding::new(
            "codex trust was read from `codex app-server`, which writes Codex's own state (a database, skills) into CODEX_HOME",
            "preloop-hooks doctor --no-codex-query (derives trust from config.toml)",
        ));
    }
    let secrets = util::secrets(config);
    let state = state_report(config);
    let last_errors = last_errors(&config.home, 5, &secrets);
    let limits = limits(config, &harnesses);
    if !any_installed {
        c.problems.insert(0, Finding::new("our hooks are installed in no harness", "preloop-hooks install"));
    }
    let exit = if !any_installed {
        Exit::NotInstalled
    } else if c.install_problem {
        Exit::InstallProblem
    } else if c.server_problem {
        Exit::ServerProblem
    } else {
        Exit::Ok
    };
    let modes = modes(ctx, config);
    let mut report = Report {
        schema: SCHEMA_VERSION,
        healthy: exit == Exit::Ok,
        exit_code: exit.code(),
        exit: exit.name(),
        mode: modes.hooks.clone(),
        modes,
        preloop_home: config.home.display().to_string(),
        bin_dir: ctx.bin_dir.display().to_string(),
        hook_dir: hook_dir.display().to_string(),
        harnesses,
        server,
        state,
        last_errors,
        limits,
        problems: c.problems,
        warnings: c.warnings,
    };
    // Nothing a server said reaches the output with a token in it.
    for f in report.problems.iter_mut().chain(report.warnings.iter_mut()) {
        f.what = util::redact(&f.what, &secrets);
        f.fix = util::redact(&f.fix, &secrets);
    }
    for d in report.server.detail.iter_mut() {
        *d = util::redact(d, &secrets);
    }
    if json {
        print_json(&report);
    } else {
        print_human(ctx, &report, verbose);
    }
    exit
}

fn print_human(ctx: &Ctx, r: &Report, verbose: bool) {
    let t = |p: &str| util::tilde(&ctx.env, Path::new(p));
    crate::outln!("hooks      {}: {}", r.modes.hooks, r.modes.hooks_why);
    crate::outln!("notes      {}: {}", r.modes.operator, r.modes.operator_why);
    if r.bin_dir == r.hook_dir {
        crate::outln!("binaries   {}", t(&r.bin_dir));
    } else if Path::new(&r.hook_dir).exists() {
        crate::outln!("binaries   {} (copied from {})", t(&r.hook_dir), t(&r.bin_dir));
    } else {
        crate::outln!(
            "binaries   {} (install copies them to {}: `cargo clean` deletes target/)",
            t(&r.bin_dir),
            t(&r.hook_dir)
        );
    }
    crate::outln!();
    let mut rows: Vec<Vec<String>> = Vec::new();
    for h in &r.harnesses {
        let base = vec![
            h.harness.clone(),
            if h.installed { "yes".into() } else { "no".into() },
            h.version.clone().unwrap_or_else(|| "-".into()),
        ];
        for (i, s) in h.scopes.iter().enumerate() {
            let trusted = s.entries.iter().filter(|e| e.trust.as_deref() == Some("trusted")).count();
            let broken =
                s.entries.iter().filter(|e| matches!(e.program.as_deref(), Some("missing" | "not_executable"))).count();
            let mut row = if i == 0 { base.clone() } else { vec![String::new(), String::new(), String::new()] };
            row.push(format!("{} ({})", t(&s.config), s.scope));
            row.push(if s.config_state == "ok" || s.config_state == "missing" {
                let mut v = format!("{}/{}", s.hooks_present, s.hooks_expected);
                if broken > 0 {
                    v.push_str(&format!(", {broken} broken"));
                }
                if h.harness == "codex" && s.hooks_present > 0 {
                    v.push_str(&format!(", {trusted} trusted"));
                }
                if s.folder_trusted == Some(false) {
                    v.push_str(", folder not trusted");
                }
                v
            } else {
                "config does not parse".into()
            });
            rows.push(row);
        }
    }
    print_table(&["HARNESS", "INSTALLED", "VERSION", "CONFIG", "OUR HOOKS"], &rows);
    if verbose {
        for h in &r.harnesses {
            for s in h.scopes.iter().filter(|s| s.hooks_present > 0) {
                crate::outln!();
                crate::outln!(
                    "{} hooks in {}{}",
                    h.harness,
                    t(&s.config),
                    s.trust_source.as_deref().map(|x| format!(" (trust: {x})")).unwrap_or_default()
                );
                let codex = h.harness == "codex";
                let rows: Vec<Vec<String>> = s
                    .entries
                    .iter()
                    .map(|e| {
                        let mut v = vec![
                            format!("  {}", e.event),
                            if e.present { "present".into() } else { "MISSING".into() },
                            e.timeout.map(|x| x.to_string()).unwrap_or_else(|| "-".into()),
                            e.program.clone().unwrap_or_else(|| "-".into()).replace('_', " "),
                        ];
                        if codex {
                            v.push(e.trust.clone().unwrap_or_else(|| "-".into()));
                        }
                        v.push(
                            e.command
                                .as_deref()
                                .map(|c| util::tilde(&ctx.env, Path::new(c)))
                                .unwrap_or_else(|| e.binary.clone()),
                        );
                        v
                    })
                    .collect();
                if codex {
                    print_table(&["  EVENT", "ENTRY", "TIMEOUT", "BINARY", "TRUST", "COMMAND"], &rows);
                } else {
                    print_table(&["  EVENT", "ENTRY", "TIMEOUT", "BINARY", "COMMAND"], &rows);
                }
            }
        }
    }
    if r.server.configured {
        crate::outln!();
        crate::outln!(
            "server     {}: {}; runtime token {}; user token {}",
            r.server.url.as_deref().unwrap_or(""),
            match r.server.health.as_str() {
                "preloop" => "a Preloop server",
                "unhealthy" => "a Preloop server reporting a problem",
                "not_preloop" => "answers, NOT a Preloop server",
                "unreachable" => "UNREACHABLE",
                _ => "unchecked",
            },
            r.server.runtime_token,
            r.server.user_token
        );
    }
    crate::outln!();
    let st = &r.state;
    crate::outln!(
        "sessions   {} live, {} ended; spool: {} note(s){}; owed acks: {}{}",
        st.sessions_live,
        st.sessions_ended,
        st.spooled_notes,
        if st.sessions_with_spool.is_empty() {
            String::new()
        } else {
            format!(" in {}", st.sessions_with_spool.join(", "))
        },
        st.owed_acks,
        st.inbox_pending.map(|n| format!("; inbox: {n} pending")).unwrap_or_default()
    );
    if !r.last_errors.is_empty() {
        crate::outln!();
        crate::outln!("last errors ({})", t(&format!("{}/log/hooks.log", r.preloop_home)));
        for e in &r.last_errors {
            crate::outln!("  {e}");
        }
    }
    if verbose && !r.limits.is_empty() {
        crate::outln!();
        crate::outln!("known limits");
        for l in &r.limits {
            crate::outln!("  - {l}");
        }
    }
    let width = terminal_width();
    if !r.warnings.is_empty() {
        crate::outln!();
        crate::outln!("warnings");
        for w in &r.warnings {
            crate::outln!("{}", bullet(&w.line(), width));
        }
    }
    if !r.problems.is_empty() {
        crate::outln!();
        crate::outln!("problems");
        for p in &r.problems {
            crate::outln!("{}", bullet(&p.line(), width));
        }
    }
    crate::outln!();
    if r.healthy {
        crate::outln!("healthy{}", if verbose { "" } else { " (known limits and every hook: --verbose)" });
    } else {
        crate::outln!(
            "not healthy (exit {} {}){}",
            r.exit_code,
            r.exit,
            if verbose { "" } else { "; every hook: --verbose" }
        );
    }
}

/// The terminal's width when stdout is one (`COLUMNS`, else the tty's),
/// else None: piped output keeps one line per item.
fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|c| c.parse::<usize>().ok()) {
        return Some(c);
    }
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one winsize through a valid pointer to ours.
    let ok = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col > 0).then_some(ws.ws_col as usize)
}

/// `  - text`, wrapped at word boundaries to `width` with a hanging indent.
fn bullet(text: &str, width: Option<usize>) -> String {
    let Some(width) = width.filter(|w| *w >= 40) else { return format!("  - {text}") };
    let mut out = String::from("  -");
    let mut col = 3;
    for word in text.split(' ') {
        let n = word.chars().count();
        if col > 4 && col + 1 + n > width {
            out.push_str("\n    ");
            col = 4;
            out.push_str(word);
        } else {
            out.push(' ');
            out.push_str(word);
            col += 1;
        }
        col += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bullets_wrap_only_on_a_terminal() {
        let t = "the hooks point at /tmp/dd/bin, which no longer holds the binaries (fix: preloop-hooks install)";
        assert_eq!(bullet(t, None), format!("  - {t}"));
        let w = bullet(t, Some(40));
        assert!(w.lines().all(|l| l.chars().count() <= 40), "{w}");
        assert!(w.lines().skip(1).all(|l| l.starts_with("    ")), "{w}");
        assert_eq!(w.split_whitespace().filter(|x| *x != "-").collect::<Vec<_>>().join(" "), t);
    }
}
