//! Preloop's `send_note` MCP tool gets the caller's harness session id
//! (issue 33): tool.execute.before answers `{"kind": "args", "args": …}`
//! (the whole input, `preloop_caller_session_id` = the payload's session
//! id, replacing a model-supplied one) and no decision; the plugin sets
//! those arguments in the object OpenCode 1.18.33 hands the MCP server,
//! before OpenCode's own permission check (docs/event-matrix.md, "send_note
//! caller session"). OpenCode names an MCP tool `<server>_<tool>`; the
//! plugin sends the MCP servers its config names, and only those make a
//! tool an MCP tool.

use crate::common::*;
use preloop_opencode::{Event, mcp_tool};
use preloop_shared::flow::McpTool;
use preloop_testkit::hooks;
use serde_json::{Value, json};

const FORGED: &str = "FORGED";

fn send_note(session: &str, tool: &str, servers: &[&str]) -> Value {
    let mut p = OpenCode::fixture_for("tool.execute.before.json", session);
    p["tool_name"] = json!(tool);
    p["tool_input"] = json!({"text": "hello child", "runtime_session_id": "rt-1", "preloop_caller_session_id": FORGED});
    p["mcp_servers"] = json!(servers);
    p
}

fn rewritten(s: &str) -> Value {
    json!({"kind": "args", "args": {"text": "hello child", "runtime_session_id": "rt-1", "preloop_caller_session_id": s}})
}

#[test]
fn opencodes_mcp_tool_spelling() {
    let servers = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(mcp_tool("preloop_send_note", &servers(&["preloop"])), McpTool::SendNote);
    // OpenCode makes every character but [A-Za-z0-9_-] an `_`, one per UTF-16 unit.
    assert_eq!(mcp_tool("my_pre_loop_send_note", &servers(&["my.pre loop"])), McpTool::SendNote);
    assert_eq!(mcp_tool("a__send_note", &servers(&["a😀"])), McpTool::Other);
    assert_eq!(mcp_tool("a___send_note", &servers(&["a😀"])), McpTool::SendNote);
    // A server name holding `_`: the configured server decides.
    assert_eq!(mcp_tool("a_b_send_note", &servers(&["a", "a_b"])), McpTool::SendNote);
    assert_eq!(mcp_tool("a_b_send_note", &servers(&["a"])), McpTool::Other);
    for (tool, cfg) in [
        ("preloop_send_note", vec![]),
        ("preloop_send_note", servers(&["other"])),
        ("preloop_send_notes", servers(&["preloop"])),
        ("preloop_list_notes", servers(&["preloop"])),
        ("send_note", servers(&["preloop"])),
        ("_send_note", servers(&[""])),
        ("bash", servers(&["preloop"])),
    ] {
        assert_eq!(mcp_tool(tool, &cfg), McpTool::Other, "{tool} {cfg:?}");
    }
}

#[test]
fn send_note_gets_the_callers_session_id_and_no_decision() {
    let (server, home, s) = hooks::started_on_server::<OpenCode>("sn");
    for (tool, servers) in [("preloop_send_note", &["preloop"][..]), ("my_pre_loop_send_note", &["x", "my.pre loop"])] {
        server.clear_requests();
        let (out, _) = home.run(Event::ToolExecuteBefore, &send_note(&s, tool, servers));
        assert_eq!(out, Some(rewritten(&s)), "{tool}: the forged value is replaced, the rest kept, no decision");
        // The central check sees the input that will run.
        let body = hooks::the_one_pre_tool_check(&server, "opencode", tool);
        assert_eq!(body["tool_input"]["preloop_caller_session_id"], json!(s), "{tool}");
    }
}

#[test]
fn send_note_is_rewritten_in_local_mode_too() {
    let (home, s) = hooks::started_locally::<OpenCode>("sn-local");
    let (out, _) = home.run(Event::ToolExecuteBefore, &send_note(&s, "preloop_send_note", &["preloop"]));
    assert_eq!(out, Some(rewritten(&s)));
}

#[test]
fn other_tools_are_never_rewritten() {
    let (_server, home, s) = hooks::started_on_server::<OpenCode>("sn-other");
    for (tool, servers) in [
        ("bash", &["preloop"][..]),
        ("send_note", &["preloop"]),
        ("preloop_send_note", &[]),
        ("preloop_send_note", &["other"]),
        ("preloop_send_notes", &["preloop"]),
        ("preloop_list_notes", &["preloop"]),
        ("mcp__preloop__send_note", &["preloop"]),
    ] {
        let (out, _) = home.run(Event::ToolExecuteBefore, &send_note(&s, tool, servers));
        assert_eq!(out, None, "{tool} {servers:?}: allow with no note prints nothing");
    }
    // A payload with no `mcp_servers` at all (an older plugin): no MCP tool.
    let mut p = send_note(&s, "preloop_send_note", &[]);
    p.as_object_mut().unwrap().remove("mcp_servers");
    assert_eq!(home.run(Event::ToolExecuteBefore, &p).0, None);
}

#[test]
fn a_central_deny_carries_no_rewrite() {
    let (server, home, s) = hooks::started_on_server::<OpenCode>("sn-deny");
    server.set_tool_enabled("preloop_send_note", false);
    let (out, _) = home.run(Event::ToolExecuteBefore, &send_note(&s, "preloop_send_note", &["preloop"]));
    let out = out.expect("a deny");
    assert_eq!(out["kind"], json!("deny"), "{out}");
    assert!(out.get("args").is_none(), "{out}");
}

#[test]
fn fail_open_still_rewrites_and_fail_closed_denies() {
    // An unreachable server: the gate's fail policy. Open leaves OpenCode's own flow (the
    // rewrite grants nothing, so it rides); closed denies with no rewrite.
    let home = Home::dead_server("sn-fail").with_env("PRELOOP_CONNECT_TIMEOUT_MS", "200");
    let s = preloop_testkit::support::unique_session("sn-fail");
    let (out, _) = home.run(Event::ToolExecuteBefore, &send_note(&s, "preloop_send_note", &["preloop"]));
    assert_eq!(out, Some(rewritten(&s)));
    let closed = Home::dead_server("sn-fail-closed")
        .with_env("PRELOOP_CONNECT_TIMEOUT_MS", "200")
        .with_env("PRELOOP_PRE_TOOL_USE_ON_ERROR", "deny");
    let (out, _) = closed.run(Event::ToolExecuteBefore, &send_note(&s, "preloop_send_note", &["preloop"]));
    assert_eq!(out.expect("a deny")["kind"], json!("deny"));
}
