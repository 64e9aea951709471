//! Concurrency: 32 hook processes of one session at once, with 5 pending
//! notes and a spool, in server and local mode: every note reaches exactly
//! one output and its receipt says delivered. 32 concurrent Stops never
//! spend more than the rescue cap. Two sessions hammered at once never see
//! each other's notes.

use crate::common::*;
use preloop_shared::Harness;
use preloop_testkit::FakeServer;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Barrier, Mutex};

/// Run `jobs` (hook, session) all at once; returns (session, output) of each.
fn at_once(home: &Home, jobs: &[(Hook, String)]) -> Vec<(String, Option<Value>)> {
    let barrier = Barrier::new(jobs.len());
    let outs = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for (h, session) in jobs {
            let (barrier, outs) = (&barrier, &outs);
            s.spawn(move || {
                let payload = serde_json::to_string(&h.payload(session)).unwrap();
                barrier.wait();
                let r = home.run(h, payload.as_bytes());
                r.assert_ok(h);
                let out = Checker::new(h).check(&r.stdout).unwrap_or_else(|e| panic!("{}: {e}", h.name()));
                outs.lock().unwrap().push((session.clone(), out));
            });
        }
    });
    outs.into_inner().unwrap()
}

fn ids_of(outs: &[(String, Option<Value>)]) -> Vec<String> {
    outs.iter().flat_map(|(_, o)| context_of(o).map(|c| ids_in(&c)).unwrap_or_default()).collect()
}

fn counts(ids: &[String]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for i in ids {
        *m.entry(i.clone()).or_default() += 1;
    }
    m
}

fn server() -> FakeServer {
    let s = FakeServer::start();
    s.set_native_tool_approvals(&s.agent_id(), true);
    s.set_rate_limit(None);
    s
}

/// 5 pending notes and a spool; 32 hooks of the session at once.
fn one_session_32_hooks(m: &Backend) {
    let h = |e: &str| hook(Harness::Codex, e);
    let session = unique_session("conc");
    m.home.hook(&h("SessionStart"), &session);
    // A spool: the server claims for a gate that cannot carry; locally a
    // 20 KB carrier too small for five 4 KB notes keeps one back.
    let (mut notes, mut carried) = m.make_spool(&session, 2);
    let spooled = m.home.run_state_of(&session).unwrap().spool.len();
    assert!(spooled >= 1, "{}: a spool to start with", m.label());
    for i in 0..5 {
        notes.push(m.send(&session, &format!("pending {i}")));
    }
    // Carrying hooks only: a gate's claim on top of a full spool is acked
    // spool_dropped (reported, not lost), which would not be "exactly once".
    let events = ["UserPromptSubmit", "PreToolUse", "Stop"];
    let jobs: Vec<(Hook, String)> = (0..32).map(|i| (h(events[i % events.len()]), session.clone())).collect();
    let outs = at_once(&m.home, &jobs);
    carried.extend(ids_of(&outs));
    // Whatever a late gate spooled is carried by the next hook.
    let (out, _) = m.home.hook(&h("UserPromptSubmit"), &session);
    carried.extend(context_of(&out).map(|c| ids_in(&c)).unwrap_or_default());
    let c = counts(&carried);
    for id in &notes {
        assert_eq!(c.get(id).copied().unwrap_or(0), 1, "{}: {id} must reach exactly one output: {c:?}", m.label());
        assert_eq!(m.state(id), "delivered", "{}: {id}", m.label());
    }
    assert!(m.home.run_state_of(&session).unwrap().spool.is_empty());
    // No hook waited out a lock.
    assert!(!m.home.log().contains("still held"), "{}: {}", m.label(), m.home.log());
}

/// The same for Gemini and Copilot, whose gates never spool: a spool from a
/// carrier too small for five 4 KB notes, 5 more pending, then 32 of the
/// session's hooks at once (Gemini BeforeTool takes what the server claims
/// on its check and holds the call; Copilot preToolUse carries only the
/// spool), then the prompt hook until nothing is left: every note exactly
/// once, every receipt delivered.
fn one_session_32_hooks_pulling(m: &Backend, harness: Harness) {
    let h = |e: &str| hook(harness, e);
    let (start, prompt, events) = match harness {
        Harness::Gemini => ("SessionStart", "BeforeAgent", ["BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent"]),
        Harness::Copilot => {
            ("sessionStart", "userPromptSubmitted", ["userPromptSubmitted", "preToolUse", "postToolUse", "agentStop"])
        }
        _ => unreachable!(),
    };
    let session = unique_session("concp");
    m.home.hook(&h(start), &session);
    let mut notes = Vec::new();
    for i in 0..5 {
        notes.push(m.send(&session, &format!("{i}{}", "y".repeat(4000))));
    }
    let (out, _) = m.home.hook(&h(prompt), &session);
    let mut carried = ids_in(&context_of(&out).unwrap());
    assert!(!m.home.run_state_of(&session).unwrap().spool.is_empty(), "{}: a spool to start with", m.label());
    for i in 0..5 {
        notes.push(m.send(&session, &format!("pending {i}")));
    }
    let jobs: Vec<(Hook, String)> = (0..32).map(|i| (h(events[i % events.len()]), session.clone())).collect();
    carried.extend(ids_of(&at_once(&m.home, &jobs)));
    for _ in 0..4 {
        let (out, _) = m.home.hook(&h(prompt), &session);
        carried.extend(context_of(&out).map(|c| ids_in(&c)).unwrap_or_default());
    }
    let c = counts(&carried);
    for id in &notes {
        assert_eq!(
            c.get(id).copied().unwrap_or(0),
            1,
            "{harness:?} {}: {id} must reach exactly one output: {c:?}",
            m.label()
        );
        assert_eq!(m.state(id), "delivered", "{harness:?} {}: {id}", m.label());
    }
    assert!(m.home.run_state_of(&session).unwrap().spool.is_empty());
    assert!(!m.home.log().contains("still held"), "{}: {}", m.label(), m.home.log());
}

