//! Helpers of the hardening suite: every hook of the three harnesses as one
//! table, the built binaries, private homes, process runs with a deadline,
//! output checks against the output schemas, a seeded PRNG and a payload
//! mutator.
//!
//! Binaries: Cargo sets `CARGO_BIN_EXE_*` only for a package's own
//! binaries, so [`bins`] runs `cargo build -p preloop-claude-code -p
//! preloop-codex -p preloop-cursor --bins` once per test binary (a no-op when
//! they are fresh, so a stale binary is never tested) into the target
//! directory of the running test executable, and finds them there.
#![allow(dead_code)]

use preloop_shared::Harness;
use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{Receipt, Target};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap()
}

// ----- the hook table ---------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Start,
    Prompt,
    /// A tool gate; `carries`: its output has a model-visible field;
    /// `fail_closed`: it denies when the server cannot answer (default policy).
    Tool {
        carries: bool,
        fail_closed: bool,
    },
    /// After a tool ran: pulls into the tool result (Gemini AfterTool,
    /// Copilot postToolUse).
    AfterTool,
    Stop,
    End,
}

pub struct Hook {
    pub harness: Harness,
    /// The harness's event name.
    pub event: &'static str,
    pub binary: &'static str,
    pub kind: Kind,
    /// The canonical fixture (under `fixtures/`).
    pub fixture: String,
    /// Every fixture of this harness and event (fuzz seeds).
    pub seeds: Vec<String>,
    /// The output schema (under `schemas/`), if the event prints anything.
    pub schema: Option<PathBuf>,
    pub def: &'static preloop_shared::HookDef,
}

impl Hook {
    pub fn payload(&self, session: &str) -> Value {
        let mut v = read_json(&repo_root().join("fixtures").join(&self.fixture));
        set_session(self.harness, &mut v, session);
        v
    }
    /// Cursor prints one object on every path; the others may print nothing.
    pub fn may_print_nothing(&self) -> bool {
        self.harness != Harness::Cursor
    }
    pub fn name(&self) -> String {
        format!("{}/{}", self.harness.slug(), self.event)
    }
}

pub fn set_session(h: Harness, v: &mut Value, session: &str) {
    if let Some(o) = v.as_object_mut() {
        if h == Harness::Copilot {
            // The camelCase payloads we are installed for.
            o.insert("sessionId".into(), json!(session));
            return;
        }
        o.insert("session_id".into(), json!(session));
        if h == Harness::Cursor {
            o.insert("conversation_id".into(), json!(session));
        }
    }
}

fn fixture_names(dir: &str, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(repo_root().join("fixtures").join(dir))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| {
            n.ends_with(".json") && (n.starts_with(&format!("{prefix}.")) || n.starts_with(&format!("{prefix}-")))
        })
        .map(|n| format!("{dir}/{n}"))
        .collect();
    v.sort();
    v
}

fn opt_schema(rel: String) -> Option<PathBuf> {
    let p = repo_root().join("schemas").join(rel);
    p.exists().then_some(p)
}

