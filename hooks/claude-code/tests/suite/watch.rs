//! `preloop-claude-code-watch`, the background watcher that wakes an idle
//! session, run as Claude Code runs it (an async + asyncRewake hook: stdin
//! payload, exit 2 with the block on stderr), on the local inbox and against
//! the fake server.

use crate::common::*;
use preloop_shared::operator::ReceiptState;
use preloop_testkit::fake_server::FakeServer;
use serde_json::{Value, json};
use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const S: &str = "5b1f7c2e-0d4a-4c1e-9a77-1f0c3b2d9e10";

/// Start a watcher as Claude Code would on Stop; stdin is written and closed.
fn spawn_watch(home: &Home, session: &str, env: &[(&str, &str)]) -> Child {
    spawn_watch_with(home, session, env, Stdio::piped())
}

fn spawn_watch_with(home: &Home, session: &str, env: &[(&str, &str)], stderr: Stdio) -> Child {
    let mut c = command("Watch", home.path(), env);
    c.stderr(stderr);
    let mut child = c.spawn().unwrap();
    let mut sin = child.stdin.take().unwrap();
    use std::io::Write;
    sin.write_all(payload("Stop", session).to_string().as_bytes()).unwrap();
    drop(sin);
    child
}

/// How long a test waits for a watcher to exit before it fails. Generous:
/// [`wait_exit`] returns as soon as the child exits, so this costs a passing
/// test nothing, while each case's regression (a watcher that stays until a
/// 30 s poll or its one-hour lifetime) still cannot pass it. The 1-3 s it
/// replaces held a watcher's start, its polls and this test's sampling to
/// a margin no code controls (docs/hardening.md, "Tests with a wall-clock
/// bound").
const EXIT_WAIT: Duration = Duration::from_secs(10);

fn wait_exit(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    child.stderr.take().unwrap().read_to_string(&mut s).unwrap();
    s
}

fn stdout_of(child: &mut Child) -> String {
    let mut s = String::new();
    child.stdout.take().unwrap().read_to_string(&mut s).unwrap();
    s
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn lock_file(home: &Home, session: &str) -> std::path::PathBuf {
    preloop_claude_code::watch::lock_path(home.path(), session)
}

/// Wait until the watcher holds its lock (its pid is in the lock file).
fn wait_locked(home: &Home, session: &str, child: &Child) {
    let until = Instant::now() + EXIT_WAIT;
    while Instant::now() < until {
        if std::fs::read_to_string(lock_file(home, session)).is_ok_and(|t| t.trim() == child.id().to_string()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the watcher never took its lock");
}

const FAST: [(&str, &str); 1] = [("PRELOOP_WATCH_POLL_MS", "50")];

#[test]
fn a_note_wakes_the_session_with_the_block_on_stderr_then_is_acked() {
    let home = started("cc", S);
    let mut w = spawn_watch(&home, S, &FAST);
    std::thread::sleep(Duration::from_millis(300));
    assert!(w.try_wait().unwrap().is_none(), "nothing pending: the watcher waits");
    let note = home.send(S, "Rebase on main before you push.");
    let t = Instant::now();
    let status = wait_exit(&mut w, EXIT_WAIT).expect("the watcher exits once the note is claimed");
    assert_eq!(status.code(), Some(2), "exit 2 wakes Claude");
    // Picked up at a poll (every 50 ms here), not at the lifetime's end (an
    // hour): a sanity bound, as the machine's load decides the rest.
    assert!(t.elapsed() < Duration::from_secs(5), "picked up at a poll: {:?}", t.elapsed());
    let err = stderr_of(&mut w);
    assert_eq!(ids_in(&err), vec![note.clone()], "the framed block on stderr: {err:?}");
    assert!(err.contains("Rebase on main before you push."));
    assert_eq!(stdout_of(&mut w), "", "nothing on stdout");
    assert_eq!(home.note_state(&note), ("delivered".into(), Some("stop".into()), None));
    assert!(
        home.log().lines().any(|l| l.contains(" Watch ") && l.contains("outcome=notes") && l.contains(&note)),
        "{}",
        home.log()
    );
    // Delivered once: the next hook finds nothing.
    assert_eq!(hook(&home, "PreToolUse", S), None);
}

/// A pipe whose buffer is already full: a write to it blocks until the test drains it.
fn full_pipe() -> (File, File) {
    let mut fds = [0; 2];
    // SAFETY: plain pipe/fcntl/write calls on descriptors we own.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        let flags = libc::fcntl(fds[1], libc::F_GETFL);
        libc::fcntl(fds[1], libc::F_SETFL, flags | libc::O_NONBLOCK);
        let buf = [b'x'; 4096];
        while libc::write(fds[1], buf.as_ptr().cast(), buf.len()) > 0 {}
        while libc::write(fds[1], buf.as_ptr().cast(), 1) > 0 {}
        libc::fcntl(fds[1], libc::F_SETFL, flags);
        (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1]))
    }
}

