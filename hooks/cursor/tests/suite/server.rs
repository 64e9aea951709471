//! Process-level tests: the built binaries against the fake Preloop server
//! (`preloop_testkit::FakeServer`, a loopback fake of the 0.17.1 hook routes).

use crate::common::*;
use preloop_cursor::Event;
use preloop_testkit::{FakeServer, FaultSpec, RecordedRequest};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn home_for(server: &FakeServer, tag: &str) -> Home {
    Home::new(tag)
        .with_env("PRELOOP_URL", &server.url())
        .with_env("PRELOOP_TOKEN", &server.runtime_token())
        .with_env("PRELOOP_CONNECT_TIMEOUT_MS", "1000")
        .with_env("PRELOOP_CALL_TIMEOUT_MS", "3000")
        .with_env("PRELOOP_PERMISSION_TIMEOUT_SECS", "20")
}

/// Requests to one hook route (`permission-check`, `notes/ack`...), in order.
fn calls(server: &FakeServer, route: &str) -> Vec<RecordedRequest> {
    let path = format!("/api/v1/agents/{route}");
    server.requests().into_iter().filter(|r| r.path == path).collect()
}

fn body(r: &RecordedRequest) -> Value {
    r.body.clone().unwrap_or(Value::Null)
}

/// Register the session the way Cursor starts one (IDE: no startup claim).
fn start(home: &Home, s: &str) -> Value {
    home.run(Event::SessionStart, &session_start(s, false))
}

/// A fresh fake, a home against it, and an IDE session started on it (with
/// what sessionStart printed).
fn started_with(tag: &str) -> (FakeServer, Home, String, Value) {
    let server = FakeServer::start();
    let home = home_for(&server, tag);
    let s = session(tag);
    let out = start(&home, &s);
    (server, home, s, out)
}

fn started(tag: &str) -> (FakeServer, Home, String) {
    let (server, home, s, _) = started_with(tag);
    (server, home, s)
}

#[test]
fn session_start_registers_exports_the_runtime_id_and_claims_in_the_cli() {
    // The session must exist before a note can name it: register, then send.
    let (server, home, s, out) = started_with("srv-ss");
    let rid = server.runtime_session_id(&server.agent_id(), &s).expect("registered");
    assert_eq!(out, json!({"env": {"PRELOOP_PARENT_SESSION_ID": rid}}));
    let reg = body(&calls(&server, "session-start")[0]);
    assert_eq!((reg["source"].as_str(), reg["cwd"].as_str()), (Some("cursor"), Some("/tmp/cursor-workspace")));
    assert!(calls(&server, "notes/pending").is_empty(), "the IDE's sessionStart claims nothing");
    let file = home.session_file(&s).expect("session file written in server mode");
    assert_eq!(
        (file.runtime_session_id.as_str(), file.mode.as_str(), file.agent_kind.as_str()),
        (rid.as_str(), "server", "cursor")
    );

    // The CLI's sessionStart (a resumed conversation, say) pulls.
    let note = server.send_to_session(&s, "Deploy to eu-west-1.");
    let out = home.run(Event::SessionStart, &session_start(&s, true));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![note.clone()]);
    let pull = body(&calls(&server, "notes/pending")[0]);
    assert_eq!(pull, json!({"channel": "hook", "event": "session_start", "defer_delivery": true, "session_id": s}));
    let r = server.receipt(&note);
    assert_eq!((r["state"].as_str(), r["delivery_event"].as_str()), (Some("delivered"), Some("session_start")));
}

#[test]
fn before_shell_deferral_spools_and_the_next_pre_tool_use_carries_and_acks() {
    let (server, home, s) = started("srv-defer");
    server.set_native_tool_approvals(&server.agent_id(), true); // escalations auto-approve at once
    let note = server.send_to_session(&s, "Use the staging cluster.");

    let out = home.run(Event::BeforeShellExecution, &shell(&s, "make deploy"));
    assert_eq!(out, json!({"permission": "allow"}), "no field the model reads: the note is not here");
    let check = body(&calls(&server, "permission-check")[0]);
    assert_eq!(check["tool_name"], "Shell");
    assert_eq!(check["tool_input"]["command"], "make deploy");
    assert_eq!(check["source"], "cursor");
    assert_eq!(check["hook_event_name"], "beforeShellExecution");
    assert_eq!(check["evaluation_phase"], "permission_request");
    assert_eq!(check["session_id"], json!(s));
    assert_eq!(server.note_state(&note).0, "claimed", "the server defers a cursor before* claim");
    let spool = home.run_state(&s)["spool"].clone();
    assert_eq!(spool.as_array().map(Vec::len), Some(1), "spooled: {spool}");
    assert!(calls(&server, "notes/ack").is_empty());

    let out = home.run(Event::PreToolUse, &pre_tool(&s, "make deploy"));
    assert_eq!(out["permission"], "allow");
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![note.clone()]);
    let checks = calls(&server, "permission-check");
    let pre = body(checks.last().unwrap());
    assert_eq!(
        (pre["hook_event_name"].as_str(), pre["evaluation_phase"].as_str()),
        (Some("preToolUse"), Some("pre_tool_use"))
    );
    let acks = calls(&server, "notes/ack");
    assert_eq!(acks.len(), 1);
    assert_eq!(body(&acks[0]), json!({"note_ids": [note.clone()], "session_id": s}));
    assert!(acks[0].seq > checks.last().unwrap().seq, "acked after the carrying call");
    assert_eq!(server.note_state(&note).0, "delivered");
    assert_eq!(home.run_state(&s)["spool"], json!([]));
    // Once: the next tool call is clean.
    assert_eq!(home.run(Event::PreToolUse, &pre_tool(&s, "ls")), json!({"permission": "allow"}));
}