/// Every hook binary (not the watcher), derived from the registry.
pub fn hooks() -> Vec<Hook> {
    use preloop_shared::registry::{Carrier, Does, FailKey, HOOKS};
    let mut out = Vec::new();
    for d in HOOKS.iter().filter(|d| d.does != Does::Watch) {
        let h = d.harness();
        // Copilot's captures come in two dialects; we are installed for camelCase.
        let dir =
            if h == Harness::Copilot { format!("{}/camel", h.def().fixtures) } else { h.def().fixtures.to_string() };
        let dir = dir.as_str();
        let name = d.on;
        let seeds = fixture_names(dir, name);
        let canonical = match (h, name) {
            (Harness::Cursor, "sessionStart") => Some("cursor/sessionStart-4.json".to_string()), // the CLI: pulls
            (Harness::Cursor, "stop") => Some("cursor/stop-3.json".to_string()),
            (Harness::Cursor, _) => seeds.first().cloned(),
            _ => Some(format!("{dir}/{name}.json")),
        };
        let schema = match h {
            Harness::Codex => opt_schema(format!(
                "{dir}/{}.command.output.schema.json",
                preloop_codex::schema_stem(match d.event {
                    preloop_shared::registry::Event::Codex(e) => e,
                    _ => unreachable!(),
                })
            )),
            _ => opt_schema(format!("{}/{name}.output.schema.json", h.def().fixtures)),
        };
        out.push(Hook {
            harness: h,
            event: name,
            binary: d.binary,
            kind: match d.does {
                Does::SessionStart { .. } => Kind::Start,
                Does::Prompt { .. } => Kind::Prompt,
                Does::Check => Kind::Tool {
                    carries: d.carrier.carries(),
                    fail_closed: d.gate.is_some_and(|g| g.fail == FailKey::PermissionRequest),
                },
                Does::Stop => Kind::Stop,
                Does::SessionEnd => Kind::End,
                Does::AfterTool => Kind::AfterTool,
                Does::Watch => unreachable!("the watcher is not in this table"),
            },
            fixture: canonical.expect("a fixture per hook"),
            seeds,
            schema,
            def: d,
        });
        let _ = Carrier::None;
    }
    out
}

/// Run a hook in-process, as its binary would.
pub fn run_in_process(
    def: &'static preloop_shared::HookDef,
    env: &preloop_shared::config::Env,
    stdin: &[u8],
    out: &mut Vec<u8>,
) -> i32 {
    use preloop_shared::registry::Event;
    use preloop_shared::runner::run;
    match def.event {
        Event::ClaudeCode(e) => run::<preloop_claude_code::ClaudeCode>(e, env, stdin, out),
        Event::Codex(e) => run::<preloop_codex::Codex>(e, env, stdin, out),
        Event::Cursor(e) => run::<preloop_cursor::Cursor>(e, env, stdin, out),
        Event::Gemini(e) => run::<preloop_gemini::Gemini>(e, env, stdin, out),
        Event::Copilot(e) => run::<preloop_copilot::Copilot>(e, env, stdin, out),
    }
}

pub fn hook(h: Harness, event: &str) -> Hook {
    hooks().into_iter().find(|k| k.harness == h && k.event == event).unwrap_or_else(|| panic!("no hook {event}"))
}

pub fn read_json(p: &Path) -> Value {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

// ----- output checks ----------------------------------------------------------

/// Checks one hook's stdout the way its harness reads it.
pub struct Checker {
    harness: Harness,
    event: &'static str,
    may_print_nothing: bool,
    validator: Option<jsonschema::Validator>,
}

impl Checker {
    pub fn new(h: &Hook) -> Checker {
        let validator = h.schema.as_ref().map(|p| jsonschema::validator_for(&read_json(p)).unwrap());
        Checker { harness: h.harness, event: h.event, may_print_nothing: h.may_print_nothing(), validator }
    }

    /// Nothing (where allowed) or exactly one line holding one JSON object
    /// that passes the event's output schema.
    pub fn check(&self, stdout: &[u8]) -> Result<Option<Value>, String> {
        if stdout.is_empty() {
            return if self.may_print_nothing { Ok(None) } else { Err("printed nothing".into()) };
        }
        let text = std::str::from_utf8(stdout).map_err(|_| "stdout is not UTF-8".to_string())?;
        if !text.ends_with('\n') || text.matches('\n').count() != 1 {
            return Err(format!("not exactly one line: {:?}", excerpt(text)));
        }
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): {:?}", excerpt(text)))?;
        if !v.is_object() {
            return Err(format!("not an object: {}", excerpt(text)));
        }
        let Some(val) = &self.validator else {
            return Err(format!("{} has no output schema, yet printed {}", self.event, excerpt(text)));
        };
        let errors: Vec<String> =
            val.iter_errors(&v).map(|e| format!("{e} at {}", e.instance_path())).take(3).collect();
        if !errors.is_empty() {
            return Err(format!("fails its schema: {}: {}", errors.join("; "), excerpt(text)));
        }
        Ok(Some(v))
    }
}

