//! What every test crate of the workspace needs to run hook binaries the
//! way a harness does: the repository's paths and captures, a private
//! `PRELOOP_HOME` with the local inbox, process runs with a deadline, output
//! and schema checks, note ids in a block, and dropping root for the tests
//! that need another user.
//!
//! Harness-specific pieces (which binary is which event, an event's output
//! schema) stay in each crate's `tests/all.rs`; everything here takes a
//! binary path or a schema.

use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{Receipt, Target};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

// ----- the repository ----------------------------------------------------------

/// The workspace root.
pub fn repo_root() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    p.canonicalize().unwrap_or(p)
}

/// `fixtures/<dir>`: a harness's captures (`claude-code-2.1.328`, `codex-0.169.0`, `cursor`).
pub fn fixtures_dir(dir: &str) -> PathBuf {
    repo_root().join("fixtures").join(dir)
}

/// `schemas/<dir>`.
pub fn schemas_dir(dir: &str) -> PathBuf {
    repo_root().join("schemas").join(dir)
}

/// A JSON file, or a panic naming it.
pub fn read_json(p: &Path) -> Value {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("{}: not JSON: {e}", p.display()))
}

/// The capture `fixtures/<dir>/<name>`.
pub fn fixture(dir: &str, name: &str) -> Value {
    read_json(&fixtures_dir(dir).join(name))
}

/// A capture as a fresh session: `session_id` (and Cursor's
/// `conversation_id`, when `cursor`) replaced, so every test has its own.
pub fn fixture_for(dir: &str, name: &str, session: &str) -> Value {
    let mut v = fixture(dir, name);
    set_session(&mut v, session, dir == "cursor");
    v
}

/// Put `session` into a payload (`conversation_id` too for Cursor).
pub fn set_session(v: &mut Value, session: &str, cursor: bool) {
    if let Some(o) = v.as_object_mut() {
        o.insert("session_id".into(), json!(session));
        if cursor {
            o.insert("conversation_id".into(), json!(session));
        }
    }
}

/// The sorted names of the `.json` files directly in `dir`.
pub fn json_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    names
}

/// A schema file, compiled.
pub fn validator(path: &Path) -> jsonschema::Validator {
    jsonschema::validator_for(&read_json(path)).unwrap_or_else(|e| panic!("{}: bad schema: {e}", path.display()))
}

/// Validate `instance` against `schema`; `Err` lists the errors.
pub fn validate(schema: &Value, instance: &Value) -> Result<(), String> {
    let v = jsonschema::validator_for(schema).map_err(|e| format!("bad schema: {e}"))?;
    let errors: Vec<String> = v.iter_errors(instance).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
}

// ----- notes and blocks ----------------------------------------------------------

