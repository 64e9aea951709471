//! Golden tests from the real Codex 0.169.0 payloads, JSON Schema checks of
//! every fixture and every output the adapter can render, and the output-key
//! whitelist. No process, no network.
//!
//! Expected files live in `fixtures/codex-0.169.0/expected/`; regenerate them
//! with `PRELOOP_BLESS=1 cargo test -p preloop-codex --test all golden` and review
//! the diff.

use crate::common::*;
use preloop_codex::{Event, parse, render};
use preloop_shared::flow::{Carry, Input, InputKind, Outcome};
use preloop_shared::render::{frame, render_element};
use preloop_shared::runner::Parsed;
use preloop_shared::time::Timestamp;
use preloop_shared::wire::Decision;
use serde_json::{Value, json};

/// Compare `actual` with the checked-in file (or write it when blessing).
fn golden(rel: &str, actual: &Value) {
    preloop_testkit::golden::check_json(&fixtures_dir().join("expected").join(rel), actual);
}

fn render_json(event: Event, o: &Outcome) -> Option<Value> {
    render(event, o).map(|out| serde_json::to_value(out).unwrap())
}

fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    assert!(names.len() >= 18, "the Codex 0.169.0 captures are missing: {names:?}");
    names
}

fn input_json(p: &Parsed) -> Value {
    let Input { session_id, cwd, kind, transcript_path: _ } = match p {
        Parsed::StandDown(why) => return json!({"stand_down": why}),
        Parsed::Run(i) => i,
    };
    let kind = match kind {
        InputKind::SessionStart { pull } => json!({"session_start": {"pull": pull}}),
        InputKind::Prompt { prompt, pull } => json!({"user_prompt": {"prompt": prompt, "pull": pull}}),
        InputKind::Tool { tool_name, tool_input, model, carry } => json!({"tool": {
            "tool_name": tool_name, "tool_input": tool_input, "model": model, "carry": format!("{carry:?}")}}),
        InputKind::AfterTool { carry } => json!({"after_tool": {"carry": carry}}),
        InputKind::Stop { may_continue } => json!({"stop": {"may_continue": may_continue}}),
        InputKind::SessionEnd { reason } => json!({"session_end": {"reason": reason}}),
    };
    json!({"session_id": session_id, "cwd": cwd, "kind": kind})
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
    let mut ran = 0;
    for name in fixture_names() {
        let v = fixture(&name);
        let own = Event::from_name(v["hook_event_name"].as_str().unwrap());
        for event in Event::ALL {
            let parsed = parse(event, &v);
            if Some(event) == own {
                let parsed = parsed.unwrap_or_else(|e| panic!("{name}: {e}"));
                golden(&format!("{}.input.json", name.trim_end_matches(".json")), &input_json(&parsed));
                ran += 1;
            } else {
                assert!(parsed.is_err(), "{name} was accepted by the {} hook", event.name());
            }
        }
    }
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

fn note_block() -> String {
    let t = Timestamp::parse("2026-12-02T09:20:38.291972").unwrap();
    let a =
        render_element("3f2a9c0d1e4b5a6c", "Olive Operator", "jwt", t, "Stop editing the parser; run the tests first.");
    frame(&[a]).unwrap()
}

fn cases() -> Vec<(&'static str, Outcome)> {
    let block = note_block();
    let notes =
        Outcome { context: Some(block.clone()), note_ids: vec!["3f2a9c0d1e4b5a6c".into()], ..Outcome::default() };
    let deny =
        Outcome { decision: Some(Decision::Deny), reason: Some("Blocked by access rule".into()), ..Outcome::default() };
    let allow = Outcome {
        decision: Some(Decision::Allow),
        reason: Some("No central native rule requires approval".into()),
        ..Outcome::default()
    };
    vec![
        ("nothing", Outcome::default()),
        ("notes", notes.clone()),
        ("deny", deny.clone()),
        ("deny_notes", Outcome { context: Some(block.clone()), note_ids: notes.note_ids.clone(), ..deny.clone() }),
        ("deny_no_reason", Outcome { reason: None, ..deny.clone() }),
        (
            "fail_closed",
            Outcome {
                reason: Some(
                    "Preloop could not check this tool call (unreachable); denied by the hook's fail-closed policy."
                        .into(),
                ),
                ..deny
            },
        ),
        ("allow", allow.clone()),
        ("allow_notes", Outcome { context: Some(block.clone()), ..allow }),
        ("continue", Outcome { continue_turn: true, ..notes }),
        (
            "runtime_id",
            Outcome { runtime_session_id: Some("5f9c7c7b-e77b-4e3c-99be-5a7a623325db".into()), ..Outcome::default() },
        ),
    ]
}

/// What each event prints for each outcome, checked in under
/// `expected/render/<Event>.<case>.json` (`null`: prints nothing).
#[test]
fn renders_match_the_goldens() {
    for event in Event::ALL {
        for (case, o) in cases() {
            let out = render_json(event, &o);
            golden(&format!("render/{}.{case}.json", event.name()), &out.clone().unwrap_or(Value::Null));
        }
    }
}

/// Every combination of outcome fields renders to nothing or to an output
/// that passes the event's output schema and the whitelist.
#[test]
fn every_render_passes_schema_and_whitelist() {
    let block = note_block();
    let contexts = [None, Some(String::new()), Some(block.clone()), Some("é".repeat(4000))];
    let decisions = [None, Some(Decision::Allow), Some(Decision::Deny)];
    let reasons = [None, Some(String::new()), Some("  ".to_string()), Some("Blocked by access rule".to_string())];
    let mut rendered = 0;
    for event in Event::ALL {
        let out_schema = schema(&preloop_codex::schema_stem(event), "output");
        for context in &contexts {
            for decision in decisions {
                for reason in &reasons {
                    for continue_turn in [false, true] {
                        let o = Outcome {
                            context: context.clone(),
                            decision,
                            reason: reason.clone(),
                            continue_turn,
                            ..Outcome::default()
                        };
                        let Some(v) = render_json(event, &o) else { continue };
                        rendered += 1;
                        let s = out_schema
                            .as_ref()
                            .unwrap_or_else(|| panic!("{} rendered {v} but has no output schema", event.name()));
                        validate(s, &v).unwrap_or_else(|e| panic!("{} {o:?}: {e}", event.name()));
                        check_output(event, &v).unwrap_or_else(|e| panic!("{} {o:?}: {e}", event.name()));
                        // Nothing a Codex 0.169.0 parser rejects or ignores, by name.
                        let text = v.to_string();
                        for bad in [
                            "\"continue\"",
                            "suppressOutput",
                            "stopReason",
                            "systemMessage",
                            "updatedInput",
                            "updatedPermissions",
                            "interrupt",
                            "\"ask\"",
                        ] {
                            assert!(!text.contains(bad), "{} emitted {bad}: {text}", event.name());
                        }
                        if event == Event::PreToolUse {
                            assert_ne!(v.pointer("/hookSpecificOutput/permissionDecision"), Some(&json!("allow")));
                            assert!(v.get("decision").is_none(), "legacy decision is never used");
                        }
                        if event == Event::PermissionRequest {
                            assert!(!text.contains("additionalContext"), "PermissionRequest cannot carry context");
                        }
                        if event == Event::Stop {
                            assert!(v.get("hookSpecificOutput").is_none());
                        }
                    }
                }
            }
        }
    }
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