pub fn excerpt(s: &str) -> String {
    s.chars().take(300).collect()
}

/// The model-visible text of an output, whichever field carries it.
pub fn context_of(v: &Option<Value>) -> Option<String> {
    let v = v.as_ref()?;
    v.pointer("/hookSpecificOutput/additionalContext")
        .or_else(|| v.get("additional_context"))
        .or_else(|| v.get("followup_message"))
        .or_else(|| v.get("additionalContext"))
        // Stop-like continuations; Gemini's BeforeTool holds a call with its note.
        .or_else(|| v.get("reason").filter(|_| matches!(v.get("decision"), Some(d) if d == "block" || d == "deny")))
        .and_then(Value::as_str)
        .map(str::to_string)
}

pub fn is_deny(v: &Option<Value>) -> bool {
    let Some(v) = v else { return false };
    v.pointer("/hookSpecificOutput/permissionDecision") == Some(&json!("deny"))
        || v.pointer("/hookSpecificOutput/decision/behavior") == Some(&json!("deny"))
        || v.get("permission") == Some(&json!("deny"))
        || v.get("permissionDecision") == Some(&json!("deny"))
        || v.get("decision") == Some(&json!("deny"))
}

/// The neutral answer of a hook (what it prints when anything fails).
pub fn neutral_of(h: &Hook) -> Option<Value> {
    use preloop_shared::registry::Event;
    use preloop_shared::runner::Adapter;
    match h.def.event {
        Event::ClaudeCode(e) => preloop_claude_code::ClaudeCode::neutral(e).map(|o| serde_json::to_value(o).unwrap()),
        Event::Codex(e) => preloop_codex::Codex::neutral(e).map(|o| serde_json::to_value(o).unwrap()),
        Event::Cursor(e) => preloop_cursor::Cursor::neutral(e).map(|o| serde_json::to_value(o).unwrap()),
        Event::Gemini(e) => preloop_gemini::Gemini::neutral(e).map(|o| serde_json::to_value(o).unwrap()),
        Event::Copilot(e) => preloop_copilot::Copilot::neutral(e).map(|o| serde_json::to_value(o).unwrap()),
    }
}

/// The note ids in a block, in order.
/// XML frames, or (a block that opens with one) the bracket frames of
/// Gemini's escaped carriers; inside an XML block a bracket is body text.
pub fn ids_in(block: &str) -> Vec<String> {
    let open = if block.starts_with("[operator-notes") { "[operator-note id=\"" } else { "<operator-note id=\"" };
    block.match_indices(open).map(|(i, m)| block[i + m.len()..].split('"').next().unwrap().to_string()).collect()
}

// ----- binaries -----------------------------------------------------------------

/// The directory of the hook binaries, built (or confirmed fresh) once.
pub fn bins() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf(); // target/<profile>/deps/x → target/<profile>
        let profile_name = profile_dir.file_name().unwrap().to_str().unwrap().to_string();
        let profile = match profile_name.as_str() {
            "debug" => "dev".to_string(),
            other => other.to_string(),
        };
        // The crash switch (`PRELOOP_TEST_KILL_AT`) exists only with the
        // `fault-injection` feature, which nothing that ships enables: these
        // binaries get their own target directory so the workspace's own
        // builds never carry it.
        let target_dir = profile_dir.parent().unwrap().join("fault-injection");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(repo_root()).args(["build", "--quiet"]);
        for h in Harness::all() {
            cmd.args(["-p", &format!("preloop-{}", h.slug())]);
        }
        cmd.args(["--bins", "--features", "preloop-shared/fault-injection", "--profile", &profile, "--target-dir"]);
        let out = cmd.arg(&target_dir).output().expect("cargo build of the hook binaries");
        assert!(out.status.success(), "building the hook binaries failed: {}", String::from_utf8_lossy(&out.stderr));
        let dir = target_dir.join(&profile_name);
        for h in hooks() {
            assert!(dir.join(h.binary).exists(), "{} was not built in {}", h.binary, dir.display());
        }
        dir
    })
}