/// The note ids in a block, in order. An XML block must be well formed
/// (one `<operator-notes>` frame of whole elements): a test never accepts a
/// block the model could misread. A block that opens with a bracket frame
/// (Gemini's escaped carriers) is scanned for its bracket elements, and any
/// other text for the elements it holds.
pub fn ids_in(block: &str) -> Vec<String> {
    if block.starts_with("[operator-notes") {
        let open = "[operator-note id=\"";
        return block
            .match_indices(open)
            .filter_map(|(i, m)| block[i + m.len()..].split('"').next().map(str::to_string))
            .collect();
    }
    if !block.starts_with("<operator-notes") {
        // Not a block (a deny reason in the same field, a carrier's own
        // prefix): the elements it holds, if any.
        let open = "<operator-note id=\"";
        return block
            .match_indices(open)
            .filter_map(|(i, m)| block[i + m.len()..].split('"').next().map(str::to_string))
            .collect();
    }
    preloop_shared::render::parse_block(block)
        .unwrap_or_else(|| panic!("not a well-formed note block: {:?}", block.chars().take(400).collect::<String>()))
        .into_iter()
        .flat_map(|n| n.id.split(',').map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// The model-visible text of any harness's output, whichever field carries
/// it: Claude/Codex `additionalContext`, Cursor `additional_context` /
/// `followup_message`, a flat `additionalContext` (Copilot), a Stop-like
/// `reason` of `decision: block`, and the `reason` of a Gemini BeforeTool
/// that holds the call with its note (`decision: deny`).
pub fn context_of(v: &Option<Value>) -> Option<String> {
    let v = v.as_ref()?;
    v.pointer("/hookSpecificOutput/additionalContext")
        .or_else(|| v.get("additional_context"))
        .or_else(|| v.get("followup_message"))
        .or_else(|| v.get("additionalContext"))
        .or_else(|| v.get("reason").filter(|_| matches!(v.get("decision"), Some(d) if d == "block" || d == "deny")))
        // A plugin shim's answer (Pi): `{"kind": "context" | "continue", "text"}`.
        .or_else(|| v.get("text").filter(|_| matches!(v.get("kind"), Some(k) if k == "context" || k == "continue")))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Whether an output of any harness denies the tool call.
pub fn is_deny(v: &Option<Value>) -> bool {
    let Some(v) = v else { return false };
    v.pointer("/hookSpecificOutput/permissionDecision") == Some(&json!("deny"))
        || v.pointer("/hookSpecificOutput/decision/behavior") == Some(&json!("deny"))
        || v.get("permission") == Some(&json!("deny"))
        || v.get("permissionDecision") == Some(&json!("deny"))
        || v.get("decision") == Some(&json!("deny"))
        || v.get("kind") == Some(&json!("deny"))
}

/// A fresh harness session id for one test.
pub fn unique_session(tag: &str) -> String {
    format!("{tag}-{}", preloop_shared::fsutil::uuid_v4())
}

/// A URL nothing listens on.
pub fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}")
}

/// Poll `f` until it returns `Some`, or panic after `within`.
pub fn wait_for<T>(within: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {within:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `ms=` of a hook's log line: how long the hook took by its own clock,
/// from its start to its log line. That is what its deadlines govern; the
/// wall clock of a test's run adds what a loaded machine adds (fork, exec
/// of a large debug binary, the scheduler), which no code controls
/// (docs/hardening.md, "Tests with a wall-clock bound").
pub fn logged_ms(line: &str) -> u128 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("ms="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no ms= in the log line {line:?}"))
}

/// The last log line of `event` (` <event> `, not its detached worker's)
/// in `log`.
pub fn log_line_of<'a>(log: &'a str, event: &str) -> &'a str {
    let word = format!(" {event} ");
    log.lines().rev().find(|l| l.contains(&word)).unwrap_or_else(|| panic!("no {event} line in the log:\n{log}"))
}

/// Every path under `dir` (itself included, symlinks not followed).
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        out.push(d.clone());
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

// ----- homes ---------------------------------------------------------------------

/// A fresh path under the temp dir (not created).
pub fn temp_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "preloop-test-{tag}-{}-{}",
        std::process::id(),
        preloop_shared::fsutil::note_id()
    ))
}

/// A private `PRELOOP_HOME` (also the hooks' `HOME`), removed on drop.
pub struct Home {
    pub dir: PathBuf,
    /// Environment for every run, besides `PATH`, `HOME` and `PRELOOP_HOME`.
    pub env: Vec<(String, String)>,
}

impl Home {
    pub fn new(tag: &str) -> Home {
        let dir = temp_path(tag);
        std::fs::create_dir_all(&dir).unwrap();
        Home { dir, env: Vec::new() }
    }

    /// Server mode against `url` with the runtime `token`.
    pub fn server(tag: &str, url: &str, token: &str) -> Home {
        Home::new(tag).with_env("PRELOOP_URL", url).with_env("PRELOOP_TOKEN", token)
    }

    /// Server mode against a [`FakeServer`](crate::FakeServer), with its
    /// runtime token.
    pub fn for_server(tag: &str, server: &crate::FakeServer) -> Home {
        Home::server(tag, &server.url(), &server.runtime_token())
    }

    /// Server mode against a URL nothing listens on.
    pub fn dead_server(tag: &str) -> Home {
        Home::server(tag, &dead_url(), "agt_dead")
    }

