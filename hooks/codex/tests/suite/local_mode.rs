//! Process-level tests of the built Codex hook binaries in local mode
//! (`PRELOOP_HOME` in a temp dir, no server), fed the real 0.169.0 payloads.

use crate::common::*;
use preloop_codex::Event;
use preloop_shared::operator::ReceiptState;
use preloop_testkit::hooks;
use serde_json::{Value, json};
use std::time::Duration;

#[test]
fn every_binary_exits_0_with_nothing_on_bad_stdin() {
    let home = Home::new("bad");
    let mut extra = vec![
        br#"{"session_id": ""}"#.to_vec(),
        vec![0xff, 0xfe, 0x00, 0x7b],
        br#"{"session_id":"s","hook_event_name":"PostToolUse","tool_name":"Bash"}"#.to_vec(),
    ];
    // Every other event's captured payload is refused too.
    for name in ["PostToolUse.json", "Interrupt.json", "SubagentStop.json", "PreModelRequest.json"] {
        extra.push(std::fs::read(fixtures_dir().join(name)).unwrap());
    }
    hooks::bad_stdin_is_ignored::<Codex>(&home, &extra);
    assert!(home.log().contains("outcome=neutral"), "refusals are logged");
}

#[test]
fn every_binary_answers_its_captured_payload() {
    let home = Home::new("plain");
    hooks::nothing_pending_prints_nothing::<Codex>(&home, || unique_session("pl"), Duration::from_secs(5));
    // A UTF-8 BOM and a trailing newline are tolerated.
    let session = unique_session("bom");
    let mut payload = b"\xEF\xBB\xBF".to_vec();
    payload.extend(serde_json::to_vec(&fixture_for("SessionStart.json", &session)).unwrap());
    payload.push(b'\n');
    let r = home.run_raw(Event::SessionStart, &payload);
    assert_eq!((r.code(), r.out().as_str()), (Some(0), ""));
    assert!(home.inbox().sessions().iter().any(|s| s.external_session_id.as_deref() == Some(session.as_str())));
}

#[test]
fn session_start_registers_and_carries_notes() {
    let text = "Stop editing the parser; run the tests first.";
    let hooks::Started { home, session, out, block: ctx } =
        hooks::local_start_carries_a_waiting_note::<Codex>("start", text);
    assert_eq!(out.pointer("/hookSpecificOutput/hookEventName"), Some(&json!("SessionStart")));
    assert!(ctx.starts_with("<operator-notes count=\"1\" source=\"preloop-control-plane\">\n"));
    assert!(ctx.contains(text));
    // The session file: agent kind codex_cli, cwd from the payload.
    let s = home
        .inbox()
        .sessions()
        .into_iter()
        .find(|s| s.external_session_id.as_deref() == Some(session.as_str()))
        .unwrap();
    assert_eq!(s.agent_kind.as_ref().map(|k| k.as_str()), Some("codex_cli"));
    assert_eq!(s.cwd.as_deref(), Some("/tmp/codex-e2e/20261202-092115-baseline-qEY2/proj"));
    // resume and compact pull again.
    let id2 = home.send(&session, "second");
    let (out, _) = home.run(Event::SessionStart, &fixture_for("SessionStart.compact.json", &session));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id2]);
    let (out, _) = home.run(Event::SessionStart, &fixture_for("SessionStart.resume.json", &session));
    assert!(out.is_none());
}

