//! A hostile server, for every hook event of every harness (process-level,
//! the built binaries): the fake's faults (5xx with Retry-After, 4xx,
//! garbage, wrong-shape JSON, a 10 MB body, a closed connection, a hang, a
//! slow answer, an answer slower than every timeout) and raw loopback
//! servers the fake cannot be (connection refused, accepts and never
//! answers, a reset mid-body, a redirect to another host, TLS to a plain
//! HTTP port). Each run must exit 0 within its time budget with the neutral
//! answer, or the documented deny of a fail-closed gate (Codex
//! PermissionRequest, Cursor before*), and leave exactly one log line. The
//! plain-http cases past the client's bounds (endless 1xx heads and
//! trailers, a chunk size near `u64::MAX`, a slow reader on a 24 MiB body)
//! also hold each hook to an address-space limit; a token with a line break
//! is never sent. The second half proves no note is lost while the server misbehaves: a
//! deferred claim stays spooled until a hook carries it (or it is acked
//! `spool_dropped`), and nothing is acked delivered that no output carried.

use crate::common::*;
use preloop_shared::Harness;
use preloop_testkit::{FakeServer, FaultSpec};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CONNECT_MS: u64 = 300;
const CALL_MS: u64 = 600;
const PERMISSION_SECS: u64 = 1;
const END_BUDGET_MS: u64 = 600;

/// Short timeouts so a hang costs little; the bounds below derive from them.
fn tight(home: Home) -> Home {
    home.with_env("PRELOOP_CONNECT_TIMEOUT_MS", &CONNECT_MS.to_string())
        .with_env("PRELOOP_CALL_TIMEOUT_MS", &CALL_MS.to_string())
        .with_env("PRELOOP_PERMISSION_TIMEOUT_SECS", &PERMISSION_SECS.to_string())
        .with_env("PRELOOP_SESSION_END_BUDGET_MS", &END_BUDGET_MS.to_string())
}

/// The longest a hook may take, by its own clock, against a server that
/// never helps: every call it can make, each at its timeout, plus slack for
/// its own work.
fn budget(h: &Hook) -> Duration {
    let slack = Duration::from_millis(1500);
    let call = Duration::from_millis(CALL_MS);
    match (h.kind, h.harness) {
        // A harness that kills its SessionEnd hook gets it within the end budget (runner.rs).
        (Kind::End, h) if h.def().session_end_kill_ms.is_some() => Duration::from_millis(END_BUDGET_MS) + slack,
        (Kind::Tool { .. }, _) => 3 * call + Duration::from_secs(PERMISSION_SECS) + slack,
        _ => 4 * call + slack,
    }
}

/// What a run is held to beyond the contract of [`every_hook_against`].
struct Case {
    /// Environment over [`tight`]'s.
    env: Vec<(&'static str, String)>,
    /// A hook's stdin for a session (default: its canonical payload).
    payload: fn(&Hook, &str) -> Vec<u8>,
    /// How long a hook may take by its own clock (its log line's `ms=`,
    /// which its calls' timeouts govern); the run's wall clock is held to
    /// this plus 15 s. `None`: only `deadline` holds.
    budget: Option<fn(&Hook) -> Duration>,
    /// When a run counts as hung (it is killed and fails).
    deadline: Duration,
    /// Words the log line must not hold (a flood must stop at a bound the
    /// client sets, never at its timeout: `timed out`).
    log_must_not: &'static [&'static str],
    /// An address-space limit for the hook process (`RLIMIT_AS`): past it an
    /// allocation aborts the hook, which the contract then catches.
    address_space: Option<u64>,
}

impl Default for Case {
    fn default() -> Case {
        Case {
            env: Vec::new(),
            payload: |h, session| serde_json::to_vec(&h.payload(session)).unwrap(),
            budget: Some(budget),
            deadline: Duration::from_secs(30),
            log_must_not: &[],
            address_space: None,
        }
    }
}