    /// Set (or replace) an environment variable for every run.
    pub fn with_env(mut self, k: &str, v: &str) -> Home {
        self.env.retain(|(key, _)| key != k);
        self.env.push((k.into(), v.into()));
        self
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    pub fn inbox(&self) -> LocalInbox {
        LocalInbox::new(&self.dir, 86_400)
    }

    /// Send a local note to a harness session.
    pub fn send(&self, session: &str, text: &str) -> String {
        self.send_to(Target::Session(session.to_string()), text)
    }

    pub fn send_to(&self, target: Target, text: &str) -> String {
        crate::send_local_note(&self.inbox(), target, text)
    }

    pub fn receipt(&self, id: &str) -> Receipt {
        self.inbox().status(id).unwrap_or_else(|e| panic!("receipt of {id}: {e}"))
    }

    /// A local note's receipt as `(state, delivery_event,
    /// undeliverable_reason)`, the shape of
    /// [`FakeServer::note_state`](crate::FakeServer::note_state).
    pub fn note_state(&self, id: &str) -> (String, Option<String>, Option<String>) {
        let r = self.receipt(id);
        (r.state.to_string(), r.delivery_event, r.undeliverable_reason)
    }

    /// A local note's state (`pending`, `claimed`, `delivered`, ...).
    pub fn state(&self, id: &str) -> String {
        self.receipt(id).state.to_string()
    }

    pub fn session_file(&self, session: &str) -> Option<preloop_shared::session::SessionFile> {
        preloop_shared::session::read_session_file(&self.dir, session).ok().flatten()
    }

    pub fn run_state_path(&self, session: &str) -> PathBuf {
        self.dir.join("run").join(format!("{}.json", preloop_shared::fsutil::session_file_stem(session)))
    }

    /// The session's run state as JSON (`Null` when there is none).
    pub fn run_state(&self, session: &str) -> Value {
        std::fs::read_to_string(self.run_state_path(session))
            .ok()
            .map(|t| serde_json::from_str(&t).unwrap_or_else(|e| panic!("run state is corrupt: {e}: {t}")))
            .unwrap_or(Value::Null)
    }

    /// The hook log (the rotated file first).
    pub fn log(&self) -> String {
        let mut s = std::fs::read_to_string(self.dir.join("log/hooks.log.1")).unwrap_or_default();
        s.push_str(&std::fs::read_to_string(self.dir.join("log/hooks.log")).unwrap_or_default());
        s
    }

    /// A command for `bin` with only our environment (nothing leaks in
    /// from the test runner), stdio piped.
    pub fn command(&self, bin: &Path, extra: &[(&str, &str)]) -> Command {
        let mut c = Command::new(bin);
        self.prepare(&mut c, extra);
        c
    }

    /// Give `cmd` this home's environment (and `extra`), nothing else.
    pub fn prepare(&self, cmd: &mut Command, extra: &[(&str, &str)]) {
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.dir)
            .env("PRELOOP_HOME", &self.dir);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for (k, v) in extra {
            cmd.env(k, v);
        }
    }

    /// Run `bin` with `stdin` (killed after 60 s).
    pub fn run_bin(&self, bin: &Path, stdin: &[u8], extra: &[(&str, &str)]) -> Run {
        run_cmd(self.command(bin, extra), stdin, Duration::from_secs(60))
    }

    /// Run `bin` as a plugin shim does (`preloop_shared::plugin`): `payload`
    /// as one line, then, once an answer line came, `confirm` (`Some("applied")`)
    /// or nothing, and stdin closed (killed after 60 s).
    pub fn run_plugin(&self, bin: &Path, payload: &[u8], confirm: Option<&str>, extra: &[(&str, &str)]) -> Run {
        run_as_plugin(self.command(bin, extra), payload, confirm, Duration::from_secs(60))
    }
}

/// Run `cmd` as a plugin shim does ([`Home::run_plugin`]).
pub fn run_as_plugin(mut cmd: Command, payload: &[u8], confirm: Option<&str>, deadline: Duration) -> Run {
    let started = Instant::now();
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let mut pin = child.stdin.take().unwrap();
    let mut line = payload.to_vec();
    if !line.ends_with(b"\n") {
        line.push(b'\n');
    }
    let _ = pin.write_all(&line);
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let ro = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut b = [0u8; 8192];
        loop {
            match so.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    all.extend_from_slice(&b[..n]);
                    let _ = tx.send(b[..n].to_vec());
                }
            }
        }
        all
    });
    let re = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = se.read_to_end(&mut b);
        b
    });
    // The answer line, or stdout closed: then confirm (or not) and close.
    let mut seen = Vec::new();
    while !seen.contains(&b'\n') {
        match rx.recv_timeout(deadline.saturating_sub(started.elapsed())) {
            Ok(chunk) => seen.extend(chunk),
            Err(_) => break,
        }
    }
    if seen.contains(&b'\n')
        && let Some(c) = confirm
    {
        let _ = pin.write_all(format!("{c}\n").as_bytes());
    }
    drop(pin);
    let (status, timed_out) = wait_within(&mut child, started, deadline);
    Run { stdout: ro.join().unwrap(), stderr: re.join().unwrap(), status, elapsed: started.elapsed(), timed_out }
}

