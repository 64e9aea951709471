//! Preloop's `send_note` MCP tool gets the caller's harness session id
//! (issue 33): BeforeTool prints `hookSpecificOutput.tool_input` (the whole
//! input, `preloop_caller_session_id` = the payload's session id, replacing
//! a model-supplied one) and no decision. Gemini CLI 0.61.0 spells an MCP
//! tool `mcp_<server>_<tool>`, which cannot be split (a server name may
//! hold `_`): the tool is named by `mcp_context.tool_name`
//! (docs/event-matrix.md, "send_note caller session").

use crate::common::*;
use preloop_gemini::{Event, HELD};
use preloop_testkit::hooks;
use serde_json::{Value, json};

const CAPTURE: &str = "BeforeTool.mcp-send_note.json";

fn rewritten(s: &str) -> Value {
    json!({"hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input":
        {"text": "hello child", "runtime_session_id": "rt-1", "preloop_caller_session_id": s}}})
}

#[test]
fn send_note_gets_the_callers_session_id_and_no_decision() {
    let (server, home, s) = hooks::started_on_server::<Gemini>("sn");
    // The real capture (the model forged the field), and a server whose
    // name holds `_` and odd characters (Gemini's tool name mangles it).
    let mut odd = fixture_for(CAPTURE, &s);
    odd["tool_name"] = json!("mcp_my_pre_loop_send_note");
    odd["mcp_context"]["server_name"] = json!("my.pre loop");
    for payload in [fixture_for(CAPTURE, &s), odd] {
        server.clear_requests();
        let (out, _) = home.run(Event::BeforeTool, &payload);
        assert_eq!(out, Some(rewritten(&s)), "the forged value is replaced, the rest kept, no decision");
        // The gate was asked about the input that will run.
        let body = hooks::the_one_pre_tool_check(&server, "gemini_cli", payload["tool_name"].as_str().unwrap());
        assert_eq!(body["tool_input"]["preloop_caller_session_id"], json!(s));
    }
}

#[test]
fn send_note_is_rewritten_in_local_mode_too() {
    let (home, s) = hooks::started_locally::<Gemini>("sn-local");
    let (out, _) = home.run(Event::BeforeTool, &fixture_for(CAPTURE, &s));
    assert_eq!(out, Some(rewritten(&s)));
}

#[test]
fn only_an_mcp_tool_named_send_note_is_rewritten() {
    let (_server, home, s) = hooks::started_on_server::<Gemini>("sn-other");
    let mut cases = Vec::new();
    // The name alone is not enough: without mcp_context it is no MCP tool of a configured server.
    let mut no_ctx = fixture_for(CAPTURE, &s);
    no_ctx.as_object_mut().unwrap().remove("mcp_context");
    cases.push(no_ctx);
    let mut other = fixture_for(CAPTURE, &s);
    other["tool_name"] = json!("mcp_preloop_list_notes");
    other["mcp_context"]["tool_name"] = json!("list_notes");
    cases.push(other);
    let mut no_server = fixture_for(CAPTURE, &s);
    no_server["mcp_context"]["server_name"] = json!("");
    cases.push(no_server);
    let mut builtin = fixture_for("BeforeTool.json", &s);
    builtin["tool_name"] = json!("send_note");
    cases.push(builtin);
    for payload in cases {
        let (out, _) = home.run(Event::BeforeTool, &payload);
        assert_eq!(out, None, "allow with no note prints nothing: {payload}");
    }
}

#[test]
fn a_deny_or_a_held_call_carries_no_rewrite() {
    let (server, home, s) = hooks::started_on_server::<Gemini>("sn-deny");
    // A note the server claims on the check holds the call: no rewrite rides.
    server.send_to_session(&s, "read me first");
    let (out, _) = home.run(Event::BeforeTool, &fixture_for(CAPTURE, &s));
    let out = out.expect("held");
    assert_eq!(out["decision"], json!("deny"));
    assert!(out["reason"].as_str().unwrap().starts_with(HELD));
    assert!(out.get("hookSpecificOutput").is_none(), "{out}");
    // A central deny.
    server.set_tool_enabled("mcp_preloop_send_note", false);
    let (out, _) = home.run(Event::BeforeTool, &fixture_for(CAPTURE, &s));
    assert_eq!(out, Some(json!({"decision": "deny", "reason": "Tool blocked in Preloop"})));
}