#[test]
fn thirty_two_gemini_and_copilot_hooks_of_one_session() {
    let s = server();
    for harness in [Harness::Gemini, Harness::Copilot] {
        one_session_32_hooks_pulling(&Backend::new(Some(&s), "concp-s"), harness);
        one_session_32_hooks_pulling(&Backend::new(None, "concp-l"), harness);
    }
}

#[test]
fn thirty_two_hooks_of_one_session_server() {
    let s = server();
    one_session_32_hooks(&Backend::new(Some(&s), "conc-s"));
}

#[test]
fn thirty_two_hooks_of_one_session_local() {
    one_session_32_hooks(&Backend::new(None, "conc-l"));
}

/// 32 Stops at once with 20 pending notes: at most `cap` continuations.
fn stop_cap(m: &Backend) {
    let stop = hook(Harness::Codex, "Stop");
    let session = unique_session("cap");
    m.home.hook(&hook(Harness::Codex, "SessionStart"), &session);
    let notes: Vec<String> = (0..20).map(|i| m.send(&session, &format!("late {i}"))).collect();
    let jobs: Vec<(Hook, String)> = (0..32).map(|_| (hook(Harness::Codex, "Stop"), session.clone())).collect();
    let _ = &stop;
    let outs = at_once(&m.home, &jobs);
    let rescues = outs.iter().filter(|(_, o)| o.as_ref().is_some_and(|v| v["decision"] == json!("block"))).count();
    assert!((1..=3).contains(&rescues), "{}: {rescues} continuations, the cap is 3", m.label());
    assert_eq!(m.home.run_state_of(&session).unwrap().stop_rescues as usize, rescues);
    let c = counts(&ids_of(&outs));
    assert!(c.values().all(|&n| n == 1), "{}: a note twice: {c:?}", m.label());
    for id in &notes {
        let st = m.state(id);
        if c.contains_key(id) {
            assert_eq!(st, "delivered");
        } else {
            assert_eq!(st, "pending", "{}: an uncarried note stays pending for a later hook", m.label());
        }
    }
}

#[test]
fn concurrent_stops_respect_the_rescue_cap_server() {
    let s = server();
    stop_cap(&Backend::new(Some(&s), "cap-s"));
}

#[test]
fn concurrent_stops_respect_the_rescue_cap_local() {
    stop_cap(&Backend::new(None, "cap-l"));
}

/// Two sessions (of two harnesses sharing one home), 16 hooks each, at once.
fn two_sessions(m: &Backend) {
    let (a, b) = (unique_session("a"), unique_session("b"));
    m.home.hook(&hook(Harness::ClaudeCode, "SessionStart"), &a);
    m.home.hook(&hook(Harness::Codex, "SessionStart"), &b);
    let na: Vec<String> = (0..5).map(|i| m.send(&a, &format!("for a {i}"))).collect();
    let nb: Vec<String> = (0..5).map(|i| m.send(&b, &format!("for b {i}"))).collect();
    let mut jobs = Vec::new();
    for i in 0..16 {
        jobs.push((hook(Harness::ClaudeCode, ["UserPromptSubmit", "PreToolUse", "Stop"][i % 3]), a.clone()));
        jobs.push((hook(Harness::Codex, ["UserPromptSubmit", "PreToolUse", "Stop"][i % 3]), b.clone()));
    }
    let outs = at_once(&m.home, &jobs);
    for (session, out) in &outs {
        let own = if session == &a { &na } else { &nb };
        for id in context_of(out).map(|c| ids_in(&c)).unwrap_or_default() {
            assert!(own.contains(&id), "{}: session {session} saw {id}, a note of the other session", m.label());
        }
    }
    let c = counts(&ids_of(&outs));
    for id in na.iter().chain(&nb) {
        assert_eq!(c.get(id).copied().unwrap_or(0), 1, "{}: {id}: {c:?}", m.label());
    }
}

#[test]
fn two_sessions_never_see_each_others_notes_server() {
    let s = server();
    two_sessions(&Backend::new(Some(&s), "two-s"));
}

#[test]
fn two_sessions_never_see_each_others_notes_local() {
    two_sessions(&Backend::new(None, "two-l"));
}
