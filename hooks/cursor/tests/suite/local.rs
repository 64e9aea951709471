//! Process-level tests: the built binaries in local mode (the embedded
//! inbox under a private PRELOOP_HOME), and against a server that is down.

use crate::common::*;
use preloop_cursor::{Event, neutral};
use serde_json::{Value, json};
use std::time::Duration;

#[test]
fn session_start_in_the_cli_carries_pending_notes_and_exports_the_runtime_id() {
    let home = Home::new("ss-cli");
    let s = session("cli");
    let note = home.send(&s, "Deploy to eu-west-1, not us-east-1.");
    let out = home.run(Event::SessionStart, &session_start(&s, true));
    let file = home.session_file(&s).expect("the session file is written");
    assert_eq!(file.agent_kind.as_str(), "cursor");
    assert_eq!(file.cwd.as_deref(), Some("/tmp/cursor-workspace"), "cwd falls back to workspace_roots[0]");
    assert_eq!(out["env"]["PRELOOP_PARENT_SESSION_ID"], json!(file.runtime_session_id));
    let ctx = context_of(&out).expect("the note rides sessionStart in the CLI");
    assert!(ctx.contains("Deploy to eu-west-1"));
    assert_eq!(ids_in(&ctx), vec![note.clone()]);
    assert_eq!(home.note_state(&note), ("delivered".into(), Some("session_start".into()), None));
}

#[test]
fn session_start_in_the_ide_claims_nothing_and_the_note_rides_the_first_tool_call() {
    let home = Home::new("ss-ide");
    let s = session("ide");
    let note = home.send(&s, "Stop refactoring the tests, ship the fix.");
    let out = home.run(Event::SessionStart, &session_start(&s, false));
    assert!(out.get("additional_context").is_none(), "the IDE may drop sessionStart context: {out}");
    assert!(out["env"]["PRELOOP_PARENT_SESSION_ID"].is_string());
    assert_eq!(home.state(&note), "pending");
    let out = home.run(Event::PreToolUse, &pre_tool(&s, "ls"));
    assert_eq!(out["permission"], "allow");
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![note.clone()]);
    assert_eq!(home.note_state(&note), ("delivered".into(), Some("pre_tool_use".into()), None));
}

#[test]
fn cwd_falls_back_to_cursor_project_dir() {
    let home = Home::new("cwd").with_env("CURSOR_PROJECT_DIR", "/from/env");
    let s = session("cwd");
    let mut v = session_start(&s, true);
    v["workspace_roots"] = json!([]);
    home.run(Event::SessionStart, &v);
    assert_eq!(home.session_file(&s).unwrap().cwd.as_deref(), Some("/from/env"));
}

#[test]
fn before_submit_prompt_registers_the_first_prompt_and_claims_nothing() {
    let home = Home::new("bsp");
    let s = session("bsp");
    let note = home.send(&s, "The deadline moved to Friday.");
    let out = home.run(Event::BeforeSubmitPrompt, &submit_prompt(&s, "Fix the flaky parser test"));
    assert_eq!(out, json!({"continue": true}));
    let file = home.session_file(&s).expect("registered by the first prompt");
    assert_eq!(file.title.as_deref(), Some("Fix the flaky parser test"));
    assert!(file.last_prompt_at.is_some());
    assert_eq!(home.state(&note), "pending", "beforeSubmitPrompt has no carrier: it must not claim");
    // A later prompt does not retitle the session.
    home.run(Event::BeforeSubmitPrompt, &submit_prompt(&s, "and another thing"));
    assert_eq!(home.session_file(&s).unwrap().title.as_deref(), Some("Fix the flaky parser test"));
}

#[test]
fn our_own_followup_never_titles_a_session() {
    let home = Home::new("bsp-own");
    let s = session("own");
    home.run(
        Event::BeforeSubmitPrompt,
        &submit_prompt(&s, "<operator-notes count=\"1\" source=\"preloop-control-plane\">\nsecret note text"),
    );
    let file = home.session_file(&s).expect("registered");
    assert_eq!(file.title, None);
}

