//! `preloop-bench`: what a hook costs, measured beside its floors, in one run
//! on one machine. Build and run with `scripts/bench` (release profile).
//!
//! Every case spawns a fresh process per run, writes its stdin, and waits for
//! it to exit: exactly what a harness pays per hook. The cases are measured
//! round-robin (run `i` of every case, then run `i + 1`), so a burst of load
//! from other processes on the machine hits every case alike and the ratios
//! stay meaningful on a noisy machine. Reported: median and p95 wall time
//! over `--runs` runs (after warm-up), peak RSS (three more runs through
//! `preloop-bench-rss`), binary sizes, and the ratios the performance
//! targets are stated in.
//!
//! Cases:
//! * floors: `/bin/true`; a minimal start + stdin + one loopback HTTP POST
//!   program (`preloop-floor-hook`);
//! * references: curl making the same request; a Python urllib hook;
//! * every hook binary of the three harnesses (payloads from `fixtures/`),
//!   in server mode (the in-process fake server, which answers at once) and
//!   local-inbox mode, without and with a pending note;
//! * a PreToolUse carrying a full spool (5 entries), in both modes;
//! * the local inbox's claim with 10, 1,000 and 10,000 notes stored for
//!   1,000 other sessions (seeded with `LocalInbox::send`).
//!
//! `scripts/bench [--runs N] [--json FILE] [--only SUBSTRING] [--scale 10,1000,10000]`

use preloop_shared::backend::Backend;
use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{Author, SendRequest, Target};
use preloop_shared::render;
use preloop_shared::session::{RunFiles, SpoolEntry};
use preloop_shared::time::Timestamp;
use preloop_shared::wire::SessionStartRequest;
use preloop_testkit::fake_server::FakeServer;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

const NOTE_TEXT: &str = "Deploy to eu-west-1, not us-east-1.";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Server,
    Local,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Server => "server",
            Mode::Local => "local",
        }
    }
}

/// What a case is, for the tables.
#[derive(Clone, Default)]
struct Meta {
    /// The hook binary's file name.
    binary: Option<String>,
    harness: &'static str,
    event: &'static str,
    mode: Option<Mode>,
    note: bool,
    /// A section other than the per-hook table (`floor`, `spool`, `scale`).
    section: &'static str,
    /// Stored notes (scale cases).
    stored: usize,
}

type Stdin = Box<dyn FnMut(usize) -> Vec<u8>>;
type Before = Box<dyn FnMut(usize)>;

struct Case {
    name: String,
    meta: Meta,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    stdin: Stdin,
    before: Option<Before>,
    times: Vec<Duration>,
    max_rss_kib: i64,
    failures: usize,
}

#[derive(Clone, Copy)]
struct Stats {
    median: Duration,
    p95: Duration,
}

impl Case {
    fn new(name: impl Into<String>, meta: Meta, program: PathBuf, env: Vec<(String, String)>, stdin: Stdin) -> Case {
        Case {
            name: name.into(),
            meta,
            program,
            args: Vec::new(),
            env,
            stdin,
            before: None,
            times: Vec::new(),
            max_rss_kib: 0,
            failures: 0,
        }
    }

    fn stats(&self) -> Option<Stats> {
        if self.times.is_empty() {
            return None;
        }
        let mut t = self.times.clone();
        t.sort();
        Some(Stats { median: t[t.len() / 2], p95: t[(t.len() * 95 / 100).min(t.len() - 1)] })
    }

    /// One run: spawn, write stdin, wait. Returns the wall time.
    fn run_once(&mut self, i: usize) -> Option<Duration> {
        if let Some(b) = self.before.as_mut() {
            b(i);
        }
        let input = (self.stdin)(i);
        let mut c = Command::new(&self.program);
        c.args(&self.args)
            .env_clear()
            .envs(self.env.iter().cloned())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let t = Instant::now();
        let mut child = c.spawn().ok()?;
        {
            let mut sin = child.stdin.take()?;
            let _ = sin.write_all(&input);
        }
        let (ok, _) = wait_rss(&child)?;
        let d = t.elapsed();
        if !ok {
            self.failures += 1;
        }
        Some(d)
    }

