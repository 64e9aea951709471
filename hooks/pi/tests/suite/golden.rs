//! Golden tests: our extension's payloads (built from the Pi 0.73.1
//! captures in `fixtures/pi-0.73.1/events/`: the same session id, cwd,
//! prompt and tool call) parse into the checked-in inputs, every render
//! passes its schema, and the registry rows say what docs/contracts/pi.md
//! observed. No process, no network.
//!
//! Expected files live in `fixtures/pi-0.73.1/expected/`; regenerate them
//! with `PRELOOP_BLESS=1 cargo test -p preloop-pi --test all golden` and
//! review the diff.

use crate::common::*;
use preloop_pi::{Answer, Event, parse, render};
use preloop_shared::flow::{InputKind, Outcome};
use preloop_shared::runner::Parsed;
use preloop_testkit::golden::{self, note_block};
use preloop_testkit::support::{fixtures_dir, json_names};
use serde_json::{Value, json};

fn event_of(name: &str) -> Option<Event> {
    let stem = name.split('.').next()?;
    Pi::events().into_iter().find(|e| e.name() == stem)
}

#[test]
fn payloads_parse_to_the_golden_inputs() {
    let names = json_names(&fixtures_dir(Pi::FIXTURES));
    assert_eq!(names.len(), 7, "one payload per event, and agent_end without a UI: {names:?}");
    let ran = golden::check_parse_goldens::<Pi>(&names, |name, _| event_of(name), true);
    assert_eq!(ran, 7);
}

/// The payloads hold what Pi's own events and `ctx` held in the captures.
#[test]
fn payloads_follow_the_captures() {
    for event in Pi::events() {
        let capture = fixture(&format!("events/{}.json", event.name()));
        let payload = fixture(&format!("{}.json", event.name()));
        assert_eq!(payload["session_id"], capture["ctx"]["sessionId"], "{}", event.name());
        assert_eq!(payload["event"], capture["payload"]["type"]);
        for (ours, pi) in [("reason", "reason"), ("prompt", "prompt"), ("tool_name", "toolName")] {
            assert_eq!(payload.get(ours), capture["payload"].get(pi), "{} {ours}", event.name());
        }
    }
    assert_eq!(fixture("tool_call.json")["tool_input"], fixture("events/tool_call.json")["payload"]["input"]);
}

#[test]
fn parse_details() {
    let stop = |has_ui: bool| {
        let mut v = fixture("agent_end.json");
        v["has_ui"] = json!(has_ui);
        match parse(Event::AgentEnd, &v) {
            Ok(Parsed::Run(i)) => i.kind,
            _ => panic!(),
        }
    };
    // -p and json mode drop a continuation's answer: nothing is claimed there.
    assert_eq!(stop(false), InputKind::Stop { may_continue: false });
    assert_eq!(stop(true), InputKind::Stop { may_continue: true });
    // Our own note block as a prompt never titles the session.
    let mut p = fixture("before_agent_start.json");
    p["prompt"] = json!(note_block());
    assert!(
        matches!(parse(Event::BeforeAgentStart, &p), Ok(Parsed::Run(i)) if i.kind == InputKind::Prompt { prompt: String::new(), pull: true })
    );
    for event in Pi::events() {
        assert!(parse(event, &json!({})).is_err());
        assert!(parse(event, &json!("x")).is_err());
        let mut blank = fixture(&format!("{}.json", event.name()));
        blank["session_id"] = json!(" ");
        assert!(parse(event, &blank).is_err(), "{}", event.name());
        let mut future = fixture(&format!("{}.json", event.name()));
        future["v"] = json!(2);
        assert!(parse(event, &future).is_err(), "another protocol version is refused");
    }
    let mut no_tool = fixture("tool_call.json");
    no_tool.as_object_mut().unwrap().remove("tool_name");
    assert!(parse(Event::ToolCall, &no_tool).is_err());
}

#[test]
fn renders_match_the_goldens() {
    golden::check_render_goldens::<Pi>(&golden::render_cases("Tool blocked in Preloop"));
}

#[test]
fn carriers_hold_what_the_design_says() {
    let block = note_block();
    let notes = Outcome { context: Some(block.clone()), ..Outcome::default() };
    for event in [Event::SessionStart, Event::BeforeAgentStart, Event::ToolResult] {
        assert_eq!(render(event, &notes), Some(Answer::Context { text: block.clone() }), "{}", event.name());
    }
    assert_eq!(render(Event::ToolCall, &notes), None, "a tool call carries no note (two steers in one batch)");
    assert_eq!(render(Event::AgentEnd, &notes), None, "no continuation without continue_turn");
    let stop = Outcome { continue_turn: true, ..notes.clone() };
    assert_eq!(render(Event::AgentEnd, &stop), Some(Answer::Continue { text: block.clone() }));
    let deny = Outcome::deny("R");
    assert_eq!(render(Event::ToolCall, &deny), Some(Answer::Deny { reason: "R".into() }));
    assert_eq!(
        serde_json::to_value(Answer::Deny { reason: "R".into() }).unwrap(),
        json!({"kind": "deny", "reason": "R"})
    );
    assert_eq!(render(Event::SessionShutdown, &stop), None);
}

#[test]
fn every_render_passes_schema() {
    let rendered = golden::every_render_passes_schema::<Pi>(&[], &["\"allow\""], |_, _, _: &Value| {});
    assert!(rendered > 40);
}

#[test]
fn the_registry_rows_are_pis() {
    use preloop_shared::registry::{Carrier, Declaration, ServerClaim, StopBrake};
    let pi = preloop_shared::Harness::Pi.def();
    assert_eq!(Event::ToolCall.def().gate.unwrap().server_claim, ServerClaim::Never);
    assert_eq!(Event::ToolCall.def().carrier, Carrier::None);
    assert_eq!(pi.stop_brake, StopBrake::OursOnly);
    assert_eq!(pi.declaration, Declaration::Plugin);
    assert_eq!((pi.source, pi.slug), ("pi", "pi"));
}
