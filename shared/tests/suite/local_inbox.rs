//! The local inbox behind the engine (`Engine::with_backend` with a real
//! `LocalInbox`): what a claim may take, atomic claims across engines,
//! registration (no cwd, unique aliases), and session end.

use preloop_shared::backend::Backend;
use preloop_shared::config::{Config, Env};
use preloop_shared::flow::{Carry, Engine, Input, InputKind};
use preloop_shared::operator::{
    Author, NOTE_RATE_LIMIT_PER_HOUR, RATE_LIMIT_DETAIL, SendRequest, Target, rate_limited,
};
use preloop_shared::registry::{HookDef, def_of, event};
use preloop_shared::time::Timestamp;
use preloop_shared::wire::SessionStartRequest;
use preloop_shared::{Error, Harness};
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
    let input = Input {
        session_id: session.into(),
        cwd: Some("/tmp".into()),
        transcript_path: None,
        parent_session_id: None,
        kind,
    };
    let (out, after) = e.handle(&input).unwrap();
    e.finish(after, true);
    out.context.as_deref().map(ids_in).unwrap_or_default()
}

fn tool(carry: Carry) -> InputKind {
    InputKind::Tool { tool_name: "Bash".into(), mcp_tool: None, tool_input: json!({}), model: None, carry }
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
        parent_session_id: None,
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

fn request(target: Target, from: &str, text: &str) -> SendRequest {
    SendRequest {
        text: text.into(),
        target,
        next_session: false,
        expires_in_secs: None,
        author: Author { display: Some(from.into()), auth_method: Some("local".into()), ..Author::default() },
    }
}

/// The server's limit (docs/contracts/preloop-server.md §5.1): 20 notes per
/// rolling hour per (sender, target), cancelled ones included; the 21st is
/// refused with the server's reason and nothing is written.
#[test]
fn d6_the_local_inbox_keeps_the_servers_rate_limit() {
    let home = Home::new("inbox-rate");
    let inbox = home.inbox();
    for s in ["s", "t"] {
        inbox.session_start(&SessionStartRequest { session_id: s.into(), ..Default::default() }).unwrap();
    }
    let to_s = || Target::Session("s".into());
    let first = inbox.send(&request(to_s(), "olive", "note 0")).unwrap();
    inbox.cancel(&first.note_id).unwrap();
    for i in 1..NOTE_RATE_LIMIT_PER_HOUR {
        inbox.send(&request(to_s(), "olive", &format!("note {i}"))).unwrap();
    }
    let stored = inbox.list().unwrap().len();
    let err = inbox.send(&request(to_s(), "olive", "one too many")).expect_err("the 21st note");
    assert!(matches!(err, Error::Refused(_)), "{err:?}");
    assert_eq!(err.to_string(), rate_limited(RATE_LIMIT_DETAIL));
    assert!(err.to_string().contains("20 notes per hour"), "{err}");
    assert_eq!(inbox.list().unwrap().len(), stored, "nothing written");
    // The same session by its runtime id is the same target.
    let rid = home.session_file("s").unwrap().runtime_session_id;
    assert!(inbox.send(&request(Target::RuntimeSession(rid), "olive", "x")).is_err());
    // Another target, another sender: their own windows.
    inbox.send(&request(Target::Session("t".into()), "olive", "for t")).unwrap();
    inbox.send(&request(to_s(), "bob", "bob's first")).unwrap();
    // A harness target has its own window too (the server's agent).
    for i in 0..NOTE_RATE_LIMIT_PER_HOUR {
        inbox.send(&request(Target::Harness(Harness::ClaudeCode), "olive", &format!("next {i}"))).unwrap();
    }
    assert!(inbox.send(&request(Target::Harness(Harness::ClaudeCode), "olive", "21")).is_err());
    // A window only holds the last hour: age every entry past it and the
    // sender may send again.
    let sent = home.path().join("inbox/sent/session/s.json");
    let mut window: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&sent).unwrap()).unwrap();
    let olive = |w: &serde_json::Value| w.as_array().unwrap().iter().filter(|e| e["by"] == "name:olive").count();
    assert_eq!(olive(&window), NOTE_RATE_LIMIT_PER_HOUR);
    let hour_ago = Timestamp::now().add_secs(-3601);
    for e in window.as_array_mut().unwrap() {
        e["at"] = serde_json::to_value(hour_ago).unwrap();
    }
    std::fs::write(&sent, window.to_string()).unwrap();
    inbox.send(&request(to_s(), "olive", "an hour later")).unwrap();
    let window: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&sent).unwrap()).unwrap();
    assert_eq!(window.as_array().unwrap().len(), 1, "older entries pruned: {window}");
    // Without a limit (benchmarks), nothing is counted.
    let unlimited = home.inbox().with_rate_limit(None);
    for i in 0..NOTE_RATE_LIMIT_PER_HOUR + 5 {
        unlimited.send(&request(Target::Session("t".into()), "olive", &format!("bulk {i}"))).unwrap();
    }
}

