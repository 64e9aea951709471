//! The scenarios OpenCode shares with other harnesses, from
//! `preloop_testkit::hooks`, its hooks picked by what the registry says
//! they do: bad stdin, a quiet session, the stop rescue and its cap
//! (OpenCode has no brake of its own: ours is the only one), the session
//! end (local and server mode), the first prompt, and a dead server. Every
//! run speaks the plugin's protocol and confirms the answer.
//!
//! Written out rather than through `hook_scenarios!`, because OpenCode's
//! start (the event `session.created`, which OpenCode does not await)
//! registers without pulling: `server_start_registers_without_pulling`
//! replaces the shared registration scenario.

use crate::common::*;
use preloop_opencode::Event;
use preloop_testkit::hooks as scenarios;
use preloop_testkit::support::unique_session;
use preloop_testkit::{FakeServer, support::context_of, support::ids_in};
use serde_json::json;

const STOP_ACTIVE: &str = "experimental.text.complete.stop_hook_active.json";

fn text(event: Event, key: &str) -> String {
    scenarios::capture_field::<OpenCode>(event, key).as_str().expect("a string in the capture").to_string()
}

#[test]
fn every_binary_exits_0_with_nothing_on_bad_stdin() {
    scenarios::bad_stdin_is_ignored::<OpenCode>(
        &Home::new("bad"),
        &[
            br#"{"v":1,"event":"session.created","session_id":7,"mode":"run"}"#.to_vec(),
            br#"{"v":2,"event":"tool.execute.before","session_id":"s","mode":"run","tool_name":"bash"}"#.to_vec(),
            br#"{"v":1,"event":"tool.execute.before","session_id":"s","mode":"run","tool_name":"bash","extra":1}"#
                .to_vec(),
            br#"{"v":1,"event":"chat.message","session_id":"s"}"#.to_vec(),
        ],
    );
}

#[test]
fn a_session_with_nothing_pending_prints_nothing() {
    let s = unique_session("q");
    scenarios::nothing_pending_prints_nothing::<OpenCode>(
        &Home::new("quiet"),
        || s.clone(),
        std::time::Duration::from_secs(2),
    );
}

#[test]
fn local_stop_rescues_once_per_stop_and_three_times_per_session() {
    scenarios::local_stop_rescues_three_times::<OpenCode>(
        &Home::new("stop"),
        "as",
        Event::SessionCreated,
        Event::TextComplete,
        STOP_ACTIVE,
    );
}

#[test]
fn local_session_end_makes_pending_notes_undeliverable() {
    scenarios::local_end_drops_pending::<OpenCode>(&Home::new("end"), "se", Event::SessionCreated, Event::Dispose);
}

/// session.created registers the session (source `opencode`, the project
/// folder) and claims nothing; the first chat.message takes a note sent
/// since, pulled with deferral and acked once applied.
#[test]
fn server_start_registers_without_pulling() {
    let server = FakeServer::start();
    let home = Home::for_server("reg", &server);
    let s = unique_session("reg");
    assert_eq!(scenarios::run_own::<OpenCode>(&home, Event::SessionCreated, &s), None);
    let calls = server.hook_calls();
    let routes: Vec<&str> = calls.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(routes, ["session-start"], "no pull on an event OpenCode does not await");
    let start = &calls[0].1;
    assert_eq!(
        (&start["source"], &start["session_id"], &start["cwd"]),
        (&json!("opencode"), &json!(s), &json!(text(Event::SessionCreated, "cwd")))
    );
    let file = home.session_file(&s).expect("the public session file");
    assert_eq!((file.agent_kind.as_str(), file.mode.as_str()), ("opencode", "server"));

    server.clear_requests();
    let id = server.send_to_session(&s, "run the tests first");
    let out = scenarios::run_own::<OpenCode>(&home, Event::ChatMessage, &s);
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id.clone()]);
    let start = server.hook_call("session-start");
    assert_eq!(
        (&start["first_prompt"], &start["hook_event_name"]),
        (&json!(text(Event::ChatMessage, "prompt")), &json!("UserPromptSubmit"))
    );
    assert_eq!(server.note_state(&id), ("delivered".into(), Some("session_start".into()), None));
}

#[test]
fn server_stop_continues_and_reports_the_turn_end() {
    let server = FakeServer::start();
    let home = Home::for_server("stop", &server);
    scenarios::server_stop_continues::<OpenCode>(
        &server,
        &home,
        Event::SessionCreated,
        Event::TextComplete,
        STOP_ACTIVE,
    );
}

#[test]
fn server_session_end_in_process() {
    let server = FakeServer::start();
    let home = Home::for_server("end", &server).with_env(preloop_shared::detach::DETACH_ENV, "0");
    let reason = text(Event::Dispose, "reason");
    scenarios::server_end_in_process::<OpenCode>(&server, &home, Event::SessionCreated, Event::Dispose, &reason);
}

#[test]
fn server_session_end_in_a_detached_worker() {
    let server = FakeServer::start();
    let home = Home::for_server("end-detached", &server);
    let reason = text(Event::Dispose, "reason");
    scenarios::server_end_detached::<OpenCode>(&server, &home, Event::SessionCreated, Event::Dispose, &reason);
}

#[test]
fn an_unreachable_server_fails_open() {
    let s = unique_session("un");
    scenarios::unreachable_server_fails_open::<OpenCode>(&Home::dead_server("dead"), &s, &[]);
}
