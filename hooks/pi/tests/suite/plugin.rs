//! The extension's protocol, end to end on the built hook commands: a note
//! is acked `delivered` only once the extension confirmed it applied the
//! answer; without the confirmation it goes back to the spool and the next
//! carrying hook takes it.

use crate::common::*;
use preloop_pi::Event;
use preloop_testkit::support::unique_session;

fn payload(event: Event, session: &str) -> Vec<u8> {
    let v = Pi::fixture_for(&format!("{}.json", event.name()), session);
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn a_note_is_delivered_only_once_applied() {
    let home = Home::new("pi-ack");
    let s = unique_session("ack");
    home.run_plugin(&Pi::bin(Event::SessionStart), &payload(Event::SessionStart, &s), Some("applied"), &[])
        .assert_exit_0("session_start");
    let id = home.send(&s, "MARK-unapplied");
    // The extension could not hand it to Pi: stdin closed without `applied`.
    let r = home.run_plugin(&Pi::bin(Event::ToolResult), &payload(Event::ToolResult, &s), None, &[]);
    r.assert_exit_0("tool_result");
    assert!(r.out().contains("MARK-unapplied"), "{}", r.out());
    assert_ne!(home.state(&id), "delivered", "not applied: not delivered");
    // Anything but `applied` is no confirmation either.
    let r = home.run_plugin(&Pi::bin(Event::ToolResult), &payload(Event::ToolResult, &s), Some("dropped"), &[]);
    assert!(r.out().contains("MARK-unapplied"), "{}", r.out());
    assert_ne!(home.state(&id), "delivered");
    // The next carrying hook takes it again, and this time it is applied.
    let r = home.run_plugin(&Pi::bin(Event::ToolResult), &payload(Event::ToolResult, &s), Some("applied"), &[]);
    let ans = r.json("tool_result").expect("the note again");
    assert_eq!(ans["kind"], "context");
    assert!(ans["text"].as_str().unwrap().contains("MARK-unapplied"));
    assert_eq!(home.state(&id), "delivered");
    // Nothing pending: nothing printed, no confirmation needed.
    let r = home.run_plugin(&Pi::bin(Event::ToolResult), &payload(Event::ToolResult, &s), None, &[]);
    assert_eq!(r.out(), "");
}

/// A tool call in a session with a pending note carries nothing (a note
/// there and one from tool_result would be two steers in one batch) and
/// leaves the note pending for tool_result.
#[test]
fn a_tool_call_carries_nothing() {
    let home = Home::new("pi-tc");
    let s = unique_session("tc");
    home.run_plugin(&Pi::bin(Event::SessionStart), &payload(Event::SessionStart, &s), Some("applied"), &[]);
    let id = home.send(&s, "MARK-wait");
    let r = home.run_plugin(&Pi::bin(Event::ToolCall), &payload(Event::ToolCall, &s), Some("applied"), &[]);
    r.assert_exit_0("tool_call");
    assert_eq!(r.out(), "");
    assert_eq!(home.state(&id), "pending");
}