#[test]
fn first_prompt_titles_the_session_and_prompts_carry_notes() {
    let home = Home::new("prompt");
    let session = unique_session("up");
    let mut p = fixture_for("UserPromptSubmit.json", &session);
    p["prompt"] = json!("Fix the flaky parser test\nand more");
    let (out, _) = home.run(Event::UserPromptSubmit, &p);
    assert!(out.is_none());
    let title = |h: &Home| {
        h.inbox()
            .sessions()
            .into_iter()
            .find(|s| s.external_session_id.as_deref() == Some(session.as_str()))
            .and_then(|s| s.title)
    };
    assert_eq!(title(&home).as_deref(), Some("Fix the flaky parser test and more"));
    let id = home.send(&session, "use the fixtures");
    p["prompt"] = json!("second prompt");
    let (out, _) = home.run(Event::UserPromptSubmit, &p);
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id.clone()]);
    assert_eq!(out.unwrap().pointer("/hookSpecificOutput/hookEventName"), Some(&json!("UserPromptSubmit")));
    assert_eq!(title(&home).as_deref(), Some("Fix the flaky parser test and more"), "only the first prompt titles");
    assert_eq!(home.receipt(&id).state, ReceiptState::Delivered);

    // A sub-agent's prompt (parent's session id + agent_id) carries nothing.
    let id = home.send(&session, "for the main agent");
    let (out, _) = home.run(Event::UserPromptSubmit, &fixture_for("UserPromptSubmit.subagent.json", &session));
    assert!(out.is_none());
    assert_eq!(home.receipt(&id).state, ReceiptState::Pending);
    assert!(home.log().contains("outcome=stand_down"));
}

#[test]
fn pre_tool_use_carries_notes_without_a_decision() {
    let (home, session) = hooks::started_locally::<Codex>("pre");
    let id = home.send(&session, "late note");
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("PreToolUse.json", &session));
    let out = out.expect("carried");
    assert!(out.pointer("/hookSpecificOutput/permissionDecision").is_none(), "local mode never decides: {out}");
    assert_eq!(ids_in(&context_of(&Some(out)).unwrap()), vec![id.clone()]);
    assert_eq!(home.note_state(&id), ("delivered".into(), Some("pre_tool_use".into()), None));

    // In a sub-agent (agent_id), the note is left for the main agent.
    let id = home.send(&session, "for the main agent");
    let mut sub = fixture_for("PreToolUse.json", &session);
    sub["agent_id"] = json!("01a2367a-bc19-76d2-a660-919580b8549c");
    sub["agent_type"] = json!("default");
    let (out, _) = home.run(Event::PreToolUse, &sub);
    assert!(out.is_none());
    assert_eq!(home.receipt(&id).state, ReceiptState::Pending);
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("PreToolUse.json", &session));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id]);
}

#[test]
fn permission_request_in_local_mode_prints_nothing_and_claims_nothing() {
    let (home, session) = hooks::started_locally::<Codex>("pr");
    let id = home.send(&session, "not here");
    let (out, r) = home.run(Event::PermissionRequest, &fixture_for("PermissionRequest.json", &session));
    assert!(out.is_none(), "Codex's own approval flow decides: {}", r.out());
    assert_eq!(home.receipt(&id).state, ReceiptState::Pending, "a hook that cannot carry never claims");
    // Fail-closed does not apply: nothing failed, local mode just has no opinion.
    let home = home.with_env("PRELOOP_PERMISSION_REQUEST_ON_ERROR", "deny");
    let (out, _) = home.run(Event::PermissionRequest, &fixture_for("PermissionRequest.json", &session));
    assert!(out.is_none());
}

#[test]
fn stop_continues_once_per_stop_and_three_times_per_session() {
    let (home, session) = hooks::started_locally::<Codex>("stop");
    let stop = fixture_for("Stop.json", &session);
    let again = fixture_for("Stop.stop_hook_active.json", &session);
    // Nothing pending: the turn ends.
    assert!(home.run(Event::Stop, &stop).0.is_none());
    for round in 1..=3 {
        let id = home.send(&session, &format!("late note {round}"));
        let (out, _) = home.run(Event::Stop, &stop);
        let out = out.unwrap_or_else(|| panic!("rescue {round}"));
        assert_eq!(out["decision"], json!("block"));
        assert_eq!(ids_in(out["reason"].as_str().unwrap()), vec![id.clone()]);
        assert_eq!(home.receipt(&id).delivery_event.as_deref(), Some("stop"));
        assert_eq!(home.receipt(&id).state, ReceiptState::Delivered);
        // The continuation's own Stop (stop_hook_active) never blocks again.
        let id2 = home.send(&session, "during the continuation");
        assert!(home.run(Event::Stop, &again).0.is_none(), "one continuation per stop");
        assert_eq!(home.receipt(&id2).state, ReceiptState::Pending);
        // Let the next round start clean: a prompt carries it.
        let (out, _) = home.run(Event::UserPromptSubmit, &fixture_for("UserPromptSubmit.json", &session));
        assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id2]);
    }
    assert_eq!(home.run_state(&session)["stop_rescues"], json!(3));
    let id = home.send(&session, "fourth");
    assert!(home.run(Event::Stop, &stop).0.is_none(), "the per-session cap holds (Codex has none)");
    assert_eq!(home.receipt(&id).state, ReceiptState::Pending);
}