impl Drop for Home {
    /// Wait (at most 15 s) for the detached SessionEnd workers still ending
    /// a session of this home (a `run/*.ending` marker naming a live pid),
    /// then remove it. A test drops its home before its server (declared
    /// first, dropped last), so a worker finishes against its own server:
    /// one that outlived it would retry the port, which under load another
    /// test's stub may have taken by then, and count there as a stray call.
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline && workers_ending(&self.dir) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether a `run/*.ending` marker under `home` names a worker whose
/// process is still there.
fn workers_ending(home: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(home.join("run")) else { return false };
    entries.flatten().filter(|e| e.file_name().to_string_lossy().ends_with(".ending")).any(|e| {
        let pid = std::fs::read(e.path())
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| v.pointer("/worker/pid").and_then(Value::as_u64));
        pid.is_some_and(|p| Path::new(&format!("/proc/{p}")).exists())
    })
}

// ----- runs ----------------------------------------------------------------------

/// One finished (or killed) process.
#[derive(Debug)]
pub struct Run {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub status: ExitStatus,
    pub elapsed: Duration,
    /// Killed by [`run_cmd`] at its deadline.
    pub timed_out: bool,
}

impl Run {
    /// Stdout, which must be UTF-8.
    pub fn out(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("stdout is UTF-8")
    }
    /// Stderr, lossily.
    pub fn err(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
    pub fn killed(&self) -> bool {
        self.status.signal() == Some(9)
    }
    /// Exit 0 within the deadline, or a panic naming `what`.
    pub fn assert_exit_0(&self, what: &str) {
        assert!(!self.timed_out, "{what} did not finish within its deadline ({:?})", self.elapsed);
        assert_eq!(self.code(), Some(0), "{what} exited {:?}; stderr: {}", self.status, self.err());
    }
    /// Stdout as a harness reads it: nothing, or exactly one line holding
    /// one JSON object.
    pub fn json(&self, what: &str) -> Option<Value> {
        one_object(&self.stdout).unwrap_or_else(|e| panic!("{what}: {e}"))
    }
}

/// Nothing, or exactly one line of one JSON object.
pub fn one_object(stdout: &[u8]) -> Result<Option<Value>, String> {
    if stdout.is_empty() {
        return Ok(None);
    }
    let text = std::str::from_utf8(stdout).map_err(|_| "stdout is not UTF-8".to_string())?;
    if !text.ends_with('\n') || text.matches('\n').count() != 1 {
        return Err(format!("not exactly one line: {:?}", text.chars().take(300).collect::<String>()));
    }
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): {text:?}"))?;
    if !v.is_object() {
        return Err(format!("not an object: {text}"));
    }
    Ok(Some(v))
}

