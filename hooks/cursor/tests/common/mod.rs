//! What the Cursor hook tests share: the captures and schemas, the
//! binaries, and running them as Cursor does. The generic pieces (homes,
//! runs, blocks, paths) are `preloop_testkit::support`'s.

use preloop_cursor::Event;
pub use preloop_testkit::support::{Home, Run, dead_url, ids_in, validate};
use serde_json::{Value, json};
use std::path::PathBuf;

/// The Cursor captures (`fixtures/cursor`, `schemas/cursor`).
pub const FIXTURES: &str = "cursor";

pub fn fixtures_dir() -> PathBuf {
    preloop_testkit::support::fixtures_dir(FIXTURES)
}

pub fn fixture(name: &str) -> Value {
    preloop_testkit::support::fixture(FIXTURES, name)
}

/// A capture as a fresh session: both ids replaced, so every test has its own.
pub fn fixture_for(name: &str, session: &str) -> Value {
    preloop_testkit::support::fixture_for(FIXTURES, name, session)
}

/// The capture file names, sorted.
pub fn fixture_names() -> Vec<String> {
    // The canonical `<event>.json` are links to one of the captures (for the
    // generic scenarios): each capture once, by its own name.
    let dir = fixtures_dir();
    let names: Vec<String> =
        preloop_testkit::support::json_names(&dir).into_iter().filter(|n| !dir.join(n).is_symlink()).collect();
    assert_eq!(names.len(), 42, "the 42 public Cursor captures are expected in fixtures/cursor/: {names:?}");
    names
}

pub fn schema(event: &str, dir: &str) -> Option<Value> {
    let path = preloop_testkit::support::schemas_dir(FIXTURES).join(format!("{event}.{dir}.schema.json"));
    path.exists().then(|| preloop_testkit::support::read_json(&path))
}

/// Check one stdout of `event` the way Cursor reads it: exactly one JSON
/// object on one line that passes the event's output schema.
pub fn check_stdout(event: Event, stdout: &str) -> Value {
    let v = preloop_testkit::support::one_object(stdout.as_bytes())
        .unwrap_or_else(|e| panic!("{}: {e}", event.name()))
        .unwrap_or_else(|| panic!("{}: printed nothing (a Cursor hook always prints an object)", event.name()));
    check_output(event, &v);
    v
}

/// An output value passes the event's output schema.
pub fn check_output(event: Event, v: &Value) {
    let schema = schema(event.name(), "output").unwrap_or_else(|| panic!("{} has no output schema", event.name()));
    validate(&schema, v).unwrap_or_else(|e| panic!("{} output fails its schema: {e}: {v}", event.name()));
}

pub fn bin(event: Event) -> PathBuf {
    preloop_testkit::commands::hook(event.binary())
}

/// A fresh session id for one test.
pub fn session(tag: &str) -> String {
    preloop_testkit::support::unique_session(tag)
}

/// Local mode, a new home (`tag`) and a fresh IDE session started in it.
pub fn started_locally(tag: &str) -> (Home, String) {
    let home = Home::new(tag);
    let s = session(tag);
    home.run(Event::SessionStart, &session_start(&s, false));
    (home, s)
}

/// Running Cursor's hook binaries in a [`Home`].
pub trait CursorHome {
    /// Run a hook binary with raw `stdin` and this home's environment.
    fn run_raw(&self, event: Event, stdin: &[u8]) -> Run;
    /// As [`CursorHome::run_raw`], with extra environment for this run only.
    fn run_raw_env(&self, event: Event, stdin: &[u8], extra: &[(&str, &str)]) -> Run;
    /// Run a hook with a JSON payload; exit 0 and a schema-valid stdout.
    fn run(&self, event: Event, payload: &Value) -> Value;
    /// As [`CursorHome::run`], with extra environment for this run only.
    fn run_env(&self, event: Event, payload: &Value, extra: &[(&str, &str)]) -> Value;
}

impl CursorHome for Home {
    fn run_raw(&self, event: Event, stdin: &[u8]) -> Run {
        self.run_raw_env(event, stdin, &[])
    }
    fn run_raw_env(&self, event: Event, stdin: &[u8], extra: &[(&str, &str)]) -> Run {
        self.run_bin(&bin(event), stdin, extra)
    }
    fn run(&self, event: Event, payload: &Value) -> Value {
        self.run_env(event, payload, &[])
    }
    fn run_env(&self, event: Event, payload: &Value, extra: &[(&str, &str)]) -> Value {
        let r = self.run_raw_env(event, serde_json::to_string(payload).unwrap().as_bytes(), extra);
        r.assert_exit_0(event.name());
        check_stdout(event, &r.out())
    }
}

/// The model-visible text of an output, whichever field carries it.
pub fn context_of(v: &Value) -> Option<String> {
    v.get("additional_context").or_else(|| v.get("followup_message")).and_then(Value::as_str).map(str::to_string)
}

/// Payloads built like the captures, for one session.
pub fn session_start(session: &str, cli: bool) -> Value {
    let mut v = fixture_for(if cli { "sessionStart-4.json" } else { "sessionStart-2.json" }, session);
    v["workspace_roots"] = json!(["/tmp/cursor-workspace"]);
    v
}

pub fn submit_prompt(session: &str, prompt: &str) -> Value {
    let mut v = fixture_for("beforeSubmitPrompt-5.json", session);
    v["prompt"] = json!(prompt);
    v
}

pub fn shell(session: &str, command: &str) -> Value {
    let mut v = fixture_for("beforeShellExecution-3.json", session);
    v["command"] = json!(command);
    v
}

pub fn mcp(session: &str) -> Value {
    fixture_for("beforeMCPExecution-1.json", session)
}

pub fn pre_tool(session: &str, command: &str) -> Value {
    let mut v = fixture_for("preToolUse-6.json", session);
    v["tool_input"] = json!({"command": command});
    v
}

pub fn stop(session: &str, status: &str, loop_count: u64) -> Value {
    let mut v = fixture_for("stop-3.json", session);
    v["status"] = json!(status);
    v["loop_count"] = json!(loop_count);
    v
}

pub fn session_end(session: &str) -> Value {
    fixture_for("sessionEnd-4.json", session)
}
