//! Process-level tests of the built Gemini hook binaries in server mode
//! (`PRELOOP_URL` + `PRELOOP_TOKEN`) against the loopback fake Preloop
//! server, which claims immediately on `gemini_cli` permission checks as
//! the real 0.17.1 does (docs/contracts/preloop-server.md §4.2, trap 25).

use crate::common::*;
use preloop_gemini::{Event, HELD};
use preloop_testkit::hooks;
use serde_json::json;

/// The server claims immediately on the check and records `delivered`: the
/// note goes out in the one field the model reads, by holding the call.
#[test]
fn before_tool_holds_the_call_with_the_note_the_server_claimed() {
    let (server, home, s) = hooks::started_on_server::<Gemini>("hold");
    let id = server.send_to_session(&s, "use eu-west-1");
    server.clear_requests();
    let (out, _) = home.run(Event::BeforeTool, &fixture_for("BeforeTool.json", &s));
    let out = out.expect("held");
    assert_eq!(out["decision"], json!("deny"));
    let reason = out["reason"].as_str().unwrap();
    assert!(reason.starts_with(&format!("{HELD}\n\n<operator-notes count=\"1\"")), "{reason}");
    assert_eq!(ids_in(reason), vec![id.clone()]);
    assert_eq!(server.note_state(&id), ("delivered".into(), Some("pre_tool_use".into()), None));
    let body = hooks::the_one_pre_tool_check(&server, "gemini_cli", "run_shell_command");
    assert_eq!(body["hook_event_name"], json!("BeforeTool"));
    assert_eq!(body["tool_input"]["command"], json!("echo hi"));
    // Nothing pending: the next check is an allow, printed as nothing.
    let (out, _) = home.run(Event::BeforeTool, &fixture_for("BeforeTool.json", &s));
    assert_eq!(out, None);
}

#[test]
fn before_tool_deny_keeps_the_servers_reason_first() {
    let (server, home, s) = hooks::started_on_server::<Gemini>("deny");
    server.set_tool_enabled("run_shell_command", false);
    let (out, _) = home.run(Event::BeforeTool, &fixture_for("BeforeTool.json", &s));
    assert_eq!(out, Some(json!({"decision": "deny", "reason": "Tool blocked in Preloop"})));
    let id = server.send_to_session(&s, "stop");
    let (out, _) = home.run(Event::BeforeTool, &fixture_for("BeforeTool.json", &s));
    let reason = out.unwrap()["reason"].as_str().unwrap().to_string();
    assert!(reason.starts_with("Tool blocked in Preloop\n\n<operator-notes"), "{reason}");
    assert_eq!(ids_in(&reason), vec![id]);
}

/// BeforeTool never carries the spool: a note spooled because a carrier was
/// full waits for AfterTool, and is acked there.
#[test]
fn before_tool_leaves_the_spool_to_after_tool() {
    let (server, home, s) = hooks::started_on_server::<Gemini>("spool");
    let a = server.send_to_session(&s, &format!("a{}", "<".repeat(2000)));
    let b = server.send_to_session(&s, &format!("b{}", "<".repeat(2000)));
    let (out, _) = home.run(Event::BeforeAgent, &fixture_for("BeforeAgent.json", &s));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![a.clone()]);
    assert_eq!(server.note_state(&b).0, "claimed", "spooled, deferred");
    server.clear_requests();
    let (out, _) = home.run(Event::BeforeTool, &fixture_for("BeforeTool.json", &s));
    assert_eq!(out, None, "the spool is not carried by holding a call");
    assert_eq!(server.hook_routes(), vec!["permission-check"]);
    let (out, _) = home.run(Event::AfterTool, &fixture_for("AfterTool.json", &s));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![b.clone()]);
    assert_eq!(server.note_state(&b), ("delivered".into(), Some("session_start".into()), None));
}

#[test]
fn after_tool_pulls_deferred_and_acks() {
    let (server, home, s) = hooks::started_on_server::<Gemini>("after");
    let id = server.send_to_session(&s, "mid-run");
    hooks::server_after_tool_pulls_deferred::<Gemini>(&server, &home, &s, Event::AfterTool, &id);
}

/// `PRELOOP_PRE_TOOL_USE_ON_ERROR=deny`: BeforeTool fails closed when the
/// server cannot be reached (every other hook fails open: `shared`).
#[test]
fn an_unreachable_server_fails_closed_where_configured() {
    let s = unique_session("un");
    let home = Home::dead_server("dead").with_env("PRELOOP_PRE_TOOL_USE_ON_ERROR", "deny");
    let (out, _) = home.run(Event::BeforeTool, &fixture_for("BeforeTool.json", &s));
    let out = out.expect("fail closed");
    assert_eq!(out["decision"], json!("deny"));
    assert!(out["reason"].as_str().unwrap().contains("fail-closed"), "{out}");
}