#[test]
fn mcp_tool_input_is_decoded_and_its_note_spooled() {
    let (server, home, s) = started("srv-mcp");
    server.set_native_tool_approvals(&server.agent_id(), true);
    let note = server.send_to_session(&s, "Only read from Linear.");
    assert_eq!(home.run(Event::BeforeMcpExecution, &mcp(&s)), json!({"permission": "allow"}));
    let check = body(&calls(&server, "permission-check")[0]);
    assert_eq!((check["tool_name"].clone(), check["tool_input"]["limit"].clone()), (json!("list_issues"), json!(1)));
    assert_eq!(check["hook_event_name"], "beforeMCPExecution");
    assert_eq!(server.note_state(&note).0, "claimed");
    let mut v = fixture_for("preToolUse-5.json", &s);
    v["tool_input"] = json!({"limit": 1});
    let out = home.run(Event::PreToolUse, &v);
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![note.clone()]);
    assert_eq!(server.note_state(&note).0, "delivered");
}

#[test]
fn a_human_decline_on_a_before_hook_is_a_cursor_deny() {
    let (server, home, s) = started("srv-decline");
    let payload = shell(&s, "terraform apply");
    let stdin = serde_json::to_vec(&payload).unwrap();
    let runner = {
        let dir = home.dir.clone();
        let env = home.env.clone();
        std::thread::spawn(move || {
            let h = Home { dir, env };
            let r = h.run_raw(Event::BeforeShellExecution, &stdin);
            std::mem::forget(h); // the test's Home owns the directory
            r
        })
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    let approval = loop {
        if let Some(a) = server.approvals().into_iter().find(|a| a["status"] == "pending") {
            break a;
        }
        assert!(Instant::now() < deadline, "no approval was requested");
        std::thread::sleep(Duration::from_millis(50));
    };
    server.decide(approval["id"].as_str().unwrap(), false, Some("not today")).unwrap();
    let r = runner.join().unwrap();
    assert_eq!(r.code(), Some(0));
    let out = check_stdout(Event::BeforeShellExecution, &r.out());
    assert_eq!(out, json!({"permission": "deny", "user_message": "not today", "agent_message": "not today"}));
}

#[test]
fn pre_tool_use_deny_still_carries_the_note() {
    let (server, home, s) = started("srv-deny");
    server.set_tool_enabled("Shell", false);
    let note = server.send_to_session(&s, "Do not touch prod.");
    let out = home.run(Event::PreToolUse, &pre_tool(&s, "kubectl delete ns prod"));
    assert_eq!(out["permission"], "deny");
    assert_eq!(out["user_message"], "Tool blocked in Preloop");
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![note.clone()]);
    assert_eq!(server.note_state(&note).0, "delivered");
    // The before* gate denies too, and carries nothing.
    assert_eq!(
        home.run(Event::BeforeShellExecution, &shell(&s, "kubectl delete ns prod")),
        json!({"permission": "deny", "user_message": "Tool blocked in Preloop", "agent_message": "Tool blocked in Preloop"})
    );
}

#[test]
fn a_failing_check_keeps_the_fail_policy_and_still_delivers_the_spool() {
    let (server, home, s) = started("srv-fail");
    server.set_native_tool_approvals(&server.agent_id(), true);
    let note = server.send_to_session(&s, "Ship it.");
    home.run(Event::BeforeShellExecution, &shell(&s, "ls"));
    assert_eq!(server.note_state(&note).0, "claimed");
    server.set_fault(FaultSpec::route("/api/v1/agents/permission-check").status(500, None));
    // before*: fail closed (the documented default)...
    let out = home.run(Event::BeforeShellExecution, &shell(&s, "ls"));
    assert_eq!(out["permission"], "deny");
    // ...preToolUse: fail open, and the spooled note still rides it.
    let out = home.run(Event::PreToolUse, &pre_tool(&s, "ls"));
    assert_eq!(out["permission"], "allow");
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![note.clone()]);
    assert_eq!(server.note_state(&note).0, "delivered");
}

#[test]
fn a_failed_ack_is_owed_and_retried_by_the_next_hook() {
    let (server, home, s) = started("srv-owed");
    server.set_native_tool_approvals(&server.agent_id(), true);
    let note = server.send_to_session(&s, "Rebase first.");
    home.run(Event::BeforeMcpExecution, &mcp(&s));
    server.set_fault(FaultSpec::route("/api/v1/agents/notes/ack").status(503, None).times(1));
    let out = home.run(Event::PreToolUse, &pre_tool(&s, "git status"));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![note.clone()]);
    assert_eq!(server.note_state(&note).0, "claimed", "never reported delivered before the ack succeeds");
    assert!(!home.run_state(&s)["owed_acks"].as_array().unwrap().is_empty());
    home.run(Event::PreToolUse, &pre_tool(&s, "ls"));
    assert_eq!(server.note_state(&note).0, "delivered");
}

