//! Regression tests for the findings of red-team report 2 and mission audit
//! 2 that a Cursor hook shows (issue 12). Each one reproduces the finding's
//! own steps and failed on b6fdd07, the commit before the fixes.

use crate::common::*;
use preloop_cursor::Event;
use preloop_testkit::stub_server::StubServer;
use preloop_testkit::support::{is_deny, unescape_json_escapes, walk};
use serde_json::{Value, json};

/// A payload of a Cursor gate with its `tool_input` (or `command`) JSON
/// text given as is.
fn gate_payload(event: Event, session: &str, tool_input: &str) -> String {
    let common = format!(
        r#""conversation_id":"{session}","session_id":"{session}","generation_id":"g1","model":"default","hook_event_name":"{}","cursor_version":"2026.07.23-e383d2b","workspace_roots":["/ws"],"cwd":"""#,
        event.name()
    );
    match event {
        Event::BeforeShellExecution => format!(r#"{{{common},"command":{tool_input},"extra":{{"o":{}}}}}"#, deep()),
        Event::BeforeMcpExecution => {
            format!(r#"{{{common},"tool_name":"db_exec","mcp_server_name":"db","tool_input":{tool_input}}}"#)
        }
        _ => format!(r#"{{{common},"tool_name":"db_exec","tool_input":{tool_input},"tool_use_id":"u1"}}"#),
    }
}

fn deep() -> String {
    format!("{}{}", "[".repeat(130), "]".repeat(130))
}

/// H1: the three Cursor gates check a payload `serde_json` alone refuses (a
/// lone surrogate escape as Node writes it, 130 levels of nesting) and the
/// server's deny holds; never the blanket `allow`.
#[test]
fn h1_an_unparseable_tool_input_is_still_checked_and_the_deny_holds() {
    let deny = StubServer::deny_all();
    for policy in ["open", "deny"] {
        let home = Home::server("h1", &deny.url(), "agt_probe")
            .with_env("PRELOOP_PRE_TOOL_USE_ON_ERROR", policy)
            .with_env("PRELOOP_PERMISSION_REQUEST_ON_ERROR", policy);
        for event in [Event::BeforeShellExecution, Event::BeforeMcpExecution, Event::PreToolUse] {
            let inputs: Vec<(&str, String)> = match event {
                Event::BeforeShellExecution => vec![
                    ("lone surrogate", r#""rm -rf /srv/prod # \ud800""#.to_string()),
                    ("nesting elsewhere in the payload", r#""rm -rf /srv/prod""#.to_string()),
                ],
                _ => vec![
                    ("lone surrogate", r#"{"q":"DROP TABLE x # \ud800"}"#.to_string()),
                    ("130-deep nesting", format!(r#"{{"q":"DROP TABLE x","o":{}}}"#, deep())),
                    (
                        "130-deep nesting, JSON-encoded",
                        json!(format!(r#"{{"q":"DROP TABLE x","o":{}}}"#, deep())).to_string(),
                    ),
                ],
            };
            for (what, input) in inputs {
                let before = deny.count("permission-check");
                let r = home.run_raw(event, gate_payload(event, "h1", &input).as_bytes());
                r.assert_exit_0(event.name());
                let out = check_stdout(event, &r.out());
                assert_eq!(deny.count("permission-check"), before + 1, "{}: {what}: the check was made", event.name());
                assert!(is_deny(&Some(out.clone())), "{} ({policy}): {what}: the deny holds, got {out}", event.name());
                let sent = deny.requests().into_iter().rev().find(|r| r.route() == "permission-check").unwrap().json();
                let seen = sent["tool_input"].to_string();
                assert!(seen.contains("rm -rf /srv/prod") || seen.contains("DROP TABLE x"), "{what}: {sent}");
            }
        }
    }
}

/// H1: a payload no parser can use, on a Cursor gate in server mode: the
/// fail policy answers; with fail-closed settings no gate says `allow`.
#[test]
fn h1_an_unusable_gate_payload_never_gets_a_blanket_allow() {
    let deny = StubServer::deny_all();
    let bad: [&[u8]; 3] =
        [br#"{"conversation_id":"u","hook_event_name":"preToolUse","tool_input":{"q":"x"#, b"[]", b"\xff"];
    let closed =
        Home::server("h1-unusable", &deny.url(), "agt_probe").with_env("PRELOOP_PRE_TOOL_USE_ON_ERROR", "deny");
    let default = Home::server("h1-default", &deny.url(), "agt_probe");
    for b in bad {
        for event in [Event::BeforeShellExecution, Event::BeforeMcpExecution, Event::PreToolUse] {
            let r = closed.run_raw(event, b);
            r.assert_exit_0(event.name());
            let out = check_stdout(event, &r.out());
            assert_eq!(
                out["permission"],
                "deny",
                "{} (fail-closed): {:?}: {out}",
                event.name(),
                String::from_utf8_lossy(b)
            );
            // The before* gates fail closed by default.
            if event != Event::PreToolUse {
                let r = default.run_raw(event, b);
                let out = check_stdout(event, &r.out());
                assert_eq!(out["permission"], "deny", "{} (default): {out}", event.name());
            }
        }
    }
}

/// A Cursor session with no folder open (`workspace_roots: []`, no cwd, no
/// `CURSOR_PROJECT_DIR`) is registered in the local inbox, so notes can be
/// addressed to it.
#[test]
fn a_session_with_no_folder_open_is_registered_locally() {
    for cli in [true, false] {
        let home = Home::new("no-folder");
        let s = session("nofolder");
        let mut v = session_start(&s, cli);
        v["workspace_roots"] = json!([]);
        v["cwd"] = json!("");
        home.run(Event::SessionStart, &v);
        let f = home.session_file(&s).expect("the session is registered");
        assert_eq!(f.cwd, None);
        let id = home.send(&s, "reach me");
        let out = home.run(Event::PreToolUse, &pre_tool(&s, "ls"));
        assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id.clone()], "cli={cli}");
        assert_eq!(home.state(&id), "delivered");
    }
}

/// L5: a hostile server that echoes the token JSON-`\u`-escaped never gets
/// it into Cursor's `env` output (which Cursor hands to the session's later
/// hooks and its commands), a file, or the log.
#[test]
fn l5_a_json_escaped_token_echo_never_reaches_the_env_output() {
    let srv = StubServer::escaped_token_echo();
    let token = "agt_RuntimeSecret_BBBB2222";
    let home = Home::server("escaped", &srv.url(), token);
    let s = session("e2");
    let mut seen = String::new();
    for (event, payload) in [
        (Event::SessionStart, session_start(&s, true)),
        (Event::BeforeSubmitPrompt, submit_prompt(&s, "hi")),
        (Event::BeforeShellExecution, shell(&s, "ls")),
        (Event::PreToolUse, pre_tool(&s, "ls")),
        (Event::Stop, stop(&s, "completed", 0)),
        (Event::SessionEnd, session_end(&s)),
    ] {
        let out: Value = home.run(event, &payload);
        assert!(out.get("env").is_none(), "{}: no runtime id to export: {out}", event.name());
        seen.push_str(&out.to_string());
    }
    for p in walk(&home.dir).into_iter().filter(|p| p.is_file()) {
        seen.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
    }
    assert!(!seen.contains(token), "the token leaked verbatim");
    assert!(!unescape_json_escapes(&seen).contains(token), "the token leaked JSON-escaped: {seen}");
}
