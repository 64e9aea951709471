//! A sub-agent's child session (the `task` tool's; `session.created` with
//! `parentID`) is recorded as a child of the session that started it (issue
//! 32): the plugin names the parent on every payload of the child, the hook
//! resolves it to the parent's runtime session and registers the child with
//! it, so `notes send --children <parent>` reaches the sub-agent. Local
//! inbox and server mode.

use crate::common::*;
use preloop_opencode::Event;
use preloop_shared::operator::Target;
use preloop_shared::session::read_session_file;
use preloop_testkit::FakeServer;
use preloop_testkit::support::unique_session;
use serde_json::{Value, json};

fn created(session: &str, parent: Option<&str>) -> Value {
    let mut p = OpenCode::fixture_for("session.created.json", session);
    if let Some(parent) = parent {
        p["parent_session_id"] = json!(parent);
    }
    p
}

fn runtime_of(home: &Home, session: &str) -> String {
    read_session_file(home.path(), session).unwrap().expect("a session file").runtime_session_id
}

fn parent_of(home: &Home, session: &str) -> Option<String> {
    read_session_file(home.path(), session).unwrap().expect("a session file").parent_session_id
}

#[test]
fn a_sub_agents_session_is_its_parents_child_in_the_local_inbox() {
    let home = Home::new("oc-sub");
    let (p, c) = (unique_session("parent"), unique_session("child"));
    home.run(Event::SessionCreated, &created(&p, None));
    home.run(Event::SessionCreated, &created(&c, Some(&p)));
    assert_eq!(parent_of(&home, &c), Some(runtime_of(&home, &p)));
    assert_eq!(parent_of(&home, &p), None);
    // `notes send --children all --parent <the parent>` reaches the sub-agent's session,
    // by the parent's OpenCode id and by its runtime id.
    for parent in [p.clone(), runtime_of(&home, &p)] {
        let id = home.send_to(Target::Children { parent, all: true }, "MARK-sub");
        let mut payload = OpenCode::fixture_for("tool.execute.after.json", &c);
        payload["parent_session_id"] = json!(p);
        let (out, _) = home.run(Event::ToolExecuteAfter, &payload);
        let text = out.expect("the note")["text"].as_str().unwrap().to_string();
        assert!(text.contains("MARK-sub"), "{text}");
        assert_eq!(home.state(&id), "delivered");
    }
}

#[test]
fn a_later_hook_of_the_sub_agent_registers_it_as_the_child_too() {
    // session.created is not awaited by OpenCode: the child's first hook may register it.
    let home = Home::new("oc-sub-late");
    let (p, c) = (unique_session("parent"), unique_session("child"));
    home.run(Event::SessionCreated, &created(&p, None));
    let mut chat = OpenCode::fixture_for("chat.message.json", &c);
    chat["parent_session_id"] = json!(p);
    home.run(Event::ChatMessage, &chat);
    assert_eq!(parent_of(&home, &c), Some(runtime_of(&home, &p)));
}

#[test]
fn an_unknown_or_ended_parent_is_not_recorded_and_the_child_still_runs() {
    let home = Home::new("oc-sub-unknown");
    let c = unique_session("child");
    let (out, run) = home.run(Event::SessionCreated, &created(&c, Some("ses_nobody")));
    assert_eq!(out, None);
    run.assert_exit_0("session.created");
    assert_eq!(parent_of(&home, &c), None);
    // An ended parent: not a live run, no child of it.
    let (p, c2) = (unique_session("parent"), unique_session("child2"));
    home.run(Event::SessionCreated, &created(&p, None));
    home.run(Event::Dispose, &OpenCode::fixture_for("dispose.json", &p));
    home.run(Event::SessionCreated, &created(&c2, Some(&p)));
    assert_eq!(parent_of(&home, &c2), None);
    // A session is never its own parent.
    let s = unique_session("self");
    home.run(Event::SessionCreated, &created(&s, Some(&s)));
    assert_eq!(parent_of(&home, &s), None);
}

#[test]
fn the_harness_parent_outranks_the_exported_variable() {
    // The whole OpenCode process was started by a conductor (PRELOOP_PARENT_SESSION_ID);
    // its sub-agent is the child of the session whose task tool runs it.
    let home = Home::new("oc-sub-env");
    let (p, c) = (unique_session("parent"), unique_session("child"));
    let conductor = "0b7e3c1e-2f7a-4c59-9a53-3c8f5f1f6a11";
    let home = home.with_env("PRELOOP_PARENT_SESSION_ID", conductor);
    home.run(Event::SessionCreated, &created(&p, None));
    home.run(Event::SessionCreated, &created(&c, Some(&p)));
    assert_eq!(parent_of(&home, &c), Some(runtime_of(&home, &p)));
}

#[test]
fn on_the_server_the_child_registers_with_its_parents_runtime_session() {
    let server = FakeServer::start();
    let home = Home::for_server("oc-sub-srv", &server);
    let (p, c) = (unique_session("parent"), unique_session("child"));
    home.run(Event::SessionCreated, &created(&p, None));
    let parent_rt = runtime_of(&home, &p);
    server.clear_requests();
    home.run(Event::SessionCreated, &created(&c, Some(&p)));
    let starts: Vec<Value> =
        server.hook_calls().into_iter().filter(|(route, _)| route == "session-start").map(|(_, b)| b).collect();
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert_eq!(starts[0]["parent_session_id"], json!(parent_rt));
    assert_eq!(parent_of(&home, &c), Some(parent_rt));
}