/// Run every hook once against `url` on a fresh session each and check the
/// contract: exit 0, a valid output, neutral or the documented deny, one
/// log line, within budget. Returns the outputs by hook.
fn every_hook_against(label: &str, url: &str, token: &str, expect_neutral: bool) -> BTreeMap<String, Option<Value>> {
    every_hook_against_with(label, url, token, expect_neutral, &Case::default())
}

fn every_hook_against_with(
    label: &str,
    url: &str,
    token: &str,
    expect_neutral: bool,
    case: &Case,
) -> BTreeMap<String, Option<Value>> {
    let hooks = hooks();
    let results = Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for h in &hooks {
            let results = &results;
            s.spawn(move || {
                let mut home = tight(server_home(&format!("hostile-{label}"), url, token));
                for (k, v) in &case.env {
                    home = home.with_env(k, v);
                }
                let session = unique_session("hostile");
                let mut cmd = home.command(&bin(h), &[]);
                if let Some(limit) = case.address_space {
                    limit_address_space(&mut cmd, limit);
                }
                let r = run_cmd(cmd, &(case.payload)(h, &session), case.deadline);
                r.assert_ok(h);
                let out = Checker::new(h).check(&r.stdout).unwrap_or_else(|e| panic!("{label}: {}: {e}", h.name()));
                let log = home.log();
                assert_eq!(log.lines().count(), 1, "{label}: {}: one log line expected: {log}", h.name());
                if let Some(budget) = case.budget {
                    // The hook's own clock (its log line's ms=) is held to
                    // the budget its timeouts make; the run's wall clock
                    // (fork, exec and stdin of a debug binary, every hook at
                    // once on a loaded machine) only to a sanity bound over
                    // it (docs/hardening.md, "Tests with a wall-clock bound").
                    let within = budget(h);
                    let took = Duration::from_millis(preloop_testkit::support::logged_ms(&log) as u64);
                    assert!(took <= within, "{label}: {} took {took:?} by its own clock (budget {within:?})", h.name());
                    let sane = within + Duration::from_secs(15);
                    assert!(r.elapsed <= sane, "{label}: {} took {:?} (sanity bound {sane:?})", h.name(), r.elapsed);
                }
                assert!(
                    log.contains(&format!(" {} ", h.event)),
                    "{label}: {}: log line names the event: {log}",
                    h.name()
                );
                assert!(!log.contains("outcome=panic"), "{label}: {}: {log}", h.name());
                for word in case.log_must_not {
                    assert!(!log.contains(word), "{label}: {}: the log says {word:?}: {log}", h.name());
                }
                if expect_neutral {
                    let fail_closed = matches!(h.kind, Kind::Tool { fail_closed: true, .. });
                    if fail_closed {
                        assert!(is_deny(&out), "{label}: {} must fail closed, printed {out:?}", h.name());
                        assert!(log.contains("outcome=fail_closed"), "{label}: {}: {log}", h.name());
                    } else {
                        assert_eq!(out, neutral_of(h), "{label}: {} must answer neutrally", h.name());
                    }
                    assert!(
                        log.contains("error=") || log.contains("warn="),
                        "{label}: {}: the log line says what failed: {log}",
                        h.name()
                    );
                }
                results.lock().unwrap().insert(h.name(), out);
            });
        }
    });
    results.into_inner().unwrap()
}

/// Hold the process `cmd` starts to `bytes` of address space.
fn limit_address_space(cmd: &mut std::process::Command, bytes: u64) {
    use std::os::unix::process::CommandExt;
    let limit = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing
    // the parent shares.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
        });
    }
}

fn fake_with(fault: FaultSpec) -> FakeServer {
    let server = FakeServer::start();
    server.set_native_tool_approvals(&server.agent_id(), true);
    server.set_fault(fault);
    server
}

fn agents() -> FaultSpec {
    FaultSpec::route("/api/v1/agents/*")
}

macro_rules! fault_test {
    ($name:ident, $fault:expr) => {
        #[test]
        fn $name() {
            let server = fake_with($fault);
            every_hook_against(stringify!($name), &server.url(), &server.runtime_token(), true);
        }
    };
}

