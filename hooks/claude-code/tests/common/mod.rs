//! Running the real Claude Code hook binaries as the harness does: stdin in,
//! stdout out. The generic pieces (homes, runs, blocks, paths) are
//! `preloop_testkit::support`'s; what is Claude Code's lives here.

use preloop_testkit::fake_server::FakeServer;
pub use preloop_testkit::support::{Home, context_of as context, ids_in, log_line_of, logged_ms, wait_for};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The captures of Claude Code 2.1.328 (`fixtures/` and `schemas/`).
pub const FIXTURES: &str = "claude-code-2.1.328";

pub fn bin(event: &str) -> PathBuf {
    let e = preloop_claude_code::Event::ALL
        .into_iter()
        .find(|e| format!("{e:?}") == event)
        .unwrap_or_else(|| panic!("no hook for {event}"));
    preloop_testkit::commands::hook(e.binary())
}

/// The environment a hook gets: only what we set (no PRELOOP_* leaks in from the test runner).
pub fn command(event: &str, home: &Path, extra_env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(bin(event));
    c.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default()).env("HOME", home).env("PRELOOP_HOME", home);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

pub fn run_raw(mut c: Command, stdin: &[u8]) -> Output {
    let mut child = c.spawn().unwrap();
    let mut sin = child.stdin.take().unwrap();
    let _ = sin.write_all(stdin);
    drop(sin);
    child.wait_with_output().unwrap()
}

/// Run a hook; assert the harness contract (exit 0; stdout empty or exactly
/// one JSON object) and return the parsed output.
pub fn run(event: &str, home: &Path, extra_env: &[(&str, &str)], stdin: &Value) -> Option<Value> {
    let out = run_raw(command(event, home, extra_env), stdin.to_string().as_bytes());
    check_contract(event, &out)
}

/// Run the hook of `event` in `home` on its canonical [`payload`] for
/// `session` (the contract checked, as [`run`]).
pub fn hook(home: &Home, event: &str, session: &str) -> Option<Value> {
    run(event, home.path(), &[], &payload(event, session))
}

/// A new home (`tag`) with `session` started in it.
pub fn started(tag: &str, session: &str) -> Home {
    let home = Home::new(tag);
    hook(&home, "SessionStart", session);
    home
}

/// The environment of a hook in server mode against `server` (SessionEnd
/// runs in-process: its detached worker has its own test).
pub fn server_env(server: &FakeServer) -> Vec<(String, String)> {
    vec![
        ("PRELOOP_URL".into(), server.url()),
        ("PRELOOP_TOKEN".into(), server.runtime_token()),
        ("PRELOOP_SESSION_END_DETACH".into(), "0".into()),
    ]
}

/// [`run`] in server mode against `server`, with `extra` set as well.
pub fn run_s(event: &str, home: &Home, server: &FakeServer, extra: &[(&str, &str)], stdin: &Value) -> Option<Value> {
    let e = server_env(server);
    let mut all: Vec<(&str, &str)> = e.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    all.extend_from_slice(extra);
    run(event, home.path(), &all, stdin)
}

pub fn check_contract(event: &str, out: &Output) -> Option<Value> {
    assert_eq!(out.status.code(), Some(0), "{event} exit status; stderr: {}", String::from_utf8_lossy(&out.stderr));
    preloop_testkit::support::one_object(&out.stdout).unwrap_or_else(|e| panic!("{event}: {e}"))
}

pub fn payload(event: &str, session: &str) -> Value {
    let mut v = json!({
        "session_id": session,
        "transcript_path": format!("/tmp/x/{session}.jsonl"),
        "cwd": "/tmp/proj",
        "hook_event_name": event,
    });
    let o = v.as_object_mut().unwrap();
    match event {
        "SessionStart" => {
            o.insert("source".into(), json!("startup"));
        }
        "UserPromptSubmit" => {
            o.insert("prompt".into(), json!("Fix the flaky test in api/"));
        }
        "PreToolUse" => {
            o.insert("tool_name".into(), json!("Bash"));
            o.insert("tool_input".into(), json!({"command": "echo hi"}));
            o.insert("tool_use_id".into(), json!("toolu_1"));
        }
        "Stop" => {
            o.insert("stop_hook_active".into(), json!(false));
        }
        "SessionEnd" => {
            o.insert("reason".into(), json!("other"));
        }
        _ => {}
    }
    v
}