#[test]
fn before_hooks_in_local_mode_have_no_opinion_and_leave_notes_for_pre_tool_use() {
    let (home, s) = started_locally("before");
    let note = home.send(&s, "Use the staging cluster.");
    assert_eq!(home.run(Event::BeforeShellExecution, &shell(&s, "rm -rf build")), json!({"permission": "allow"}));
    assert_eq!(home.run(Event::BeforeMcpExecution, &mcp(&s)), json!({"permission": "allow"}));
    assert_eq!(home.state(&note), "pending", "a non-carrying hook never claims locally");
    assert_eq!(home.run_state(&s)["spool"], json!([]));
    let out = home.run(Event::PreToolUse, &pre_tool(&s, "rm -rf build"));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![note.clone()]);
    assert_eq!(home.state(&note), "delivered");
    // Carried once: the next tool call is clean.
    assert_eq!(home.run(Event::PreToolUse, &pre_tool(&s, "ls")), json!({"permission": "allow"}));
}

#[test]
fn pre_tool_use_fits_notes_into_ten_thousand_characters_and_acks_each_once() {
    let (home, s) = started_locally("limit");
    let body = |i: usize| format!("note {i} ") + &"x".repeat(4096 - 7);
    let notes: Vec<String> = (0..5).map(|i| home.send(&s, &body(i))).collect();
    let mut carried = Vec::new();
    for _ in 0..5 {
        let out = home.run(Event::PreToolUse, &pre_tool(&s, "ls"));
        let Some(ctx) = context_of(&out) else { break };
        assert!(
            ctx.chars().count() <= 10_000,
            "a block over the limit would be dropped whole: {}",
            ctx.chars().count()
        );
        let ids = ids_in(&ctx);
        assert!(!ids.is_empty());
        for id in &ids {
            assert_eq!(home.state(id), "delivered", "acked after the output was written");
        }
        carried.extend(ids);
    }
    assert_eq!(carried, notes, "every note carried once, oldest first");
    assert_eq!(home.run_state(&s)["spool"], json!([]));
}

#[test]
fn stop_follows_up_only_on_completed_turns_below_the_loop_limit() {
    let (home, s) = started_locally("stop");
    let note = home.send(&s, "Also update the changelog.");
    assert_eq!(home.run(Event::Stop, &stop(&s, "error", 0)), json!({}));
    assert_eq!(home.run(Event::Stop, &stop(&s, "aborted", 0)), json!({}));
    assert_eq!(
        home.run(Event::Stop, &stop(&s, "completed", u64::from(preloop_shared::registry::CURSOR_LOOP_LIMIT))),
        json!({})
    );
    let mut no_count = stop(&s, "completed", 0);
    no_count.as_object_mut().unwrap().remove("loop_count");
    assert_eq!(home.run(Event::Stop, &no_count), json!({}));
    assert_eq!(home.state(&note), "pending", "no claim where Cursor would not submit the follow-up");
    let out = home.run(Event::Stop, &stop(&s, "completed", 4));
    let ctx = out["followup_message"].as_str().expect("a follow-up carries the note");
    assert_eq!(ids_in(ctx), vec![note.clone()]);
    assert_eq!(home.note_state(&note), ("delivered".into(), Some("stop".into()), None));
    // Nothing pending: nothing to say.
    assert_eq!(home.run(Event::Stop, &stop(&s, "completed", 0)), json!({}));
}

#[test]
fn stop_spends_at_most_three_rescues_per_session() {
    let (home, s) = started_locally("rescues");
    for i in 0..3 {
        let note = home.send(&s, &format!("late note {i}"));
        let out = home.run(Event::Stop, &stop(&s, "completed", i));
        assert_eq!(ids_in(out["followup_message"].as_str().unwrap()), vec![note]);
    }
    let fourth = home.send(&s, "one too many");
    assert_eq!(home.run(Event::Stop, &stop(&s, "completed", 3)), json!({}));
    assert_eq!(home.state(&fourth), "pending", "past the cap the note waits for a tool call or sessionEnd");
    let out = home.run(Event::PreToolUse, &pre_tool(&s, "ls"));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![fourth]);
}

#[test]
fn session_end_marks_undelivered_notes_and_ends_the_session() {
    let (home, s) = started_locally("end");
    let note = home.send(&s, "You will never read this (headless: no stop).");
    assert_eq!(home.run(Event::SessionEnd, &session_end(&s)), json!({}));
    assert_eq!(home.note_state(&note), ("undeliverable".into(), None, Some("session_ended".into())));
    let file = home.session_file(&s).unwrap();
    assert!(file.ended_at.is_some());
    assert_eq!(file.end_reason.as_deref(), Some("completed"));
    assert_eq!(home.run_state(&s), Value::Null, "private run state is removed");
}

