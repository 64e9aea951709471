//! Golden tests from the 42 public Cursor captures, JSON Schema checks of
//! every fixture and of every output the adapter can render.
//!
//! Expected files live in `fixtures/cursor/expected/`; regenerate them with
//! `PRELOOP_BLESS=1 cargo test -p preloop-cursor --test all golden` and review
//! the diff.

use crate::common::*;
use preloop_cursor::{Event, neutral, parse_with, render};
use preloop_shared::flow::Outcome;
use preloop_shared::runner::Parsed;
use preloop_shared::wire::Decision;
use serde_json::{Value, json};

/// Compare `actual` with the checked-in file (or write it when blessing).
fn golden(rel: &str, actual: &Value) {
    preloop_testkit::golden::check_json(&fixtures_dir().join("expected").join(rel), actual);
}

fn render_json(event: Event, o: &Outcome) -> Value {
    serde_json::to_value(render(event, o)).unwrap()
}

fn neutral_json(event: Event) -> Value {
    serde_json::to_value(neutral(event)).unwrap()
}

fn input_json(r: &Result<Parsed, String>) -> Value {
    match r {
        Err(e) => json!({"error": e}),
        Ok(p) => preloop_testkit::golden::input_json(p, false),
    }
}

/// The runtime session id is random: name it instead.
fn normalize(mut v: Value) -> Value {
    if let Some(id) = v.pointer_mut("/env/PRELOOP_PARENT_SESSION_ID") {
        assert!(id.as_str().is_some_and(|s| s.len() == 36), "a runtime session id (UUID) is exported: {id}");
        *id = json!("<runtime_session_id>");
    }
    v
}

/// Every capture: which hook takes it, whether it matches our input schema,
/// what we parse from it, and what the built binary answers in local mode
/// with an empty inbox. Captures of events we do not hook are answered
/// neutrally by every binary.
#[test]
fn captures_parse_and_answer_as_recorded() {
    let home = Home::new("golden");
    for name in fixture_names() {
        let v = fixture(&name);
        let event_name = v["hook_event_name"].as_str().unwrap_or_else(|| panic!("{name}: no hook_event_name"));
        let actual = match Event::from_name(event_name) {
            Some(event) => {
                let schema = schema(event.name(), "input").unwrap();
                let valid = validate(&schema, &v);
                let parsed = parse_with(event, &v, Some("/from/CURSOR_PROJECT_DIR"));
                // The schema states what a hook needs: a payload it refuses
                // is exactly one the schema refuses.
                assert_eq!(
                    valid.is_ok(),
                    parsed.is_ok(),
                    "{name}: schema {valid:?} vs parse {:?}",
                    input_json(&parsed)
                );
                let stdout = normalize(home.run(event, &v));
                if parsed.is_err() {
                    assert_eq!(stdout, neutral_json(event), "{name}: a refused payload gets the neutral answer");
                }
                json!({
                    "hook": event.binary(),
                    "input_schema_valid": valid.is_ok(),
                    "input": input_json(&parsed),
                    "stdout_local_empty_inbox": stdout,
                })
            }
            None => {
                let answers: serde_json::Map<String, Value> = Event::ALL
                    .into_iter()
                    .map(|event| {
                        assert!(parse_with(event, &v, None).is_err(), "{name}: {} must refuse it", event.binary());
                        (event.binary().to_string(), neutral_json(event))
                    })
                    .collect();
                json!({"hook": null, "answers": answers})
            }
        };
        golden(&name, &actual);
    }
}

/// A note block with fixed attributes.
fn block(n: usize) -> String {
    let text = |i| format!("Note {i}: stop editing the parser; run the tests first.");
    preloop_testkit::golden::fixed_block(n, "2026-12-02T09:20:38.291972+00:00", text)
}