/// `children all` is refused whole when one child's window is full, as the
/// server's transaction is.
#[test]
fn d6_a_children_send_is_refused_whole() {
    let home = Home::new("inbox-rate-kids");
    let inbox = home.inbox();
    inbox.session_start(&SessionStartRequest { session_id: "p".into(), ..Default::default() }).unwrap();
    let parent = home.session_file("p").unwrap().runtime_session_id;
    for k in ["k1", "k2"] {
        let req =
            SessionStartRequest { session_id: k.into(), parent_session_id: Some(parent.clone()), ..Default::default() };
        inbox.session_start(&req).unwrap();
    }
    for i in 0..NOTE_RATE_LIMIT_PER_HOUR {
        inbox.send(&request(Target::Session("k2".into()), "olive", &format!("{i}"))).unwrap();
    }
    let before = inbox.list().unwrap().len();
    let all = Target::Children { parent: parent.clone(), all: true };
    assert!(matches!(inbox.send_all(&request(all, "olive", "everyone")), Err(Error::Refused(_))));
    assert_eq!(inbox.list().unwrap().len(), before, "no child got it");
}

/// A first prompt's secrets never reach the title (the server's
/// redaction), and a title written before that is masked when listed.
#[test]
fn d6_session_titles_are_redacted_as_the_server_redacts_them() {
    let home = Home::new("inbox-title");
    let inbox = home.inbox();
    let prompt = "Fix the flaky test with key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx and password=hunter2\nthen push";
    let req = SessionStartRequest {
        session_id: "s".into(),
        first_prompt: Some(prompt.into()),
        hook_event_name: Some("UserPromptSubmit".into()),
        ..Default::default()
    };
    inbox.session_start(&req).unwrap();
    let title = home.session_file("s").unwrap().title.unwrap();
    assert_eq!(title, "Fix the flaky test with key sk-ant-[redacted] and password: [redacted] then push");
    // A session file from before: its title as typed.
    let mut f = home.session_file("s").unwrap();
    f.external_session_id = "old".into();
    f.title = Some("deploy with token=abc123secret now".into());
    preloop_shared::session::write_session_file(home.path(), &f).unwrap();
    let rows = inbox.sessions();
    let old = rows.iter().find(|r| r.id == "old").unwrap();
    assert_eq!(old.title.as_deref(), Some("deploy with token: [redacted] now"));
    assert!(!old.label.contains("abc123secret"), "{}", old.label);
    let listed = serde_json::to_string(&rows).unwrap();
    assert!(!listed.contains("hunter2") && !listed.contains("AbCdEf") && !listed.contains("abc123"), "{listed}");
}

