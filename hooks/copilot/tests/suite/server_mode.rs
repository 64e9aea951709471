//! Process-level tests of the built Copilot hook binaries in server mode
//! against the loopback fake Preloop server, which never hands copilot_cli a
//! note on a permission check, as the real 0.17.1 does
//! (docs/contracts/preloop-server.md §4.2, trap 26).

use crate::common::*;
use preloop_copilot::Event;
use preloop_testkit::FakeServer;
use serde_json::{Value, json};

fn server_home(server: &FakeServer, tag: &str) -> Home {
    Home::new(tag).with_env("PRELOOP_URL", &server.url()).with_env("PRELOOP_TOKEN", &server.runtime_token())
}

fn send(server: &FakeServer, session: &str, text: &str) -> String {
    server.send_note(json!({"external_session_id": session, "text": text}))["note_id"].as_str().unwrap().to_string()
}

fn state(server: &FakeServer, id: &str) -> (String, Option<String>, Option<String>) {
    let r = server.receipt(id);
    let s = |k: &str| r[k].as_str().map(str::to_string);
    (s("state").unwrap(), s("delivery_event"), s("undeliverable_reason"))
}

fn hook_calls(server: &FakeServer) -> Vec<(String, Value)> {
    server
        .requests()
        .into_iter()
        .filter_map(|r| Some((r.path.strip_prefix("/api/v1/agents/")?.to_string(), r.body.unwrap_or(Value::Null))))
        .collect()
}

fn routes(server: &FakeServer) -> Vec<String> {
    hook_calls(server).into_iter().map(|(r, _)| r).collect()
}

#[test]
fn session_start_registers_as_copilot_cli_and_the_prompt_is_recorded() {
    let server = FakeServer::start();
    let home = server_home(&server, "reg");
    let s = unique_session("rg");
    home.run(Event::SessionStart, &fixture_for("sessionStart.json", &s));
    let calls = hook_calls(&server);
    assert_eq!((calls[0].0.as_str(), calls[0].1["source"].clone()), ("session-start", json!("copilot_cli")));
    assert_eq!(calls[1].0, "notes/pending");
    server.clear_requests();
    let id = send(&server, &s, "run the tests first");
    let (out, _) = home.run(Event::UserPromptSubmitted, &fixture_for("userPromptSubmitted.json", &s));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id.clone()]);
    let calls = hook_calls(&server);
    let start = calls.iter().find(|(r, _)| r == "session-start").unwrap();
    assert_eq!(
        (start.1["first_prompt"].clone(), start.1["hook_event_name"].clone()),
        (json!("Run echo hi"), json!("UserPromptSubmit"))
    );
    assert_eq!(state(&server, &id), ("delivered".into(), Some("session_start".into()), None));
}

/// The no-note preToolUse is one round trip, and a pending note stays
/// pending through it (the server never claims for copilot_cli); the next
/// postToolUse pulls it deferred and acks it after the output.
#[test]
fn pre_tool_use_is_one_round_trip_and_post_tool_use_pulls() {
    let server = FakeServer::start();
    let home = server_home(&server, "tool");
    let s = unique_session("tl");
    home.run(Event::SessionStart, &fixture_for("sessionStart.json", &s));
    let id = send(&server, &s, "mid-run");
    server.clear_requests();
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("preToolUse.json", &s));
    assert_eq!(out, None);
    let calls = hook_calls(&server);
    assert_eq!(routes(&server), vec!["permission-check"], "one call");
    let body = &calls[0].1;
    assert_eq!(body["source"], json!("copilot_cli"));
    assert_eq!(body["evaluation_phase"], json!("pre_tool_use"), "never escalate to a human for 300 s");
    assert_eq!(body["tool_name"], json!("bash"));
    assert_eq!(body["tool_input"], json!({"command": "echo hi", "description": "say hi"}));
    assert_eq!(state(&server, &id).0, "pending");
    server.clear_requests();
    let (out, _) = home.run(Event::PostToolUse, &fixture_for("postToolUse.json", &s));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id.clone()]);
    assert_eq!(routes(&server), vec!["notes/pending", "notes/ack"]);
    assert_eq!(state(&server, &id), ("delivered".into(), Some("pre_tool_use".into()), None));
}

#[test]
fn a_central_deny_denies_also_inside_a_subagent() {
    let server = FakeServer::start();
    let home = server_home(&server, "deny");
    let s = unique_session("dn");
    home.run(Event::SessionStart, &fixture_for("sessionStart.json", &s));
    server.set_tool_enabled("bash", false);
    let want = json!({"permissionDecision": "deny", "permissionDecisionReason": "Tool blocked in Preloop"});
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("preToolUse.json", &s));
    assert_eq!(out, Some(want.clone()));
    server.clear_requests();
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("preToolUse.in-subagent.json", &s));
    assert_eq!(out, Some(want), "the sub-agent's call is denied too");
    let calls = hook_calls(&server);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].1["session_id"], json!(s), "checked under the session's own id");
}

#[test]
fn agent_stop_continues_and_reports_the_turn_end() {
    let server = FakeServer::start();
    let home = server_home(&server, "stop");
    let s = unique_session("st");
    home.run(Event::SessionStart, &fixture_for("sessionStart.json", &s));
    let id = send(&server, &s, "late");
    server.clear_requests();
    let (out, _) = home.run(Event::AgentStop, &fixture_for("agentStop.json", &s));
    assert_eq!(out.as_ref().unwrap()["decision"], json!("block"));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id.clone()]);
    assert_eq!(state(&server, &id), ("delivered".into(), Some("stop".into()), None));
    let ev = hook_calls(&server).into_iter().find(|(r, _)| r == "session-event").expect("turn end");
    assert_eq!(ev.1["hook_event_name"], json!("Stop"));
}

#[test]
fn session_end_is_awaited_in_process() {
    let server = FakeServer::start();
    let home = server_home(&server, "end");
    let s = unique_session("en");
    home.run(Event::SessionStart, &fixture_for("sessionStart.json", &s));
    let id = send(&server, &s, "never read");
    home.run(Event::SessionEnd, &fixture_for("sessionEnd.json", &s));
    assert_eq!(state(&server, &id), ("undeliverable".into(), None, Some("session_ended".into())));
    let end = hook_calls(&server).into_iter().find(|(r, _)| r == "session-end").unwrap();
    assert_eq!((end.1["external_session_id"].clone(), end.1["reason"].clone()), (json!(s), json!("complete")));
}

#[test]
fn an_unreachable_server_follows_the_fail_policy_with_exit_0() {
    let s = unique_session("un");
    let home = Home::new("dead").with_env("PRELOOP_URL", &dead_url()).with_env("PRELOOP_TOKEN", "agt_x");
    for event in Event::ALL {
        let (out, r) = home.run(event, &fixture_for(&own_fixture(event), &s));
        assert_eq!(out, None, "{}: fail open by default", event.name());
        assert!(r.elapsed.as_secs() < 5, "{} took {:?}", event.name(), r.elapsed);
    }
    let home = home.with_env("PRELOOP_PRE_TOOL_USE_ON_ERROR", "deny");
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("preToolUse.json", &s));
    assert_eq!(out.unwrap()["permissionDecision"], json!("deny"));
}
