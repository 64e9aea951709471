//! What the Copilot hook tests share: the 1.0.102 captures (camelCase and
//! PascalCase dialects) and our output schemas, the built binaries, private
//! homes, and running a binary the way Copilot CLI does (stdout parsed as
//! one JSON object; exit 0, or Copilot ignores the JSON).
#![allow(dead_code)]

use preloop_copilot::Event;
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
    repo_root().join("fixtures/copilot-cli-1.0.102")
}

pub fn schemas_dir() -> PathBuf {
    repo_root().join("schemas/copilot-cli-1.0.102")
}

pub fn fixture(name: &str) -> Value {
    let path = fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// A camelCase capture with its session id replaced (each test gets its own
/// session); a sub-agent's capture gets `session` as its parent.
pub fn fixture_for(name: &str, session: &str) -> Value {
    let mut v = fixture(&format!("camel/{name}"));
    if v.get("parentAgentId").is_some() {
        v["parentAgentId"] = Value::String(session.to_string());
    } else {
        v["sessionId"] = Value::String(session.to_string());
    }
    v
}

/// The camelCase capture of each binary's own event.
pub fn own_fixture(event: Event) -> String {
    format!("{}.json", event.name())
}

/// Our output schema of an event (generated from the typed outputs).
pub fn output_schema(event: Event) -> Option<Value> {
    let path = schemas_dir().join(format!("{}.output.schema.json", event.name()));
    Some(serde_json::from_str(&std::fs::read_to_string(path).ok()?).unwrap())
}

pub fn validate(schema: &Value, instance: &Value) -> Result<(), String> {
    let v = jsonschema::validator_for(schema).map_err(|e| format!("bad schema: {e}"))?;
    let errors: Vec<String> = v.iter_errors(instance).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
}

/// Check one stdout of `event` the way Copilot reads it: nothing, or exactly
/// one JSON object that passes our output schema.
pub fn check_stdout(event: Event, stdout: &str) -> Option<Value> {
    if stdout.is_empty() {
        return None;
    }
    assert!(stdout.ends_with('\n') && stdout.matches('\n').count() == 1, "{}: one line: {stdout:?}", event.name());
    let v: Value =
        serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{}: not JSON ({e}): {stdout:?}", event.name()));
    let schema =
        output_schema(event).unwrap_or_else(|| panic!("{} has no output schema, yet printed {stdout}", event.name()));
    validate(&schema, &v).unwrap_or_else(|e| panic!("{} output fails its schema: {e}: {v}", event.name()));
    Some(v)
}

pub fn bin(event: Event) -> PathBuf {
    PathBuf::from(match event {
        Event::SessionStart => env!("CARGO_BIN_EXE_preloop-copilot-session-start"),
        Event::UserPromptSubmitted => env!("CARGO_BIN_EXE_preloop-copilot-user-prompt-submitted"),
        Event::PreToolUse => env!("CARGO_BIN_EXE_preloop-copilot-pre-tool-use"),
        Event::PostToolUse => env!("CARGO_BIN_EXE_preloop-copilot-post-tool-use"),
        Event::AgentStop => env!("CARGO_BIN_EXE_preloop-copilot-agent-stop"),
        Event::SessionEnd => env!("CARGO_BIN_EXE_preloop-copilot-session-end"),
    })
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
            "preloop-copilot-{tag}-{}-{}",
            std::process::id(),
            preloop_shared::fsutil::note_id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Home { dir, env: Vec::new() }
    }

    pub fn with_env(mut self, key: &str, value: &str) -> Home {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    pub fn inbox(&self) -> LocalInbox {
        LocalInbox::new(&self.dir, 86_400)
    }

    pub fn send(&self, session: &str, text: &str) -> String {
        preloop_testkit::send_local_note(&self.inbox(), Target::Session(session.to_string()), text)
    }

    pub fn receipt(&self, note_id: &str) -> Receipt {
        self.inbox().status(note_id).unwrap()
    }

    pub fn run_state(&self, session: &str) -> Value {
        let path = self.dir.join("run").join(format!("{}.json", preloop_shared::fsutil::session_file_stem(session)));
        std::fs::read_to_string(path).ok().map(|t| serde_json::from_str(&t).unwrap()).unwrap_or(Value::Null)
    }

    pub fn session_file(&self, session: &str) -> Value {
        let path = self.dir.join("sessions").join(format!("{session}.json"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log/hooks.log")).unwrap_or_default()
    }

    /// Run a hook binary with `stdin`.
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

    /// Run a hook with a JSON payload and check what it printed as Copilot
    /// would: exit 0 (else its JSON is ignored, and preToolUse denies),
    /// stdout nothing or one valid object.
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

/// The model-visible text of a Copilot output, whichever field carries it.
pub fn context_of(v: &Option<Value>) -> Option<String> {
    let v = v.as_ref()?;
    v.get("additionalContext").or_else(|| v.get("reason")).and_then(Value::as_str).map(str::to_string)
}

/// The note ids in a block, in order.
pub fn ids_in(block: &str) -> Vec<String> {
    block
        .match_indices("<operator-note id=\"")
        .map(|(i, m)| block[i + m.len()..].split('"').next().unwrap().to_string())
        .collect()
}

pub fn unique_session(tag: &str) -> String {
    format!("c0b1{tag}-{}", preloop_shared::fsutil::uuid_v4())
}

/// A URL nothing listens on.
pub fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}")
}