    /// One untimed run through `preloop-bench-rss`, for the peak RSS (see
    /// src/bin/rss.rs for why not from our own wait4).
    fn rss_once(&mut self, i: usize, spawner: &Path) -> Option<i64> {
        if let Some(b) = self.before.as_mut() {
            b(i);
        }
        let input = (self.stdin)(i);
        let mut c = Command::new(spawner);
        c.arg(&self.program)
            .args(&self.args)
            .env_clear()
            .envs(self.env.iter().cloned())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c.spawn().ok()?;
        {
            let mut sin = child.stdin.take()?;
            let _ = sin.write_all(&input);
        }
        let out = child.wait_with_output().ok()?;
        let kib: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
        self.max_rss_kib = self.max_rss_kib.max(kib);
        Some(kib)
    }
}

/// Wait for a child and return (exited 0, its ru_maxrss in KiB); `std` does not expose rusage.
fn wait_rss(child: &std::process::Child) -> Option<(bool, i64)> {
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child's pid with valid out-pointers.
    let r = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    (r > 0).then(|| (libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, usage.ru_maxrss))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn bin_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target/release"))
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|s| s.parse().ok())
}

// ----- harnesses and their payloads ------------------------------------------

struct HookEvent {
    /// The harness's event name.
    name: &'static str,
    /// The binary's suffix.
    slug: &'static str,
    /// A captured payload from fixtures/.
    fixture: &'static str,
}

struct HarnessDef {
    slug: &'static str,
    /// Cursor keys its sessions by `conversation_id`.
    cursor: bool,
    events: Vec<HookEvent>,
}

impl HarnessDef {
    fn binary(&self, ev: &HookEvent) -> String {
        format!("preloop-{}-{}", self.slug, ev.slug)
    }
    fn start(&self) -> &HookEvent {
        &self.events[0]
    }
}

fn harnesses() -> Vec<HarnessDef> {
    macro_rules! ev {
        ($name:literal, $slug:literal, $file:literal) => {
            HookEvent { name: $name, slug: $slug, fixture: include_str!(concat!("../../fixtures/", $file)) }
        };
    }
    vec![
        HarnessDef {
            slug: "claude-code",
            cursor: false,
            events: vec![
                ev!("SessionStart", "session-start", "claude-code-2.1.328/SessionStart.json"),
                ev!("UserPromptSubmit", "user-prompt-submit", "claude-code-2.1.328/UserPromptSubmit.json"),
                ev!("PreToolUse", "pre-tool-use", "claude-code-2.1.328/PreToolUse.json"),
                ev!("Stop", "stop", "claude-code-2.1.328/Stop.json"),
                ev!("SessionEnd", "session-end", "claude-code-2.1.328/SessionEnd.json"),
            ],
        },
        HarnessDef {
            slug: "codex",
            cursor: false,
            events: vec![
                ev!("SessionStart", "session-start", "codex-0.169.0/SessionStart.json"),
                ev!("UserPromptSubmit", "user-prompt-submit", "codex-0.169.0/UserPromptSubmit.json"),
                ev!("PreToolUse", "pre-tool-use", "codex-0.169.0/PreToolUse.json"),
                ev!("PermissionRequest", "permission-request", "codex-0.169.0/PermissionRequest.json"),
                ev!("Stop", "stop", "codex-0.169.0/Stop.json"),
                ev!("SessionEnd", "session-end", "codex-0.169.0/SessionEnd.json"),
            ],
        },
        HarnessDef {
            slug: "cursor",
            cursor: true,
            events: vec![
                // The CLI capture: the CLI's sessionStart pulls notes (the IDE's does not).
                ev!("sessionStart", "session-start", "cursor/sessionStart-4.json"),
                ev!("beforeSubmitPrompt", "before-submit-prompt", "cursor/beforeSubmitPrompt-1.json"),
                ev!("beforeShellExecution", "before-shell-execution", "cursor/beforeShellExecution-1.json"),
                ev!("beforeMCPExecution", "before-mcp-execution", "cursor/beforeMCPExecution-1.json"),
                ev!("preToolUse", "pre-tool-use", "cursor/preToolUse-1.json"),
                ev!("stop", "stop", "cursor/stop-1.json"),
                ev!("sessionEnd", "session-end", "cursor/sessionEnd-1.json"),
            ],
        },
    ]
}

