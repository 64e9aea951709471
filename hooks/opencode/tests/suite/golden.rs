//! Golden tests: our plugin's payloads (built from the OpenCode 1.18.33
//! captures in `fixtures/opencode-1.18.33/plugin-hooks/` and `events/`:
//! the same session, message and tool call) parse into the checked-in
//! inputs, every render passes its schema, and the registry rows say what
//! docs/contracts/opencode.md observed. No process, no network.
//!
//! Expected files live in `fixtures/opencode-1.18.33/expected/`; regenerate
//! them with `PRELOOP_BLESS=1 cargo test -p preloop-opencode --test all golden`
//! and review the diff.

use crate::common::*;
use preloop_opencode::{Answer, Event, parse, render};
use preloop_shared::flow::{InputKind, Outcome};
use preloop_shared::runner::Parsed;
use preloop_testkit::golden::{self, note_block};
use preloop_testkit::support::{fixtures_dir, json_names};
use serde_json::{Value, json};

fn event_of(name: &str) -> Option<Event> {
    let stem = name.trim_end_matches(".json").trim_end_matches(".stop_hook_active");
    OpenCode::events().into_iter().find(|e| e.name() == stem)
}

#[test]
fn payloads_parse_to_the_golden_inputs() {
    let names = json_names(&fixtures_dir(OpenCode::FIXTURES));
    assert_eq!(names.len(), 7, "one payload per event, and text.complete after a continuation: {names:?}");
    let ran = golden::check_parse_goldens::<OpenCode>(&names, |name, _| event_of(name), true);
    assert_eq!(ran, 7);
}

/// The payloads hold what OpenCode's own hooks and events held in the captures.
#[test]
fn payloads_follow_the_captures() {
    let created = fixture("events/session.created.json");
    let session = created["properties"]["info"]["id"].clone();
    for event in OpenCode::events() {
        assert_eq!(fixture(&format!("{}.json", event.name()))["session_id"], session, "{}", event.name());
    }
    let chat = fixture("plugin-hooks/chat.message.json");
    assert_eq!(fixture("chat.message.json")["prompt"], chat["output"]["parts"][0]["text"]);
    assert_eq!(fixture("chat.message.json")["message_id"], chat["output"]["message"]["id"]);
    let before = fixture("plugin-hooks/tool.execute.before.json");
    assert_eq!(fixture("tool.execute.before.json")["tool_name"], before["input"]["tool"]);
    assert_eq!(fixture("tool.execute.before.json")["call_id"], before["input"]["callID"]);
    assert_eq!(fixture("tool.execute.before.json")["tool_input"], before["output"]["args"]);
    let after = fixture("plugin-hooks/tool.execute.after.json");
    assert_eq!(fixture("tool.execute.after.json")["call_id"], after["input"]["callID"]);
    let text = fixture("plugin-hooks/experimental.text.complete.json");
    assert_eq!(fixture("experimental.text.complete.json")["message_id"], text["input"]["messageID"]);
}

#[test]
fn parse_details() {
    let stop = |active: bool| {
        let mut v = fixture("experimental.text.complete.json");
        v["stop_hook_active"] = json!(active);
        match parse(Event::TextComplete, &v) {
            Ok(Parsed::Run(i)) => i.kind,
            _ => panic!(),
        }
    };
    // One continuation per stop: the text part that answers ours claims nothing.
    assert_eq!(stop(true), InputKind::Stop { may_continue: false });
    assert_eq!(stop(false), InputKind::Stop { may_continue: true });
    // session.created is not awaited: it registers and claims nothing.
    assert!(matches!(
        parse(Event::SessionCreated, &fixture("session.created.json")),
        Ok(Parsed::Run(i)) if i.kind == InputKind::SessionStart { pull: false }
    ));
    // Our own note block as a prompt never titles the session.
    let mut p = fixture("chat.message.json");
    p["prompt"] = json!(note_block());
    assert!(
        matches!(parse(Event::ChatMessage, &p), Ok(Parsed::Run(i)) if i.kind == InputKind::Prompt { prompt: String::new(), pull: true })
    );
    for event in OpenCode::events() {
        assert!(parse(event, &json!({})).is_err());
        assert!(parse(event, &json!("x")).is_err());
        let mut blank = fixture(&format!("{}.json", event.name()));
        blank["session_id"] = json!(" ");
        assert!(parse(event, &blank).is_err(), "{}", event.name());
        let mut future = fixture(&format!("{}.json", event.name()));
        future["v"] = json!(2);
        assert!(parse(event, &future).is_err(), "another protocol version is refused");
        let mut no_mode = fixture(&format!("{}.json", event.name()));
        no_mode.as_object_mut().unwrap().remove("mode");
        assert!(parse(event, &no_mode).is_err(), "{}: the mode is required", event.name());
    }
    let mut no_tool = fixture("tool.execute.before.json");
    no_tool.as_object_mut().unwrap().remove("tool_name");
    assert!(parse(Event::ToolExecuteBefore, &no_tool).is_err());
}

#[test]
fn renders_match_the_goldens() {
    golden::check_render_goldens::<OpenCode>(&golden::render_cases("Tool blocked in Preloop"));
}

#[test]
fn carriers_hold_what_the_design_says() {
    let block = note_block();
    let notes = Outcome { context: Some(block.clone()), ..Outcome::default() };
    for event in [Event::ChatMessage, Event::ToolExecuteAfter] {
        assert_eq!(render(event, &notes), Some(Answer::Context { text: block.clone() }), "{}", event.name());
    }
    assert_eq!(render(Event::ToolExecuteBefore, &notes), None, "the gate carries no note");
    assert_eq!(render(Event::SessionCreated, &notes), None, "session.created is not awaited");
    assert_eq!(render(Event::TextComplete, &notes), None, "no continuation without continue_turn");
    let stop = Outcome { continue_turn: true, ..notes.clone() };
    assert_eq!(render(Event::TextComplete, &stop), Some(Answer::Continue { text: block.clone() }));
    let deny = Outcome::deny("R");
    assert_eq!(render(Event::ToolExecuteBefore, &deny), Some(Answer::Deny { reason: "R".into() }));
    assert_eq!(
        serde_json::to_value(Answer::Continue { text: "T".into() }).unwrap(),
        json!({"kind": "continue", "text": "T"})
    );
    assert_eq!(render(Event::Dispose, &stop), None);
}

#[test]
fn every_render_passes_schema() {
    let rendered = golden::every_render_passes_schema::<OpenCode>(&[], &["\"allow\""], |_, _, _: &Value| {});
    assert!(rendered > 20, "{rendered}");
}

#[test]
fn the_registry_rows_are_opencodes() {
    use preloop_shared::registry::{Carrier, Declaration, ServerClaim, StopBrake};
    let oc = preloop_shared::Harness::OpenCode.def();
    assert_eq!(Event::ToolExecuteBefore.def().gate.unwrap().server_claim, ServerClaim::Never);
    assert_eq!(Event::ToolExecuteBefore.def().carrier, Carrier::None);
    assert_eq!(Event::SessionCreated.def().carrier, Carrier::None);
    assert_eq!(oc.stop_brake, StopBrake::OursOnly);
    assert_eq!(oc.declaration, Declaration::Plugin);
    assert_eq!((oc.source, oc.slug), ("opencode", "opencode"));
}
