//! Helpers shared by the Codex hook tests: paths, schemas, running the built
//! binaries, and the local inbox.
#![allow(dead_code)]

use preloop_codex::Event;
use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{Receipt, Target};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixtures_dir() -> PathBuf {
    repo_root().join("fixtures/codex-0.169.0")
}

pub fn schemas_dir() -> PathBuf {
    repo_root().join("schemas/codex-0.169.0")
}

pub fn fixture(name: &str) -> Value {
    let path = fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// A fixture with its session id replaced (each test gets its own session).
pub fn fixture_for(name: &str, session: &str) -> Value {
    let mut v = fixture(name);
    v["session_id"] = Value::String(session.to_string());
    v
}

/// The schema stem of a Codex event name (`PreToolUse` → `pre-tool-use`).
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

pub fn schema(stem: &str, dir: &str) -> Option<Value> {
    let path = schemas_dir().join(format!("{stem}.command.{dir}.schema.json"));
    let text = std::fs::read_to_string(path).ok()?;
    Some(serde_json::from_str(&text).unwrap())
}

/// Validate `instance` against a schema; `Err` lists the errors.
/// Our own output schema (generated from the typed outputs).
pub fn preloop_output_schema(stem: &str) -> Value {
    let path = schemas_dir().join(format!("preloop/{stem}.output.schema.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// Whether `output` is one Codex 0.169.0 takes for `event` at run time:
/// our generated schema (stricter than the one in the Codex binary).
pub fn check_output(event: Event, output: &Value) -> Result<(), String> {
    if event == Event::SessionEnd {
        return Err("SessionEnd prints nothing".into());
    }
    validate(&preloop_output_schema(&preloop_codex::schema_stem(event)), output)
}

pub fn validate(schema: &Value, instance: &Value) -> Result<(), String> {
    let v = jsonschema::validator_for(schema).map_err(|e| format!("bad schema: {e}"))?;
    let errors: Vec<String> = v.iter_errors(instance).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
}

/// Check one stdout of `event` the way Codex would: nothing, or exactly one
/// JSON document that passes the output schema and the key whitelist.
pub fn check_stdout(event: Event, stdout: &str) -> Option<Value> {
    if stdout.is_empty() {
        return None;
    }
    assert!(
        stdout.ends_with('\n') && stdout.matches('\n').count() == 1,
        "{}: one line expected: {stdout:?}",
        event.name()
    );
    let v: Value = serde_json::from_str(stdout)
        .unwrap_or_else(|e| panic!("{}: stdout is not JSON ({e}): {stdout:?}", event.name()));
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

/// A private PRELOOP_HOME, removed on drop.
pub struct Home {
    pub dir: PathBuf,
    /// Extra environment for every hook run.
    pub env: Vec<(String, String)>,
}

impl Home {
    pub fn new(tag: &str) -> Home {
        let dir = std::env::temp_dir().join(format!(
            "preloop-codex-{tag}-{}-{}",
            std::process::id(),
            preloop_shared::fsutil::note_id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Home { dir, env: Vec::new() }
    }

    pub fn with_env(mut self, key: &str, value: &str) -> Home {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    pub fn inbox(&self) -> LocalInbox {
        LocalInbox::new(&self.dir, 86_400)
    }

    /// Send a local note to a Codex session.
    pub fn send(&self, session: &str, text: &str) -> String {
        preloop_testkit::send_local_note(&self.inbox(), Target::Session(session.to_string()), text)
    }

    pub fn receipt(&self, note_id: &str) -> Receipt {
        self.inbox().status(note_id).unwrap()
    }

    pub fn run_state(&self, session: &str) -> Value {
        let path = self.dir.join("run").join(format!("{session}.json"));
        std::fs::read_to_string(path).ok().map(|t| serde_json::from_str(&t).unwrap()).unwrap_or(Value::Null)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log/hooks.log")).unwrap_or_default()
    }

    /// Run a hook binary with `stdin`; returns (stdout, exit code, duration).
    pub fn run_raw(&self, event: Event, stdin: &[u8]) -> Run {
        let started = Instant::now();
        let mut cmd = Command::new(bin(event));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PRELOOP_HOME", &self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        {
            let mut pipe = child.stdin.take().unwrap();
            let _ = pipe.write_all(stdin);
        }
        let out = child.wait_with_output().unwrap();
        Run {
            stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            code: out.status.code(),
            elapsed: started.elapsed(),
        }
    }

    /// Run a hook with a JSON payload and check its stdout as Codex would.
    pub fn run(&self, event: Event, payload: &Value) -> (Option<Value>, Run) {
        let r = self.run_raw(event, serde_json::to_string(payload).unwrap().as_bytes());
        assert_eq!(r.code, Some(0), "{} exited {:?}; stderr: {}", event.name(), r.code, r.stderr);
        (check_stdout(event, &r.stdout), r)
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[derive(Debug)]
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub code: Option<i32>,
    pub elapsed: Duration,
}

/// The model-visible text of an output, whichever field carries it.
pub fn context_of(v: &Option<Value>) -> Option<String> {
    let v = v.as_ref()?;
    v.pointer("/hookSpecificOutput/additionalContext")
        .or_else(|| v.get("reason"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The note ids in a block, in order.
pub fn ids_in(block: &str) -> Vec<String> {
    block
        .match_indices("<operator-note id=\"")
        .map(|(i, m)| block[i + m.len()..].split('"').next().unwrap().to_string())
        .collect()
}

pub fn unique_session(tag: &str) -> String {
    format!("01a2{tag}-{}", preloop_shared::fsutil::uuid_v4())
}

/// Poll `f` until it returns Some, or panic after `within`.
pub fn wait_for<T>(within: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
