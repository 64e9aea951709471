//! Process-level tests of the built Codex hook binaries in server mode
//! (`PRELOOP_URL` + `PRELOOP_TOKEN`) against the loopback fake Preloop
//! server, fed the real 0.169.0 payloads.

use crate::common::*;
use preloop_codex::Event;
use preloop_testkit::hooks;
use preloop_testkit::{FakeServer, FaultSpec};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn session_start_and_first_prompt_register_and_carry() {
    let cwd = "/tmp/codex-e2e/20261202-092115-baseline-qEY2/proj";
    let (server, home, session) = hooks::server_start_registers::<Codex>("s-start", "codex_cli", cwd);
    // A note sent now reaches the first prompt, which also titles the session.
    hooks::server_first_prompt_registers::<Codex>(&server, &home, &session, Event::UserPromptSubmit, "say hi");
}

#[test]
fn pre_tool_use_deny_carries_the_note_too() {
    let (server, home, session) = hooks::started_on_server::<Codex>("s-deny");
    server.set_tool_enabled("Bash", false);
    let id = server.send_to_session(&session, "do not touch prod");
    server.clear_requests();
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("PreToolUse.json", &session));
    let out = out.expect("deny");
    assert_eq!(out.pointer("/hookSpecificOutput/permissionDecision"), Some(&json!("deny")));
    assert_eq!(out.pointer("/hookSpecificOutput/permissionDecisionReason"), Some(&json!("Tool blocked in Preloop")));
    assert_eq!(ids_in(&context_of(&Some(out)).unwrap()), vec![id.clone()]);
    assert_eq!(
        server.note_state(&id),
        ("delivered".into(), Some("pre_tool_use".into()), None),
        "immediate claim on pre_tool_use"
    );
    let body = hooks::the_one_pre_tool_check(&server, "codex_cli", "Bash");
    assert_eq!(body["hook_event_name"], json!("PreToolUse"));
    assert_eq!(body["tool_input"], json!({"command": "echo hi"}));
    assert_eq!(body["model"], json!("mock-model"));

    // An allow (no rule) prints nothing: Codex's own flow stays in charge.
    server.set_tool_enabled("Bash", true);
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("PreToolUse.json", &session));
    assert!(out.is_none());
}

/// PermissionRequest: the server defers its note; Codex takes no context
/// there, so it is spooled, carried by the next PreToolUse, and acked only
/// after that hook's stdout was written.
#[test]
fn permission_request_spools_and_the_next_pre_tool_use_carries_and_acks() {
    let (server, home, session) = hooks::started_on_server::<Codex>("s-spool");
    server.set_native_tool_approvals(&server.agent_id(), true); // escalations auto-approve
    let id = server.send_to_session(&session, "the schema changed; regenerate the client");
    server.clear_requests();
    let (out, _) = home.run(Event::PermissionRequest, &fixture_for("PermissionRequest.json", &session));
    assert_eq!(
        out,
        Some(json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}))
    );
    let calls = server.hook_calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].1["evaluation_phase"], json!("permission_request"));
    assert_eq!(calls[0].1["hook_event_name"], json!("PermissionRequest"));
    assert_eq!(server.note_state(&id).0, "claimed", "deferred: not delivered yet");
    assert_eq!(home.run_state(&session)["spool"][0]["deferred"], json!(true));

    // The next PreToolUse carries it; hold its ack for a while to see that
    // stdout is complete before the ack is sent.
    server.set_fault(FaultSpec::route("/api/v1/agents/notes/ack").delay(Duration::from_millis(800)));
    server.clear_requests();
    let mut child = Command::new(bin(Event::PreToolUse))
        .env_clear()
        .envs(home.env.iter().cloned())
        .env("PRELOOP_HOME", &home.dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(fixture_for("PreToolUse.json", &session).to_string().as_bytes()).unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let out = check_stdout(Event::PreToolUse, &line);
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id.clone()]);
    assert!(child.try_wait().unwrap().is_none(), "still running: the ack comes after the output");
    assert_eq!(server.note_state(&id).0, "claimed", "no receipt before the ack");
    assert!(child.wait().unwrap().success());
    assert_eq!(server.note_state(&id).0, "delivered");
    let calls = server.hook_calls();
    assert_eq!(calls.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>(), vec!["permission-check", "notes/ack"]);
    assert_eq!(calls[1].1, json!({"note_ids": [id], "session_id": session}));
    assert!(home.run_state(&session)["spool"].as_array().unwrap().is_empty());
}