fault_test!(status_500, agents().status(500, None));
fault_test!(status_502, agents().status(502, Some(json!("<html>Bad Gateway</html>"))));
fault_test!(
    status_503_retry_after,
    agents()
        .status(503, Some(json!({"detail": "Database connections are saturated. Please retry shortly."})))
        .retry_after("1")
);
fault_test!(status_401, agents().status(401, None));
fault_test!(status_403, agents().status(403, None));
fault_test!(status_404, agents().status(404, None));
fault_test!(status_422, agents().status(422, Some(json!({"detail": [{"loc": ["body"], "msg": "bad"}]}))));
fault_test!(status_429, agents().status(429, None).retry_after("3600"));
fault_test!(garbage_body, agents().garbage());
fault_test!(
    wrong_shape_object,
    agents().status(200, Some(json!({"unexpected": true, "decision": "maybe", "notes": "x", "runtime_session_id": 7})))
);
fault_test!(wrong_shape_array, agents().status(200, Some(json!([1, 2, 3]))));
fault_test!(wrong_shape_null, agents().status(200, Some(Value::Null)));
fault_test!(ten_megabyte_body, agents().huge(10 << 20));
fault_test!(closes_connection, agents().close());
fault_test!(hangs, agents().hang());
fault_test!(slower_than_every_timeout, agents().delay(Duration::from_millis(PERMISSION_SECS * 1000 + 500)));

/// A slow server that still answers inside the timeouts: hooks work.
#[test]
fn slow_but_inside_the_timeouts() {
    let server = fake_with(agents().delay(Duration::from_millis(100)));
    let outs = every_hook_against("slow", &server.url(), &server.runtime_token(), false);
    // The gates were answered by the server (allow), not by a fail policy.
    assert!(!is_deny(&outs["codex/PermissionRequest"]), "{:?}", outs["codex/PermissionRequest"]);
    assert_eq!(outs["cursor/beforeShellExecution"], Some(json!({"permission": "allow"})));
}

#[test]
fn connection_refused() {
    every_hook_against("refused", &dead_url(), "agt_refused", true);
}

/// A loopback server that hands each connection to `handler`; returns its
/// URL and the number of connections it saw.
fn raw_server(handler: impl Fn(TcpStream) + Send + Sync + 'static) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    let handler = Arc::new(handler);
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let h = handler.clone();
            std::thread::spawn(move || h(s));
        }
    });
    (url, seen)
}

/// Read a request head (through the blank line, or what came before the
/// stream ended).
fn read_head(s: &mut TcpStream) -> String {
    preloop_testkit::stub_server::read_head(s).unwrap_or_else(|partial| partial)
}

#[test]
fn accepts_and_never_answers() {
    let (url, seen) = raw_server(|s| {
        std::thread::sleep(Duration::from_secs(30));
        drop(s);
    });
    every_hook_against("silent", &url, "agt_silent", true);
    assert!(seen.load(Ordering::SeqCst) > 0);
}

#[test]
fn reset_mid_body() {
    let (url, _) = raw_server(|mut s| {
        // Read a little of the request only: closing with unread bytes in the
        // receive buffer makes the kernel send RST.
        let mut b = [0u8; 16];
        let _ = s.read(&mut b);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"runtime_session_id\": \"half-a-body");
        let _ = s.flush();
        std::thread::sleep(Duration::from_millis(20));
        drop(s);
    });
    every_hook_against("reset", &url, "agt_reset", true);
}

#[test]
fn redirect_to_another_host_never_carries_the_token() {
    let heads = Arc::new(Mutex::new(Vec::<String>::new()));
    let rec = heads.clone();
    let (elsewhere, reached) = raw_server(move |mut s| {
        let head = read_head(&mut s);
        rec.lock().unwrap().push(head);
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        );
    });
    for code in ["302 Found", "307 Temporary Redirect", "308 Permanent Redirect"] {
        let target = elsewhere.clone();
        let (url, _) = raw_server(move |mut s| {
            let head = read_head(&mut s);
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
            let _ = s.write_all(
                format!(
                    "HTTP/1.1 {code}\r\nLocation: {target}{path}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                .as_bytes(),
            );
        });
        every_hook_against("redirect", &url, "agt_redirect_secret", true);
    }
    assert_eq!(reached.load(Ordering::SeqCst), 0, "a redirect was followed: {:?}", heads.lock().unwrap());
}

