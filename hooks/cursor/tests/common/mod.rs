//! Helpers shared by the Cursor hook tests: paths, schemas, running the built
//! binaries, and the local inbox.
#![allow(dead_code)]

use preloop_cursor::Event;
use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{Receipt, Target};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixtures_dir() -> PathBuf {
    repo_root().join("fixtures/cursor")
}

pub fn schemas_dir() -> PathBuf {
    repo_root().join("schemas/cursor")
}

pub fn fixture(name: &str) -> Value {
    let path = fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// A fixture as a fresh session: both ids replaced, so every test has its own.
pub fn fixture_for(name: &str, session: &str) -> Value {
    let mut v = fixture(name);
    v["conversation_id"] = json!(session);
    v["session_id"] = json!(session);
    v
}

/// The capture file names, sorted.
pub fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 42, "the 42 public Cursor captures are expected in fixtures/cursor/: {names:?}");
    names
}

pub fn schema(event: &str, dir: &str) -> Option<Value> {
    let path = schemas_dir().join(format!("{event}.{dir}.schema.json"));
    let text = std::fs::read_to_string(path).ok()?;
    Some(serde_json::from_str(&text).unwrap())
}

/// Validate `instance` against a schema; `Err` lists the errors.
pub fn validate(schema: &Value, instance: &Value) -> Result<(), String> {
    let v = jsonschema::validator_for(schema).map_err(|e| format!("bad schema: {e}"))?;
    let errors: Vec<String> = v.iter_errors(instance).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
}

/// Check one stdout of `event` the way Cursor reads it: exactly one JSON
/// object on one line that passes the event's output schema.
pub fn check_stdout(event: Event, stdout: &str) -> Value {
    assert!(
        stdout.ends_with('\n') && stdout.matches('\n').count() == 1,
        "{}: exactly one line expected: {stdout:?}",
        event.name()
    );
    let v: Value = serde_json::from_str(stdout)
        .unwrap_or_else(|e| panic!("{}: stdout is not JSON ({e}): {stdout:?}", event.name()));
    check_output(event, &v);
    v
}

/// An output value passes the event's output schema.
pub fn check_output(event: Event, v: &Value) {
    let schema = schema(event.name(), "output").unwrap_or_else(|| panic!("{} has no output schema", event.name()));
    validate(&schema, v).unwrap_or_else(|e| panic!("{} output fails its schema: {e}: {v}", event.name()));
}

pub fn bin(event: Event) -> PathBuf {
    let path = match event {
        Event::SessionStart => env!("CARGO_BIN_EXE_preloop-cursor-session-start"),
        Event::BeforeSubmitPrompt => env!("CARGO_BIN_EXE_preloop-cursor-before-submit-prompt"),
        Event::BeforeShellExecution => env!("CARGO_BIN_EXE_preloop-cursor-before-shell-execution"),
        Event::BeforeMcpExecution => env!("CARGO_BIN_EXE_preloop-cursor-before-mcp-execution"),
        Event::PreToolUse => env!("CARGO_BIN_EXE_preloop-cursor-pre-tool-use"),
        Event::Stop => env!("CARGO_BIN_EXE_preloop-cursor-stop"),
        Event::SessionEnd => env!("CARGO_BIN_EXE_preloop-cursor-session-end"),
    };
    PathBuf::from(path)
}

/// A fresh session id for one test.
pub fn session(tag: &str) -> String {
    format!("{tag}-{}", preloop_shared::fsutil::uuid_v4())
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
            "preloop-cursor-{tag}-{}-{}",
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

    /// Send a local note to a Cursor session (its conversation id).
    pub fn send(&self, session: &str, text: &str) -> String {
        self.send_to(Target::Session(session.to_string()), text)
    }

    pub fn send_to(&self, target: Target, text: &str) -> String {
        preloop_testkit::send_local_note(&self.inbox(), target, text)
    }

    pub fn receipt(&self, note_id: &str) -> Receipt {
        self.inbox().status(note_id).unwrap()
    }

    pub fn state(&self, note_id: &str) -> String {
        self.receipt(note_id).state
    }

    pub fn session_file(&self, session: &str) -> Option<preloop_shared::session::SessionFile> {
        preloop_shared::session::read_session_file(&self.dir, session).unwrap()
    }

    pub fn run_state(&self, session: &str) -> Value {
        let stem = preloop_shared::fsutil::session_file_stem(session);
        let path = self.dir.join("run").join(format!("{stem}.json"));
        std::fs::read_to_string(path).ok().map(|t| serde_json::from_str(&t).unwrap()).unwrap_or(Value::Null)
    }

    pub fn log(&self) -> String {
        let dir = self.dir.join("log");
        let mut all = String::new();
        for name in preloop_shared::fsutil::list_names(&dir) {
            all.push_str(&std::fs::read_to_string(dir.join(name)).unwrap_or_default());
        }
        all
    }

    /// Run a hook binary with raw `stdin` and a clean environment.
    pub fn run_raw(&self, event: Event, stdin: &[u8]) -> Run {
        self.run_raw_env(event, stdin, &[])
    }

    /// As [`Home::run_raw`], with extra environment for this run only.
    pub fn run_raw_env(&self, event: Event, stdin: &[u8], extra: &[(&str, &str)]) -> Run {
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
        for (k, v) in extra {
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

    /// Run a hook with a JSON payload; exit 0 and a schema-valid stdout.
    pub fn run(&self, event: Event, payload: &Value) -> Value {
        self.run_env(event, payload, &[])
    }

    /// As [`Home::run`], with extra environment for this run only.
    pub fn run_env(&self, event: Event, payload: &Value, extra: &[(&str, &str)]) -> Value {
        let r = self.run_raw_env(event, serde_json::to_string(payload).unwrap().as_bytes(), extra);
        assert_eq!(r.code, Some(0), "{} exited {:?}; stderr: {}", event.name(), r.code, r.stderr);
        check_stdout(event, &r.stdout)
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
pub fn context_of(v: &Value) -> Option<String> {
    v.get("additional_context").or_else(|| v.get("followup_message")).and_then(Value::as_str).map(str::to_string)
}

/// The note ids in a block, in order.
pub fn ids_in(block: &str) -> Vec<String> {
    block
        .match_indices("<operator-note id=\"")
        .filter_map(|(i, m)| {
            let rest = &block[i + m.len()..];
            rest.find('"').map(|end| rest[..end].to_string())
        })
        .collect()
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