#[test]
fn permission_request_waits_for_the_human() {
    let (server, home, session) = hooks::started_on_server::<Codex>("s-human");
    for (approve, expected) in
        [(true, json!({"behavior": "allow"})), (false, json!({"behavior": "deny", "message": "not today"}))]
    {
        let before = server.approvals().len();
        let payload = fixture_for("PermissionRequest.json", &session);
        let h = std::thread::spawn({
            let dir = home.dir.clone();
            let env = home.env.clone();
            move || {
                let home = Home { dir, env };
                let r = home.run(Event::PermissionRequest, &payload);
                std::mem::forget(home); // the outer Home owns the directory
                r
            }
        });
        let approval = wait_for(Duration::from_secs(10), "an approval request", || {
            let a = server.approvals();
            (a.len() > before).then(|| a[0]["id"].as_str().unwrap().to_string())
        });
        std::thread::sleep(Duration::from_millis(300));
        assert!(!h.is_finished(), "the hook blocks while the human decides");
        server.decide(&approval, approve, (!approve).then_some("not today")).unwrap();
        let (out, _) = h.join().unwrap();
        assert_eq!(out.unwrap().pointer("/hookSpecificOutput/decision"), Some(&expected));
    }
    // No answer in time: the server's timed-out deny.
    server.set_approval_timeout(Duration::from_millis(300));
    let (out, _) = home.run(Event::PermissionRequest, &fixture_for("PermissionRequest.json", &session));
    assert_eq!(out.unwrap().pointer("/hookSpecificOutput/decision/behavior"), Some(&json!("deny")));
}

#[test]
fn unreachable_server_fails_closed_on_permission_request_only() {
    let home = Home::dead_server("s-dead");
    let session = unique_session("dd");
    let denied = hooks::unreachable_server_fails_open::<Codex>(&home, &session, &[Event::PermissionRequest]);
    // PermissionRequest fails closed by default.
    let out = &denied[0];
    assert_eq!(out.pointer("/hookSpecificOutput/decision/behavior"), Some(&json!("deny")));
    let msg = out.pointer("/hookSpecificOutput/decision/message").unwrap().as_str().unwrap();
    assert!(msg.contains("could not check") && msg.contains("fail-closed"), "{msg}");
    // The documented setting opens it.
    let home = home.with_env("PRELOOP_PERMISSION_REQUEST_ON_ERROR", "open");
    let (out, _) = home.run(Event::PermissionRequest, &fixture_for("PermissionRequest.json", &session));
    assert!(out.is_none(), "fail open: Codex's own approval flow decides");
    // PreToolUse can be made fail-closed the same way.
    let home = home.with_env("PRELOOP_PRE_TOOL_USE_ON_ERROR", "deny");
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("PreToolUse.json", &session));
    assert_eq!(out.unwrap().pointer("/hookSpecificOutput/permissionDecision"), Some(&json!("deny")));
}

#[test]
fn server_errors_fail_closed_on_permission_request() {
    let (server, home, session) = hooks::started_on_server::<Codex>("s-500");
    server.set_fault(FaultSpec::route("/api/v1/agents/permission-check").status(500, None));
    let (out, _) = home.run(Event::PermissionRequest, &fixture_for("PermissionRequest.json", &session));
    assert_eq!(out.unwrap().pointer("/hookSpecificOutput/decision/behavior"), Some(&json!("deny")));
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("PreToolUse.json", &session));
    assert!(out.is_none(), "PreToolUse fails open by default");
    server.clear_faults();
    server.set_fault(FaultSpec::route("/api/v1/agents/permission-check").garbage());
    let (out, _) = home.run(Event::PermissionRequest, &fixture_for("PermissionRequest.json", &session));
    assert_eq!(out.unwrap().pointer("/hookSpecificOutput/decision/behavior"), Some(&json!("deny")));
}

