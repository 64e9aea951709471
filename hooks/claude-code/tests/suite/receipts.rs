//! Regression tests for mission audit 3's receipt and session findings
//! (issue 23), end to end: the Claude Code hook processes against the fake
//! Preloop server and on the local inbox. Each failed on e53e516.

use crate::common::*;
use preloop_testkit::fake_server::FakeServer;
use serde_json::{Value, json};

const S: &str = "3c1f4a52-7d0e-4f8b-9a61-2b5d8e0c7f13";

fn session_file(home: &Home, session: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(home.path().join(format!("sessions/{session}.json"))).unwrap())
        .unwrap()
}

/// D-2: a run started by Preloop's flow sidecar (`PRELOOP_FLOW_EXECUTION_ID`)
/// sends its execution on the permission check and records it in the
/// session file; the old name still works.
#[test]
fn d2_preloops_flow_execution_variable_reaches_the_check_and_the_session_file() {
    for var in ["PRELOOP_FLOW_EXECUTION_ID", "PRELOOP_EXECUTION_ID"] {
        let (home, server) = (Home::new("d2"), FakeServer::start());
        let extra = [(var, "exec-1")];
        run_s("SessionStart", &home, &server, &extra, &payload("SessionStart", S));
        run_s("PreToolUse", &home, &server, &extra, &payload("PreToolUse", S));
        assert_eq!(server.hook_call("permission-check")["flow_execution_id"], json!("exec-1"), "{var}");
        assert_eq!(session_file(&home, S)["execution_id"], json!("exec-1"), "{var}");
    }
}

/// D-3 (server): after SessionEnd, a late UserPromptSubmit does not call
/// session-start (which reopens an ended session) and does not carry a note
/// sent after the end; the session stays ended on the server. A SessionStart
/// (resume) reopens it and carries the note.
#[test]
fn d3_a_late_prompt_never_reopens_an_ended_session() {
    let (home, server) = (Home::new("d3"), FakeServer::start());
    run_s("SessionStart", &home, &server, &[], &payload("SessionStart", S));
    run_s("SessionEnd", &home, &server, &[], &payload("SessionEnd", S));
    let note = server.send_note(json!({"external_session_id": S, "text": "after end"}))["note_id"]
        .as_str()
        .unwrap()
        .to_string();
    server.clear_requests();
    assert_eq!(run_s("UserPromptSubmit", &home, &server, &[], &payload("UserPromptSubmit", S)), None);
    assert_eq!(run_s("Stop", &home, &server, &[], &payload("Stop", S)), None);
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert!(paths.is_empty(), "no call for an ended session: {paths:?}");
    assert_eq!(server.receipt(&note)["state"], json!("pending"));
    assert!(session_file(&home, S)["ended_at"].is_string(), "the mirror still says ended");
    let out = run_s("SessionStart", &home, &server, &[], &payload("SessionStart", S));
    assert_eq!(ids_in(&context(&out).unwrap()), vec![note.clone()]);
    assert_eq!(server.receipt(&note)["state"], json!("delivered"));
}