/// Wait for `child` until `started + deadline`; past it, kill it. Its exit
/// status, and whether it was killed.
fn wait_within(child: &mut std::process::Child, started: Instant, deadline: Duration) -> (ExitStatus, bool) {
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return (s, false);
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            return (child.wait().unwrap(), true);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Run `cmd` with `stdin` (then closed), killing it past `deadline`.
pub fn run_cmd(cmd: Command, stdin: &[u8], deadline: Duration) -> Run {
    run_with_stdin(cmd, Some(stdin), deadline)
}

/// Run `cmd` with a stdin that is never written to nor closed (a harness
/// that never finishes its payload), killing it past `deadline`.
pub fn run_with_open_stdin(cmd: Command, deadline: Duration) -> Run {
    run_with_stdin(cmd, None, deadline)
}

fn run_with_stdin(mut cmd: Command, stdin: Option<&[u8]>, deadline: Duration) -> Run {
    let started = Instant::now();
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let mut pin = child.stdin.take().unwrap();
    let (input, close) = match stdin {
        Some(s) => (s.to_vec(), true),
        None => (Vec::new(), false),
    };
    let (keep_tx, keep_rx) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        let _ = pin.write_all(&input);
        if !close {
            // Hold the pipe open until the process is gone.
            let _ = keep_rx.recv();
        }
        drop(pin);
    });
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let ro = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = so.read_to_end(&mut b);
        b
    });
    let re = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = se.read_to_end(&mut b);
        b
    });
    let (status, timed_out) = wait_within(&mut child, started, deadline);
    let elapsed = started.elapsed();
    drop(keep_tx);
    let _ = writer.join();
    Run { stdout: ro.join().unwrap(), stderr: re.join().unwrap(), status, elapsed, timed_out }
}

// ----- another user --------------------------------------------------------------

/// The uid the tests run hooks as when they need a user that is not root
/// (root ignores permission bits).
pub const OTHER_UID: u32 = 1001;
/// A third user: the one who plants files in someone else's home.
pub const INTRUDER_UID: u32 = 1002;

/// Wrap `bin` so it runs as `uid` (gid the same, no supplementary groups)
/// with `setpriv`. Panics, loudly, when that is impossible here (not root,
/// no `setpriv`): these tests must not pass by skipping.
pub fn as_user(uid: u32, bin: &Path) -> Command {
    require_privilege_drop();
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}")).arg(format!("--regid={uid}")).arg("--clear-groups").arg("--").arg(bin);
    c
}

/// Panic unless this process can run commands as another user.
pub fn require_privilege_drop() {
    let euid = preloop_shared::fsutil::euid();
    assert_eq!(
        euid, 0,
        "this test must run as root (euid {euid}) so it can drop to uid {OTHER_UID} with setpriv: permission bits are \
         the point of it"
    );
    let ok = Command::new("setpriv")
        .args([&format!("--reuid={OTHER_UID}"), &format!("--regid={OTHER_UID}"), "--clear-groups", "--", "true"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "setpriv --reuid={OTHER_UID} -- true failed: util-linux setpriv is required to drop privileges");
}

/// `chown -R uid:uid path` (as root, links themselves not followed), or a
/// loud panic. A file that goes while the tree is walked is no error: a
/// detached SessionEnd worker may still be removing its files (its run
/// state, its `.ending` marker) when a test hands the tree to another uid.
pub fn chown_tree(path: &Path, uid: u32) {
    fn walk(p: &Path, uid: u32) -> std::io::Result<()> {
        let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
        match std::os::unix::fs::lchown(p, Some(uid), Some(uid)) {
            Err(e) if gone(&e) => return Ok(()),
            r => r?,
        }
        let meta = match std::fs::symlink_metadata(p) {
            Err(e) if gone(&e) => return Ok(()),
            r => r?,
        };
        if meta.is_dir() {
            let entries = match std::fs::read_dir(p) {
                Err(e) if gone(&e) => return Ok(()),
                r => r?,
            };
            for entry in entries {
                match entry {
                    Err(e) if gone(&e) => {}
                    Err(e) => return Err(e),
                    Ok(entry) => walk(&entry.path(), uid)?,
                }
            }
        }
        Ok(())
    }
    if let Err(e) = walk(path, uid) {
        panic!("chown -R {uid}:{uid} {} failed (these tests run as root): {e}", path.display());
    }
}

/// `chown uid:uid path` of the link itself or file (as root), or a loud panic.
pub fn chown(path: &Path, uid: u32) {
    let ok = Command::new("chown").arg("-h").arg(format!("{uid}:{uid}")).arg(path).status().is_ok_and(|s| s.success());
    assert!(ok, "chown {uid}:{uid} {} failed (these tests run as root)", path.display());
}

/// Make the parents of `dir` traversable by everyone (the temp dir is; a
/// test's own subdirectories may not be).
pub fn open_parents(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let tmp = std::env::temp_dir();
    let mut p = dir.parent();
    while let Some(d) = p {
        if d == tmp || d.as_os_str().is_empty() || d == Path::new("/") {
            break;
        }
        if let Ok(m) = std::fs::metadata(d) {
            let mode = m.permissions().mode();
            let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode | 0o011));
        }
        p = d.parent();
    }
}

