//! Process-level tests of the built Gemini hook binaries in local mode
//! (`PRELOOP_HOME` in a temp dir, no server), fed the real 0.61.0 payloads.

use crate::common::*;
use preloop_gemini::Event;
use preloop_shared::operator::ReceiptState;
use preloop_testkit::hooks;
use serde_json::json;

#[test]
fn session_start_carries_a_bracket_block_and_acks() {
    let text = "Deploy to eu-west-1, not us-east-1 <b>now</b>.";
    let hooks::Started { home, session: s, out, block: ctx } =
        hooks::local_start_carries_a_waiting_note::<Gemini>("start", text);
    assert_eq!(out["hookSpecificOutput"]["hookEventName"], json!("SessionStart"));
    assert!(ctx.starts_with("[operator-notes count=\"1\""), "{ctx}");
    assert!(ctx.contains(&format!("\n{text}\n[/operator-note]")), "{ctx}");
    // The session file names the harness.
    assert_eq!(home.session_file(&s).unwrap().agent_kind.as_str(), "gemini_cli");
}

#[test]
fn before_agent_titles_with_the_prompt_and_pulls() {
    let (home, s) = hooks::started_locally::<Gemini>("prompt");
    let id = home.send(&s, "also run the linter");
    let (out, _) = home.run(Event::BeforeAgent, &fixture_for("BeforeAgent.json", &s));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id.clone()]);
    assert_eq!(home.receipt(&id).state, ReceiptState::Delivered);
    assert_eq!(home.session_file(&s).unwrap().title.as_deref(), Some("Run echo hi"));
}

#[test]
fn before_tool_never_claims_on_the_local_inbox() {
    let (home, s) = hooks::started_locally::<Gemini>("tool");
    let after =
        hooks::local_after_tool_carries_what_the_gate_left::<Gemini>(&home, &s, Event::BeforeTool, Event::AfterTool);
    assert_eq!(after["hookSpecificOutput"]["hookEventName"], json!("AfterTool"));
}

/// Notes that do not fit one escaped carrier wait in the spool for the next
/// one; BeforeTool never carries the spool (it would have to hold the call).
#[test]
fn what_does_not_fit_waits_for_the_next_carrier() {
    let (home, s) = hooks::started_locally::<Gemini>("split");
    // 4,000 characters of '<' count 16,000 once Gemini escapes them: one per carrier.
    let ids: Vec<String> = (0..3).map(|i| home.send(&s, &format!("{i}{}", "<".repeat(2000)))).collect();
    let (out, _) = home.run(Event::BeforeAgent, &fixture_for("BeforeAgent.json", &s));
    let limit = Event::BeforeAgent.def().limit;
    let ctx = context_of(&out).unwrap();
    assert!(limit.measure(&ctx) <= limit.max(), "{} > {}", limit.measure(&ctx), limit.max());
    let first = ids_in(&ctx);
    assert_eq!(first, ids[..first.len()].to_vec());
    assert!(first.len() < 3, "the three do not fit one carrier");
    let (out, _) = home.run(Event::BeforeTool, &fixture_for("BeforeTool.json", &s));
    assert_eq!(out, None, "BeforeTool does not carry the spool");
    let mut seen = first;
    for _ in 0..3 {
        let (out, _) = home.run(Event::AfterTool, &fixture_for("AfterTool.json", &s));
        seen.extend(context_of(&out).map(|c| ids_in(&c)).unwrap_or_default());
    }
    assert_eq!(seen, ids, "each exactly once, in order");
    for id in &ids {
        assert_eq!(home.receipt(id).state, ReceiptState::Delivered);
    }
}
