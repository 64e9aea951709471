//! What the Codex hook tests share: its captures and schemas, its binaries,
//! and running them as Codex does. The generic pieces (homes, runs, blocks,
//! paths) are `preloop_testkit::support`'s.

use preloop_codex::Event;
pub use preloop_testkit::support::{Home, Run, context_of, dead_url, ids_in, unique_session, validate, wait_for};
use serde_json::Value;
use std::path::PathBuf;

/// The captures of Codex 0.169.0 (`fixtures/` and `schemas/`).
pub const FIXTURES: &str = "codex-0.169.0";

pub fn fixtures_dir() -> PathBuf {
    preloop_testkit::support::fixtures_dir(FIXTURES)
}

pub fn schemas_dir() -> PathBuf {
    preloop_testkit::support::schemas_dir(FIXTURES)
}

pub fn fixture(name: &str) -> Value {
    preloop_testkit::support::fixture(FIXTURES, name)
}

/// A capture with its session id replaced (each test gets its own session).
pub fn fixture_for(name: &str, session: &str) -> Value {
    preloop_testkit::support::fixture_for(FIXTURES, name, session)
}

/// A schema extracted from the Codex binary, if it has one for the stem.
pub fn schema(stem: &str, dir: &str) -> Option<Value> {
    let path = schemas_dir().join(format!("{stem}.command.{dir}.schema.json"));
    path.exists().then(|| preloop_testkit::support::read_json(&path))
}

/// Our own output schema (generated from the typed outputs).
pub fn preloop_output_schema(stem: &str) -> Value {
    preloop_testkit::support::read_json(&schemas_dir().join(format!("preloop/{stem}.output.schema.json")))
}

/// Whether `output` is one Codex 0.169.0 takes for `event` at run time:
/// our generated schema (stricter than the one in the Codex binary).
pub fn check_output(event: Event, output: &Value) -> Result<(), String> {
    if event == Event::SessionEnd {
        return Err("SessionEnd prints nothing".into());
    }
    validate(&preloop_output_schema(&preloop_codex::schema_stem(event)), output)
}

/// Check one stdout of `event` the way Codex would: nothing, or exactly one
/// JSON document that passes the output schema and the key whitelist.
pub fn check_stdout(event: Event, stdout: &str) -> Option<Value> {
    let v =
        preloop_testkit::support::one_object(stdout.as_bytes()).unwrap_or_else(|e| panic!("{}: {e}", event.name()))?;
    let stem = preloop_codex::schema_stem(event);
    let schema = schema(&stem, "output")
        .unwrap_or_else(|| panic!("{} has no output schema, yet printed {stdout}", event.name()));
    validate(&schema, &v).unwrap_or_else(|e| panic!("{} output fails Codex's schema: {e}: {v}", event.name()));
    // Ours is stricter: only what Codex 0.169.0 accepts at run time.
    let ours = preloop_output_schema(&stem);
    validate(&ours, &v).unwrap_or_else(|e| panic!("{} output would fail in Codex: {e}: {v}", event.name()));
    Some(v)
}

pub fn bin(event: Event) -> PathBuf {
    let path = match event {
        Event::SessionStart => env!("CARGO_BIN_EXE_preloop-codex-session-start"),
        Event::UserPromptSubmit => env!("CARGO_BIN_EXE_preloop-codex-user-prompt-submit"),
        Event::PreToolUse => env!("CARGO_BIN_EXE_preloop-codex-pre-tool-use"),
        Event::PermissionRequest => env!("CARGO_BIN_EXE_preloop-codex-permission-request"),
        Event::Stop => env!("CARGO_BIN_EXE_preloop-codex-stop"),
        Event::SessionEnd => env!("CARGO_BIN_EXE_preloop-codex-session-end"),
    };
    PathBuf::from(path)
}

/// Running Codex's hook binaries in a [`Home`].
pub trait CodexHome {
    /// Run a hook binary with raw `stdin`.
    fn run_raw(&self, event: Event, stdin: &[u8]) -> Run;
    /// Run a hook with a JSON payload and check its stdout as Codex would.
    fn run(&self, event: Event, payload: &Value) -> (Option<Value>, Run);
}

impl CodexHome for Home {
    fn run_raw(&self, event: Event, stdin: &[u8]) -> Run {
        self.run_bin(&bin(event), stdin, &[])
    }

    fn run(&self, event: Event, payload: &Value) -> (Option<Value>, Run) {
        let r = self.run_raw(event, serde_json::to_string(payload).unwrap().as_bytes());
        r.assert_exit_0(event.name());
        (check_stdout(event, &r.out()), r)
    }
}

/// The schema stem of any Codex event name, ours or not (`PreModelRequest`
/// → `pre-model-request`).
pub fn schema_stem(event_name: &str) -> String {
    let mut out = String::new();
    for (i, c) in event_name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}
