//! Preloop's `send_note` MCP tool gets the caller's harness session id
//! (issue 33, part 1): the PreToolUse hook prints `updatedInput` with
//! `preloop_caller_session_id` set to the payload's session id, replacing a
//! model-supplied one, and never a permission decision (Claude Code 2.1.328
//! honours `updatedInput` alone and keeps its own permission flow,
//! docs/event-matrix.md "send_note caller session").

use crate::common::*;
use preloop_testkit::fake_server::FakeServer;
use preloop_testkit::stub_server::StubServer;
use preloop_testkit::support::{fixture_for, is_deny};
use serde_json::{Value, json};

const S: &str = "6c6211a2-24a1-4699-8ef8-88c2ec7d1e75";

/// The real capture of a `mcp__preloop__send_note` call whose model forged
/// the caller field, with `tool_name` set.
fn send_note(session: &str, tool_name: &str) -> Value {
    let mut v = fixture_for(FIXTURES, "PreToolUse.mcp-send_note.json", session);
    v["tool_name"] = json!(tool_name);
    v
}

fn updated_input(out: &Option<Value>) -> Option<&Value> {
    out.as_ref()?.get("hookSpecificOutput")?.get("updatedInput")
}

fn no_decision(out: &Option<Value>) -> bool {
    out.as_ref().is_none_or(|o| o["hookSpecificOutput"].get("permissionDecision").is_none())
}

#[test]
fn send_note_gets_the_callers_session_id_and_no_decision() {
    let (home, server) = (Home::new("sn"), FakeServer::start());
    // A server name with `__` in it: the tool is what follows the last `__`.
    for tool in ["mcp__preloop__send_note", "mcp__my__preloop__send_note"] {
        server.clear_requests();
        let out = run_s("PreToolUse", &home, &server, &[], &send_note(S, tool));
        let upd = updated_input(&out).unwrap_or_else(|| panic!("{tool}: no updatedInput in {out:?}"));
        assert_eq!(
            upd,
            &json!({"text": "hello child", "runtime_session_id": "rt-1", "preloop_caller_session_id": S}),
            "{tool}: the forged value is replaced, the rest kept"
        );
        assert!(no_decision(&out), "{tool}: the rewrite grants nothing: {out:?}");
        // The gate was asked about the input that will run.
        let check = server
            .requests()
            .into_iter()
            .filter(|r| r.path.ends_with("/permission-check"))
            .filter_map(|r| r.body)
            .next_back()
            .expect("a permission check");
        assert_eq!(check["tool_input"]["preloop_caller_session_id"], S, "{tool}");
    }
}

#[test]
fn send_note_is_rewritten_in_local_mode_too() {
    let home = Home::new("sn-local");
    let out = run("PreToolUse", home.path(), &[], &send_note(S, "mcp__preloop__send_note"));
    assert_eq!(updated_input(&out).unwrap()["preloop_caller_session_id"], S);
    assert!(no_decision(&out));
}

#[test]
fn other_tools_are_never_rewritten() {
    let (home, server) = (Home::new("sn-other"), FakeServer::start());
    for tool in
        ["Bash", "send_note", "mcp__preloop__send_notes", "mcp__preloop__list_notes", "mcp____send_note", "MCP:other"]
    {
        let out = run_s("PreToolUse", &home, &server, &[], &send_note(S, tool));
        assert_eq!(updated_input(&out), None, "{tool}: {out:?}");
        assert_eq!(out, None, "{tool}: allow with no note prints nothing");
    }
}

#[test]
fn a_central_deny_stays_a_deny_without_a_rewrite() {
    let deny = StubServer::deny_all();
    let home = Home::new("sn-deny");
    let env = [("PRELOOP_URL", deny.url()), ("PRELOOP_TOKEN", "agt_probe".to_string())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = run("PreToolUse", home.path(), &env, &send_note(S, "mcp__preloop__send_note"));
    assert!(is_deny(&out), "{out:?}");
    assert_eq!(updated_input(&out), None, "a deny carries no rewrite: {out:?}");
}

#[test]
fn fail_closed_denies_without_a_rewrite_and_fail_open_still_rewrites() {
    let home = Home::new("sn-fail");
    let dead = preloop_testkit::support::dead_url();
    let base = [("PRELOOP_URL", dead.as_str()), ("PRELOOP_TOKEN", "agt_probe")];
    let mut closed = base.to_vec();
    closed.push(("PRELOOP_PRE_TOOL_USE_ON_ERROR", "deny"));
    let out = run("PreToolUse", home.path(), &closed, &send_note(S, "mcp__preloop__send_note"));
    assert!(is_deny(&out), "{out:?}");
    assert_eq!(updated_input(&out), None);
    let out = run("PreToolUse", home.path(), &base, &send_note(S, "mcp__preloop__send_note"));
    assert_eq!(updated_input(&out).unwrap()["preloop_caller_session_id"], S, "{out:?}");
    assert!(no_decision(&out));
}
