//! Process-level tests of the built Copilot hook binaries in local mode
//! (`PRELOOP_HOME` in a temp dir, no server), fed the real 1.0.102 payloads.

use crate::common::*;
use preloop_copilot::Event;
use preloop_shared::operator::ReceiptState;
use preloop_testkit::hooks;

#[test]
fn session_start_and_prompt_carry_the_block_verbatim() {
    let text = "Deploy to eu-west-1 <b>now</b> & \"then\" test.";
    let hooks::Started { home, session: s, block: ctx, .. } =
        hooks::local_start_carries_a_waiting_note::<Copilot>("start", text);
    assert!(ctx.starts_with("<operator-notes count=\"1\""), "{ctx}");
    assert!(ctx.contains(&format!("\n{text}\n</operator-note>")), "{ctx}");
    let b = home.send(&s, "and lint");
    let (out, _) = home.run(Event::UserPromptSubmitted, &fixture_for("userPromptSubmitted.json", &s));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![b.clone()]);
    assert_eq!(home.receipt(&b).state, ReceiptState::Delivered);
    let file = home.session_file(&s).unwrap();
    assert_eq!((file.agent_kind.as_str(), file.title.as_deref()), ("copilot_cli", Some("Run echo hi")));
}

/// preToolUse claims nothing (the server never hands copilot_cli a note, and
/// the local inbox mirrors it); postToolUse pulls.
#[test]
fn pre_tool_use_never_claims_post_tool_use_pulls() {
    let (home, s) = hooks::started_locally::<Copilot>("tool");
    hooks::local_after_tool_carries_what_the_gate_left::<Copilot>(&home, &s, Event::PreToolUse, Event::PostToolUse);
}

/// What a carrier could not hold is spooled; preToolUse carries the spool
/// (and only the spool).
#[test]
fn pre_tool_use_carries_the_spool_only() {
    let (home, s) = hooks::started_locally::<Copilot>("spool");
    let ids: Vec<String> = (0..3).map(|i| home.send(&s, &format!("{i}{}", "x".repeat(4000)))).collect();
    let (out, _) = home.run(Event::UserPromptSubmitted, &fixture_for("userPromptSubmitted.json", &s));
    let first = ids_in(&context_of(&out).unwrap());
    assert_eq!(first, ids[..2].to_vec(), "two 4,000-character notes fit 10,000 characters");
    let late = home.send(&s, "arrived after the prompt");
    let (out, _) = home.run(Event::PreToolUse, &fixture_for("preToolUse.json", &s));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![ids[2].clone()], "the spooled note, not the pending one");
    assert_eq!(home.receipt(&late).state, ReceiptState::Pending);
    let (out, _) = home.run(Event::PostToolUse, &fixture_for("postToolUse.json", &s));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![late.clone()]);
    for id in ids.iter().chain([&late]) {
        assert_eq!(home.receipt(id).state, ReceiptState::Delivered, "{id}");
    }
}

#[test]
fn sub_agent_hooks_register_and_carry_nothing() {
    let (home, s) = hooks::started_locally::<Copilot>("sub");
    let id = home.send(&s, "for the main agent");
    for (event, file) in [
        (Event::UserPromptSubmitted, "userPromptSubmitted.subagent.json"),
        (Event::PreToolUse, "preToolUse.in-subagent.json"),
        (Event::AgentStop, "agentStop.in-subagent.json"),
    ] {
        let (out, _) = home.run(event, &fixture_for(file, &s));
        assert_eq!(out, None, "{file}");
    }
    assert_eq!(home.receipt(&id).state, ReceiptState::Pending);
    let sessions: Vec<String> = std::fs::read_dir(home.dir.join("sessions"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    assert_eq!(sessions, vec![format!("{s}.json")], "no session for the sub-agent's own id");
    let (out, _) = home.run(Event::PostToolUse, &fixture_for("postToolUse.json", &s));
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id]);
}
