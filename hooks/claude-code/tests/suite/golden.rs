//! Golden tests: real Claude Code 2.1.328 payloads (fixtures/claude-code-2.1.328)
//! through the pure adapter, outputs compared with the checked-in expected
//! files and validated, like the inputs, against schemas/claude-code-2.1.328.
//! Set PRELOOP_BLESS=1 to rewrite the expected files.

use crate::common::FIXTURES;
use preloop_claude_code::{Event, parse, render};
use preloop_shared::flow::{Carry, InputKind, Outcome};
use preloop_shared::runner::Parsed;
use preloop_shared::wire::Decision;
use preloop_testkit::support::{fixtures_dir, json_names, read_json, schemas_dir, validator};
use serde_json::Value;

fn fixture(name: &str) -> Value {
    read_json(&fixtures_dir(FIXTURES).join(name))
}

fn schema(name: &str) -> jsonschema::Validator {
    validator(&schemas_dir(FIXTURES).join(name))
}

fn assert_valid(v: &jsonschema::Validator, doc: &Value, what: &str) {
    let errors: Vec<String> = v.iter_errors(doc).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{what} does not match its schema: {errors:?}\n{doc:#}");
}

fn event_of(file: &str) -> Option<Event> {
    let stem = file.split('.').next()?;
    Event::ALL.into_iter().find(|e| e.name() == stem)
}

#[test]
fn every_captured_payload_matches_its_schema_and_parses() {
    let mut seen = 0;
    for name in json_names(&fixtures_dir(FIXTURES)) {
        let Some(event) = event_of(&name) else { continue };
        let v = fixture(&name);
        assert_valid(&schema(&format!("{}.input.schema.json", event.name())), &v, &name);
        let Ok(Parsed::Run(input)) = parse(event, &v) else { panic!("{name} did not parse") };
        assert_eq!(input.session_id, v["session_id"].as_str().unwrap(), "{name}");
        assert_eq!(input.cwd.as_deref(), v["cwd"].as_str(), "{name}");
        match (&input.kind, event) {
            (InputKind::SessionStart { pull: true }, Event::SessionStart) => {}
            (InputKind::Prompt { prompt, .. }, Event::UserPromptSubmit) => {
                assert_eq!(prompt, v["prompt"].as_str().unwrap())
            }
            (InputKind::Tool { tool_name, tool_input, carry, .. }, Event::PreToolUse) => {
                assert_eq!(tool_name, v["tool_name"].as_str().unwrap());
                assert_eq!(tool_input, &v["tool_input"]);
                // In a sub-agent the note goes to the spool for the main agent.
                let expected = if v.get("agent_id").is_some() { Carry::None } else { Carry::All };
                assert_eq!(*carry, expected, "{name}");
            }
            (InputKind::Stop { may_continue }, Event::Stop) => {
                assert_eq!(*may_continue, !v["stop_hook_active"].as_bool().unwrap())
            }
            (InputKind::SessionEnd { reason }, Event::SessionEnd) => assert_eq!(reason, v["reason"].as_str().unwrap()),
            (k, e) => panic!("{name}: {e:?} parsed as {k:?}"),
        }
        seen += 1;
    }
    assert!(seen >= 8, "expected the captured payloads, saw {seen}");
}

#[test]
fn cursor_payloads_make_our_claude_hooks_stand_down() {
    let dir = fixtures_dir("cursor");
    let names = json_names(&dir);
    assert!(!names.is_empty(), "the Cursor captures are expected in {}", dir.display());
    for name in names {
        let p = dir.join(name);
        let v = read_json(&p);
        if v.get("cursor_version").is_none() {
            continue;
        }
        for e in Event::ALL {
            assert!(matches!(parse(e, &v), Ok(Parsed::StandDown(_))), "{} as {e:?}", p.display());
        }
    }
    let imported = serde_json::json!({"session_id": "s", "hook_event_name": "PreToolUse", "cursor_version": "2026.10.01", "tool_name": "Shell", "tool_input": {}});
    assert!(matches!(parse(Event::PreToolUse, &imported), Ok(Parsed::StandDown(_))));
}

#[test]
fn malformed_inputs_are_rejected_not_guessed() {
    for (e, v) in [
        (Event::PreToolUse, serde_json::json!({"hook_event_name": "PreToolUse", "tool_name": "Bash"})),
        (Event::PreToolUse, serde_json::json!({"session_id": "s", "hook_event_name": "PreToolUse"})),
        (Event::Stop, serde_json::json!({"session_id": "s", "hook_event_name": "SessionStart"})),
        (Event::SessionStart, serde_json::json!({"session_id": "  "})),
    ] {
        assert!(parse(e, &v).is_err(), "{e:?} {v}");
    }
}

fn block(n: usize) -> String {
    preloop_testkit::golden::fixed_block(n, "2026-12-02T09:20:38.291972", |_| {
        "Deploy to eu-west-1, not us-east-1.".into()
    })
}

/// (event, scenario, outcome) → fixtures/claude-code-2.1.328/expected/<Event>.<scenario>.json
fn scenarios() -> Vec<(Event, &'static str, Outcome)> {
    let note = Outcome { context: Some(block(1)), ..Outcome::default() };
    let deny = Outcome {
        decision: Some(Decision::Deny),
        reason: Some("Tool blocked in Preloop".into()),
        ..Outcome::default()
    };
    let allow = Outcome {
        decision: Some(Decision::Allow),
        reason: Some("No central native rule requires approval".into()),
        ..Outcome::default()
    };
    let mut v = Vec::new();
    for e in Event::ALL.into_iter().filter(|e| *e != Event::Watch) {
        v.push((e, "no-note", Outcome::default()));
    }
    v.push((
        Event::SessionStart,
        "note",
        Outcome { runtime_session_id: Some("5f9c7c7b-e77b-4e3c-99be-5a7a623325db".into()), ..note.clone() },
    ));
    v.push((Event::UserPromptSubmit, "note", note.clone()));
    v.push((Event::PreToolUse, "allow-no-note", allow.clone()));
    v.push((Event::PreToolUse, "allow-note", Outcome { context: Some(block(2)), ..allow.clone() }));
    v.push((Event::PreToolUse, "deny", deny.clone()));
    v.push((Event::PreToolUse, "deny-note", Outcome { context: Some(block(1)), ..deny.clone() }));
    // Preloop's send_note: the caller's session id rides as updatedInput, with
    // no decision (it grants nothing); beside a deny it is dropped.
    let rewritten = serde_json::json!({
        "text": "hello child",
        "runtime_session_id": "rt-1",
        "preloop_caller_session_id": "6c6211a2-24a1-4699-8ef8-88c2ec7d1e75"
    });
    let rewrite = Outcome { tool_input: Some(rewritten), ..allow.clone() };
    v.push((Event::PreToolUse, "send-note-caller", rewrite.clone()));
    v.push((Event::PreToolUse, "send-note-caller-note", Outcome { context: Some(block(1)), ..rewrite.clone() }));
    v.push((Event::PreToolUse, "send-note-deny", Outcome { tool_input: rewrite.tool_input, ..deny.clone() }));
    v.push((Event::Stop, "rescue", Outcome { continue_turn: true, ..note.clone() }));
    v.push((Event::Stop, "note-without-continue", note.clone()));
    v.push((Event::SessionEnd, "note-ignored", note));
    v
}

#[test]
fn outputs_match_golden_files_and_schemas() {
    let dir = fixtures_dir(FIXTURES).join("expected");
    for (event, name, outcome) in scenarios() {
        let out = render(event, &outcome).map(|o| serde_json::to_value(o).unwrap());
        let path = dir.join(format!("{}.{name}.json", event.name()));
        // `null` stands for: the hook prints nothing. Compared as JSON values:
        // key order is not part of the contract.
        preloop_testkit::golden::check_json(&path, &out.clone().unwrap_or(Value::Null));
        if let Some(v) = out {
            assert_valid(&schema(&format!("{}.output.schema.json", event.name())), &v, &path.display().to_string());
            let keys: Vec<&String> = v["hookSpecificOutput"].as_object().unwrap().keys().collect();
            assert!(
                !keys.iter().any(|k| k.as_str() == "permissionDecision")
                    || v["hookSpecificOutput"]["permissionDecision"] == "deny",
                "only deny is ever a decision"
            );
        }
    }
}