#[test]
fn tls_to_a_plain_http_port() {
    let server = FakeServer::start();
    let url = server.url().replacen("http://", "https://", 1);
    every_hook_against("tls-to-plain", &url, &server.runtime_token(), true);
}

// ----- a plain-http server past the client's bounds (red-team 3, N1/N3) -------

/// Read a request through its body (by Content-Length).
fn read_request(s: &mut TcpStream) -> String {
    let head = read_head(s);
    let len: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
        .unwrap_or(0);
    let _ = std::io::copy(&mut s.take(len as u64), &mut std::io::sink());
    head
}

/// A server that answers every request with `first`, then writes `unit`
/// without end (until the client goes, or 20 s).
fn flooding_server(first: &'static [u8], unit: Vec<u8>) -> String {
    let (url, _) = raw_server(move |mut s| {
        read_request(&mut s);
        let block = unit.repeat((64 * 1024 / unit.len()).max(1));
        let started = std::time::Instant::now();
        if s.write_all(first).is_err() {
            return;
        }
        while started.elapsed() < Duration::from_secs(20) && s.write_all(&block).is_ok() {}
    });
    url
}

/// A hook that met a flood must not wait out its timeouts or grow with it:
/// it stops at the first bound the client sets (the log names that bound,
/// never `timed out`), inside 512 MiB of address space. The old client grew
/// by GBs until the deadline and, under such a limit, aborted: exit 134, no
/// output, no log line. The timeouts are a minute, so a hook that stopped at
/// one could not pass the wall-clock check either, however loaded the
/// machine: the check has 3× headroom under them for a hook that stops at a
/// bound (0.01-0.09 s measured, docs/hardening.md).
fn flood_case() -> Case {
    Case {
        env: vec![("PRELOOP_CALL_TIMEOUT_MS", "60000".into()), ("PRELOOP_PERMISSION_TIMEOUT_SECS", "60".into())],
        budget: Some(|_| Duration::from_secs(20)),
        deadline: Duration::from_secs(90),
        log_must_not: &["timed out"],
        address_space: Some(512 << 20),
        ..Case::default()
    }
}

#[test]
fn endless_interim_heads() {
    let url = flooding_server(b"", b"HTTP/1.1 100 Continue\r\n\r\n".to_vec());
    every_hook_against_with("interim-flood", &url, "agt_interim", true, &flood_case());
}

#[test]
fn endless_trailers() {
    let url = flooding_server(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n",
        format!("X-T: {}\r\n", "a".repeat(1000)).into_bytes(),
    );
    every_hook_against_with("trailer-flood", &url, "agt_trailers", true, &flood_case());
}

#[test]
fn a_chunk_size_near_u64_max() {
    let url = flooding_server(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\nffffffffffffffff\r\n",
        vec![b'y'; 4096],
    );
    every_hook_against_with("huge-chunk", &url, "agt_chunk", true, &flood_case());
}

/// A gate's payload with 24 MiB in its tool input (the command of Cursor
/// beforeShellExecution); other hooks get their canonical payload.
fn with_24_mib_tool_input(h: &Hook, session: &str) -> Vec<u8> {
    let mut v = h.payload(session);
    if matches!(h.kind, Kind::Tool { .. }) {
        let big = "A".repeat(24 << 20);
        let o = v.as_object_mut().expect("a gate payload is an object");
        match ["tool_input", "toolArgs"].into_iter().find(|k| o.contains_key(*k)) {
            Some(k) => {
                o.insert(k.into(), json!({"file_path": "/srv/x", "command": "cat > /srv/x", "content": big}));
            }
            None => {
                o.insert("command".into(), json!(format!("echo {big}")));
            }
        }
    }
    serde_json::to_vec(&v).unwrap()
}

