//! Golden tests from the real Copilot CLI 1.0.102 payloads (both dialects),
//! schema checks of every output the adapter can render, and the sub-agent
//! rules. No process, no network.
//!
//! Expected files live in `fixtures/copilot-cli-1.0.102/expected/`;
//! regenerate them with `PRELOOP_BLESS=1 cargo test -p preloop-copilot
//! --test all golden` and review the diff.

use crate::common::*;
use preloop_copilot::{Event, parse, pascal_name};
use preloop_shared::flow::{Carry, Input, InputKind, Outcome};
use preloop_shared::runner::Parsed;
use preloop_shared::wire::Decision;
use preloop_testkit::golden::{self, note_block};
use preloop_testkit::support::{fixtures_dir, json_names};
use serde_json::{Value, json};

fn render_json(event: Event, o: &Outcome) -> Option<Value> {
    Copilot::render(event, o)
}

/// The captures of one dialect, as `<dialect>/<file>`.
fn names(dialect: &str) -> Vec<String> {
    json_names(&fixtures_dir(Copilot::FIXTURES).join(dialect)).into_iter().map(|n| format!("{dialect}/{n}")).collect()
}

/// The event a capture belongs to, from its file name (`camel/preToolUse.task.json`).
fn event_of(name: &str) -> Option<Event> {
    let stem = name.split('/').nth(1)?.split('.').next()?;
    Event::ALL.into_iter().find(|e| e.name() == stem || pascal_name(*e) == stem)
}

/// Each binary parses the captures of its own event, in both dialects, into
/// the input checked in under `expected/<dialect>/<capture>.input.json`, and
/// refuses every other event's: by `hook_event_name` (PascalCase style) or
/// by the payload's shape (camelCase payloads name no event).
#[test]
fn captures_parse_to_the_golden_inputs() {
    let all: Vec<String> = names("camel").into_iter().chain(names("pascal")).collect();
    assert_eq!(all.len(), 37, "the Copilot CLI 1.0.102 captures: {all:?}");
    let ran = golden::check_parse_goldens::<Copilot>(&all, |name, _| event_of(name), true);
    assert_eq!(ran, 26, "one golden per capture of the six events we hook, both dialects");
}

#[test]
fn subagent_hooks_carry_nothing_and_check_under_the_session() {
    let parent = "0d9fc67d-6d54-4639-a547-e6bdcde2c737";
    let Ok(Parsed::Run(Input { session_id, kind: InputKind::Tool { carry, tool_name, .. }, .. })) =
        parse(Event::PreToolUse, &fixture("camel/preToolUse.in-subagent.json"))
    else {
        panic!()
    };
    assert_eq!((session_id.as_str(), carry, tool_name.as_str()), (parent, Carry::None, "bash"));
    for (event, file) in [
        (Event::UserPromptSubmitted, "camel/userPromptSubmitted.subagent.json"),
        (Event::AgentStop, "camel/agentStop.in-subagent.json"),
        (Event::UserPromptSubmitted, "pascal/UserPromptSubmit.subagent.json"),
        (Event::AgentStop, "pascal/Stop.in-subagent.json"),
    ] {
        assert!(matches!(parse(event, &fixture(file)), Ok(Parsed::StandDown(_))), "{file}");
    }
    let mut post = fixture("camel/postToolUse.json");
    post["agentId"] = json!("94ea4701-3fb5-4c0c-898e-028779a00fae");
    post["parentAgentId"] = json!(parent);
    assert!(matches!(parse(Event::PostToolUse, &post), Ok(Parsed::StandDown(_))));
    // A sub-agent's tool call without its parent cannot be checked for the session.
    let mut orphan = fixture("camel/preToolUse.in-subagent.json");
    orphan.as_object_mut().unwrap().remove("parentAgentId");
    assert!(parse(Event::PreToolUse, &orphan).is_err());
}

