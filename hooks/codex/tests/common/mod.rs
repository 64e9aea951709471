//! What the Codex hook tests share: its captures and schemas, its binaries,
//! and running them as Codex does. The generic pieces (homes, runs, blocks,
//! paths) are `preloop_testkit::support`'s.

use preloop_codex::Event;
pub use preloop_testkit::hooks::Hooks;
pub use preloop_testkit::support::{
    Home, Run, context_of, ids_in, log_line_of, logged_ms, unique_session, validate, wait_for,
};
use serde_json::Value;
use std::path::PathBuf;

preloop_testkit::hooks! {
    /// Codex 0.169.0's hooks, for `preloop_testkit::hooks`: a stdout passes
    /// the output schema extracted from the Codex binary and ours.
    pub Codex(CodexHome) = preloop_codex, "codex-0.169.0";

    /// The output schema in the Codex binary.
    fn output_schema(event: Event) -> Option<Value> {
        schema(&preloop_codex::schema_stem(event), "output")
    }
    fn check(event: Event, run: &Run) -> Option<Value> {
        check_stdout(event, &run.out())
    }
}

pub fn fixtures_dir() -> PathBuf {
    preloop_testkit::support::fixtures_dir(Codex::FIXTURES)
}

pub fn fixture(name: &str) -> Value {
    preloop_testkit::support::fixture(Codex::FIXTURES, name)
}

/// A capture with its session id replaced (each test gets its own session).
pub fn fixture_for(name: &str, session: &str) -> Value {
    Codex::fixture_for(name, session)
}

/// A schema extracted from the Codex binary, if it has one for the stem.
pub fn schema(stem: &str, dir: &str) -> Option<Value> {
    let path = preloop_testkit::support::schemas_dir(Codex::FIXTURES).join(format!("{stem}.command.{dir}.schema.json"));
    path.exists().then(|| preloop_testkit::support::read_json(&path))
}

/// Our own output schema (generated from the typed outputs).
pub fn preloop_output_schema(stem: &str) -> Value {
    let dir = preloop_testkit::support::schemas_dir(Codex::FIXTURES);
    preloop_testkit::support::read_json(&dir.join(format!("preloop/{stem}.output.schema.json")))
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
    Codex::bin(event)
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
