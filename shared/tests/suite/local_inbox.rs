//! The local inbox behind the engine (`Engine::with_backend` with a real
//! `LocalInbox`): what a claim may take, atomic claims across engines,
//! registration (no cwd, unique aliases), and session end.

use preloop_shared::backend::Backend;
use preloop_shared::config::{Config, Env};
use preloop_shared::flow::{Carry, Engine, Input, InputKind};
use preloop_shared::operator::{SendRequest, Target};
use preloop_shared::registry::{HookDef, def_of, event};
use preloop_shared::wire::SessionStartRequest;
use preloop_testkit::support::{Home, ids_in};
use serde_json::json;

fn engine(home: &Home, def: &'static HookDef, session: &str) -> Engine {
    let config = Config::load_from(&Env::of(&[("PRELOOP_HOME", home.dir.to_str().unwrap())]), Some(def.harness()));
    assert!(config.is_local() && !config.mode_unknown);
    Engine::with_backend(def, config, session, Box::new(home.inbox()))
}

/// Run a hook through the engine; returns the carried note ids.
fn hook(home: &Home, def: &'static HookDef, session: &str, kind: InputKind) -> Vec<String> {
    let mut e = engine(home, def, session);
    let input = Input { session_id: session.into(), cwd: Some("/tmp".into()), transcript_path: None, kind };
    let (out, after) = e.handle(&input).unwrap();
    e.finish(after, true);
    out.context.as_deref().map(ids_in).unwrap_or_default()
}

fn tool(carry: Carry) -> InputKind {
    InputKind::Tool { tool_name: "Bash".into(), tool_input: json!({}), model: None, carry }
}

#[test]
fn a_gate_that_cannot_carry_never_claims_locally() {
    let home = Home::new("inbox");
    hook(&home, def_of(event::Codex::SessionStart), "s", InputKind::SessionStart { pull: true });
    let id = home.send("s", "wait for a carrier");
    assert!(hook(&home, def_of(event::Codex::PermissionRequest), "s", tool(Carry::None)).is_empty());
    for e in [event::Cursor::BeforeShellExecution, event::Cursor::BeforeMcpExecution] {
        assert!(hook(&home, def_of(e), "s", tool(Carry::None)).is_empty());
    }
    assert_eq!(home.state(&id), "pending");
    assert_eq!(hook(&home, def_of(event::Codex::PreToolUse), "s", tool(Carry::All)), vec![id.clone()]);
    let r = home.receipt(&id);
    assert_eq!((r.state.as_str(), r.delivery_event.as_deref()), ("delivered", Some("pre_tool_use")));
}

#[test]
fn claims_are_atomic_across_engines() {
    let home = Home::new("inbox-atomic");
    let def = def_of(event::ClaudeCode::UserPromptSubmit);
    hook(&home, def_of(event::ClaudeCode::SessionStart), "s", InputKind::SessionStart { pull: true });
    let ids: Vec<String> = (0..12).map(|i| home.send("s", &format!("note {i}"))).collect();
    let carried: Vec<String> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..8)
            .map(|_| sc.spawn(|| hook(&home, def, "s", InputKind::Prompt { prompt: "p".into(), pull: true })))
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let mut sorted = carried.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), carried.len(), "a note in two outputs: {carried:?}");
    for id in &ids {
        assert_eq!(home.state(id) == "delivered", carried.contains(id), "{id}: delivered iff carried");
    }
}

#[test]
fn a_session_with_no_cwd_is_registered() {
    let home = Home::new("inbox-nocwd");
    let inbox = home.inbox();
    let req = SessionStartRequest { session_id: "c1".into(), source: Some("cursor".into()), ..Default::default() };
    let resp = inbox.session_start(&req).unwrap();
    let f = home.session_file("c1").expect("registered without a cwd");
    assert_eq!((f.runtime_session_id, f.cwd), (resp.runtime_session_id, None));
}