#[test]
fn stop_rescues_are_capped_and_turn_ends_reported() {
    let (server, home, session) = hooks::started_on_server::<Codex>("s-stop");
    let stop = fixture_for("Stop.json", &session);
    let again = fixture_for("Stop.stop_hook_active.json", &session);
    let mut stops = 0;
    for round in 1..=4 {
        let id = server.send_to_session(&session, &format!("late note {round}"));
        let (out, _) = home.run(Event::Stop, &stop);
        stops += 1;
        if round <= 3 {
            let out = out.unwrap_or_else(|| panic!("rescue {round}"));
            assert_eq!(out["decision"], json!("block"));
            assert_eq!(ids_in(out["reason"].as_str().unwrap()), vec![id.clone()]);
            assert_eq!(server.note_state(&id), ("delivered".into(), Some("stop".into()), None));
            // stop_hook_active: never a second continuation, and no pull at all.
            server.clear_requests();
            assert!(home.run(Event::Stop, &again).0.is_none());
            stops += 1;
            assert_eq!(server.hook_routes(), vec!["session-event"]);
        } else {
            assert!(out.is_none(), "the fourth rescue is refused: Codex itself has no cap");
            assert_eq!(server.note_state(&id).0, "pending");
        }
    }
    let _ = stops;
    let events: Vec<Value> =
        server.hook_calls().into_iter().filter(|(r, _)| r == "session-event").map(|(_, b)| b).collect();
    assert!(!events.is_empty());
    for e in events {
        assert_eq!(e, json!({"session_id": session, "hook_event_name": "Stop", "source": "codex_cli"}));
    }
}

/// Build a session that holds one deferred (PermissionRequest) note in its
/// spool and one pending note on the server.
fn session_with_spool(server: &FakeServer, home: &Home, tag: &str) -> (String, String, String) {
    let session = unique_session(tag);
    home.run(Event::SessionStart, &fixture_for("SessionStart.json", &session));
    server.set_native_tool_approvals(&server.agent_id(), true);
    let spooled = server.send_to_session(&session, "spooled by PermissionRequest");
    home.run(Event::PermissionRequest, &fixture_for("PermissionRequest.json", &session));
    assert_eq!(server.note_state(&spooled).0, "claimed");
    let pending = server.send_to_session(&session, "never pulled");
    (session, spooled, pending)
}

/// Codex kills SessionEnd ~0.96 s after it spawned it.
const CODEX_KILL: Duration = Duration::from_millis(960);

/// Where the hook must hand off before Codex's kill, that kill measured
/// from the spawn is a margin no code controls: fork and exec of the debug
/// binary alone took up to 0.75 s at load 40 beside a cold `cargo build`
/// (docs/hardening.md, round five). There the kill comes later, and the
/// hand-off is held to its own clock instead ([`assert_handed_off`]: under
/// 500 ms, 0 ms measured).
const KILL_AFTER_THE_SPAWN: Duration = Duration::from_secs(5);

