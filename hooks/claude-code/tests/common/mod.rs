//! Running the real hook binaries as the harness does: stdin in, stdout out.
#![allow(dead_code)]

use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{Receipt, Target};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub fn bin(event: &str) -> PathBuf {
    let p = match event {
        "SessionStart" => env!("CARGO_BIN_EXE_preloop-claude-code-session-start"),
        "UserPromptSubmit" => env!("CARGO_BIN_EXE_preloop-claude-code-user-prompt-submit"),
        "PreToolUse" => env!("CARGO_BIN_EXE_preloop-claude-code-pre-tool-use"),
        "Stop" => env!("CARGO_BIN_EXE_preloop-claude-code-stop"),
        "SessionEnd" => env!("CARGO_BIN_EXE_preloop-claude-code-session-end"),
        "Watch" => env!("CARGO_BIN_EXE_preloop-claude-code-watch"),
        other => panic!("no binary for {other}"),
    };
    PathBuf::from(p)
}

/// A temporary PRELOOP_HOME, removed on drop.
pub struct Home(pub PathBuf);

impl Home {
    pub fn new() -> Home {
        let p = std::env::temp_dir().join(format!("preloop-test-{}", preloop_shared::fsutil::note_id()));
        std::fs::create_dir_all(&p).unwrap();
        Home(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    pub fn inbox(&self) -> LocalInbox {
        LocalInbox::new(&self.0, 86_400)
    }
    pub fn send(&self, session: &str, text: &str) -> String {
        preloop_testkit::send_local_note(&self.inbox(), Target::Session(session.into()), text)
    }
    pub fn receipt(&self, id: &str) -> Receipt {
        self.inbox().status(id).unwrap()
    }
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.0.join("log/hooks.log")).unwrap_or_default()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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

pub fn check_contract(event: &str, out: &Output) -> Option<Value> {
    assert_eq!(out.status.code(), Some(0), "{event} exit status; stderr: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8");
    if text.is_empty() {
        return None;
    }
    assert!(text.ends_with('\n') && text.matches('\n').count() == 1, "{event}: one line of JSON, got {text:?}");
    let v: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{event}: stdout is not JSON ({e}): {text:?}"));
    assert!(v.is_object(), "{event}: stdout is not an object");
    Some(v)
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

pub fn context(out: &Option<Value>) -> Option<String> {
    out.as_ref()?.get("hookSpecificOutput")?.get("additionalContext")?.as_str().map(str::to_string)
}

/// The note ids inside a block.
pub fn ids_in(block: &str) -> Vec<String> {
    preloop_shared::render::parse_block(block).expect("a well-formed block").into_iter().map(|n| n.id).collect()
}