/// The outcomes the engine can hand each event, and what we print for them.
fn cases(event: Event) -> Vec<(&'static str, Outcome)> {
    let rid = Some("5f9c7c7b-e77b-4e3c-99be-5a7a623325db".to_string());
    let ctx = Some(block(2));
    let deny =
        |reason: &str| Outcome { decision: Some(Decision::Deny), reason: Some(reason.into()), ..Outcome::default() };
    match event {
        Event::SessionStart => vec![
            ("registered", Outcome { runtime_session_id: rid.clone(), ..Outcome::default() }),
            ("registered-with-notes", Outcome { runtime_session_id: rid, context: ctx, ..Outcome::default() }),
            ("unregistered", Outcome::default()),
        ],
        Event::BeforeSubmitPrompt => vec![("any", Outcome::default())],
        Event::BeforeShellExecution | Event::BeforeMcpExecution => vec![
            ("no-opinion", Outcome::default()),
            ("allow", Outcome { decision: Some(Decision::Allow), ..Outcome::default() }),
            ("deny", deny("Approval declined: not today")),
            (
                "deny-fail-closed",
                deny("Preloop could not check this tool call (unreachable); denied by the hook's fail-closed policy."),
            ),
        ],
        Event::PreToolUse => vec![
            ("no-opinion", Outcome::default()),
            ("no-opinion-with-notes", Outcome { context: ctx.clone(), ..Outcome::default() }),
            ("allow", Outcome { decision: Some(Decision::Allow), ..Outcome::default() }),
            (
                "allow-with-notes",
                Outcome { decision: Some(Decision::Allow), context: ctx.clone(), ..Outcome::default() },
            ),
            ("deny", deny("Tool blocked in Preloop")),
            ("deny-with-notes", Outcome { context: ctx, ..deny("Tool blocked in Preloop") }),
            ("deny-empty-reason", deny("")),
        ],
        Event::Stop => vec![
            ("continue-with-notes", Outcome { continue_turn: true, context: ctx.clone(), ..Outcome::default() }),
            ("nothing", Outcome::default()),
            ("context-without-continue", Outcome { context: ctx, ..Outcome::default() }),
        ],
        Event::SessionEnd => vec![("any", Outcome::default())],
    }
}

/// Every rendered output, checked in and validated against its schema.
#[test]
fn rendered_outputs_match_and_validate() {
    for event in Event::ALL {
        for (case, o) in cases(event) {
            let v = render_json(event, &o);
            check_output(event, &v);
            golden(&format!("render/{}.{case}.json", event.name()), &v);
        }
        check_output(event, &neutral_json(event));
        golden(&format!("render/{}.neutral.json", event.name()), &neutral_json(event));
    }
}

/// The largest block the engine may hand a carrier still validates (10,000
/// characters), and one character more does not: the schema holds the limit.
#[test]
fn the_context_limit_is_in_the_schemas() {
    for event in [Event::SessionStart, Event::PreToolUse, Event::Stop] {
        let fits = Outcome { context: Some("x".repeat(10_000)), continue_turn: true, ..Outcome::default() };
        check_output(event, &render_json(event, &fits));
        let over = Outcome { context: Some("é".repeat(10_001)), continue_turn: true, ..Outcome::default() };
        let v = render_json(event, &over);
        assert!(
            validate(&schema(event.name(), "output").unwrap(), &v).is_err(),
            "{}: 10,001 characters must fail",
            event.name()
        );
    }
}

/// The output schemas refuse what Cursor would misread.
#[test]
fn output_schemas_refuse_foreign_shapes() {
    let bad = [
        (Event::PreToolUse, json!({"permission": "ask"})),
        (Event::PreToolUse, json!({})),
        (Event::PreToolUse, json!({"permission": "deny"})),
        (Event::PreToolUse, json!({"permission": "allow", "user_message": "x", "agent_message": "x"})),
        (
            Event::PreToolUse,
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny"}}),
        ),
        (Event::BeforeShellExecution, json!({"permission": "allow", "additional_context": "x"})),
        (Event::BeforeMcpExecution, json!({"permission": "ask"})),
        (Event::BeforeSubmitPrompt, json!({"continue": false})),
        (Event::Stop, json!({"followup_message": ""})),
        (Event::Stop, json!({"decision": "block", "reason": "x"})),
        (Event::SessionEnd, json!({"x": 1})),
        (Event::SessionStart, json!({"additionalContext": "x"})),
        (Event::SessionStart, json!({"env": {"OTHER": "x"}})),
    ];
    for (event, v) in bad {
        let schema = schema(event.name(), "output").unwrap();
        assert!(validate(&schema, &v).is_err(), "{} schema accepts {v}", event.name());
    }
}