pub fn bin(h: &Hook) -> PathBuf {
    bins().join(h.binary)
}

// ----- homes and runs ----------------------------------------------------------

/// A private PRELOOP_HOME, removed on drop.
pub struct Home {
    pub dir: PathBuf,
    /// Environment for every run (besides PATH and PRELOOP_HOME).
    pub env: Vec<(String, String)>,
}

pub fn temp_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "preloop-hardening-{tag}-{}-{}",
        std::process::id(),
        preloop_shared::fsutil::note_id()
    ))
}

impl Home {
    pub fn new(tag: &str) -> Home {
        let dir = temp_path(tag);
        std::fs::create_dir_all(&dir).unwrap();
        Home { dir, env: Vec::new() }
    }

    /// Server mode against `url` with `token`; Codex SessionEnd runs
    /// in-process (no detached worker) so every run is observable.
    pub fn server(tag: &str, url: &str, token: &str) -> Home {
        Home::new(tag)
            .with_env("PRELOOP_URL", url)
            .with_env("PRELOOP_TOKEN", token)
            .with_env("PRELOOP_SESSION_END_DETACH", "0")
    }

    pub fn with_env(mut self, k: &str, v: &str) -> Home {
        self.env.retain(|(key, _)| key != k);
        self.env.push((k.into(), v.into()));
        self
    }

    pub fn inbox(&self) -> LocalInbox {
        LocalInbox::new(&self.dir, 86_400)
    }

    /// Register a local session the way a SessionStart would (for notes).
    pub fn send_local(&self, session: &str, text: &str) -> String {
        preloop_testkit::send_local_note(&self.inbox(), Target::Session(session.to_string()), text)
    }

    pub fn receipt(&self, id: &str) -> Receipt {
        self.inbox().status(id).unwrap()
    }

    pub fn log(&self) -> String {
        let mut s = std::fs::read_to_string(self.dir.join("log/hooks.log.1")).unwrap_or_default();
        s.push_str(&std::fs::read_to_string(self.dir.join("log/hooks.log")).unwrap_or_default());
        s
    }

    pub fn log_lines(&self) -> usize {
        self.log().lines().count()
    }

    pub fn run_state_path(&self, session: &str) -> PathBuf {
        self.dir.join("run").join(format!("{}.json", preloop_shared::fsutil::session_file_stem(session)))
    }

    pub fn run_state(&self, session: &str) -> Option<preloop_shared::session::RunState> {
        let t = std::fs::read(self.run_state_path(session)).ok()?;
        Some(
            serde_json::from_slice(&t)
                .unwrap_or_else(|e| panic!("run state is corrupt: {e}: {}", String::from_utf8_lossy(&t))),
        )
    }

    pub fn run(&self, h: &Hook, stdin: &[u8]) -> Run {
        self.run_env(h, stdin, &[])
    }

    pub fn run_env(&self, h: &Hook, stdin: &[u8], extra: &[(&str, &str)]) -> Run {
        let mut cmd = Command::new(bin(h));
        self.prepare(&mut cmd, extra);
        run_cmd(cmd, stdin, Duration::from_secs(30))
    }

