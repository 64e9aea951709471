//! Golden tests from the real Codex 0.169.0 payloads, JSON Schema checks of
//! every fixture and every output the adapter can render, and the output-key
//! whitelist. No process, no network.
//!
//! Expected files live in `fixtures/codex-0.169.0/expected/`; regenerate them
//! with `PRELOOP_BLESS=1 cargo test -p preloop-codex --test all golden` and review
//! the diff.

use crate::common::*;
use preloop_codex::{Event, parse};
use preloop_shared::flow::{Carry, Input, InputKind, Outcome};
use preloop_shared::runner::Parsed;
use preloop_testkit::golden;
use preloop_testkit::support::json_names;
use serde_json::{Value, json};

fn fixture_names() -> Vec<String> {
    let names = json_names(&fixtures_dir());
    assert!(names.len() >= 18, "the Codex 0.169.0 captures are missing: {names:?}");
    names
}

/// Every captured payload validates against the input schema extracted from
/// the same Codex binary (where the binary has one).
#[test]
fn fixtures_match_the_codex_input_schemas() {
    let mut checked = 0;
    for name in fixture_names() {
        let v = fixture(&name);
        let event = v["hook_event_name"].as_str().unwrap().to_string();
        match schema(&schema_stem(&event), "input") {
            Some(s) => {
                validate(&s, &v).unwrap_or_else(|e| panic!("{name}: {e}"));
                checked += 1;
            }
            // PreModelRequest / PostModelRequest have no embedded schema.
            None => assert!(event.ends_with("ModelRequest"), "no input schema for {event}"),
        }
    }
    assert_eq!(checked, 16);
}

/// Each binary parses the payloads of its own event into the input checked
/// in under `expected/<fixture>.input.json`, and refuses every other event's.
#[test]
fn fixtures_parse_to_the_golden_inputs() {
    let own = |_: &str, v: &Value| Event::from_name(v["hook_event_name"].as_str().unwrap());
    let ran = golden::check_parse_goldens::<Codex>(&fixture_names(), own, false);
    assert_eq!(ran, 10, "one golden per capture of the six events");
}

#[test]
fn parse_details() {
    // Sub-agent hooks: the prompt stands down, a tool call is checked but carries nothing.
    assert!(matches!(
        parse(Event::UserPromptSubmit, &fixture("UserPromptSubmit.subagent.json")),
        Ok(Parsed::StandDown(_))
    ));
    let mut pre = fixture("PreToolUse.json");
    pre["agent_id"] = json!("01a2367a-bc19-76d2-a660-919580b8549c");
    let Ok(Parsed::Run(Input { kind: InputKind::Tool { carry, .. }, .. })) = parse(Event::PreToolUse, &pre) else {
        panic!()
    };
    assert_eq!(carry, Carry::None);
    // A payload without hook_event_name is taken for the binary's own event.
    let mut stop = fixture("Stop.stop_hook_active.json");
    stop.as_object_mut().unwrap().remove("hook_event_name");
    let Ok(Parsed::Run(Input { kind: InputKind::Stop { may_continue }, .. })) = parse(Event::Stop, &stop) else {
        panic!()
    };
    assert!(!may_continue);
    // Non-object tool_input becomes {} (the server answers 422 otherwise).
    let mut pr = fixture("PermissionRequest.json");
    pr["tool_input"] = json!("touch x");
    let Ok(Parsed::Run(Input { kind: InputKind::Tool { tool_input, .. }, .. })) = parse(Event::PermissionRequest, &pr)
    else {
        panic!()
    };
    assert_eq!(tool_input, json!({}));
    // Required fields.
    for event in Event::ALL {
        assert!(parse(event, &json!({})).is_err());
        assert!(parse(event, &json!({"session_id": "  "})).is_err());
    }
    assert!(parse(Event::PreToolUse, &json!({"session_id": "s"})).is_err(), "a tool hook needs tool_name");
    assert!(matches!(parse(Event::SessionEnd, &json!({"session_id": "s"})), Ok(Parsed::Run(_))));
}

fn cases() -> Vec<(&'static str, Outcome)> {
    let mut cases = golden::render_cases("Blocked by access rule");
    let fail_closed = "Preloop could not check this tool call (unreachable); denied by the hook's fail-closed policy.";
    let deny = cases.iter().find(|(c, _)| *c == "deny").unwrap().1.clone();
    cases.push(("fail_closed", Outcome { reason: Some(fail_closed.into()), ..deny }));
    let rid = Some("5f9c7c7b-e77b-4e3c-99be-5a7a623325db".to_string());
    cases.push(("runtime_id", Outcome { runtime_session_id: rid, ..Outcome::default() }));
    cases
}

/// What each event prints for each outcome, checked in under
/// `expected/render/<Event>.<case>.json` (`null`: prints nothing).
#[test]
fn renders_match_the_goldens() {
    golden::check_render_goldens::<Codex>(&cases());
}