/// A note file written before the stored note was its receipt (the claiming
/// session under `session_id`, no `harness`, no `managed_agent_id`) reads
/// into the receipt the inbox always gave for it, field for field; a file
/// without `created_at` is still no note. (The record is now `NoteRecord {
/// to, receipt }`, the receipt flattened into the file.)
#[test]
fn a_note_file_from_before_the_record_was_its_receipt_reads_as_it_did() {
    use preloop_shared::operator::{Receipt, ReceiptState};
    let home = Home::new("inbox-old-files");
    let notes = home.dir.join("inbox/notes");
    std::fs::create_dir_all(&notes).unwrap();
    let author = json!({"display": "Olive", "auth_method": "local"});
    let old = |id: &str, extra: serde_json::Value| {
        let mut v = json!({
            "note_id": id, "text": "old words", "next_session": false, "author": author,
            "created_at": "2026-12-01T00:00:00Z", "expires_at": "2099-01-01T00:00:00Z",
            "claimed_at": null, "delivered_at": null, "delivery_channel": null, "delivery_event": null,
            "undeliverable_at": null, "undeliverable_reason": null, "cancelled_at": null, "expired_at": null,
        });
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        std::fs::write(notes.join(format!("{id}.json")), v.to_string()).unwrap();
    };
    old(
        "00000000000000a1",
        json!({"state": "claimed", "to": {"kind": "session", "session_id": "s-1"}, "session_id": "s-1",
               "runtime_session_id": "r-1", "claimed_at": "2026-12-01T00:00:01Z",
               "delivery_channel": "hook", "delivery_event": "stop"}),
    );
    old(
        "00000000000000a2",
        json!({"state": "undeliverable", "to": {"kind": "harness", "harness": "codex"}, "next_session": true,
               "session_id": "cx-1", "runtime_session_id": "r-2", "undeliverable_at": "2026-12-01T00:00:02Z",
               "undeliverable_reason": "session_ended"}),
    );
    let mut no_created = json!({"note_id": "00000000000000a3", "state": "pending", "text": "x",
        "to": {"kind": "session", "session_id": "s-1"}, "author": author, "expires_at": "2099-01-01T00:00:00Z"});
    std::fs::write(notes.join("00000000000000a3.json"), no_created.to_string()).unwrap();
    let at = |s: &str| Timestamp::parse(s);
    let base = |id: &str, state| Receipt {
        text: "old words".into(),
        author: serde_json::from_value(author.clone()).unwrap(),
        created_at: at("2026-12-01T00:00:00Z"),
        expires_at: at("2099-01-01T00:00:00Z"),
        ..Receipt::new(id, state)
    };
    let a1 = Receipt {
        runtime_session_id: Some("r-1".into()),
        external_session_id: Some("s-1".into()),
        claimed_at: at("2026-12-01T00:00:01Z"),
        delivery_channel: Some("hook".into()),
        delivery_event: Some("stop".into()),
        ..base("00000000000000a1", ReceiptState::Claimed)
    };
    let a2 = Receipt {
        runtime_session_id: Some("r-2".into()),
        external_session_id: Some("cx-1".into()),
        harness: Some("codex".into()),
        next_session: true,
        undeliverable_at: at("2026-12-01T00:00:02Z"),
        undeliverable_reason: Some("session_ended".into()),
        ..base("00000000000000a2", ReceiptState::Undeliverable)
    };
    let inbox = home.inbox();
    for want in [&a1, &a2] {
        let got = inbox.status(&want.note_id).unwrap();
        assert_eq!(serde_json::to_value(&got).unwrap(), serde_json::to_value(want).unwrap());
    }
    let listed: Vec<String> = inbox.list().unwrap().into_iter().map(|r| r.note_id).collect();
    assert_eq!(listed, ["00000000000000a2", "00000000000000a1"], "the file without created_at is no note");
    // Written back (a cancel of a claimed note changes nothing but is read
    // again the same way); a cancel of a pending one writes the new form.
    assert_eq!(inbox.cancel("00000000000000a1").unwrap(), a1);
    no_created["created_at"] = json!("2026-12-01T00:00:00Z");
    std::fs::write(notes.join("00000000000000a3.json"), no_created.to_string()).unwrap();
    let cancelled = inbox.cancel("00000000000000a3").unwrap();
    assert_eq!((cancelled.state, cancelled.external_session_id), (ReceiptState::Cancelled, None));
    assert_eq!(inbox.status("00000000000000a3").unwrap().state, ReceiptState::Cancelled);
}