/// Red-team 3, N3: a server that drains a 24 MiB permission check 64 KiB
/// every 250 ms and never answers holds a gate no longer than its budget
/// (the old write waited one timeout per partial write: 442 s for a 5 s
/// budget). At 256 KiB/s a write that ignored the call deadline needs 96 s
/// for 24 MiB; a gate that keeps it (1 s here) ends in a few seconds of its
/// own work: 6.4 s measured with the release build, 10-20 s (wall clock)
/// with the debug build and every gate at once on 2 cores beside a cold
/// `cargo build`. The bound, on the hook's own clock, sits between the two,
/// at 45 s: a machine's load cannot reach it, and the regression cannot
/// stay under it. That the write itself keeps the
/// deadline to the millisecond is `http_plain::tests::the_write_keeps_the_call_deadline`.
#[test]
fn a_slow_reader_on_a_24_mib_body() {
    let (url, seen) = raw_server(|mut s| {
        read_head(&mut s);
        let mut b = vec![0u8; 64 * 1024];
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_secs(300) {
            match s.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(_) => std::thread::sleep(Duration::from_millis(250)),
            }
        }
    });
    let case = Case {
        payload: with_24_mib_tool_input,
        budget: Some(|_| Duration::from_secs(45)),
        deadline: Duration::from_secs(150),
        address_space: Some(1 << 30),
        ..Case::default()
    };
    every_hook_against_with("slow-reader", &url, "agt_slow", true, &case);
    assert!(seen.load(Ordering::SeqCst) > 0);
}

/// Aesthetics review 3, §2 (b): a token with CR/LF (from the environment or
/// config.json) is never written into a request, where it would split the
/// head: the call fails before it connects, and the gate answers by its
/// fail policy.
#[test]
fn a_token_with_a_line_break_is_never_sent() {
    let heads = Arc::new(Mutex::new(Vec::<String>::new()));
    let rec = heads.clone();
    let (url, _) = raw_server(move |mut s| {
        let head = read_request(&mut s);
        rec.lock().unwrap().push(head);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
    });
    every_hook_against("crlf-token", &url, "agt_x\r\nX-Injected: 1", true);
    let heads = heads.lock().unwrap();
    assert!(heads.iter().all(|h| !h.contains("X-Injected")), "a header was injected: {heads:?}");
}

// ----- no note is lost while the server misbehaves --------------------------

fn state_of(server: &FakeServer, id: &str) -> (String, Option<String>) {
    let r = server.receipt(id);
    (r["state"].as_str().unwrap().to_string(), r["undeliverable_reason"].as_str().map(str::to_string))
}