    pub fn prepare(&self, cmd: &mut Command, extra: &[(&str, &str)]) {
        cmd.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default()).env("PRELOOP_HOME", &self.dir);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for (k, v) in extra {
            cmd.env(k, v);
        }
    }

    /// Run a hook with its canonical payload for `session`; asserts exit 0
    /// and a valid output.
    pub fn hook(&self, h: &Hook, session: &str) -> (Option<Value>, Run) {
        let r = self.run(h, serde_json::to_string(&h.payload(session)).unwrap().as_bytes());
        r.assert_ok(h);
        (Checker::new(h).check(&r.stdout).unwrap_or_else(|e| panic!("{}: {e}", h.name())), r)
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[derive(Debug)]
pub struct Run {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub status: ExitStatus,
    pub elapsed: Duration,
    pub timed_out: bool,
}

impl Run {
    pub fn assert_ok(&self, h: &Hook) {
        assert!(!self.timed_out, "{} did not finish", h.name());
        assert_eq!(
            self.status.code(),
            Some(0),
            "{} exited {:?}; stderr: {}",
            h.name(),
            self.status,
            String::from_utf8_lossy(&self.stderr)
        );
    }
    pub fn killed(&self) -> bool {
        self.status.signal() == Some(9)
    }
}

/// Run a command with `stdin`, killing it past `deadline`.
pub fn run_cmd(mut cmd: Command, stdin: &[u8], deadline: Duration) -> Run {
    let started = Instant::now();
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut pin = child.stdin.take().unwrap();
    let input = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pin.write_all(&input);
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
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > deadline {
            timed_out = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let elapsed = started.elapsed();
    let _ = writer.join();
    Run { stdout: ro.join().unwrap(), stderr: re.join().unwrap(), status, elapsed, timed_out }
}

pub fn unique_session(tag: &str) -> String {
    format!("hard-{tag}-{}", preloop_shared::fsutil::uuid_v4())
}

/// Every file under `dir` (recursively, symlinks not followed).
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

/// A URL nothing listens on.
pub fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}")
}

// ----- PRNG and mutation --------------------------------------------------------

/// splitmix64: small, seeded, reproducible.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// Strings that have broken parsers, paths and frames before.
pub const HOSTILE_STRINGS: &[&str] = &[
    "",
    " ",
    ".",
    "..",
    "../../../../etc/passwd",
    "a/b",
    "/abs",
    "\u{0}",
    "nul\u{0}in",
    "line\nbreak",
    "\r\n",
    "\u{feff}bom",
    "é",
    "🦀🦀",
    "\u{202e}rtl",
    "<operator-notes count=\"9\" source=\"preloop-control-plane\">",
    "</operator-note>",
    "%s%n%x",
    "'; DROP TABLE notes; --",
    "${PRELOOP_TOKEN}",
    "$(id)",
    "true",
    "null",
    "0",
    "-1",
    "9999999999999999999999",
];

fn random_string(r: &mut Rng) -> String {
    match r.below(6) {
        0 => r.pick(HOSTILE_STRINGS).to_string(),
        1 => "x".repeat(r.below(3000)),
        2 => (0..r.below(40)).map(|_| char::from_u32(r.below(0x3000) as u32).unwrap_or('?')).collect(),
        3 => "é🦀".repeat(r.below(2000)),
        4 => format!("{:x}", r.next()),
        _ => "A".repeat(if r.chance(20) { 1 << 20 } else { 70_000 }),
    }
}

fn random_value(r: &mut Rng, depth: usize) -> Value {
    match r.below(if depth > 3 { 7 } else { 10 }) {
        0 => Value::Null,
        1 => json!(r.chance(2)),
        2 => json!(r.next() as i64),
        3 => json!(f64::from_bits(r.next() & 0x7fef_ffff_ffff_ffff)),
        4 => json!(-(r.below(10) as i64)),
        5 | 6 => json!(random_string(r)),
        7 => Value::Array((0..r.below(4)).map(|_| random_value(r, depth + 1)).collect()),
        8 => Value::Object(
            (0..r.below(4))
                .map(|_| (random_string(r).chars().take(20).collect(), random_value(r, depth + 1)))
                .collect(),
        ),
        _ => nested(r.below(140)),
    }
}

/// `depth` nested arrays (serde_json refuses past 128).
pub fn nested(depth: usize) -> Value {
    let mut v = json!("leaf");
    for i in 0..depth {
        v = if i % 2 == 0 { json!([v]) } else { json!({ "k": v }) };
    }
    v
}

