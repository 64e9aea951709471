//! Preloop's `send_note` MCP tool gets the caller's harness session id
//! (issue 33): preToolUse prints `modifiedArgs` (the whole input,
//! `preloop_caller_session_id` = the payload's session id, replacing a
//! model-supplied one) and no decision: on Copilot CLI 1.0.102
//! `modifiedArgs` alone rewrites the call and keeps Copilot's own permission
//! flow (docs/event-matrix.md, "send_note caller session"). Copilot spells
//! an MCP tool `<server>-<tool>` and sends nothing else about it.

use crate::common::*;
use preloop_copilot::{Event, mcp_tool};
use preloop_testkit::hooks;
use serde_json::{Value, json};

const CAPTURE: &str = "preToolUse.mcp-send_note.json";

fn rewritten(s: &str) -> Value {
    json!({"modifiedArgs": {"text": "hello child", "runtime_session_id": "rt-1", "preloop_caller_session_id": s}})
}

#[test]
fn copilots_mcp_tool_spelling() {
    assert_eq!(mcp_tool("preloop-send_note"), Some("send_note"));
    assert_eq!(mcp_tool("my-pre-loop-send_note"), Some("send_note"));
    for builtin in ["bash", "view", "send_note", "-send_note", "preloop-"] {
        assert_eq!(mcp_tool(builtin), None, "{builtin}");
    }
}

#[test]
fn send_note_gets_the_callers_session_id_and_no_decision() {
    let (server, home, s) = hooks::started_on_server::<Copilot>("sn");
    for tool in ["preloop-send_note", "my-pre-loop-send_note"] {
        server.clear_requests();
        let mut payload = fixture_for(CAPTURE, &s);
        payload["toolName"] = json!(tool);
        let (out, _) = home.run(Event::PreToolUse, &payload);
        assert_eq!(out, Some(rewritten(&s)), "{tool}: the forged value is replaced, the rest kept, no decision");
        let body = hooks::the_one_pre_tool_check(&server, "copilot_cli", tool);
        assert_eq!(body["tool_input"]["preloop_caller_session_id"], json!(s), "{tool}");
    }
}

#[test]
fn send_note_is_rewritten_in_local_mode_too() {
    let (home, s) = hooks::started_locally::<Copilot>("sn-local");
    let (out, _) = home.run(Event::PreToolUse, &fixture_for(CAPTURE, &s));
    assert_eq!(out, Some(rewritten(&s)));
}

#[test]
fn other_tools_are_never_rewritten() {
    let (_server, home, s) = hooks::started_on_server::<Copilot>("sn-other");
    for tool in ["bash", "send_note", "preloop-send_notes", "preloop-list_notes", "-send_note"] {
        let mut payload = fixture_for(CAPTURE, &s);
        payload["toolName"] = json!(tool);
        let (out, _) = home.run(Event::PreToolUse, &payload);
        assert_eq!(out, None, "{tool}: allow with no note prints nothing");
    }
}

#[test]
fn a_central_deny_carries_no_rewrite() {
    let (server, home, s) = hooks::started_on_server::<Copilot>("sn-deny");
    server.set_tool_enabled("preloop-send_note", false);
    let (out, _) = home.run(Event::PreToolUse, &fixture_for(CAPTURE, &s));
    let out = out.expect("a deny");
    assert_eq!(out["permissionDecision"], json!("deny"));
    assert!(out.get("modifiedArgs").is_none(), "{out}");
}