#[test]
fn the_receipt_turns_delivered_only_after_the_block_is_flushed() {
    let home = started("cc", S);
    let (mut read_end, write_end) = full_pipe();
    let mut w = spawn_watch_with(&home, S, &FAST, Stdio::from(write_end));
    wait_locked(&home, S, &w);
    let note = home.send(S, "Hold the release.");
    let until = Instant::now() + EXIT_WAIT;
    while home.receipt(&note).state == ReceiptState::Pending && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Claimed, and the write is stuck: not delivered yet.
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(home.receipt(&note).state, ReceiptState::Claimed, "no ack before the output is flushed");
    assert!(w.try_wait().unwrap().is_none());
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        read_end.read_to_end(&mut all).unwrap();
        String::from_utf8_lossy(&all).trim_start_matches('x').to_string()
    });
    assert_eq!(wait_exit(&mut w, EXIT_WAIT).and_then(|s| s.code()), Some(2));
    let err = reader.join().unwrap();
    assert_eq!(ids_in(&err), vec![note.clone()]);
    assert_eq!(home.receipt(&note).state, ReceiptState::Delivered);
}

#[test]
fn a_failed_write_puts_the_note_back_for_the_next_hook() {
    let home = started("cc", S);
    let mut w = spawn_watch(&home, S, &FAST);
    drop(w.stderr.take()); // Claude is not reading any more
    wait_locked(&home, S, &w);
    let note = home.send(S, "Use the staging DB.");
    assert_eq!(wait_exit(&mut w, EXIT_WAIT).and_then(|s| s.code()), Some(0), "no wake without the output");
    assert_eq!(home.receipt(&note).state, ReceiptState::Claimed);
    let out = hook(&home, "PreToolUse", S);
    assert_eq!(ids_in(&context(&out).unwrap()), vec![note.clone()], "carried from the spool");
    assert_eq!(home.receipt(&note).state, ReceiptState::Delivered);
}

#[test]
fn one_watcher_per_session() {
    let home = Home::new("cc");
    const OTHER: &str = "other-session-1";
    hook(&home, "SessionStart", S);
    hook(&home, "SessionStart", OTHER);
    let mut first = spawn_watch(&home, S, &FAST);
    wait_locked(&home, S, &first);
    let mut second = spawn_watch(&home, S, &FAST);
    // "At once": before any poll could matter (the lock says it is not
    // ours); one that stayed would wait out its lifetime.
    assert_eq!(wait_exit(&mut second, EXIT_WAIT).and_then(|s| s.code()), Some(0), "a second watcher leaves at once");
    assert_eq!(stderr_of(&mut second), "");
    let mut other = spawn_watch(&home, OTHER, &FAST);
    wait_locked(&home, OTHER, &other);
    assert!(
        first.try_wait().unwrap().is_none() && other.try_wait().unwrap().is_none(),
        "other sessions have their own"
    );
    assert_eq!(
        std::fs::read_to_string(lock_file(&home, S)).unwrap().trim(),
        first.id().to_string(),
        "the lock file names the watcher"
    );
    // One note, one wake.
    let note = home.send(S, "only once");
    assert_eq!(wait_exit(&mut first, EXIT_WAIT).and_then(|s| s.code()), Some(2));
    assert_eq!(ids_in(&stderr_of(&mut first)), vec![note]);
    assert!(other.try_wait().unwrap().is_none());
    kill(&mut other);
    assert!(home.log().contains("another watcher runs for this session"), "{}", home.log());
}

#[test]
fn headless_runs_and_watch_off_exit_at_once() {
    let home = started("cc", S);
    let note = home.send(S, "for the interactive session");
    for env in [[("CLAUDE_CODE_ENTRYPOINT", "sdk-cli")], [("PRELOOP_WATCH", "off")]] {
        // At once: no lock taken, nothing claimed (below); a watcher that
        // watched would stay its hour.
        let mut w = spawn_watch(&home, S, &env);
        assert_eq!(wait_exit(&mut w, EXIT_WAIT).and_then(|s| s.code()), Some(0), "{env:?}");
        assert_eq!(stderr_of(&mut w), "");
        assert!(!lock_file(&home, S).exists(), "{env:?}: no lock taken");
    }
    assert_eq!(home.receipt(&note).state, ReceiptState::Pending, "nothing claimed");
}