#[test]
fn a_session_is_never_its_own_parent_but_a_child_names_its_parent() {
    let home = Home::new("lineage");
    let parent = session("parent");
    let out = home.run(Event::SessionStart, &session_start(&parent, false));
    let rid = out["env"]["PRELOOP_PARENT_SESSION_ID"].as_str().unwrap().to_string();
    // Cursor merges sessionStart's env into the session's later hooks.
    let env = [("PRELOOP_PARENT_SESSION_ID", rid.as_str())];
    home.run_env(Event::BeforeSubmitPrompt, &submit_prompt(&parent, "first"), &env);
    home.run_env(Event::PreToolUse, &pre_tool(&parent, "ls"), &env);
    assert_eq!(home.session_file(&parent).unwrap().parent_session_id, None);
    // A run started by this one (its own conversation) inherits the variable.
    let child = session("child");
    home.run_env(Event::SessionStart, &session_start(&child, true), &env);
    assert_eq!(home.session_file(&child).unwrap().parent_session_id.as_deref(), Some(rid.as_str()));
}

#[test]
fn bad_stdin_gets_the_neutral_answer_and_exit_0() {
    let home = Home::new("bad");
    let valid_with_bom = {
        let mut b = b"\xEF\xBB\xBF".to_vec();
        b.extend(
            serde_json::to_vec(
                &json!({"conversation_id": "bom-session", "hook_event_name": "sessionEnd", "reason": "completed"}),
            )
            .unwrap(),
        );
        b
    };
    for event in Event::ALL {
        for stdin in [
            &b""[..],
            b"   \n",
            b"not json",
            b"[1,2]",
            b"null",
            b"{\"conversation_id\": ",
            b"{}",
            b"\xff\xfe{}",
            b"{\"conversation_id\": \"x\", \"hook_event_name\": \"SomethingElse\"}",
        ] {
            let r = home.run_raw(event, stdin);
            assert_eq!(r.code(), Some(0), "{}: exit code for {stdin:?}", event.name());
            assert_eq!(
                check_stdout(event, &r.out()),
                serde_json::to_value(neutral(event)).unwrap(),
                "{}: answer for {stdin:?}",
                event.name()
            );
        }
    }
    // A UTF-8 BOM (Cursor on Windows) is not bad input.
    let r = home.run_raw(Event::SessionEnd, &valid_with_bom);
    assert_eq!((r.code(), r.out().as_str()), (Some(0), "{}\n"));
    assert!(home.log().contains("session=bom-session"), "the BOM payload was parsed: {}", home.log());
}

#[test]
fn a_dead_server_never_breaks_the_session_except_the_documented_fail_closed_deny() {
    let home = Home::new("dead")
        .with_env("PRELOOP_URL", &dead_url())
        .with_env("PRELOOP_TOKEN", "agt_test")
        .with_env("PRELOOP_CONNECT_TIMEOUT_MS", "300")
        .with_env("PRELOOP_CALL_TIMEOUT_MS", "600");
    let s = session("dead");
    assert_eq!(home.run(Event::SessionStart, &session_start(&s, true)), json!({}));
    assert_eq!(home.run(Event::BeforeSubmitPrompt, &submit_prompt(&s, "hi")), json!({"continue": true}));
    // before*: Settings.permission_request_on_error, default deny (fail closed).
    for (event, payload) in [(Event::BeforeShellExecution, shell(&s, "ls")), (Event::BeforeMcpExecution, mcp(&s))] {
        let out = home.run(event, &payload);
        assert_eq!(out["permission"], "deny", "{}: {out}", event.name());
        assert!(out["user_message"].as_str().unwrap().contains("fail-closed"), "{out}");
        let open = home.run_env(event, &payload, &[("PRELOOP_PERMISSION_REQUEST_ON_ERROR", "open")]);
        assert_eq!(open, json!({"permission": "allow"}), "{}: fail open", event.name());
    }
    // preToolUse: Settings.pre_tool_use_on_error, default open.
    assert_eq!(home.run(Event::PreToolUse, &pre_tool(&s, "ls")), json!({"permission": "allow"}));
    let closed = home.run_env(Event::PreToolUse, &pre_tool(&s, "ls"), &[("PRELOOP_PRE_TOOL_USE_ON_ERROR", "deny")]);
    assert_eq!(closed["permission"], "deny");
    assert_eq!(home.run(Event::Stop, &stop(&s, "completed", 0)), json!({}));
    let r = home.run_raw(Event::SessionEnd, serde_json::to_string(&session_end(&s)).unwrap().as_bytes());
    assert_eq!((r.code(), r.out().as_str()), (Some(0), "{}\n"));
    assert!(r.elapsed < Duration::from_secs(10), "bounded by the call timeouts: {:?}", r.elapsed);
}