/// One session's life with a deferred (spooled) claim and a pending note,
/// with `fault` on while the carrying hooks run; then the server recovers
/// and the session ends. Every note ends delivered iff exactly one output
/// carried it, and otherwise undeliverable; nothing is delivered twice.
///
/// `immediate_lost`: the fault loses the answer of a permission check that
/// claimed immediately (Claude/Codex PreToolUse, Cursor preToolUse: the
/// server records those `delivered` at claim time, docs/contracts/preloop-server.md §4.2), the one
/// documented case where a receipt says delivered though no output carried
/// the note (docs/guarantees.md). The test then proves it is that case only.
fn no_note_lost(harness: Harness, fault: FaultSpec, immediate_lost: bool) {
    let server = FakeServer::start();
    server.set_native_tool_approvals(&server.agent_id(), true);
    server.set_rate_limit(None);
    let home = tight(server_home("lost", &server.url(), &server.runtime_token()));
    let session = unique_session("lost");
    let (start, gate, carriers, end) = match harness {
        Harness::Codex => {
            ("SessionStart", "PermissionRequest", vec!["PreToolUse", "UserPromptSubmit", "Stop"], "SessionEnd")
        }
        Harness::Cursor => {
            ("sessionStart", "beforeShellExecution", vec!["preToolUse", "stop", "preToolUse"], "sessionEnd")
        }
        // The runs pick one harness per way a claim can be lost (`lost_test!`);
        // these two spool a gate's deferred claim.
        _ => unreachable!("{harness:?} has no spooling sequence here"),
    };
    home.hook(&hook(harness, start), &session);
    let a = server.send_note(json!({"external_session_id": session, "text": "spooled note"}))["note_id"]
        .as_str()
        .unwrap()
        .to_string();
    home.hook(&hook(harness, gate), &session);
    let spool = home.run_state_of(&session).expect("run state").spool;
    assert_eq!(
        spool.iter().map(|e| e.note.id.clone()).collect::<Vec<_>>(),
        vec![a.clone()],
        "the gate's claim is spooled"
    );
    assert_eq!(state_of(&server, &a).0, "claimed");
    let b = server.send_note(json!({"external_session_id": session, "text": "pending note"}))["note_id"]
        .as_str()
        .unwrap()
        .to_string();

    let mut carried: Vec<String> = Vec::new();
    server.set_fault(fault);
    for ev in &carriers {
        let (out, _) = home.hook(&hook(harness, ev), &session);
        carried.extend(context_of(&out).map(|c| ids_in(&c)).unwrap_or_default());
        // While the server misbehaves a note is spooled, carried, or still on the server: never acked unseen.
        for id in [&a, &b] {
            let (st, _) = state_of(&server, id);
            let excused = immediate_lost
                && id == &b
                && st == "delivered"
                && server.receipt(id)["delivery_event"] == json!("pre_tool_use");
            assert!(st != "delivered" || carried.contains(id) || excused, "{id} acked delivered but never carried");
        }
    }
    server.clear_faults();
    for ev in &carriers {
        let (out, _) = home.hook(&hook(harness, ev), &session);
        carried.extend(context_of(&out).map(|c| ids_in(&c)).unwrap_or_default());
    }
    home.hook(&hook(harness, end), &session);
    for id in [&a, &b] {
        let n = carried.iter().filter(|c| c == &id).count();
        assert!(n <= 1, "{id} was carried {n} times: {carried:?}");
        let (st, why) = state_of(&server, id);
        if immediate_lost && id == &b && n == 0 {
            assert_eq!(st, "delivered", "the lost immediate claim is the server's delivered");
            assert_eq!(server.receipt(id)["delivery_event"], json!("pre_tool_use"));
            continue;
        }
        if n == 1 {
            assert_eq!(st, "delivered", "{id} was carried: its receipt must say so");
        } else {
            assert_eq!(st, "undeliverable", "{id} was never carried: it must be reported, not lost ({why:?})");
        }
    }
    // With the server back, both reach the model.
    assert!(carried.contains(&a), "the spooled note was carried once the server recovered: {carried:?}");
    assert!(
        carried.contains(&b) || immediate_lost,
        "the pending note was carried once the server recovered: {carried:?}"
    );
}