#[test]
fn session_end_stops_the_watcher() {
    let home = started("cc", S);
    // Slow polling, so only the SessionEnd signal can end it quickly.
    let slow = [("PRELOOP_WATCH_POLL_MS", "30000")];
    let mut w = spawn_watch(&home, S, &slow);
    wait_locked(&home, S, &w);
    let t = Instant::now();
    run("SessionEnd", home.path(), &[("CLAUDE_CODE_SESSION_ID", S)], &payload("SessionEnd", S));
    // What the code controls: SessionEnd signals the watcher (SIGTERM, not
    // an exit at a poll, which is 30 s away). The wall clock, SessionEnd's
    // run included, only has to stay under that poll.
    let status = wait_exit(&mut w, EXIT_WAIT).expect("gone well before its next poll");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    assert!(!lock_file(&home, S).exists(), "the lock file is removed");

    // Without CLAUDE_CODE_SESSION_ID in the environment: the stdin session id.
    hook(&home, "SessionStart", S);
    let mut w = spawn_watch(&home, S, &slow);
    wait_locked(&home, S, &w);
    hook(&home, "SessionEnd", S);
    let status = wait_exit(&mut w, EXIT_WAIT).expect("gone without the env variable too");
    assert_eq!(status.signal(), Some(libc::SIGTERM), "signalled without the env variable too");
}

#[test]
fn the_watcher_leaves_when_the_session_ends_or_claude_is_gone() {
    let home = started("cc", S);
    // The session ends without a signal (e.g. ended by another process).
    let mut w = spawn_watch(&home, S, &[("PRELOOP_WATCH_POLL_MS", "100")]);
    wait_locked(&home, S, &w);
    use preloop_shared::backend::Backend;
    home.inbox()
        .session_end(&preloop_shared::wire::SessionEndRequest { external_session_id: S.into(), reason: "other".into() })
        .unwrap();
    assert_eq!(wait_exit(&mut w, EXIT_WAIT).and_then(|s| s.code()), Some(0));
    assert!(home.log().contains("why=\"session ended\""), "{}", home.log());

    // Claude (CLAUDE_PID) goes away.
    const S2: &str = "s2-claude-goes";
    hook(&home, "SessionStart", S2);
    let mut claude = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let pid = claude.id().to_string();
    let mut w = spawn_watch(&home, S2, &[("PRELOOP_WATCH_POLL_MS", "100"), ("CLAUDE_PID", &pid)]);
    wait_locked(&home, S2, &w);
    std::thread::sleep(Duration::from_millis(300));
    assert!(w.try_wait().unwrap().is_none(), "stays while Claude runs");
    kill(&mut claude);
    // Noticed at a poll (100 ms), which the log line names; one that did not
    // notice would stay its hour.
    assert_eq!(wait_exit(&mut w, EXIT_WAIT).and_then(|s| s.code()), Some(0));
    assert!(home.log().contains("why=\"claude process gone\""), "{}", home.log());
}

