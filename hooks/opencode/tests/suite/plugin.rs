//! The plugin's protocol, end to end on the built hook commands: a note is
//! acked `delivered` only once the plugin confirmed it applied the answer;
//! without the confirmation it goes back to the spool and the next carrying
//! hook takes it.

use crate::common::*;
use preloop_opencode::Event;
use preloop_testkit::support::unique_session;

fn payload(event: Event, session: &str) -> Vec<u8> {
    let v = OpenCode::fixture_for(&format!("{}.json", event.name()), session);
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn a_note_is_delivered_only_once_applied() {
    let home = Home::new("oc-ack");
    let s = unique_session("ack");
    home.run_plugin(&OpenCode::bin(Event::SessionCreated), &payload(Event::SessionCreated, &s), Some("applied"), &[])
        .assert_exit_0("session.created");
    let id = home.send(&s, "MARK-unapplied");
    let after = Event::ToolExecuteAfter;
    // The plugin could not hand it to OpenCode: stdin closed without `applied`.
    let r = home.run_plugin(&OpenCode::bin(after), &payload(after, &s), None, &[]);
    r.assert_exit_0("tool.execute.after");
    assert!(r.out().contains("MARK-unapplied"), "{}", r.out());
    assert_ne!(home.state(&id), "delivered", "not applied: not delivered");
    // Anything but `applied` is no confirmation either.
    let r = home.run_plugin(&OpenCode::bin(after), &payload(after, &s), Some("dropped"), &[]);
    assert!(r.out().contains("MARK-unapplied"), "{}", r.out());
    assert_ne!(home.state(&id), "delivered");
    // The next carrying hook takes it again, and this time it is applied.
    let r = home.run_plugin(&OpenCode::bin(after), &payload(after, &s), Some("applied"), &[]);
    let ans = r.json("tool.execute.after").expect("the note again");
    assert_eq!(ans["kind"], "context");
    assert!(ans["text"].as_str().unwrap().contains("MARK-unapplied"));
    assert_eq!(home.state(&id), "delivered");
    // Nothing pending: nothing printed, no confirmation needed.
    let r = home.run_plugin(&OpenCode::bin(after), &payload(after, &s), None, &[]);
    assert_eq!(r.out(), "");
}

/// session.created (not awaited by OpenCode) and tool.execute.before claim
/// nothing: a note pending then waits for chat.message or the tool's after.
#[test]
fn the_start_and_the_gate_carry_nothing() {
    let home = Home::new("oc-tc");
    let s = unique_session("tc");
    let id = home.send(&s, "MARK-wait");
    let r = home.run_plugin(&OpenCode::bin(Event::SessionCreated), &payload(Event::SessionCreated, &s), None, &[]);
    r.assert_exit_0("session.created");
    assert_eq!(r.out(), "");
    let gate = Event::ToolExecuteBefore;
    let r = home.run_plugin(&OpenCode::bin(gate), &payload(gate, &s), Some("applied"), &[]);
    r.assert_exit_0("tool.execute.before");
    assert_eq!(r.out(), "");
    assert_eq!(home.state(&id), "pending");
    let r = home.run_plugin(&OpenCode::bin(Event::ChatMessage), &payload(Event::ChatMessage, &s), Some("applied"), &[]);
    assert!(r.out().contains("MARK-wait"), "{}", r.out());
    assert_eq!(home.state(&id), "delivered");
}