/// The same for the harnesses whose gates never claim deferred (Gemini
/// BeforeTool claims immediately and holds the call with the note; Copilot
/// preToolUse never gets one): two pending notes, the carrying hooks with
/// `fault` on, then again with the server back, then the end. A note ends
/// delivered iff exactly one output carried it (or, for Gemini, the server's
/// own immediate claim whose answer the fault lost), else undeliverable.
/// `claims_lost`: the fault loses claimed pulls, so liveness is not expected.
fn no_note_lost_pulling(harness: Harness, fault: FaultSpec, immediate_lost: bool, claims_lost: bool) {
    let server = FakeServer::start();
    server.set_rate_limit(None);
    let home = tight(server_home("lostp", &server.url(), &server.runtime_token()));
    let session = unique_session("lostp");
    let (start, carriers, end) = match harness {
        Harness::Gemini => ("SessionStart", ["BeforeTool", "AfterTool", "BeforeAgent", "AfterAgent"], "SessionEnd"),
        Harness::Copilot => {
            ("sessionStart", ["preToolUse", "postToolUse", "userPromptSubmitted", "agentStop"], "sessionEnd")
        }
        _ => unreachable!(),
    };
    home.hook(&hook(harness, start), &session);
    let ids: Vec<String> = ["first note", "second note"]
        .iter()
        .map(|t| {
            server.send_note(json!({"external_session_id": session, "text": t}))["note_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let excused = |id: &String| {
        immediate_lost && harness == Harness::Gemini && server.receipt(id)["delivery_event"] == json!("pre_tool_use")
    };
    let mut carried: Vec<String> = Vec::new();
    server.set_fault(fault);
    for ev in carriers {
        let (out, _) = home.hook(&hook(harness, ev), &session);
        carried.extend(context_of(&out).map(|c| ids_in(&c)).unwrap_or_default());
        for id in &ids {
            let (st, _) = state_of(&server, id);
            assert!(
                st != "delivered" || carried.contains(id) || excused(id),
                "{harness:?}: {id} acked delivered but never carried"
            );
        }
    }
    server.clear_faults();
    for ev in carriers {
        let (out, _) = home.hook(&hook(harness, ev), &session);
        carried.extend(context_of(&out).map(|c| ids_in(&c)).unwrap_or_default());
    }
    home.hook(&hook(harness, end), &session);
    for id in &ids {
        let n = carried.iter().filter(|c| c == &id).count();
        assert!(n <= 1, "{harness:?}: {id} was carried {n} times: {carried:?}");
        let (st, why) = state_of(&server, id);
        if n == 0 && excused(id) {
            assert_eq!(st, "delivered", "the lost immediate claim is the server's delivered");
            continue;
        }
        if n == 1 {
            assert_eq!(st, "delivered", "{harness:?}: {id} was carried: its receipt must say so");
        } else {
            assert_eq!(st, "undeliverable", "{harness:?}: {id} was never carried: it must be reported ({why:?})");
            assert!(claims_lost, "{harness:?}: {id} never reached the model though the server recovered: {carried:?}");
        }
    }
}

macro_rules! lost_test {
    ($name:ident, $fault:expr) => {
        lost_test!($name, $fault, false);
    };
    ($name:ident, $fault:expr, $immediate_lost:expr) => {
        lost_test!($name, $fault, $immediate_lost, false);
    };
    ($name:ident, $fault:expr, $immediate_lost:expr, $claims_lost:expr) => {
        #[test]
        fn $name() {
            std::thread::scope(|s| {
                s.spawn(|| no_note_lost(Harness::Codex, $fault, $immediate_lost));
                s.spawn(|| no_note_lost(Harness::Cursor, $fault, $immediate_lost));
                s.spawn(|| no_note_lost_pulling(Harness::Gemini, $fault, $immediate_lost, $claims_lost));
                s.spawn(|| no_note_lost_pulling(Harness::Copilot, $fault, $immediate_lost, $claims_lost));
            });
        }
    };
}

lost_test!(no_note_lost_on_503, agents().status(503, None).retry_after("1"));
lost_test!(no_note_lost_on_401, agents().status(401, None));
lost_test!(no_note_lost_on_garbage, agents().garbage());
lost_test!(no_note_lost_on_close, agents().close());
lost_test!(no_note_lost_on_hang, agents().hang());
lost_test!(no_note_lost_when_acks_fail, FaultSpec::route("/api/v1/agents/notes/ack").status(500, None));
lost_test!(
    no_note_lost_when_ack_answers_are_lost,
    FaultSpec::route("/api/v1/agents/notes/ack").close().after_handling()
);
lost_test!(
    no_note_lost_when_claims_answers_are_lost,
    FaultSpec::route("/api/v1/agents/notes/pending").close().after_handling(),
    false,
    true
);
lost_test!(
    no_note_lost_when_permission_answers_are_lost,
    FaultSpec::route("/api/v1/agents/permission-check").close().after_handling(),
    true
);

/// A server whose notes are larger than any carrier (a real note is at most
/// 4,096 characters): every output still fits its schema.
#[test]
fn oversized_notes_from_the_server() {
    let t = preloop_shared::time::Timestamp::parse("2026-12-02T09:20:38Z").unwrap();
    let big = preloop_shared::render::render_element("0123456789abcdef", "Olive", "jwt", t, &"é".repeat(30_000));
    let block = preloop_shared::render::frame(std::slice::from_ref(&big)).unwrap();
    let body = json!({
        "runtime_session_id": "3f1c0000-0000-4000-8000-000000000001",
        "decision": "allow", "operator_note": block,
        "notes": [{"note_id": "0123456789abcdef", "text": big.element}], "text": block,
        "marked": 0,
    })
    .to_string();
    let (url, _) = raw_server(move |mut s| {
        let head = read_head(&mut s);
        let len: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
            .unwrap_or(0);
        let mut req = vec![0u8; len];
        let _ = s.read_exact(&mut req);
        let _ = s.write_all(format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).as_bytes());
    });
    // Every output stays valid (the Checker holds each to its schema), and
    // a note longer than any carrier is never shown cut: it is not carried.
    let outs = every_hook_against("oversized", &url, "agt_oversized", false);
    let carried = outs.values().filter(|o| context_of(o).is_some()).count();
    assert_eq!(carried, 0, "an oversized note is never shown cut: {outs:?}");
}

// ----- the transport in pieces -------------------------------------------------

/// A server whose every answer arrives in short writes, or one byte at a
/// time, still answers: each hook gets the real answer (the gates print the
/// server's deny, not a fail policy) within its budget.
#[test]
fn answers_in_short_writes_and_byte_by_byte_are_read_whole() {
    use preloop_testkit::stub_server::{StubServer, Writes};
    for (label, writes) in [
        ("short-writes", Writes::Chunks(7, Duration::from_millis(2))),
        ("byte-by-byte", Writes::Chunks(1, Duration::from_millis(1))),
    ] {
        let server = StubServer::deny_all();
        server.set_writes(writes);
        let outs = every_hook_against(label, &server.url(), "agt_pieces", false);
        for h in hooks().iter().filter(|h| matches!(h.kind, Kind::Tool { .. })) {
            assert!(is_deny(&outs[&h.name()]), "{label}: {} got the server's deny: {:?}", h.name(), outs[&h.name()]);
        }
        assert!(server.count("permission-check") > 0);
    }
}

/// A server that echoes the token JSON-`\u`-escaped in every answer (red-team
/// 2, L5) gets it into no output, file or log line of any hook.
#[test]
fn a_json_escaped_token_echo_reaches_nothing() {
    use preloop_testkit::stub_server::StubServer;
    use preloop_testkit::support::unescape_json_escapes;
    let server = StubServer::escaped_token_echo();
    let token = "agt_EscapedSecret_4242";
    let hooks = hooks();
    std::thread::scope(|s| {
        for h in &hooks {
            let server = &server;
            s.spawn(move || {
                let home = tight(server_home("escaped", &server.url(), token));
                let env_file = home.dir.join("claude-env");
                let env_file = env_file.to_str().unwrap();
                let session = unique_session("escaped");
                let r = home.run_env(
                    h,
                    serde_json::to_string(&h.payload(&session)).unwrap().as_bytes(),
                    &[("CLAUDE_ENV_FILE", env_file)],
                );
                r.assert_ok(h);
                Checker::new(h).check(&r.stdout).unwrap_or_else(|e| panic!("{}: {e}", h.name()));
                let mut seen = String::from_utf8_lossy(&r.stdout).into_owned();
                seen.push_str(&String::from_utf8_lossy(&r.stderr));
                for p in walk(&home.dir).into_iter().filter(|p| p.is_file()) {
                    seen.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
                }
                assert!(!seen.contains(token), "{}: the token leaked verbatim", h.name());
                assert!(
                    !unescape_json_escapes(&seen).contains(token),
                    "{}: the token leaked escaped: {seen}",
                    h.name()
                );
            });
        }
    });
}
