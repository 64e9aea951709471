//! `doctor`: is everything in place, and what applies here.
//!
//! Checks: each harness (installed? version?), our entries in its config
//! (user and project scope), Codex trust per hook, whether each entry's
//! program is the binary next to this CLI (or an identical copy), the hook
//! timeouts, the mode (server or local) and for a server whether it answers
//! and accepts the tokens (cheap authenticated calls), the spool and session
//! state, the last errors in the hook log, and the known limits.
//!
//! Exit codes: 0 healthy (warnings allowed); 5 our hooks are installed in
//! no harness; 6 an installation problem (missing or stale entries, a
//! config that does not parse, an untrusted Codex hook, a missing or
//! different binary, a wrong timeout); 7 a server problem (unreachable, a
//! token rejected). With several, the first in that order wins (5, 6, 7).

use crate::codex_trust;
use crate::edit;
use crate::install::{self, Ctx, Scope};
use crate::server_op::{self, ServerOperator};
use crate::table;
use crate::util::{self, print_json, print_table};
use preloop_shared::Exit;
use preloop_shared::config::{Config, Origin};
use preloop_shared::session::{self, RunState};
use preloop_shared::{Harness, fsutil};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The harness versions our adapters were proven against.
pub fn proven_version(h: Harness) -> Option<&'static str> {
    match h {
        Harness::ClaudeCode => Some("2.1.328"),
        Harness::Codex => Some("0.169.0"),
        Harness::Cursor => None,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct HarnessReport {
    pub harness: String,
    pub installed: bool,
    pub program: Option<String>,
    pub version: Option<String>,
    pub config: String,
    pub scope: String,
    /// ok, missing, or the parse error.
    pub config_state: String,
    pub hooks_present: usize,
    pub hooks_expected: usize,
    pub entries: Vec<EntryReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_source: Option<String>,
}

#[derive(Debug, Serialize, Default)]
pub struct ServerReport {
    pub url: String,
    pub origin: String,
    pub reachable: Option<bool>,
    pub runtime_token: String,
    pub user_token: String,
    pub detail: Vec<String>,
}

#[derive(Debug, Serialize, Default)]
pub struct StateReport {
    pub sessions_live: usize,
    pub sessions_ended: usize,
    pub run_states: usize,
    pub spooled_notes: usize,
    pub sessions_with_spool: Vec<String>,
    pub owed_acks: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inbox_pending: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub healthy: bool,
    pub exit_code: u8,
    /// The exit code's name (`ok`, `not_installed`, ...).
    pub exit: &'static str,
    pub mode: String,
    pub preloop_home: String,
    pub bin_dir: String,
    pub harnesses: Vec<HarnessReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerReport>,
    pub state: StateReport,
    pub last_errors: Vec<String>,
    pub limits: Vec<String>,
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
}

fn sha256_file(p: &Path) -> Option<Vec<u8>> {
    std::fs::read(p).ok().map(|b| Sha256::digest(&b).to_vec())
}

fn harness_program(h: Harness) -> Option<PathBuf> {
    match h {
        Harness::ClaudeCode => util::find_program("claude", &["PRELOOP_E2E_CLAUDE"], &[]),
        Harness::Codex => util::find_program("codex", &["PRELOOP_E2E_CODEX"], &[]),
        Harness::Cursor => util::find_program("cursor-agent", &["PRELOOP_E2E_CURSOR"], &[]),
    }
}

fn version_of(p: &Path) -> Option<String> {
    let out = util::output_with_timeout(Command::new(p).arg("--version"), Duration::from_secs(15))?;
    let line = out.lines().next().unwrap_or("").to_string();
    // "2.1.328 (Claude Code)", "codex-cli 0.169.0", "2026.10.01-e373342"
    line.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .map(str::to_string)
        .or(Some(line))
}

struct Collector {
    problems: Vec<String>,
    warnings: Vec<String>,
    install_problem: bool,
    server_problem: bool,
}

fn check_harness(ctx: &Ctx, h: Harness, c: &mut Collector, deep_codex: bool) -> HarnessReport {
    let program = harness_program(h);
    let version = program.as_deref().and_then(version_of);
    if let (Some(v), Some(p)) = (&version, proven_version(h))
        && v != p
    {
        c.warnings.push(format!("{} {v} is not the version the hooks were proven against ({p})", h.slug()));
    }
    // The scope holding our entries: user first, then this project.
    let mut chosen = None;
    for scope in [Scope::User, Scope::Project] {
        let path = ctx.files(h, scope)[0].clone();
        let text = std::fs::read_to_string(&path).ok();
        let parsed = text
            .as_deref()
            .map(|t| if t.trim().is_empty() { Ok(Value::Object(Default::default())) } else { edit::parse_strict(t) });
        let n = match &parsed {
            Some(Ok(v)) => edit::our_entries(v, h).len(),
            _ => 0,
        };
        if chosen.is_none() || n > 0 {
            let keep = matches!(&chosen, Some((_, _, _, m)) if *m > 0);
            if !keep {
                chosen = Some((scope, path, parsed, n));
            }
        }
    }
    let (scope, path, parsed, _) = chosen.expect("user scope always checked");
    let expected: Vec<&table::HookDef> = table::hooks_for(h).collect();
    let mut report = HarnessReport {
        harness: h.slug().into(),
        installed: program.is_some(),
        program: program.as_ref().map(|p| p.display().to_string()),
        version,
        config: path.display().to_string(),
        scope: if scope == Scope::User { "user".into() } else { "project".into() },
        config_state: "missing".into(),
        hooks_present: 0,
        hooks_expected: expected.len(),
        entries: Vec::new(),
        trust_source: None,
    };
    let doc = match parsed {
        None => None,
        Some(Err(e)) => {
            report.config_state = format!("does not parse: {e}");
            c.problems.push(format!(
                "{}: {} does not parse ({e}); the harness may ignore it, and install refuses to touch it",
                h.slug(),
                util::tilde(&ctx.env, &path)
            ));
            c.install_problem = true;
            None
        }
        Some(Ok(v)) => {
            report.config_state = "ok".into();
            Some(v)
        }
    };
    let doc = doc.unwrap_or(Value::Null);
    let found = edit::our_entries(&doc, h);
    // Codex trust: from hooks/list when the real binary is here, else derived.
    let mut trust: Vec<(String, String, String)> = Vec::new(); // (command, event, status)
    if h == Harness::Codex && !found.is_empty() {
        let key_path = codex_trust::canonical_dir(path.parent().unwrap_or(Path::new("/"))).join("hooks.json");
        let listed = if deep_codex {
            program.as_ref().and_then(|p| {
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
        match listed {
            Some((hooks, problems)) => {
                report.trust_source = Some("codex app-server hooks/list".into());
                for p in problems {
                    c.warnings.push(format!("codex: {p}"));
                }
                for k in hooks.iter().filter(|k| edit::is_ours(Harness::Codex, &k.command)) {
                    let ev = k.key.split(':').rev().nth(2).unwrap_or("").to_string();
                    trust.push((k.command.clone(), ev, k.trust_status.clone()));
                }
            }
            None => {
                report.trust_source = Some("derived from config.toml".into());
                let cfg = std::fs::read_to_string(ctx.codex_config()).unwrap_or_default();
                let current = codex_trust::trusted_hashes(&cfg);
                for k in codex_trust::hook_keys(&key_path, &doc).into_iter().filter(|k| k.ours) {
                    let status = match current.get(&k.key) {
                        Some(v) if *v == k.hash => "trusted",
                        Some(_) => "modified",
                        None => "untrusted",
                    };
                    trust.push((k.command.clone(), codex_trust::snake(&k.event), status.into()));
                }
            }
        }
        if scope == Scope::Project {
            let cfg = std::fs::read_to_string(ctx.codex_config()).unwrap_or_default();
            if !install::codex_project_trusted(&cfg, &ctx.cwd) {
                c.problems.push(format!(
                    "codex: {} is not a trusted project, so Codex does not load its .codex/hooks.json",
                    ctx.cwd.display()
                ));
                c.install_problem = true;
            }
        }
        if let Some(o) = doc.as_object() {
            let extra: Vec<&String> = o.keys().filter(|k| *k != "hooks" && *k != "description").collect();
            if !extra.is_empty() {
                c.problems.push(format!(
                    "codex: {} has top-level key(s) {extra:?}: Codex rejects the whole file",
                    util::tilde(&ctx.env, &path)
                ));
                c.install_problem = true;
            }
        }
    }
    let entry_values = entry_values(&doc, h);
    for d in &expected {
        let expected_timeout = table::timeout_secs(d, &ctx.settings);
        let mine = entry_values
            .iter()
            .find(|(ev, cmd, _)| ev == d.on && edit::program_of(cmd).rsplit('/').next() == Some(d.binary));
        let mut e = EntryReport {
            event: d.on.into(),
            binary: d.binary.into(),
            present: mine.is_some(),
            command: mine.map(|m| m.1.clone()),
            program: None,
            timeout: mine.and_then(|m| m.2),
            expected_timeout,
            trust: None,
        };
        if let Some((_, cmd, timeout)) = mine {
            report.hooks_present += 1;
            let prog = PathBuf::from(edit::program_of(cmd));
            let here = ctx.binary(d);
            let state = if !prog.exists() {
                "missing"
            } else if !util::is_executable(&prog) {
                "not_executable"
            } else if prog == here {
                "ok"
            } else if !here.exists() {
                "not_built_here"
            } else if sha256_file(&prog) == sha256_file(&here) {
                "elsewhere_identical"
            } else {
                "elsewhere_differs"
            };
            e.program = Some(state.into());
            match state {
                "missing" | "not_executable" => {
                    c.problems.push(format!(
                        "{} {}: {} is {}",
                        h.slug(),
                        d.on,
                        prog.display(),
                        state.replace('_', " ")
                    ));
                    c.install_problem = true;
                }
                "elsewhere_differs" => {
                    c.problems.push(format!(
                        "{} {}: runs {}, which differs from {} (re-run install to point at this build)",
                        h.slug(),
                        d.on,
                        prog.display(),
                        here.display()
                    ));
                    c.install_problem = true;
                }
                _ => {}
            }
            if *timeout != Some(expected_timeout) {
                c.problems.push(format!(
                    "{} {}: timeout {} s, expected {expected_timeout} s (re-run install)",
                    h.slug(),
                    d.on,
                    timeout.map(|t| t.to_string()).unwrap_or_else(|| "unset".into())
                ));
                c.install_problem = true;
            }
            if h == Harness::Codex {
                let snake = codex_trust::snake(d.on);
                let t = trust
                    .iter()
                    .find(|(c2, ev, _)| c2 == cmd && *ev == snake)
                    .map(|t| t.2.clone())
                    .unwrap_or_else(|| "untrusted".into());
                if t != "trusted" {
                    c.problems.push(format!("codex {}: hook is {t}: Codex skips it silently (re-run `preloop-hooks install --harness codex`)", d.on));
                    c.install_problem = true;
                }
                e.trust = Some(t);
            }
        }
        report.entries.push(e);
    }
    if report.hooks_present > 0 && report.hooks_present < report.hooks_expected {
        let missing: Vec<&str> = report.entries.iter().filter(|e| !e.present).map(|e| e.event.as_str()).collect();
        c.problems.push(format!("{}: hooks missing for {} (re-run install)", h.slug(), missing.join(", ")));
        c.install_problem = true;
    }
    if found.len() > report.hooks_present {
        c.warnings.push(format!(
            "{}: {} extra entries of ours (duplicates or retired events); install cleans them up",
            h.slug(),
            found.len() - report.hooks_present
        ));
    }
    if report.installed && report.hooks_present == 0 {
        c.warnings.push(format!(
            "{} is installed but not hooked up: run `preloop-hooks install --harness {}`",
            h.slug(),
            h.slug()
        ));
    }
    report
}

/// (event, command, timeout) of our entries.
fn entry_values(doc: &Value, h: Harness) -> Vec<(String, String, Option<u64>)> {
    let mut out = Vec::new();
    let Some(hooks) = doc.get("hooks").and_then(Value::as_object) else { return out };
    for (event, arr) in hooks {
        for item in arr.as_array().into_iter().flatten() {
            let handlers: Vec<&Value> = match item.get("hooks").and_then(Value::as_array) {
                Some(hs) => hs.iter().collect(),
                None => vec![item],
            };
            for hd in handlers {
                if let Some(cmd) = hd.get("command").and_then(Value::as_str).filter(|c| edit::is_ours(h, c)) {
                    out.push((event.clone(), cmd.to_string(), hd.get("timeout").and_then(Value::as_u64)));
                }
            }
        }
    }
    out
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
    if config.is_local() {
        let ib = preloop_shared::local::LocalInbox::new(&config.home, config.settings.note_ttl_secs);
        s.inbox_pending = ib.list().ok().map(|l| l.iter().filter(|n| n.state == "pending").count());
    }
    s
}

fn last_errors(home: &Path, n: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for name in ["hooks.log.1", "hooks.log"] {
        if let Ok(t) = std::fs::read_to_string(home.join("log").join(name)) {
            lines
                .extend(t.lines().filter(|l| l.contains(" error=") || l.contains("outcome=panic")).map(str::to_string));
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
        l.push("cursor: headless `cursor-agent -p` fires no stop and no beforeSubmitPrompt, so a late note waits for the next session; sessionEnd is unreliable in the IDE; sessionStart context can be dropped by some IDE builds".into());
    }
    l
}

pub fn run(ctx: &Ctx, config: &Config, json: bool, deep_codex: bool) -> Exit {
    let mut c = Collector {
        problems: Vec::new(),
        warnings: config.warnings.clone(),
        install_problem: false,
        server_problem: false,
    };
    let harnesses: Vec<HarnessReport> = Harness::all().map(|h| check_harness(ctx, h, &mut c, deep_codex)).collect();
    let any_installed = harnesses.iter().any(|r| r.hooks_present > 0);
    let server = config.server.as_ref().map(|s| {
        let mut r = ServerReport {
            url: s.url.clone(),
            origin: match &s.origin {
                Origin::Env => "environment".into(),
                other => other.to_string(),
            },
            ..Default::default()
        };
        match server_op::health(&s.url, Duration::from_secs(3)) {
            Ok(()) => r.reachable = Some(true),
            Err(e) => {
                r.reachable = Some(false);
                r.detail.push(e.to_string());
            }
        }
        if r.reachable == Some(true) {
            match server_op::probe_runtime(&s.url, &s.token, Duration::from_secs(5)) {
                Ok(()) => r.runtime_token = "accepted".into(),
                Err(e) => {
                    r.runtime_token = "rejected".into();
                    r.detail.push(e.to_string());
                }
            }
            r.user_token = match ServerOperator::from_config(config) {
                Ok(Some(op)) => match op.probe() {
                    Ok(()) => "accepted".into(),
                    Err(e) => {
                        r.detail.push(e.to_string());
                        "rejected".into()
                    }
                },
                _ => "not configured".into(),
            };
        } else {
            r.runtime_token = "unchecked".into();
            r.user_token = if config.user_token.is_some() { "unchecked".into() } else { "not configured".into() };
        }
        if r.reachable != Some(true) || r.runtime_token == "rejected" || r.user_token == "rejected" {
            c.server_problem = true;
            c.problems.push(format!("server {}: {}", s.url, r.detail.join("; ")));
        }
        if r.user_token == "not configured" {
            c.warnings
                .push("no user token: `notes send` needs one in server mode (`preloop-hooks login --user`)".into());
        }
        r
    });
    let state = state_report(config);
    let last_errors = last_errors(&config.home, 5);
    let limits = limits(config, &harnesses);
    if !any_installed {
        c.problems.push("our hooks are installed in no harness: run `preloop-hooks install`".into());
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
    let report = Report {
        healthy: exit == Exit::Ok,
        exit_code: exit.code(),
        exit: exit.name(),
        mode: if config.is_local() { "local".into() } else { "server".into() },
        preloop_home: config.home.display().to_string(),
        bin_dir: ctx.bin_dir.display().to_string(),
        harnesses,
        server,
        state,
        last_errors,
        limits,
        problems: c.problems,
        warnings: c.warnings,
    };
    if json {
        print_json(&report);
    } else {
        print_human(ctx, &report);
    }
    exit
}

fn print_human(ctx: &Ctx, r: &Report) {
    let t = |p: &str| util::tilde(&ctx.env, Path::new(p));
    match &r.server {
        None => println!("mode       local (no server configured; inbox {})", t(&format!("{}/inbox", r.preloop_home))),
        Some(s) => println!("mode       server {} (from {})", s.url, s.origin),
    }
    println!("binaries   {}", t(&r.bin_dir));
    println!();
    let rows: Vec<Vec<String>> = r
        .harnesses
        .iter()
        .map(|h| {
            let trusted = h.entries.iter().filter(|e| e.trust.as_deref() == Some("trusted")).count();
            vec![
                h.harness.clone(),
                if h.installed { "yes".into() } else { "no".into() },
                h.version.clone().unwrap_or_else(|| "-".into()),
                format!("{} ({})", t(&h.config), h.scope),
                if h.config_state == "ok" || h.config_state == "missing" {
                    format!(
                        "{}/{}{}",
                        h.hooks_present,
                        h.hooks_expected,
                        if h.harness == "codex" && h.hooks_present > 0 {
                            format!(", {trusted} trusted")
                        } else {
                            String::new()
                        }
                    )
                } else {
                    "config does not parse".into()
                },
            ]
        })
        .collect();
    print_table(&["HARNESS", "INSTALLED", "VERSION", "CONFIG", "OUR HOOKS"], &rows);
    for h in r.harnesses.iter().filter(|h| h.hooks_present > 0) {
        println!();
        println!(
            "{} hooks{}",
            h.harness,
            h.trust_source.as_deref().map(|s| format!(" (trust: {s})")).unwrap_or_default()
        );
        let rows: Vec<Vec<String>> = h
            .entries
            .iter()
            .map(|e| {
                let mut v = vec![
                    format!("  {}", e.event),
                    if e.present { "present".into() } else { "MISSING".into() },
                    e.timeout.map(|t| format!("{t}s")).unwrap_or_else(|| "-".into()),
                    e.program.clone().unwrap_or_else(|| "-".into()).replace('_', " "),
                ];
                if h.harness == "codex" {
                    v.push(e.trust.clone().unwrap_or_else(|| "-".into()));
                }
                v.push(e.command.clone().unwrap_or_else(|| e.binary.clone()));
                v
            })
            .collect();
        if h.harness == "codex" {
            print_table(&["  EVENT", "ENTRY", "TIMEOUT", "BINARY", "TRUST", "COMMAND"], &rows);
        } else {
            print_table(&["  EVENT", "ENTRY", "TIMEOUT", "BINARY", "COMMAND"], &rows);
        }
    }
    if let Some(s) = &r.server {
        println!();
        println!(
            "server     {}; runtime token {}; user token {}",
            match s.reachable {
                Some(true) => "reachable",
                Some(false) => "UNREACHABLE",
                None => "unchecked",
            },
            s.runtime_token,
            s.user_token
        );
    }
    println!();
    let st = &r.state;
    println!(
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
        println!();
        println!("last errors ({})", t(&format!("{}/log/hooks.log", r.preloop_home)));
        for e in &r.last_errors {
            println!("  {e}");
        }
    }
    if !r.limits.is_empty() {
        println!();
        println!("known limits");
        for l in &r.limits {
            println!("  - {l}");
        }
    }
    if !r.warnings.is_empty() {
        println!();
        println!("warnings");
        for w in &r.warnings {
            println!("  - {w}");
        }
    }
    if !r.problems.is_empty() {
        println!();
        println!("problems");
        for p in &r.problems {
            println!("  - {p}");
        }
    }
    println!();
    if r.healthy {
        println!("healthy");
    } else {
        println!("not healthy (exit {})", r.exit_code);
    }
}