/// A fixture with its session id replaced by `sid`.
fn payload(fixture: &str, cursor: bool, sid: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_str(fixture).expect("fixture is JSON");
    let o = v.as_object_mut().expect("fixture is an object");
    o.remove("_source");
    o.insert("session_id".into(), json!(sid));
    if cursor {
        o.insert("conversation_id".into(), json!(sid));
    }
    serde_json::to_vec(&v).unwrap()
}

fn base_env(home: &Path) -> Vec<(String, String)> {
    vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".into(), home.display().to_string()),
        ("PRELOOP_HOME".into(), home.display().to_string()),
        // Stop continues a turn for a late note at most 3 times per session
        // by default; the Stop cases run one session many times.
        ("PRELOOP_STOP_RESCUE_CAP".into(), "1000000".into()),
    ]
}

/// Run a binary once, untimed (registration before a case).
fn run_untimed(program: &Path, env: &[(String, String)], input: &[u8]) {
    let mut c = Command::new(program);
    c.env_clear().envs(env.iter().cloned()).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = c
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (build the release binaries first: scripts/bench)", program.display()));
    let _ = child.stdin.take().unwrap().write_all(input);
    let _ = child.wait();
}

fn send_local(home: &Path, sid: &str) {
    LocalInbox::new(home, 86_400)
        .send(&SendRequest {
            text: NOTE_TEXT.into(),
            target: Target::Session(sid.into()),
            next_session: false,
            expires_in_secs: None,
            author: Author { display: Some("bench".into()), auth_method: Some("local".into()), ..Author::default() },
        })
        .expect("send a local note");
}

/// Sends notes to the fake server as an operator.
struct ServerNotes {
    url: String,
    user_token: String,
}

impl ServerNotes {
    fn send(&self, sid: &str) {
        let body = json!({"external_session_id": sid, "text": NOTE_TEXT}).to_string();
        ureq::post(&self.url)
            .header("Authorization", &format!("Bearer {}", self.user_token))
            .header("Content-Type", "application/json")
            .send(body.as_bytes())
            .expect("send a note to the fake server");
    }
}

/// Fill a session's spool with `n` entries (as non-carrying hooks leave it).
fn fill_spool(home: &Path, sid: &str, n: usize) {
    let run = RunFiles::new(home, sid);
    let _g = run.lock(Duration::from_secs(5)).expect("session lock");
    let (mut state, _) = run.read();
    let now = Timestamp::now();
    state.spool = (0..n)
        .map(|k| SpoolEntry {
            note: render::render_element(&format!("spooled-{k}"), "bench", "local", now, NOTE_TEXT),
            deferred: false,
            spooled_at: now,
        })
        .collect();
    run.write(&state).expect("write the spool");
}

/// Seed a local inbox: `sessions` registered sessions and `notes` pending
/// notes spread over them (none for the measured session).
fn seed_inbox(home: &Path, sessions: usize, notes: usize) {
    let inbox = LocalInbox::new(home, 86_400);
    let threads = 4;
    std::thread::scope(|s| {
        for t in 0..threads {
            let inbox = &inbox;
            s.spawn(move || {
                for k in (t..sessions).step_by(threads) {
                    let req = SessionStartRequest {
                        session_id: format!("other-{k:04}"),
                        source: Some("claude_code".into()),
                        cwd: Some("/tmp/proj".into()),
                        parent_session_id: None,
                        alias: None,
                        first_prompt: None,
                        hook_event_name: Some("SessionStart".into()),
                        transcript_path: None,
                    };
                    inbox.session_start(&req).expect("register a session");
                }
            });
        }
    });
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for k in (t..notes).step_by(threads) {
                    send_local(home, &format!("other-{:04}", k % sessions));
                }
            });
        }
    });
}