/// Create a FIFO at `path` (replacing what is there).
pub fn mkfifo(path: &Path) {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    let _ = std::fs::remove_file(path);
    let ok = Command::new("mkfifo").arg(path).status().is_ok_and(|s| s.success());
    assert!(ok, "mkfifo {} failed", path.display());
}

/// Undo JSON `\uXXXX` escapes in `text` (for finding a token a server sent
/// escaped): every escape becomes its character, surrogate pairs joined.
pub fn unescape_json_escapes(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let hex = |s: &[u8]| std::str::from_utf8(s).ok().and_then(|h| u16::from_str_radix(h, 16).ok());
    while i < b.len() {
        if b[i] == b'\\'
            && b.get(i + 1) == Some(&b'u')
            && i + 6 <= b.len()
            && let Some(u) = hex(&b[i + 2..i + 6])
        {
            let lo = (b.get(i + 6) == Some(&b'\\') && b.get(i + 7) == Some(&b'u') && i + 12 <= b.len())
                .then(|| hex(&b[i + 8..i + 12]))
                .flatten();
            match (u, lo) {
                (0xD800..=0xDBFF, Some(l @ 0xDC00..=0xDFFF)) => {
                    let c = 0x10000 + (((u as u32) - 0xD800) << 10) + ((l as u32) - 0xDC00);
                    out.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                    i += 12;
                }
                _ => {
                    out.push(char::from_u32(u as u32).unwrap_or('\u{fffd}'));
                    i += 6;
                }
            }
            continue;
        }
        let ch = text[i..].chars().next().unwrap();
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// How many `<` in `text` begin something a reader could take for one of
/// our frame tags (`<operator-note`, `</operator-notes`): after the `<`, an
/// optional `/`, whitespace and invisible characters are skipped, and
/// full-width and Cyrillic/Greek look-alike letters count as the Latin ones.
/// A block of `n` notes has exactly `2 + 2n`.
pub fn tag_like_runs(text: &str) -> usize {
    fn fold(c: char) -> Option<char> {
        let c = match c {
            '\u{ff01}'..='\u{ff5e}' => char::from_u32(c as u32 - 0xfee0)?,
            'а' | 'α' => 'a',
            'е' | 'ε' | 'ё' => 'e',
            'о' | 'ο' | 'σ' => 'o',
            'р' | 'ρ' => 'p',
            'с' | 'ϲ' => 'c',
            'і' | 'ι' => 'i',
            'т' | 'τ' => 't',
            'г' => 'r',
            'п' | 'η' => 'n',
            '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{fe63}' => '-',
            other => other,
        };
        Some(c.to_ascii_lowercase())
    }
    let invisible = |c: char| {
        c.is_whitespace()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{00ad}' | '\u{034f}')
    };
    let mut n = 0;
    for (i, _) in text.match_indices('<') {
        let mut folded = String::new();
        let mut slash_seen = false;
        for c in text[i + 1..].chars() {
            if folded.is_empty() && (invisible(c) || (c == '/' && !slash_seen)) {
                slash_seen |= c == '/';
                continue;
            }
            if invisible(c) {
                continue;
            }
            match fold(c) {
                Some(f) => folded.push(f),
                None => break,
            }
            if folded.len() >= "operator-note".len() {
                break;
            }
        }
        if folded == "operator-note" {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logged_ms_reads_a_line_with_or_without_its_end() {
        let line = "2026-12-04T15:32:26.781135Z cursor stop mode=server session=s outcome=ok notes=- ms=64\n";
        assert_eq!(logged_ms(line), 64);
        assert_eq!(logged_ms(line.trim_end()), 64);
        assert_eq!(logged_ms("t h e mode=- session=- outcome=ok notes=- ms=7 warn=\"x ms=9\""), 7);
        let log = "a SessionEnd ms=1\nb SessionEnd:detached ms=2\nc SessionEnd ms=3\nd Stop ms=4\n";
        assert_eq!(log_line_of(log, "SessionEnd"), "c SessionEnd ms=3");
    }
}