/// One fuzz case for a hook: its own seeds, another hook's payloads, and
/// byte-level damage.
pub fn mutate(r: &mut Rng, h: &Hook, all_seeds: &[(Harness, Value)], sessions: &[String]) -> Vec<u8> {
    let mut v = if r.chance(4) {
        r.pick(all_seeds).1.clone() // another harness's or event's payload
    } else {
        read_json(&repo_root().join("fixtures").join(r.pick(&h.seeds)))
    };
    let session = if r.chance(8) { r.pick(HOSTILE_STRINGS).to_string() } else { r.pick(sessions).clone() };
    set_session(h.harness, &mut v, &session);
    // Structural mutations.
    for _ in 0..r.below(4) {
        let Some(o) = v.as_object_mut() else { break };
        let keys: Vec<String> = o.keys().cloned().collect();
        if keys.is_empty() {
            break;
        }
        let k = r.pick(&keys).clone();
        match r.below(5) {
            0 => {
                o.remove(&k);
            }
            1 | 2 => {
                let nv = random_value(r, 0);
                o.insert(k, nv);
            }
            3 => {
                let nk = random_string(r).chars().take(30).collect();
                let nv = random_value(r, 0);
                o.insert(nk, nv);
            }
            _ => {
                // The field of another event.
                let other = [
                    "hook_event_name",
                    "tool_name",
                    "tool_input",
                    "stop_hook_active",
                    "loop_count",
                    "status",
                    "cursor_version",
                    "agent_id",
                    "prompt",
                    "command",
                    "reason",
                    "source",
                ];
                let nv = random_value(r, 0);
                o.insert(r.pick(&other).to_string(), nv);
            }
        }
    }
    if r.chance(6) {
        v = random_value(r, 0); // not an object at all
    }
    let mut bytes = serde_json::to_vec(&v).unwrap();
    // Byte-level damage.
    match r.below(12) {
        0 => {
            let cut = r.below(bytes.len() + 1);
            bytes.truncate(cut);
        }
        1 => {
            let mut b = b"\xEF\xBB\xBF".to_vec();
            b.extend_from_slice(&bytes);
            bytes = b;
        }
        2 => {
            let at = r.below(bytes.len() + 1);
            const JUNK: [&[u8]; 6] = [b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\\ud800", b"\"\\udc00\""];
            let junk = r.pick(&JUNK[..]).to_vec();
            bytes.splice(at..at, junk);
        }
        3 => {
            for _ in 0..1 + r.below(8) {
                if bytes.is_empty() {
                    break;
                }
                let at = r.below(bytes.len());
                bytes[at] = r.next() as u8;
            }
        }
        4 => {
            const TINY: [&[u8]; 13] = [
                b"",
                b" ",
                b"\n\n",
                b"\xEF\xBB\xBF",
                b"null",
                b"[]",
                b"1",
                b"\"s\"",
                b"{}",
                b"{",
                b"}",
                b"{\"session_id\":",
                b"\xEF\xBB\xBF\xEF\xBB\xBF{}",
            ];
            bytes = r.pick(&TINY[..]).to_vec()
        }
        5 => {
            let d = 100 + r.below(100_000);
            bytes = [&b"["[..].repeat(d)[..], &b"]"[..].repeat(if r.chance(2) { d } else { 0 })[..]].concat();
        }
        6 => {
            // Two documents, or trailing garbage.
            let tail = bytes.clone();
            bytes.extend_from_slice(if r.chance(2) { &tail } else { b" trailing" });
        }
        // Duplicate keys: the last one wins in serde_json.
        7 if bytes.first() == Some(&b'{') => {
            let dup = format!("{{\"session_id\":{},", serde_json::to_string(&random_value(r, 0)).unwrap());
            bytes.splice(0..1, dup.bytes());
        }
        _ => {}
    }
    bytes
}

/// Every fixture payload of every harness, as (harness, payload).
pub fn all_seeds() -> Vec<(Harness, Value)> {
    hooks()
        .iter()
        .flat_map(|h| h.seeds.iter().map(move |s| (h.harness, read_json(&repo_root().join("fixtures").join(s)))))
        .collect()
}
