//! Ids cannot lose a note (newcomer-ux-4, P4; red-team 4, P6), through the
//! real CLI: `--not-started` takes a harness's full session id only (a
//! UUID) and the "no session" refusal suggests it only for one; `notes list
//! --session <full id>` lists the notes waiting for a session that has not
//! started; an id start is resolved against every session and note of the
//! account, not a window of the newest.

use crate::common::*;
use preloop_testkit::{FakeServer, client};
use serde_json::{Value, json};

const FULL: &str = "0d9fc67d-6d54-4639-a547-e6bdcde2c737";

fn posted_notes(s: &FakeServer) -> usize {
    s.requests().iter().filter(|r| r.method == "POST" && r.path == "/api/v1/operator-notes").count()
}

/// The short-id and full-id answers that hold in both modes; the number of
/// notes this side holds before and after must not change on a refusal.
fn not_started_refusals(w: &World, count: &dyn Fn() -> usize) {
    let before = count();
    // A start that names nothing: no --not-started hint (no harness has an
    // 8-character session id).
    let out = w.run(&["notes", "send", "--session", "daa2b8c4", "x"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(!stderr(&out).contains("--not-started"), "{}", stderr(&out));
    // --not-started with a start: a usage error with the fix, nothing queued.
    let out = w.run(&["notes", "send", "--session", "daa2b8c4", "--not-started", "x"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("preloop-hooks: --not-started takes a session's full id, a UUID")
            && err.contains("daa2b8c4 is not one"),
        "{err}"
    );
    assert_eq!(count(), before, "nothing was queued");
    // A full id that names nothing: the hint is offered.
    let out = w.run(&["notes", "send", "--session", FULL, "x"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).trim_end().ends_with("for a session that has not started yet, add --not-started"),
        "{}",
        stderr(&out)
    );
    assert_eq!(count(), before, "nothing was queued");
}

#[test]
fn not_started_takes_a_full_id_and_its_notes_are_listed_locally() {
    let w = World::local("nc4-p4-local");
    not_started_refusals(&w, &|| w.inbox().list().unwrap().len());
    let out = w.run(&["notes", "send", "--session", FULL, "--not-started", "--json", "read AGENTS.md first"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["note_id"].as_str().unwrap().to_string();
    // Listed by the full id it waits for (before: "no session ...", exit 1).
    let out = w.run(&["notes", "list", "--session", FULL, "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["total"], 1, "{v}");
    assert_eq!(v["notes"][0]["note_id"], id.as_str());
    assert!(stderr(&out).contains(&format!("no session {FULL} has started on this machine yet")), "{}", stderr(&out));
    let out = w.run(&["notes", "list", "--session", FULL]);
    assert!(stdout(&out).contains(&id) && stdout(&out).contains("read AGENTS.md first"), "{}", stdout(&out));
    // A start is still no session.
    assert_eq!(code(&w.run(&["notes", "list", "--session", "0d9fc67d"])), 1);
}

#[test]
fn not_started_takes_a_full_id_on_a_server_too() {
    let s = FakeServer::start();
    let w = World::server("nc4-p4-server", &s);
    not_started_refusals(&w, &|| posted_notes(&s));
    // A server takes no note for a session it does not know: the list of
    // what waits for a full id is empty, not "no session".
    let out = w.run(&["notes", "list", "--session", FULL, "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["total"], 0);
}

/// A run registered by hooks elsewhere: the server knows it.
fn start_remote(s: &FakeServer, id: &str) -> String {
    let b = json!({"session_id": id, "source": "codex_cli", "cwd": "/w/p"});
    let r = client::post_json(&format!("{}/agents/session-start", s.api_base()), Some(&s.runtime_token()), &b).unwrap();
    assert!(r.status < 300, "{}", r.text());
    r.json()["runtime_session_id"].as_str().unwrap().to_string()
}

/// 520 sessions: the oldest and the newest share the start `801f`.
#[test]
fn an_id_start_is_resolved_against_every_session_not_the_newest_500() {
    let s = FakeServer::start();
    let w = World::server("rt4-p6", &s);
    start_remote(&s, "801f0000-aaaa-4000-8000-000000000cc0");
    let old = start_remote(&s, "801faaaa-0000-4000-8000-000000000dd0");
    for i in 0..517 {
        start_remote(&s, &format!("{i:08x}-1111-4000-8000-000000000000"));
    }
    start_remote(&s, "801f0000-0000-4000-8000-000000000ee0");
    let posted = posted_notes(&s);
    // Before: resolved to the newest, exit 0.
    let out = w.run(&["notes", "send", "--session", "801f", "x"]);
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains("801f is the start of 3 sessions in this account"), "{}", stderr(&out));
    assert_eq!(posted_notes(&s), posted, "nothing was sent");
    // The ID `sessions list` prints for the newest is unique in the whole
    // account (before: `801f0000`, which the oldest shares).
    let out = w.run(&["sessions", "list"]);
    let newest = stdout(&out).lines().nth(1).unwrap().split_whitespace().next().unwrap().to_string();
    assert!(newest.starts_with("801f0000-0"), "{}", stdout(&out));
    assert_eq!(code(&w.run(&["notes", "send", "--session", &newest, "x"])), 0);
    // Before: "no session 801fa", exit 1.
    let out = w.run(&["notes", "send", "--session", "801fa", "--json", "to the old one"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let post = s.requests().into_iter().rev().find(|r| r.path == "/api/v1/operator-notes" && r.method == "POST");
    assert_eq!(post.unwrap().body.unwrap()["runtime_session_id"], old.as_str());
}

/// 205 notes to one agent: a start of the oldest (past the newest 200)
/// still names it.
#[test]
fn a_note_id_start_is_resolved_against_every_note_not_the_newest_200() {
    let s = FakeServer::start();
    s.set_rate_limit(None);
    let w = World::server("rt4-p6-notes", &s);
    let agent = s.agent_id();
    let first = s.send_note(json!({"text": "the first", "agent_id": agent}))["note_id"].as_str().unwrap().to_string();
    for i in 0..204 {
        s.send_note(json!({"text": format!("note {i}"), "agent_id": agent}));
    }
    let out = w.run(&["notes", "status", &first[..12], "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["note_id"], first.as_str());
}