/// The context carriers keep 20,000 UTF-8 bytes (the installer's
/// `additionalContextLimit: 5000`); what does not fit waits in the spool.
#[test]
fn carrier_limit_is_20000_utf8_bytes_and_the_rest_is_spooled() {
    let (home, session) = hooks::started_locally::<Codex>("limit");
    // Five notes of 3,000 two-byte characters: 6,000 bytes each.
    let ids: Vec<String> = (0..5).map(|i| home.send(&session, &format!("{i}{}", "é".repeat(2999)))).collect();
    let mut carried = Vec::new();
    let mut per_output = Vec::new();
    for _ in 0..5 {
        let (out, _) = home.run(Event::PreToolUse, &fixture_for("PreToolUse.json", &session));
        let Some(ctx) = context_of(&out) else { break };
        assert!(ctx.len() <= 20_000, "{} bytes", ctx.len());
        let got = ids_in(&ctx);
        per_output.push(got.len());
        carried.extend(got);
        for id in &carried {
            assert_eq!(home.receipt(id).state, ReceiptState::Delivered, "acked after the write");
        }
    }
    assert_eq!(per_output, vec![3, 2], "three 6 KB notes per 20 KB carrier");
    assert_eq!(carried, ids, "oldest first, each exactly once");
    assert!(home.run_state(&session)["spool"].as_array().is_none_or(|s| s.is_empty()));
}

#[test]
fn session_end_reports_spooled_and_pending_notes() {
    let (home, session) = hooks::started_locally::<Codex>("end");
    // Five 6 KB notes: three are carried, two stay spooled (claimed, deferred).
    let ids: Vec<String> = (0..5).map(|i| home.send(&session, &format!("{i}{}", "é".repeat(2999)))).collect();
    let (out, _) = home.run(Event::UserPromptSubmit, &fixture_for("UserPromptSubmit.json", &session));
    assert_eq!(ids_in(&context_of(&out).unwrap()), ids[..3].to_vec());
    assert_eq!(home.run_state(&session)["spool"].as_array().unwrap().len(), 2);
    assert_eq!(home.receipt(&ids[3]).state, ReceiptState::Claimed);
    let pending = home.send(&session, "never pulled");
    let (out, r) = home.run(Event::SessionEnd, &fixture_for("SessionEnd.json", &session));
    assert!(out.is_none());
    // Codex kills SessionEnd at ~0.96 s: the hook's own clock (ms=) holds it
    // to the end budget; the run's wall clock (fork and exec of the debug
    // binary on a loaded machine) only to a sanity bound.
    let line = log_line_of(&home.log(), "SessionEnd").to_string();
    assert!(logged_ms(&line) < 900, "local SessionEnd fits Codex's ~1 s by its own clock: {line}");
    assert!(r.elapsed < Duration::from_secs(10), "{:?}", r.elapsed);
    for id in &ids[3..] {
        let rc = home.receipt(id);
        assert_eq!(
            (rc.state.as_str(), rc.undeliverable_reason.as_deref()),
            ("undeliverable", Some("spool_dropped")),
            "{id}"
        );
    }
    let rc = home.receipt(&pending);
    assert_eq!((rc.state.as_str(), rc.undeliverable_reason.as_deref()), ("undeliverable", Some("session_ended")));
    for id in &ids[..3] {
        assert_eq!(home.receipt(id).state, ReceiptState::Delivered);
    }
    assert_eq!(home.run_state(&session), Value::Null, "private state removed");
    assert!(home.log().contains("codex SessionEnd mode=local"), "local mode runs in-process: {}", home.log());
}