// ----- main ------------------------------------------------------------------

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = arg(&args, "--runs").unwrap_or(200).max(1);
    let json_out: Option<String> = arg(&args, "--json");
    let only: Option<String> = arg(&args, "--only");
    let scales: Vec<usize> = arg::<String>(&args, "--scale")
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10, 1_000, 10_000]);
    let warmup = (runs / 10).max(3);
    let bins = bin_dir();
    let server = FakeServer::start();
    // The real server allows 20 notes an hour; the with-note cases send one per run.
    server.set_rate_limit(None);
    server.set_request_logging(false);
    // Permission requests (Codex PermissionRequest, Cursor before*Execution)
    // would wait for a human approval: the agent's native tool approvals are
    // switched off, so the fake answers them at once too.
    server.set_native_tool_approvals(&server.agent_id(), true);
    let url = server.url();
    let token = server.runtime_token();
    let notes = Rc::new(ServerNotes { url: format!("{url}/api/v1/operator-notes"), user_token: server.user_token() });
    let tmp = std::env::temp_dir().join(format!("preloop-bench-{}", std::process::id()));
    let home_of = |m: Mode| tmp.join(m.as_str());
    let env_of = |m: Mode| {
        let mut e = base_env(&home_of(m));
        if m == Mode::Server {
            e.push(("PRELOOP_URL".into(), url.clone()));
            e.push(("PRELOOP_TOKEN".into(), token.clone()));
        }
        e
    };
    for m in [Mode::Server, Mode::Local] {
        std::fs::create_dir_all(home_of(m)).unwrap();
    }

    let mut cases: Vec<Case> = Vec::new();
    let floor_meta = Meta { section: "floor", ..Meta::default() };
    cases.push(Case::new(
        "floor: /bin/true",
        floor_meta.clone(),
        PathBuf::from("/bin/true"),
        vec![],
        Box::new(|_| Vec::new()),
    ));
    let check_body = || {
        json!({"tool_name": "Bash", "tool_input": {"command": "echo hi"}, "source": "claude_code", "session_id": "bench-floor", "evaluation_phase": "pre_tool_use"}).to_string().into_bytes()
    };
    let addr = url.trim_start_matches("http://").to_string();
    cases.push(Case::new(
        "floor: start + stdin + one loopback HTTP POST",
        floor_meta.clone(),
        bins.join("preloop-floor-hook"),
        vec![
            ("FLOOR_ADDR".into(), addr),
            ("FLOOR_PATH".into(), "/api/v1/agents/permission-check".into()),
            ("FLOOR_TOKEN".into(), token.clone()),
        ],
        Box::new(move |_| check_body()),
    ));
    if let Some(curl) = which("curl") {
        let mut c = Case::new(
            "reference: curl, same request",
            floor_meta.clone(),
            curl,
            vec![],
            Box::new(move |_| check_body()),
        );
        c.args = [
            "-s",
            "-o",
            "/dev/null",
            "-X",
            "POST",
            "-H",
            &format!("Authorization: Bearer {token}"),
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            "@-",
            &format!("{url}/api/v1/agents/permission-check"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        cases.push(c);
    }
    if let Some(py) = which("python3") {
        let script = "import json,sys,urllib.request,os\nd=json.load(sys.stdin)\nb=json.dumps({'tool_name':d['tool_name'],'tool_input':d['tool_input'],'source':'claude_code','session_id':d['session_id'],'evaluation_phase':'pre_tool_use'}).encode()\nr=urllib.request.Request(os.environ['PRELOOP_URL']+'/api/v1/agents/permission-check',data=b,headers={'Authorization':'Bearer '+os.environ['PRELOOP_TOKEN'],'Content-Type':'application/json'})\nres=json.load(urllib.request.urlopen(r,timeout=5))\nif res.get('operator_note'): print(json.dumps({'hookSpecificOutput':{'hookEventName':'PreToolUse','additionalContext':res['operator_note']}}))\n";
        let fixture = harnesses()[0].events[2].fixture;
        let mut c = Case::new(
            "reference: Python urllib hook",
            floor_meta.clone(),
            py,
            env_of(Mode::Server),
            Box::new(move |_| payload(fixture, false, "bench-python")),
        );
        c.args = vec!["-c".into(), script.into()];
        cases.push(c);
    }

    // Every hook binary, both modes, without and with a pending note.
    let mut n = 0;
    for h in harnesses() {
        let start_bin = bins.join(h.binary(h.start()));
        let start_fixture = h.start().fixture;
        let cursor = h.cursor;
        for ev in &h.events {
            for mode in [Mode::Server, Mode::Local] {
                for note in [false, true] {
                    n += 1;
                    let sid = format!("bench-{}-{n:03}", h.slug);
                    let env = env_of(mode);
                    let home = home_of(mode);
                    let meta = Meta {
                        binary: Some(h.binary(ev)),
                        harness: h.slug,
                        event: ev.name,
                        mode: Some(mode),
                        note,
                        ..Meta::default()
                    };
                    let name = format!(
                        "{} {}, {}, {}",
                        h.slug,
                        ev.name,
                        mode.as_str(),
                        if note { "with note" } else { "no note" }
                    );
                    let fixture = ev.fixture;
                    let send: Rc<dyn Fn(&str)> = match mode {
                        Mode::Server => {
                            let notes = notes.clone();
                            Rc::new(move |s: &str| notes.send(s))
                        }
                        Mode::Local => Rc::new(move |s: &str| send_local(&home, s)),
                    };
                    let ends = ev.slug == "session-end";
                    let case = if ends {
                        // SessionEnd ends its session: each run gets its own,
                        // registered (untimed) just before.
                        let (sb, env2, sid2) = (start_bin.clone(), env.clone(), sid.clone());
                        let mut c = Case::new(
                            name,
                            meta,
                            bins.join(h.binary(ev)),
                            env.clone(),
                            Box::new(move |i| payload(fixture, cursor, &format!("{sid2}-{i}"))),
                        );
                        let sid3 = sid.clone();
                        c.before = Some(Box::new(move |i| {
                            let s = format!("{sid3}-{i}");
                            run_untimed(&sb, &env2, &payload(start_fixture, cursor, &s));
                            if note {
                                send(&s);
                            }
                        }));
                        c
                    } else {
                        run_untimed(&start_bin, &env, &payload(start_fixture, cursor, &sid));
                        let sid2 = sid.clone();
                        let mut c = Case::new(
                            name,
                            meta,
                            bins.join(h.binary(ev)),
                            env.clone(),
                            Box::new(move |_| payload(fixture, cursor, &sid2)),
                        );
                        if note {
                            c.before = Some(Box::new(move |_| send(&sid)));
                        }
                        c
                    };
                    cases.push(case);
                }
            }
        }
    }

    // A PreToolUse carrying a full spool (refilled, untimed, before each run).
    for mode in [Mode::Server, Mode::Local] {
        let h = &harnesses()[0];
        let (start, pre) = (&h.events[0], &h.events[2]);
        let sid = format!("bench-spool-{}", mode.as_str());
        let env = env_of(mode);
        let home = home_of(mode);
        run_untimed(&bins.join(h.binary(start)), &env, &payload(start.fixture, false, &sid));
        let fixture = pre.fixture;
        let sid2 = sid.clone();
        let meta = Meta {
            binary: Some(h.binary(pre)),
            harness: h.slug,
            event: pre.name,
            mode: Some(mode),
            section: "spool",
            ..Meta::default()
        };
        let mut c = Case::new(
            format!("claude-code PreToolUse, {}, carrying a full spool (5)", mode.as_str()),
            meta,
            bins.join(h.binary(pre)),
            env,
            Box::new(move |_| payload(fixture, false, &sid2)),
        );
        c.before = Some(Box::new(move |_| fill_spool(&home, &sid, 5)));
        cases.push(c);
    }

    // The local claim as the inbox grows: notes stored for 1,000 other sessions.
    let mut seeding = Duration::ZERO;
    if only.as_deref().is_none_or(|o| "claim".contains(o) || o.contains("claim")) {
        for &stored in &scales {
            let home = tmp.join(format!("scale-{stored}"));
            let t = Instant::now();
            seed_inbox(&home, 1_000, stored);
            seeding += t.elapsed();
            let h = &harnesses()[0];
            let (start, pre) = (&h.events[0], &h.events[2]);
            let env = base_env(&home);
            for note in [false, true] {
                let sid = format!("bench-claim-{stored}-{note}");
                run_untimed(&bins.join(h.binary(start)), &env, &payload(start.fixture, false, &sid));
                let fixture = pre.fixture;
                let sid2 = sid.clone();
                let meta = Meta {
                    binary: Some(h.binary(pre)),
                    harness: h.slug,
                    event: pre.name,
                    mode: Some(Mode::Local),
                    note,
                    section: "scale",
                    stored,
                };
                let mut c = Case::new(
                    format!(
                        "claim (claude-code PreToolUse, local), {stored} notes stored, {}",
                        if note { "with note" } else { "no note" }
                    ),
                    meta,
                    bins.join(h.binary(pre)),
                    env.clone(),
                    Box::new(move |_| payload(fixture, false, &sid2)),
                );
                if note {
                    let home = home.clone();
                    c.before = Some(Box::new(move |_| send_local(&home, &sid)));
                }
                cases.push(c);
            }
        }
    }
    if let Some(o) = &only {
        cases.retain(|c| c.meta.section == "floor" || c.name.contains(o.as_str()));
    }

    // Measure, round-robin.
    let started = Instant::now();
    for i in 0..(runs + warmup) {
        for c in cases.iter_mut() {
            if let Some(d) = c.run_once(i)
                && i >= warmup
            {
                c.times.push(d);
            }
        }
    }
    let elapsed = started.elapsed();
    // Peak RSS: three more runs of every case through a tiny spawner.
    let spawner = bins.join("preloop-bench-rss");
    for k in 0..3 {
        for c in cases.iter_mut() {
            c.rss_once(runs + warmup + k, &spawner);
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    report(&cases, &bins, runs, warmup, elapsed, seeding, json_out.as_deref());
    // A hook always exits 0 (the harness contract): anything else, or a case
    // that could not run at all, means the benchmark (or a hook) has rotted.
    if cases.iter().any(|c| c.failures > 0 || c.times.is_empty()) {
        eprintln!("preloop-bench: some cases failed (see WARNING above)");
        std::process::exit(1);
    }
}

// ----- report ------------------------------------------------------------------

fn report(
    cases: &[Case],
    bins: &Path,
    runs: usize,
    warmup: usize,
    elapsed: Duration,
    seeding: Duration,
    json_out: Option<&str>,
) {
    let stats: Vec<Option<Stats>> = cases.iter().map(Case::stats).collect();
    let median_of = |prefix: &str| {
        cases.iter().zip(&stats).find(|(c, _)| c.name.starts_with(prefix)).and_then(|(_, s)| s.map(|s| ms(s.median)))
    };
    let truth = median_of("floor: /bin/true");
    let floor = median_of("floor: start");
    let curl = median_of("reference: curl");
    let python = median_of("reference: Python");
    let ratio = |a: f64, b: Option<f64>| b.map(|b| format!("{:.2}", a / b)).unwrap_or_else(|| "n/a".into());
    let cell = |s: Option<Stats>| {
        s.map(|s| format!("{:.2} | {:.2}", ms(s.median), ms(s.p95))).unwrap_or_else(|| "failed | ".into())
    };

    println!(
        "preloop-bench: {runs} runs per case after {warmup} warm-up runs, round-robin over {} cases ({:.0} s, inbox seeding {:.0} s); wall time per process (spawn, stdin, exit)\n",
        cases.len(),
        elapsed.as_secs_f64(),
        seeding.as_secs_f64()
    );
    let failed: Vec<String> = cases
        .iter()
        .filter(|c| c.failures > 0 || c.times.is_empty())
        .map(|c| format!("{} ({} non-zero exits, {} runs)", c.name, c.failures, c.times.len()))
        .collect();
    if !failed.is_empty() {
        println!("WARNING: {}\n", failed.join("; "));
    }

    println!("### Floors and references\n");
    println!("| case | median ms | p95 ms | peak RSS MB |");
    println!("|---|---:|---:|---:|");
    for (c, s) in cases.iter().zip(&stats).filter(|(c, _)| c.meta.section == "floor") {
        println!("| {} | {} | {:.1} |", c.name, cell(*s), c.max_rss_kib as f64 / 1024.0);
    }

    // Per hook and mode: no note beside with note, and the ratios.
    println!("\n### Every hook binary\n");
    println!(
        "Ratios are of the no-note median: server mode against the physical floor, curl and the Python hook; local mode against /bin/true.\n"
    );
    println!(
        "| hook | mode | no note: median ms | p95 ms | with note: median ms | p95 ms | peak RSS MB | ÷ floor | ÷ curl | ÷ Python | ÷ /bin/true |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let hook_rows = cases.iter().zip(&stats).filter(|(c, _)| c.meta.section.is_empty() && !c.meta.note);
    let mut worst: BTreeMap<&'static str, (f64, String)> = BTreeMap::new();
    let mut note_worst = (0.0f64, String::new());
    for (c, s) in hook_rows {
        let with = cases.iter().zip(&stats).find(|(w, _)| {
            w.meta.section.is_empty() && w.meta.note && w.meta.binary == c.meta.binary && w.meta.mode == c.meta.mode
        });
        let rss = c.max_rss_kib.max(with.map(|(w, _)| w.max_rss_kib).unwrap_or(0));
        let med = s.map(|s| ms(s.median)).unwrap_or(f64::NAN);
        let label = format!("{} {}", c.meta.harness, c.meta.event);
        let (f, cu, py, tr) = match c.meta.mode {
            Some(Mode::Server) => {
                for (key, base) in [("server ÷ floor", floor), ("server ÷ Python", python), ("server ÷ curl", curl)]
                {
                    if let Some(b) = base {
                        let e = worst.entry(key).or_insert((0.0, String::new()));
                        if med / b > e.0 {
                            *e = (med / b, label.clone());
                        }
                    }
                }
                (ratio(med, floor), ratio(med, curl), ratio(med, python), "".into())
            }
            _ => {
                if let Some(b) = truth {
                    let e = worst.entry("local ÷ /bin/true").or_insert((0.0, String::new()));
                    if med / b > e.0 {
                        *e = (med / b, label.clone());
                    }
                }
                ("".into(), "".into(), "".into(), ratio(med, truth))
            }
        };
        if let Some((_, Some(ws))) = with {
            let base = if c.meta.mode == Some(Mode::Server) { floor } else { truth };
            if let Some(b) = base
                && ms(ws.median) / b > note_worst.0
            {
                note_worst = (ms(ws.median) / b, format!("{label}, {}", c.meta.mode.map(Mode::as_str).unwrap_or("")));
            }
        }
        println!(
            "| {} | {} | {} | {} | {:.1} | {f} | {cu} | {py} | {tr} |",
            c.meta.binary.as_deref().unwrap_or(&c.name),
            c.meta.mode.map(Mode::as_str).unwrap_or(""),
            cell(*s),
            with.map(|(_, ws)| cell(*ws)).unwrap_or_else(|| "| ".into()),
            rss as f64 / 1024.0
        );
    }

    let spool: Vec<_> = cases.iter().zip(&stats).filter(|(c, _)| c.meta.section == "spool").collect();
    if !spool.is_empty() {
        println!("\n### Spool operations\n");
        println!("| case | median ms | p95 ms | peak RSS MB | ÷ same hook, no note |");
        println!("|---|---:|---:|---:|---:|");
        for (c, s) in spool {
            let base = cases
                .iter()
                .zip(&stats)
                .find(|(b, _)| {
                    b.meta.section.is_empty()
                        && !b.meta.note
                        && b.meta.binary == c.meta.binary
                        && b.meta.mode == c.meta.mode
                })
                .and_then(|(_, s)| s.map(|s| ms(s.median)));
            println!(
                "| {} | {} | {:.1} | {} |",
                c.name,
                cell(*s),
                c.max_rss_kib as f64 / 1024.0,
                s.map(|s| ratio(ms(s.median), base)).unwrap_or_default()
            );
        }
    }

    let scale: Vec<_> = cases.iter().zip(&stats).filter(|(c, _)| c.meta.section == "scale").collect();
    let mut growth = Vec::new();
    if !scale.is_empty() {
        println!("\n### Local-inbox claim as the inbox grows (notes stored for 1,000 other sessions)\n");
        println!("| stored notes | no note: median ms | p95 ms | with note: median ms | p95 ms |");
        println!("|---:|---:|---:|---:|---:|");
        let mut stored: Vec<usize> = scale.iter().map(|(c, _)| c.meta.stored).collect();
        stored.dedup();
        let get = |n: usize, note: bool| {
            scale.iter().find(|(c, _)| c.meta.stored == n && c.meta.note == note).and_then(|(_, s)| **s)
        };
        for &n in &stored {
            println!("| {n} | {} | {} |", cell(get(n, false)), cell(get(n, true)));
        }
        if let (Some(&lo), Some(&hi)) = (stored.first(), stored.last()) {
            for note in [false, true] {
                if let (Some(a), Some(b)) = (get(lo, note), get(hi, note)) {
                    growth.push((note, lo, hi, ms(b.median) / ms(a.median)));
                }
            }
        }
    }

    // Sizes and peak RSS per binary.
    println!("\n### Binaries (release profile, stripped)\n");
    println!("| binary | size MB | peak RSS MB (max over its cases) |");
    println!("|---|---:|---:|");
    let mut names: Vec<String> = std::fs::read_dir(bins)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with("preloop-") && !n.contains('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut max_hook_size = (0u64, String::new());
    let mut max_hook_rss = (0i64, String::new());
    for n in &names {
        let Ok(m) = std::fs::metadata(bins.join(n)) else { continue };
        if !m.is_file() {
            continue;
        }
        let rss = cases.iter().filter(|c| c.meta.binary.as_deref() == Some(n.as_str())).map(|c| c.max_rss_kib).max();
        let is_hook = ["preloop-claude-code-", "preloop-codex-", "preloop-cursor-"].iter().any(|p| n.starts_with(p));
        if is_hook && m.len() > max_hook_size.0 {
            max_hook_size = (m.len(), n.clone());
        }
        if let Some(r) = rss
            && r > max_hook_rss.0
        {
            max_hook_rss = (r, n.clone());
        }
        println!(
            "| {n} | {:.2} | {} |",
            m.len() as f64 / 1e6,
            rss.map(|r| format!("{:.1}", r as f64 / 1024.0)).unwrap_or_else(|| "(not a hook)".into())
        );
    }

    println!("\n### Targets\n");
    println!("| target | measured (worst case) | met |");
    println!("|---|---|---|");
    let verdict = |ok: bool| if ok { "yes" } else { "NO" };
    if let Some((r, who)) = worst.get("server ÷ floor") {
        println!("| no-note hook ≤ 1.5× the physical floor (server mode) | {r:.2}× ({who}) | {} |", verdict(*r <= 1.5));
    }
    if let Some((r, who)) = worst.get("server ÷ Python") {
        println!("| no-note hook ≤ 0.05× the Python hook (server mode) | {r:.3}× ({who}) | {} |", verdict(*r <= 0.05));
    }
    if let Some((r, who)) = worst.get("server ÷ curl") {
        println!("| (reference) no-note hook ÷ curl (server mode) | {r:.2}× ({who}) | |");
    }
    if let Some((r, who)) = worst.get("local ÷ /bin/true") {
        println!("| local-inbox no-note hook ≤ 2× /bin/true | {r:.2}× ({who}) | {} |", verdict(*r <= 2.0));
    }
    if !note_worst.1.is_empty() {
        println!("| (reference) with-note hook ÷ its floor | {:.2}× ({}) | |", note_worst.0, note_worst.1);
    }
    if !max_hook_size.1.is_empty() {
        println!(
            "| each hook binary ≤ 3 MB | {:.2} MB ({}) | {} |",
            max_hook_size.0 as f64 / 1e6,
            max_hook_size.1,
            verdict(max_hook_size.0 <= 3_000_000)
        );
    }
    if !max_hook_rss.1.is_empty() {
        println!(
            "| peak RSS ≤ 8 MB | {:.1} MB ({}) | {} |",
            max_hook_rss.0 as f64 / 1024.0,
            max_hook_rss.1,
            verdict(max_hook_rss.0 <= 8 * 1024)
        );
    }
    for (note, lo, hi, g) in &growth {
        println!(
            "| claim flat (≤ 2×) from {lo} to {hi} stored notes, {} | {g:.2}× | {} |",
            if *note { "with note" } else { "no note" },
            verdict(*g <= 2.0)
        );
    }

    if let Some(path) = json_out {
        let v: Vec<Value> = cases
            .iter()
            .zip(&stats)
            .filter_map(|(c, s)| s.map(|s| json!({"case": c.name, "binary": c.meta.binary, "mode": c.meta.mode.map(Mode::as_str), "note": c.meta.note, "stored_notes": c.meta.stored, "median_ms": ms(s.median), "p95_ms": ms(s.p95), "max_rss_kib": c.max_rss_kib, "failures": c.failures})))
            .collect();
        let _ = std::fs::write(path, serde_json::to_string_pretty(&json!({"runs": runs, "results": v})).unwrap());
    }
}