#[test]
fn stop_pulls_with_event_stop_only_when_it_may_continue() {
    let (server, home, s) = started("srv-stop");
    let note = server.send_to_session(&s, "Also update the changelog.");
    assert_eq!(home.run(Event::Stop, &stop(&s, "error", 0)), json!({}));
    assert_eq!(home.run(Event::Stop, &stop(&s, "completed", 5)), json!({}));
    assert!(calls(&server, "notes/pending").is_empty(), "no claim when Cursor would not submit a follow-up");
    assert_eq!(server.note_state(&note).0, "pending");
    let out = home.run(Event::Stop, &stop(&s, "completed", 0));
    assert_eq!(ids_in(out["followup_message"].as_str().unwrap()), vec![note.clone()]);
    let pull = body(&calls(&server, "notes/pending")[0]);
    assert_eq!((pull["event"].as_str(), pull["defer_delivery"].as_bool()), (Some("stop"), Some(true)));
    let r = server.receipt(&note);
    assert_eq!((r["state"].as_str(), r["delivery_event"].as_str()), (Some("delivered"), Some("stop")));
    let events: Vec<Value> = calls(&server, "session-event").iter().map(body).collect();
    assert_eq!(events.len(), 3, "every stop reports the turn end");
    assert_eq!(events[0]["source"], "cursor");
}

#[test]
fn session_end_reports_spooled_notes_dropped_and_pending_ones_ended() {
    let (server, home, s) = started("srv-end");
    server.set_native_tool_approvals(&server.agent_id(), true);
    let spooled = server.send_to_session(&s, "claimed by a before* hook");
    home.run(Event::BeforeShellExecution, &shell(&s, "ls"));
    assert_eq!(server.note_state(&spooled).0, "claimed");
    let pending = server.send_to_session(&s, "after the last tool call (headless: no stop)");
    // `{}` at once; the detached worker ends the session.
    assert_eq!(home.run(Event::SessionEnd, &session_end(&s)), json!({}));
    preloop_testkit::support::wait_for(Duration::from_secs(10), "the detached session end", || {
        home.session_file(&s).and_then(|f| f.ended_at)
    });
    let (state, _, why) = server.note_state(&spooled);
    assert_eq!((state.as_str(), why.as_deref()), ("undeliverable", Some("spool_dropped")));
    let (state, _, why) = server.note_state(&pending);
    assert_eq!((state.as_str(), why.as_deref()), ("undeliverable", Some("session_ended")));
    let end = body(&calls(&server, "session-end")[0]);
    assert_eq!(end, json!({"external_session_id": s, "reason": "completed"}));
    assert!(home.session_file(&s).unwrap().ended_at.is_some());
}

#[test]
fn the_exported_id_never_makes_a_session_its_own_parent() {
    let (server, home, s, out) = started_with("srv-lineage");
    let rid = out["env"]["PRELOOP_PARENT_SESSION_ID"].as_str().unwrap().to_string();
    let env = [("PRELOOP_PARENT_SESSION_ID", rid.as_str())];
    home.run_env(Event::BeforeSubmitPrompt, &submit_prompt(&s, "Fix the parser"), &env);
    let regs = calls(&server, "session-start");
    let later = body(regs.last().unwrap());
    assert_eq!(later["first_prompt"], "Fix the parser");
    assert_eq!(later["hook_event_name"], "beforeSubmitPrompt");
    assert!(later.get("parent_session_id").is_none(), "own id not sent as parent: {later}");
    // A run this one starts names it as parent.
    let child = session("srv-child");
    home.run_env(Event::SessionStart, &session_start(&child, true), &env);
    let first = body(calls(&server, "session-start").last().unwrap());
    assert_eq!(first["parent_session_id"], json!(rid));
}

#[test]
fn a_spool_that_cannot_be_written_never_turns_a_deny_into_an_allow() {
    let (server, home, s) = started("srv-nospool");
    server.set_tool_enabled("Shell", false);
    let note = server.send_to_session(&s, "claimed by a before* hook that cannot spool");
    // The run state path is a directory: every state write fails (root ignores chmod).
    let state_path = home.dir.join("run").join(format!("{}.json", preloop_shared::fsutil::session_file_stem(&s)));
    let _ = std::fs::remove_file(&state_path);
    std::fs::create_dir_all(&state_path).unwrap();
    let out = home.run(Event::BeforeShellExecution, &shell(&s, "rm -rf /"));
    assert_eq!(out["permission"], "deny", "the server's deny stands: {out}");
    let r = server.receipt(&note);
    assert_eq!(
        (r["state"].as_str(), r["undeliverable_reason"].as_str()),
        (Some("undeliverable"), Some("spool_dropped")),
        "reported, not silently lost"
    );
}