#[test]
fn live_aliases_are_unique_and_an_ambiguous_one_is_refused() {
    let home = Home::new("inbox-alias");
    let inbox = home.inbox();
    let start = |id: &str, parent: Option<String>| {
        let req = SessionStartRequest {
            session_id: id.into(),
            source: Some("claude_code".into()),
            alias: Some("release-worker".into()),
            parent_session_id: parent,
            ..Default::default()
        };
        inbox.session_start(&req).unwrap()
    };
    let top = start("top", None);
    let child = start("child", Some(top.runtime_session_id.clone()));
    let other = start("other", None);
    assert_eq!(top.alias.as_deref(), Some("release-worker"));
    let mut aliases = vec![top.alias.unwrap(), child.alias.unwrap(), other.alias.unwrap()];
    aliases.sort();
    aliases.dedup();
    assert_eq!(aliases.len(), 3, "one machine, one alias namespace: {aliases:?}");
    // Two session files with the same alias (an older version wrote them): refused.
    let mut twin = home.session_file("child").unwrap();
    twin.external_session_id = "twin".into();
    twin.alias = Some("release-worker".into());
    preloop_shared::session::write_session_file(&home.dir, &twin).unwrap();
    let send = SendRequest {
        text: "which one?".into(),
        target: Target::Alias("release-worker".into()),
        next_session: false,
        expires_in_secs: None,
        author: Default::default(),
    };
    let err = inbox.send(&send).expect_err("ambiguous");
    assert!(err.to_string().contains("top") && err.to_string().contains("twin"), "{err}");
    // An ended session's alias is free again.
    inbox
        .session_end(&preloop_shared::wire::SessionEndRequest {
            external_session_id: "twin".into(),
            reason: "x".into(),
        })
        .unwrap();
    assert!(inbox.send(&send).is_ok());
}

#[test]
fn session_end_ends_pending_and_claimed_notes() {
    let home = Home::new("inbox-end");
    hook(&home, def_of(event::Codex::SessionStart), "s", InputKind::SessionStart { pull: true });
    let pending = home.send("s", "pending");
    // Claimed by a hook whose output was never written, its state then lost.
    let mut e = engine(&home, def_of(event::Codex::UserPromptSubmit), "s");
    let input = Input {
        session_id: "s".into(),
        cwd: None,
        transcript_path: None,
        kind: InputKind::Prompt { prompt: "p".into(), pull: true },
    };
    let (_, after) = e.handle(&input).unwrap();
    drop(after); // a hook killed after its claim
    assert_eq!(home.state(&pending), "claimed");
    let late = home.send("s", "late");
    hook(&home, def_of(event::Codex::SessionEnd), "s", InputKind::SessionEnd { reason: "other".into() });
    for id in [&pending, &late] {
        let r = home.receipt(id);
        assert_eq!((r.state.as_str(), r.undeliverable_reason.as_deref()), ("undeliverable", Some("session_ended")));
    }
}

/// D-3 on the local inbox: a late hook of an ended session neither reopens
/// it nor claims a note sent after the end; a SessionStart (resume) does.
#[test]
fn d3_a_late_hook_never_reopens_an_ended_local_session() {
    let home = Home::new("inbox-late");
    hook(&home, def_of(event::Codex::SessionStart), "s", InputKind::SessionStart { pull: true });
    hook(&home, def_of(event::Codex::SessionEnd), "s", InputKind::SessionEnd { reason: "exit".into() });
    let id = home.send("s", "after end");
    let prompt = InputKind::Prompt { prompt: "p".into(), pull: true };
    assert!(hook(&home, def_of(event::Codex::UserPromptSubmit), "s", prompt).is_empty());
    assert!(hook(&home, def_of(event::Codex::PreToolUse), "s", tool(Carry::All)).is_empty());
    assert!(hook(&home, def_of(event::Codex::Stop), "s", InputKind::Stop { may_continue: true }).is_empty());
    assert_eq!(home.state(&id), "pending");
    assert!(home.session_file("s").unwrap().ended_at.is_some(), "still ended");
    assert_eq!(hook(&home, def_of(event::Codex::SessionStart), "s", InputKind::SessionStart { pull: true }), vec![id]);
}

/// D-8 on the local inbox: a hook does not claim a note its output cannot
/// carry, so the receipt's `delivery_event` names the hook that carried the
/// note. A Codex Stop (10,000 bytes) leaves a 4,096-emoji note pending; the
/// next prompt (20,000 bytes) claims and carries it (`session_start`).
#[test]
fn d8_a_local_hook_never_claims_a_note_its_output_cannot_carry() {
    let home = Home::new("inbox-fit");
    hook(&home, def_of(event::Codex::SessionStart), "s", InputKind::SessionStart { pull: true });
    let big = home.send("s", &"😀".repeat(4096));
    let small = home.send("s", "small");
    assert!(hook(&home, def_of(event::Codex::Stop), "s", InputKind::Stop { may_continue: true }).is_empty());
    assert_eq!(home.state(&big), "pending", "the Stop cannot carry it, so it does not claim it");
    assert_eq!(home.state(&small), "pending", "nothing younger jumps ahead of it");
    let prompt = InputKind::Prompt { prompt: "p".into(), pull: true };
    assert_eq!(hook(&home, def_of(event::Codex::UserPromptSubmit), "s", prompt), vec![big.clone(), small]);
    let r = home.receipt(&big);
    assert_eq!((r.state.as_str(), r.delivery_event.as_deref()), ("delivered", Some("session_start")));
}