/// Every combination of outcome fields renders to nothing or to an output
/// that passes the event's output schema and the whitelist.
#[test]
fn every_render_passes_schema_and_whitelist() {
    // Nothing a Codex 0.169.0 parser rejects or ignores, by name.
    let banned = [
        "\"continue\"",
        "suppressOutput",
        "stopReason",
        "systemMessage",
        "updatedInput",
        "updatedPermissions",
        "interrupt",
        "\"ask\"",
    ];
    let rendered = golden::every_render_passes_schema::<Codex>(&[], &banned, |event, o, v| {
        check_output(event, v).unwrap_or_else(|e| panic!("{} {o:?}: {e}", event.name()));
        if event == Event::PreToolUse {
            assert_ne!(v.pointer("/hookSpecificOutput/permissionDecision"), Some(&json!("allow")));
            assert!(v.get("decision").is_none(), "legacy decision is never used");
        }
        if event == Event::PermissionRequest {
            assert!(!v.to_string().contains("additionalContext"), "PermissionRequest cannot carry context");
        }
        if event == Event::Stop {
            assert!(v.get("hookSpecificOutput").is_none());
        }
    });
    assert!(rendered > 50);
}

/// The whitelist rejects every output the observations saw Codex 0.169.0
/// fail (status Failed, output discarded), and accepts the ones it took.
#[test]
fn whitelist_agrees_with_the_observations() {
    let failed = [
        (
            Event::PreToolUse,
            json!({"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","additionalContext":"ALLOW-CTX-MARKER"}}),
        ),
        (
            Event::PreToolUse,
            json!({"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","additionalContext":"ASK-CTX-MARKER"}}),
        ),
        (
            Event::PreToolUse,
            json!({"hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":"X"},"bogusKey":1}),
        ),
        (
            Event::PreToolUse,
            json!({"hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":"X","bogusKey":1}}),
        ),
        (Event::PreToolUse, json!({"continue":false})),
        (Event::PreToolUse, json!({"suppressOutput":true})),
        (
            Event::PermissionRequest,
            json!({"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"M"},"additionalContext":"C"}}),
        ),
        (
            Event::PermissionRequest,
            json!({"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"M","reason":"x"}}}),
        ),
        (
            Event::PermissionRequest,
            json!({"additionalContext":"C","hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"M"}}}),
        ),
        (
            Event::PermissionRequest,
            json!({"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"M","updatedInput":{"command":"echo changed"}}}}),
        ),
        (
            Event::PermissionRequest,
            json!({"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow","interrupt":true}}}),
        ),
        (Event::PermissionRequest, json!({"hookSpecificOutput":{"hookEventName":"PermissionRequest"}})),
        (Event::Stop, json!({"decision":"block"})),
        (Event::Stop, json!({"decision":"block","reason":""})),
        (Event::Stop, json!({"hookSpecificOutput":{"hookEventName":"Stop","additionalContext":"X"}})),
        (Event::Stop, json!({"continue":false,"stopReason":"S"})),
        (Event::SessionEnd, json!({"hookSpecificOutput":{"hookEventName":"SessionEnd"}})),
    ];
    for (event, v) in failed {
        assert!(check_output(event, &v).is_err(), "{} {v} must be refused", event.name());
    }
    let accepted = [
        (
            Event::PreToolUse,
            json!({"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"R","additionalContext":"C"}}),
        ),
        (
            Event::PermissionRequest,
            json!({"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}),
        ),
        (
            Event::PermissionRequest,
            json!({"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"M"}}}),
        ),
        (Event::Stop, json!({"decision":"block","reason":"STOP-MARKER late operator note: also run tests"})),
        (Event::SessionStart, json!({"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"C"}})),
        (
            Event::UserPromptSubmit,
            json!({"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"C"}}),
        ),
    ];
    for (event, v) in accepted {
        check_output(event, &v).unwrap_or_else(|e| panic!("{}: {e}", event.name()));
        validate(&schema(&preloop_codex::schema_stem(event), "output").unwrap(), &v).unwrap();
    }
}

#[test]
fn the_carrier_limits_are_codex_bytes() {
    use preloop_shared::flow::CarrierLimit::Bytes;
    for event in Event::ALL {
        let d = event.def();
        assert_eq!(d.harness(), preloop_shared::Harness::Codex);
        // The context handlers keep 4 × additionalContextLimit bytes (the
        // installer writes 5,000); a Stop reason keeps 10,000 whatever it says.
        let expected = if event == Event::Stop { Bytes(10_000) } else { Bytes(20_000) };
        assert_eq!(d.limit, expected, "{event:?}");
    }
    assert_eq!(preloop_shared::Harness::Codex.source(), "codex_cli");
}