/// Run SessionEnd the way Codex does: kill it if it is still running
/// `kill_after` the spawn (and the process group with it, as `timeout`
/// would on exit).
fn run_session_end_like_codex(home: &Home, session: &str, kill_after: Duration) -> (String, Duration, bool) {
    let started = Instant::now();
    let mut child = Command::new(bin(Event::SessionEnd))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(home.env.iter().cloned())
        .env("PRELOOP_HOME", &home.dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(fixture_for("SessionEnd.json", session).to_string().as_bytes()).unwrap();
    let killed = loop {
        if child.try_wait().unwrap().is_some() {
            break false;
        }
        if started.elapsed() >= kill_after {
            let _ = child.kill();
            break true;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = started.elapsed();
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    let _ = child.wait();
    // Codex exiting right after SessionEnd: the hook's process group goes too.
    let _ = Command::new("kill").args(["-9", "--", &format!("-{}", child.id())]).stderr(Stdio::null()).status();
    (stdout, elapsed, killed)
}

use std::os::unix::process::CommandExt;

/// The SessionEnd hook handed off to its worker: its log line says
/// `outcome=detached`, and by its own clock (`ms=`) it took well under
/// Codex's ~0.96 s kill (no call is made before the hand-off: 0 ms by its
/// own clock at load 8-11 beside a cold `cargo build`). `wall` (the run,
/// fork and exec of the debug binary included, which a loaded machine
/// stretches and no code controls) only has a sanity bound
/// (docs/hardening.md, "Tests with a wall-clock bound").
fn assert_handed_off(home: &Home, wall: Duration) {
    let log = home.log();
    let line = log_line_of(&log, "SessionEnd");
    assert!(line.contains("outcome=detached"), "handed off: {line}");
    let took = logged_ms(line);
    assert!(took < 500, "hand-off took {took} ms by the hook's own clock: {line}");
    assert!(wall < Duration::from_secs(10), "the run took {wall:?}");
}

/// A slow network path in front of the fake: every chunk the client sends
/// reaches the server only `latency` later, and not at all if the client has
/// gone (timed out, killed) by then. Answers flow back at once.
struct SlowLink {
    url: String,
}

impl SlowLink {
    fn start(upstream: &str, latency: Duration) -> SlowLink {
        let upstream = upstream.trim_start_matches("http://").to_string();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { continue };
                let upstream = upstream.clone();
                std::thread::spawn(move || {
                    use std::io::Read;
                    let mut server: Option<std::net::TcpStream> = None;
                    let mut buf = [0u8; 16384];
                    loop {
                        let n = match client.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        std::thread::sleep(latency);
                        // Still there? (EOF: the client gave up; drop the chunk.)
                        let _ = client.set_nonblocking(true);
                        let mut probe = [0u8; 1];
                        let gone = matches!(client.peek(&mut probe), Ok(0));
                        let _ = client.set_nonblocking(false);
                        if gone {
                            break;
                        }
                        if server.is_none() {
                            let Ok(s) = std::net::TcpStream::connect(&upstream) else { break };
                            let (mut from, mut to) = (s.try_clone().unwrap(), client.try_clone().unwrap());
                            std::thread::spawn(move || {
                                let _ = std::io::copy(&mut from, &mut to);
                                let _ = to.shutdown(std::net::Shutdown::Both);
                            });
                            server = Some(s);
                        }
                        if server.as_mut().unwrap().write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    if let Some(s) = server {
                        let _ = s.shutdown(std::net::Shutdown::Write);
                    }
                });
            }
        });
        SlowLink { url }
    }
}

/// The proof the issue asks for, part 1: behind a 700 ms link, the
/// spool_dropped ack and the session-end receipt cannot fit in Codex's ~1 s
/// in-process (the hook is killed or gives up with its requests still in
/// flight, and they never arrive); the detached worker delivers both.
#[test]
fn session_end_behind_a_slow_link_needs_the_detached_worker() {
    let latency = Duration::from_millis(700);
    for detach in [false, true] {
        let server = FakeServer::start();
        let link = SlowLink::start(&server.url(), latency);
        let mut home = Home::for_server(if detach { "s-link-detached" } else { "s-link-inline" }, &server);
        if !detach {
            home = home.with_env(preloop_shared::detach::DETACH_ENV, "0");
        }
        let (session, spooled, pending) = session_with_spool(&server, &home, if detach { "ld" } else { "li" });
        let home = home.with_env("PRELOOP_URL", &link.url);
        server.clear_requests();
        let kill_after = if detach { KILL_AFTER_THE_SPAWN } else { CODEX_KILL };
        let (stdout, elapsed, killed) = run_session_end_like_codex(&home, &session, kill_after);
        assert_eq!(stdout, "", "SessionEnd prints nothing");
        if !detach {
            // Killed at 960 ms (Codex's bound, simulated above) or done by
            // then; either way nothing may reach the server.
            std::thread::sleep(Duration::from_millis(2500));
            assert!(
                server.hook_routes().is_empty(),
                "in-process: nothing reached the server ({:?}, killed: {killed})",
                server.hook_routes()
            );
            assert_eq!(server.note_state(&spooled).0, "claimed", "in-process: no spool_dropped receipt");
            assert_eq!(server.note_state(&pending).0, "pending", "in-process: no session-end receipt");
            continue;
        }
        assert!(!killed, "the hook exits long before Codex's kill ({elapsed:?})");
        assert_handed_off(&home, elapsed);
        wait_for(Duration::from_secs(15), "the session-end receipt", || {
            (server.note_state(&pending).0 == "undeliverable").then_some(())
        });
        assert_eq!(
            server.note_state(&spooled),
            ("undeliverable".into(), Some("pre_tool_use".into()), Some("spool_dropped".into()))
        );
        assert_eq!(server.note_state(&pending), ("undeliverable".into(), None, Some("session_ended".into())));
        let calls = server.hook_calls();
        let order: Vec<&str> = calls.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(order, vec!["notes/ack", "session-end"], "spool_dropped first, so the sender sees it");
        assert_eq!(
            calls[0].1,
            json!({"note_ids": [spooled], "session_id": session, "undeliverable_reason": "spool_dropped"})
        );
        assert_eq!(calls[1].1, json!({"external_session_id": session, "reason": "other"}));
        let log = wait_for(Duration::from_secs(5), "the worker's log line", || {
            let log = home.log();
            log.lines().find(|l| l.contains("SessionEnd:detached")).map(str::to_string)
        });
        assert!(
            log.contains("outcome=ok")
                && !log.contains("failed")
                && log.contains("marked undeliverable (session_ended)"),
            "the worker got its answers: {log}"
        );
        assert!(home.log().contains("outcome=detached"));
        // The session file records the end; the private state is gone.
        let f: Value =
            serde_json::from_str(&std::fs::read_to_string(home.dir.join(format!("sessions/{session}.json"))).unwrap())
                .unwrap();
        assert_eq!(f["end_reason"], json!("other"));
        assert_eq!(home.run_state(&session), Value::Null);
    }
}

/// Part 2: a server that is slow to answer (700 ms per call). In-process the
/// hook cannot get its answers within the budget (killed, or both calls
/// time out); the detached worker gets both, in order.
#[test]
fn session_end_against_a_slow_server_is_confirmed_only_when_detached() {
    let slow = Duration::from_millis(700);
    for detach in [false, true] {
        let server = FakeServer::start();
        let mut home = Home::for_server(if detach { "s-slow-detached" } else { "s-slow-inline" }, &server);
        if !detach {
            home = home.with_env(preloop_shared::detach::DETACH_ENV, "0");
        }
        let (session, spooled, pending) = session_with_spool(&server, &home, if detach { "sd" } else { "si" });
        server.clear_requests();
        server.set_fault(FaultSpec::route("/api/v1/agents/*").delay(slow));
        let kill_after = if detach { KILL_AFTER_THE_SPAWN } else { CODEX_KILL };
        let (stdout, elapsed, killed) = run_session_end_like_codex(&home, &session, kill_after);
        assert_eq!(stdout, "");
        if !detach {
            let log = home.log();
            let line = log.lines().rev().find(|l| l.contains(" SessionEnd ")).unwrap_or_default();
            assert!(
                killed || (line.contains("spool_dropped ack failed") && line.contains("error=\"unreachable")),
                "in-process: no answer within the budget ({elapsed:?}): {line}"
            );
            continue;
        }
        assert!(!killed, "the hook exits long before Codex's kill ({elapsed:?})");
        assert_handed_off(&home, elapsed);
        wait_for(Duration::from_secs(10), "the session-end receipt", || {
            (server.note_state(&pending).0 == "undeliverable").then_some(())
        });
        assert_eq!(server.note_state(&spooled).2.as_deref(), Some("spool_dropped"));
        assert_eq!(server.hook_routes(), vec!["notes/ack", "session-end"]);
        let log = wait_for(Duration::from_secs(5), "the worker's log line", || {
            home.log().lines().find(|l| l.contains("SessionEnd:detached")).map(str::to_string)
        });
        assert!(log.contains("outcome=ok") && !log.contains("failed"), "{log}");
    }
}

/// On a responsive server the detached SessionEnd ends the session too, and
/// bad input never leaves a worker behind.
#[test]
fn session_end_fast_server_and_bad_input() {
    let (server, home, session) = hooks::started_on_server::<Codex>("s-end-fast");
    let pending = server.send_to_session(&session, "never pulled");
    let (out, r) = home.run(Event::SessionEnd, &fixture_for("SessionEnd.json", &session));
    assert!(out.is_none());
    assert_handed_off(&home, r.elapsed);
    wait_for(Duration::from_secs(10), "session-end", || {
        (server.note_state(&pending).0 == "undeliverable").then_some(())
    });
    server.clear_requests();
    for bad in [&b""[..], b"{", br#"{"hook_event_name":"SessionEnd"}"#] {
        let r = home.run_raw(Event::SessionEnd, bad);
        assert_eq!((r.code(), r.out().as_str()), (Some(0), ""));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(server.hook_routes().is_empty(), "no call for a payload the hook cannot use");
}

/// The detached worker, which nothing waits for, makes its session-end call
/// again when a loaded server did not answer in time (the end is a no-op the
/// second time on the server): the session still ends, and its pending note
/// becomes undeliverable instead of staying pending (the e2e SessionEnd load
/// suite saw one of 64 workers give up after one timed-out call).
#[test]
fn the_detached_worker_tries_its_session_end_again_after_a_timeout() {
    let (server, home, session) = hooks::started_on_server::<Codex>("s-end-retry");
    let home = home.with_env("PRELOOP_CALL_TIMEOUT_MS", "500");
    let pending = server.send_to_session(&session, "never pulled");
    server.set_fault(FaultSpec::route("/api/v1/agents/session-end").hang().times(1));
    let (out, _) = home.run(Event::SessionEnd, &fixture_for("SessionEnd.json", &session));
    assert!(out.is_none());
    wait_for(Duration::from_secs(30), "the session-end receipt", || {
        (server.note_state(&pending).0 == "undeliverable").then_some(())
    });
    let log = wait_for(Duration::from_secs(10), "the worker's log line", || {
        home.log().lines().find(|l| l.contains("SessionEnd:detached")).map(str::to_string)
    });
    assert!(
        log.contains("outcome=ok") && log.contains("session-end attempt 1 failed") && log.contains("trying again"),
        "the worker tried again and ended the session: {log}"
    );
    let ends = server.hook_routes().iter().filter(|r| r.as_str() == "session-end").count();
    assert_eq!(ends, 2, "one timed-out call, one that ended the session");
}

/// A payload the hook cannot use never reaches the server; a gate then
/// answers by its fail policy (PermissionRequest: deny), never by skipping
/// the check silently.
#[test]
fn bad_stdin_never_reaches_the_server() {
    let server = FakeServer::start();
    let home = Home::for_server("s-bad", &server);
    for event in Event::ALL {
        for bad in [&b""[..], b"{", b"[1]", br#"{"session_id":"x","hook_event_name":"Bogus"}"#] {
            let r = home.run_raw(event, bad);
            assert_eq!(r.code(), Some(0), "{}", event.name());
            if event == Event::PermissionRequest {
                let v = check_stdout(event, &r.out()).expect("a fail-closed deny");
                assert_eq!(v.pointer("/hookSpecificOutput/decision/behavior"), Some(&json!("deny")));
            } else {
                assert_eq!(r.out(), "", "{}: fail-open or no output", event.name());
            }
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(server.requests().is_empty());
}

/// A sub-agent's PreToolUse is still checked (a deny holds there), but the
/// note the server hands back is kept for the session's own agent.
#[test]
fn sub_agent_tool_calls_are_checked_but_carry_nothing() {
    let (server, home, session) = hooks::started_on_server::<Codex>("s-sub");
    let id = server.send_to_session(&session, "for the main agent");
    let mut sub = fixture_for("PreToolUse.json", &session);
    sub["agent_id"] = json!("01a2367a-bc19-76d2-a660-919580b8549c");
    sub["agent_type"] = json!("default");
    server.set_tool_enabled("Bash", false);
    let (out, _) = home.run(Event::PreToolUse, &sub);
    let out = out.expect("deny");
    assert_eq!(out.pointer("/hookSpecificOutput/permissionDecision"), Some(&json!("deny")));
    assert!(out.pointer("/hookSpecificOutput/additionalContext").is_none());
    assert_eq!(home.run_state(&session)["spool"].as_array().unwrap().len(), 1);
    server.set_tool_enabled("Bash", true);
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("PreToolUse.json", &session));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id]);
}

/// If the spool cannot be written, the PermissionRequest decision still goes
/// out and the deferred note is reported `spool_dropped` rather than lost.
#[test]
fn unwritable_spool_keeps_the_decision_and_reports_the_drop() {
    let (server, home, session) = hooks::started_on_server::<Codex>("s-nospool");
    server.set_native_tool_approvals(&server.agent_id(), true);
    let id = server.send_to_session(&session, "nowhere to keep this");
    // The private state directory is not a directory any more.
    std::fs::remove_dir_all(home.dir.join("run")).unwrap();
    std::fs::write(home.dir.join("run"), b"").unwrap();
    let (out, _) = home.run(Event::PermissionRequest, &fixture_for("PermissionRequest.json", &session));
    assert_eq!(out.unwrap().pointer("/hookSpecificOutput/decision/behavior"), Some(&json!("allow")));
    assert_eq!(
        server.note_state(&id),
        ("undeliverable".into(), Some("pre_tool_use".into()), Some("spool_dropped".into()))
    );
}

/// D-3's sibling: `codex exec resume` right after a run. The run's
/// SessionEnd hands off to a detached worker whose `session-end` is slow;
/// the resume's SessionStart comes first. The worker's end must not land
/// after the resume's start (ending the resumed session on the server) nor
/// remove the resumed run's state (every later hook would stay neutral):
/// the SessionStart waits for the worker, so a note sent to the resumed
/// session is carried by its next prompt.
#[test]
fn a_resume_right_after_the_end_is_not_ended_by_the_end_s_worker() {
    let (server, home, session) = hooks::started_on_server::<Codex>("d3-resume");
    server.set_fault(FaultSpec::route("/api/v1/agents/session-end").delay(Duration::from_millis(1200)));
    let t0 = Instant::now();
    home.run(Event::SessionEnd, &fixture_for("SessionEnd.json", &session));
    assert_handed_off(&home, t0.elapsed());
    // The resume: a SessionStart of the same session, at once.
    home.run(Event::SessionStart, &fixture_for("SessionStart.json", &session));
    // Let any worker finish before the resumed run goes on.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !home.log().contains("SessionEnd:detached") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(home.log().contains("SessionEnd:detached"), "the worker never finished: {}", home.log());
    let id = server.send_to_session(&session, "the resumed run still listens");
    let (out, _) = home.run(Event::UserPromptSubmit, &fixture_for("UserPromptSubmit.json", &session));
    assert_eq!(
        context_of(&out).map(|c| ids_in(&c)),
        Some(vec![id.clone()]),
        "the resumed session's prompt carries the note; log:\n{}",
        home.log()
    );
    assert_eq!(server.note_state(&id).0, "delivered");
    let ends = server.requests().iter().filter(|r| r.path.ends_with("/session-end")).count();
    let starts_after_end = server
        .requests()
        .iter()
        .skip_while(|r| !r.path.ends_with("/session-end"))
        .filter(|r| r.path.ends_with("/session-start"))
        .count();
    assert_eq!(ends, 1);
    assert!(starts_after_end >= 1, "the resume registered after the end reached the server");
}