#[test]
fn parse_details() {
    // Our own agentStop block coming back as the continuation's prompt never titles the session.
    let mut cont = fixture("camel/userPromptSubmitted.continuation.json");
    cont["prompt"] = json!(note_block());
    let Ok(Parsed::Run(Input { kind: InputKind::Prompt { prompt, pull }, .. })) =
        parse(Event::UserPromptSubmitted, &cont)
    else {
        panic!()
    };
    assert_eq!((prompt.as_str(), pull), ("", true));
    // The main session's preToolUse carries (the spool only: the server never claims here).
    let Ok(Parsed::Run(Input { kind: InputKind::Tool { carry, .. }, .. })) =
        parse(Event::PreToolUse, &fixture("camel/preToolUse.json"))
    else {
        panic!()
    };
    assert_eq!(carry, Carry::All);
    for event in Event::ALL {
        assert!(parse(event, &json!({})).is_err());
        assert!(parse(event, &json!({"sessionId": " "})).is_err());
        assert!(parse(event, &json!("x")).is_err());
        // A bare payload is taken for the binary's own event.
        let bare = json!({"sessionId": "s", "toolName": "bash"});
        if event == Event::PreToolUse {
            assert!(matches!(parse(event, &bare), Ok(Parsed::Run(_))));
        }
    }
    assert!(parse(Event::PreToolUse, &json!({"sessionId": "s"})).is_err(), "a tool hook needs toolName");
    // Payloads of events we do not hook are refused by every binary.
    for name in [
        "camel/permissionRequest.json",
        "camel/postToolUseFailure.json",
        "camel/errorOccurred.json",
        "camel/subagentStart.json",
        "camel/subagentStop.json",
        "camel/userPromptTransformed.json",
    ] {
        for event in Event::ALL {
            assert!(parse(event, &fixture(name)).is_err(), "{name} accepted by {}", event.name());
        }
    }
}

#[test]
fn renders_match_the_goldens() {
    golden::check_render_goldens::<Copilot>(&golden::render_cases("Tool blocked in Preloop"));
}

#[test]
fn carriers_hold_what_the_design_says() {
    let block = note_block();
    let notes = Outcome { context: Some(block.clone()), ..Outcome::default() };
    for event in [Event::SessionStart, Event::UserPromptSubmitted, Event::PostToolUse, Event::PreToolUse] {
        assert_eq!(render_json(event, &notes), Some(json!({"additionalContext": block})), "{}", event.name());
    }
    let stop = Outcome { continue_turn: true, ..notes.clone() };
    assert_eq!(render_json(Event::AgentStop, &stop), Some(json!({"decision": "block", "reason": block})));
    assert_eq!(render_json(Event::AgentStop, &notes), None, "no continuation without continue_turn");
    let deny = Outcome { decision: Some(Decision::Deny), reason: Some("R".into()), ..notes };
    assert_eq!(
        render_json(Event::PreToolUse, &deny),
        Some(json!({"permissionDecision": "deny", "permissionDecisionReason": "R", "additionalContext": block}))
    );
    let allow = Outcome { decision: Some(Decision::Allow), ..Outcome::default() };
    assert_eq!(render_json(Event::PreToolUse, &allow), None, "never allow: Copilot's own flow decides");
}

#[test]
fn every_render_passes_schema() {
    let banned = ["hookSpecificOutput", "\"allow\"", "\"ask\"", "modified", "systemMessage", "\"continue\""];
    let rendered = golden::every_render_passes_schema::<Copilot>(&[], &banned, |_, _, _| {});
    assert!(rendered > 40);
}

#[test]
fn the_registry_rows_are_copilots() {
    use preloop_shared::registry::{CarrierLimit, ServerClaim, StopBrake};
    for event in Event::ALL {
        let d = event.def();
        assert_eq!(d.harness(), preloop_shared::Harness::Copilot);
        assert_eq!(d.limit, CarrierLimit::Chars(10_000), "{event:?}: postToolUse cuts past 10,240");
    }
    assert_eq!(Event::PreToolUse.def().gate.unwrap().server_claim, ServerClaim::Never);
    assert_eq!(preloop_shared::Harness::Copilot.def().stop_brake, StopBrake::Consecutive(8));
    assert_eq!(preloop_shared::Harness::Copilot.source(), "copilot_cli");
}