#[test]
fn the_lifetime_is_bounded() {
    let home = started("cc", S);
    let t = Instant::now();
    let mut w = spawn_watch(&home, S, &[("PRELOOP_WATCH_POLL_MS", "100"), ("PRELOOP_WATCH_MAX_SECS", "1")]);
    assert_eq!(wait_exit(&mut w, EXIT_WAIT).and_then(|s| s.code()), Some(0));
    // What the code controls: it left for its lifetime (the log says so)
    // after that second by its own clock (ms=). The wall clock only has a
    // sanity bound: the default lifetime is an hour.
    let log = home.log();
    let line = log.lines().find(|l| l.contains(" Watch ")).unwrap_or_else(|| panic!("no Watch line: {log}"));
    assert!(line.contains("why=\"lifetime\""), "{line}");
    assert!(logged_ms(line) >= 1000, "a 1 s lifetime kept: {line}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[test]
fn a_stop_rescue_and_the_watcher_never_deliver_the_same_note_twice() {
    let home = Home::new("cc");
    for i in 0..8 {
        let session = format!("race-{i}");
        hook(&home, "SessionStart", &session);
        let note = home.send(&session, &format!("race note {i}"));
        // The watcher starts with the Stop hook, polling as fast as it can.
        let mut w = spawn_watch(&home, &session, &[("PRELOOP_WATCH_POLL_MS", "1"), ("PRELOOP_WATCH_MAX_SECS", "2")]);
        let stop = hook(&home, "Stop", &session);
        let status = wait_exit(&mut w, EXIT_WAIT).expect("gone by its 2 s lifetime");
        let by_stop = context(&stop).map(|c| ids_in(&c)).unwrap_or_default();
        let by_watch = if status.code() == Some(2) { ids_in(&stderr_of(&mut w)) } else { Vec::new() };
        let mut all = by_stop.clone();
        all.extend(by_watch.clone());
        assert_eq!(all, vec![note.clone()], "exactly one carrier (stop {by_stop:?}, watcher {by_watch:?})");
        assert_eq!(home.receipt(&note).state, ReceiptState::Delivered);
    }
}

// ----- server mode -------------------------------------------------------------

fn server_env(server: &FakeServer) -> Vec<(String, String)> {
    // SessionEnd runs in-process here (its detached worker has its own test).
    vec![
        ("PRELOOP_URL".into(), server.url()),
        ("PRELOOP_TOKEN".into(), server.runtime_token()),
        ("PRELOOP_SESSION_END_DETACH".into(), "0".into()),
    ]
}

fn as_refs(v: &[(String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

fn pending_calls(server: &FakeServer) -> Vec<Value> {
    server.requests().into_iter().filter(|r| r.path == "/api/v1/agents/notes/pending").filter_map(|r| r.body).collect()
}

/// Wait (at most `within`) for `n` polls, and return the gaps between them
/// as the fake read them. The watcher sleeps at least 0.9 × its interval
/// after a poll's answer before the next (`watch::jitter`), so a gap is
/// never shorter than that, however loaded the machine: a lower bound on a
/// gap is what the code controls. A loaded machine only lengthens gaps (and
/// delays the first poll, which is why polls are counted, not a window).
fn poll_gaps(server: &FakeServer, n: usize, within: Duration) -> Vec<Duration> {
    let at = wait_for(within, &format!("{n} polls"), || {
        let at: Vec<Instant> = server
            .requests()
            .into_iter()
            .filter(|r| r.path == "/api/v1/agents/notes/pending")
            .map(|r| r.at.expect("the fake times what it reads"))
            .collect();
        (at.len() >= n).then_some(at)
    });
    at[..n].windows(2).map(|g| g[1] - g[0]).collect()
}

#[test]
fn server_polling_backs_off_and_the_answer_is_the_claim() {
    let (home, server) = (Home::new("cc"), FakeServer::start());
    let mut env = server_env(&server);
    run("SessionStart", home.path(), &as_refs(&env), &payload("SessionStart", S));
    server.clear_requests();
    // 200 ms doubling to 800 ms: polls near 0.2, 0.6, 1.4, 2.2, 3.0, 3.8 s.
    env.push(("PRELOOP_WATCH_SERVER_POLL_MS".into(), "200".into()));
    env.push(("PRELOOP_WATCH_SERVER_POLL_MAX_MS".into(), "800".into()));
    env.push(("PRELOOP_WATCH_POLL_MS".into(), "50".into()));
    let mut w = spawn_watch(&home, S, &as_refs(&env));
    // Gaps of 400, 800, 800, 800 ms (±10 %); a fixed 200 ms interval would
    // make them 200. Each is at least 0.9 × its interval (what the code
    // controls); that it stops at the ceiling shows as one of the last three
    // under 1.44 s, where doubling on (1.6, 3.2, 6.4 s) has none, with 640 ms
    // for load to add to all three before that check could fail.
    let gaps = poll_gaps(&server, 5, Duration::from_secs(30));
    assert!(gaps[0] >= Duration::from_millis(360), "the interval doubled from 200 ms: {gaps:?}");
    assert!(gaps[1..].iter().all(|g| *g >= Duration::from_millis(720)), "backed off to the ceiling: {gaps:?}");
    assert!(gaps[1..].iter().min().unwrap() < &Duration::from_millis(1440), "and no further: {gaps:?}");
    let calls = pending_calls(&server);
    for b in &calls {
        assert_eq!(
            b,
            &json!({"channel": "hook", "event": "stop", "defer_delivery": true, "session_id": S}),
            "claims deferred, as a Stop delivery"
        );
    }
    assert!(server.requests().iter().all(|r| r.path == "/api/v1/agents/notes/pending"), "an idle watcher only polls");

    let note = server.send_note(json!({"external_session_id": S, "text": "Ship it after the review."}))["note_id"]
        .as_str()
        .unwrap()
        .to_string();
    let status = wait_exit(&mut w, EXIT_WAIT).expect("claimed at the next poll (<= 880 ms, then exits)");
    assert_eq!(status.code(), Some(2));
    assert_eq!(ids_in(&stderr_of(&mut w)), vec![note.clone()]);
    let reqs = server.requests();
    let last_two: Vec<&str> = reqs.iter().rev().take(2).map(|r| r.path.as_str()).collect();
    assert_eq!(
        last_two,
        ["/api/v1/agents/notes/ack", "/api/v1/agents/notes/pending"],
        "the claim, then the ack after the output"
    );
    let r = server.receipt(&note);
    assert_eq!((r["state"].as_str(), r["delivery_event"].as_str()), (Some("delivered"), Some("stop")));
}

/// Issue 34 item 2: with the default cadence (2 s doubling to 30 s) a
/// watcher that just started (its turn just ended) polls no further than
/// 10 s apart (`preloop_shared::watch::ACTIVE_MAX`): polls near 2, 6, 14, 24
/// s, where the plain backoff made the fourth wait 16 s (near 30 s).
#[test]
fn a_fresh_watcher_polls_at_most_ten_seconds_apart() {
    let (home, server) = (Home::new("cc"), FakeServer::start());
    let env = server_env(&server);
    run("SessionStart", home.path(), &as_refs(&env), &payload("SessionStart", S));
    server.clear_requests();
    let mut w = spawn_watch(&home, S, &as_refs(&env));
    let gaps = poll_gaps(&server, 4, Duration::from_secs(60));
    let _ = w.kill();
    let _ = w.wait();
    // Timed where the fake read the polls, so this thread's sampling adds
    // nothing. Jitter is ±10 %: 8 s doubles to 10 s (at most 11 s), not to
    // 16 s (at least 14.4 s, what the code's sleep guarantees); the bound
    // sits between, 3 s above what the code allows for a loaded machine to
    // add to one poll's round trip (tens of ms measured under load).
    assert!(gaps[2] < Duration::from_millis(14_000), "the fourth poll waited {:?}: {gaps:?}", gaps[2]);
    assert!(gaps[1] >= Duration::from_millis(7_200), "still doubling before the ceiling: {gaps:?}");
}

#[test]
fn server_mode_watcher_stops_when_the_token_is_refused_or_the_session_ends() {
    let (home, server) = (Home::new("cc"), FakeServer::start());
    let mut env = server_env(&server);
    run("SessionStart", home.path(), &as_refs(&env), &payload("SessionStart", S));
    env.push(("PRELOOP_WATCH_SERVER_POLL_MS".into(), "100".into()));
    env.push(("PRELOOP_WATCH_POLL_MS".into(), "50".into()));
    let mut w = spawn_watch(&home, S, &as_refs(&env));
    wait_locked(&home, S, &w);
    let mut end_env = as_refs(&env);
    end_env.push(("CLAUDE_CODE_SESSION_ID", S));
    run("SessionEnd", home.path(), &end_env, &payload("SessionEnd", S));
    assert!(wait_exit(&mut w, EXIT_WAIT).is_some());
    let polls_after_end = {
        let reqs = server.requests();
        let end = reqs.iter().position(|r| r.path == "/api/v1/agents/session-end").unwrap();
        reqs[end..].iter().filter(|r| r.path == "/api/v1/agents/notes/pending").count()
    };
    assert_eq!(polls_after_end, 0, "no poll after the session ended");

    // A revoked token: the watcher gives up instead of polling for an hour.
    const S2: &str = "server-revoked";
    let env = server_env(&server);
    run("SessionStart", home.path(), &as_refs(&env), &payload("SessionStart", S2));
    assert!(server.revoke_token(&server.runtime_token()));
    let mut env2 = env.clone();
    env2.push(("PRELOOP_WATCH_SERVER_POLL_MS".into(), "100".into()));
    let mut w = spawn_watch(&home, S2, &as_refs(&env2));
    assert_eq!(wait_exit(&mut w, EXIT_WAIT).and_then(|s| s.code()), Some(0));
    assert!(home.log().contains("server refused the watcher"), "{}", home.log());
}
