//! Process-level tests of the built Copilot hook binaries in server mode
//! against the loopback fake Preloop server, which never hands copilot_cli a
//! note on a permission check, as the real 0.17.1 does
//! (docs/contracts/preloop-server.md §4.2, trap 26).

use crate::common::*;
use preloop_copilot::Event;
use preloop_testkit::hooks;
use serde_json::json;

/// The no-note preToolUse is one round trip, and a pending note stays
/// pending through it (the server never claims for copilot_cli); the next
/// postToolUse pulls it deferred and acks it after the output.
#[test]
fn pre_tool_use_is_one_round_trip_and_post_tool_use_pulls() {
    let (server, home, s) = hooks::started_on_server::<Copilot>("tool");
    let id = server.send_to_session(&s, "mid-run");
    server.clear_requests();
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("preToolUse.json", &s));
    assert_eq!(out, None);
    // In the pre_tool_use phase: never an escalation to a human for 300 s.
    let body = hooks::the_one_pre_tool_check(&server, "copilot_cli", "bash");
    assert_eq!(body["tool_input"], json!({"command": "echo hi", "description": "say hi"}));
    assert_eq!(server.note_state(&id).0, "pending");
    hooks::server_after_tool_pulls_deferred::<Copilot>(&server, &home, &s, Event::PostToolUse, &id);
}

#[test]
fn a_central_deny_denies_also_inside_a_subagent() {
    let (server, home, s) = hooks::started_on_server::<Copilot>("deny");
    server.set_tool_enabled("bash", false);
    let want = json!({"permissionDecision": "deny", "permissionDecisionReason": "Tool blocked in Preloop"});
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("preToolUse.json", &s));
    assert_eq!(out, Some(want.clone()));
    server.clear_requests();
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("preToolUse.in-subagent.json", &s));
    assert_eq!(out, Some(want), "the sub-agent's call is denied too");
    let calls = server.hook_calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].1["session_id"], json!(s), "checked under the session's own id");
}

/// `PRELOOP_PRE_TOOL_USE_ON_ERROR=deny`: preToolUse fails closed, with
/// exit 0, when the server cannot be reached (every other hook fails open:
/// `shared`).
#[test]
fn an_unreachable_server_fails_closed_where_configured() {
    let s = unique_session("un");
    let home = Home::dead_server("dead").with_env("PRELOOP_PRE_TOOL_USE_ON_ERROR", "deny");
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("preToolUse.json", &s));
    assert_eq!(out.unwrap()["permissionDecision"], json!("deny"));
}
