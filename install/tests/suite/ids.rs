//! Ids as git and docker treat them (newcomer-ux-3 N1, N2, N15), through
//! the real CLI in both modes: the ID `sessions list` prints is accepted by
//! every command that takes a session (`notes send/list --session`,
//! `--parent`, `sessions attach`), a note id by a unique start of it; a
//! start shared by several exits 2 naming them, a start of nothing known
//! exits 1 with one line, and neither queues nor sends anything. Codex-like
//! ids (UUIDv7: a timestamp first) print long enough to differ.

use crate::common::*;
use preloop_shared::backend::Backend;
use preloop_shared::wire::{SessionEndRequest, SessionStartRequest};
use preloop_testkit::{FakeServer, client};
use serde_json::{Value, json};
use std::process::Output;

const CODEX_A: &str = "01a23abb-7e5c-7d0e-9b1a-aaaaaaaaaaaa";
const CODEX_B: &str = "01a23abb-7e5c-7f00-8c2d-bbbbbbbbbbbb";
const CLAUDE: &str = "801fb481-6c51-4319-b2b0-5e90de8b176f";
const KID: &str = "c1d2e3f4-0000-4000-8000-000000000001";

impl World {
    fn notes_queued(&self) -> usize {
        self.inbox().list().unwrap().len()
    }
    /// The ID column of `sessions list`, top to bottom.
    fn id_column(&self) -> Vec<String> {
        let out = self.run(&["sessions", "list"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        stdout(&out).lines().skip(1).map(|l| l.split_whitespace().next().unwrap().to_string()).collect()
    }
}

fn start_local(w: &World, id: &str, parent: Option<&str>) -> String {
    w.inbox()
        .session_start(&SessionStartRequest {
            session_id: id.into(),
            source: Some("codex_cli".into()),
            cwd: Some("/work/p".into()),
            parent_session_id: parent.map(str::to_string),
            alias: None,
            first_prompt: None,
            hook_event_name: Some("SessionStart".into()),
            transcript_path: None,
            harness_process: None,
        })
        .unwrap()
        .runtime_session_id
}

/// A run registered by hooks on another machine: the server knows it, this
/// one has no session file.
fn start_remote(s: &FakeServer, id: &str, parent: Option<&str>) -> String {
    let mut b = json!({"session_id": id, "source": "codex_cli", "cwd": "/w/p"});
    if let Some(p) = parent {
        b["parent_session_id"] = json!(p);
    }
    let r = client::post_json(&format!("{}/agents/session-start", s.api_base()), Some(&s.runtime_token()), &b).unwrap();
    assert!(r.status < 300, "{}", r.text());
    r.json()["runtime_session_id"].as_str().unwrap().to_string()
}

/// Two Codex runs (ids that share a start), a Claude Code run and its
/// child, registered by `start`; the Claude Code run's runtime id.
fn four_sessions(start: impl Fn(&str, Option<&str>) -> String) -> String {
    start(CODEX_A, None);
    start(CODEX_B, None);
    let parent = start(CLAUDE, None);
    start(KID, Some(&parent));
    parent
}

/// N2: time-prefixed ids print long enough to differ; the rest at 8.
fn assert_printed_ids(w: &World) {
    let mut shown = w.id_column();
    shown.sort();
    assert_eq!(shown, ["01a23abb-7e5c-7d", "01a23abb-7e5c-7f", "801fb481", "c1d2e3f4"]);
}

/// N1: a note to the Claude Code run by its printed ID, confirmed by the
/// id the user knows and the one typed (N15); the note's id and stderr.
fn send_by_printed_id(w: &World) -> (String, String) {
    let out = w.run(&["notes", "send", "--session", "801fb481", "Deploy to eu-west-1."]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let id = stdout(&out).split_whitespace().next().unwrap().to_string();
    assert_eq!(stdout(&out), format!("{id} pending for session {CLAUDE} (you typed 801fb481)\n"));
    (id, stderr(&out))
}

fn one_line(o: &Output) -> String {
    let e = stderr(o);
    assert_eq!(e.lines().count(), 1, "one line on stderr: {e}");
    e.trim_end().to_string()
}

fn posted_notes(s: &FakeServer) -> usize {
    s.requests().iter().filter(|r| r.method == "POST" && r.path == "/api/v1/operator-notes").count()
}

#[test]
fn local_ids_as_sessions_list_prints_them_work_everywhere() {
    let w = World::new("ids-local", None);
    four_sessions(|id, parent| start_local(&w, id, parent));
    assert_printed_ids(&w);

    // N1: the printed ID is taken by every command.
    let (id, err) = send_by_printed_id(&w);
    assert_eq!(err, "", "no warning that it has not started");
    assert_eq!(w.inbox().status(&id).unwrap().external_session_id.as_deref(), Some(CLAUDE));
    assert_eq!(w.json(&["notes", "list", "--session", "801fb481", "--json"])["total"], 1);
    let v = w.json(&["notes", "send", "--session", "01a23abb-7e5c-7f", "--json", "to B"]);
    assert_eq!(v["target"]["session"], CODEX_B);
    let v = w.json(&["notes", "send", "--children", "all", "--parent", "801fb481", "--json", "to the kid"]);
    assert_eq!(v["notes"][0]["session"], KID);
    let v = w.json(&["sessions", "list", "--parent", "801fb481", "--json"]);
    assert_eq!(v["sessions"][0]["id"], KID);

    // A note id by a unique start of it.
    let r = w.json(&["notes", "status", &id[..6], "--json"]);
    assert_eq!(r["note_id"], id.as_str());
    let out = w.run(&["notes", "cancel", &id[..6]]);
    assert_eq!((code(&out), stdout(&out)), (0, format!("cancelled {id} (you typed {})\n", &id[..6])));

    // A start shared by two: exit 2, the one line names both, nothing queued.
    let before = w.notes_queued();
    for args in [
        vec!["notes", "send", "--session", "01a23abb", "x"],
        vec!["notes", "list", "--session", "01a23abb"],
        vec!["sessions", "attach", "01a23abb", "--no-input"],
        vec!["sessions", "list", "--parent", "01a23abb"],
    ] {
        let out = w.run(&args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        let line = one_line(&out);
        assert!(
            line.starts_with("preloop-hooks: 01a23abb is the start of 2 sessions on this machine: ")
                && line.contains(CODEX_A)
                && line.contains(CODEX_B)
                && line.ends_with("; type more of the id"),
            "{args:?}: {line}"
        );
    }
    // A start of nothing known: exit 1, one line, nothing queued.
    for args in [
        vec!["notes", "send", "--session", "7777abcd", "x"],
        vec!["notes", "list", "--session", "7777abcd"],
        vec!["sessions", "attach", "7777abcd", "--no-input"],
    ] {
        let out = w.run(&args);
        assert_eq!(code(&out), 1, "{args:?}: {}", stderr(&out));
        assert!(one_line(&out).starts_with("preloop-hooks: no session 7777abcd on this machine"), "{args:?}");
    }
    assert_eq!(w.notes_queued(), before, "nothing was queued");
    let out = w.run(&["notes", "status", &id[..3]]);
    assert_eq!(code(&out), 2, "3 characters are no start: {}", stderr(&out));

    // attach by the printed ID (an ended session: it shows it and leaves).
    w.inbox().session_end(&SessionEndRequest { external_session_id: CODEX_A.into(), reason: "exit".into() }).unwrap();
    let out = w.run(&["sessions", "attach", "01a23abb-7e5c-7d", "--no-input", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let first: Value = serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    assert!(first["text"].as_str().unwrap().starts_with(CODEX_A), "{first}");
}

#[test]
fn server_ids_resolve_against_the_account() {
    let s = FakeServer::start();
    let w = World::new("ids-server", Some(&s));
    let rid = four_sessions(|id, parent| start_remote(&s, id, parent));
    assert_printed_ids(&w);

    // The printed ID, on a machine without the session's file: the note goes
    // to its runtime session and is confirmed by the id the user knows (N15).
    let (id, _) = send_by_printed_id(&w);
    let post = s.requests().into_iter().rev().find(|r| r.path == "/api/v1/operator-notes" && r.method == "POST");
    assert_eq!(post.unwrap().body.unwrap()["runtime_session_id"], rid.as_str());
    assert_eq!(w.json(&["notes", "list", "--session", "801fb481", "--json"])["total"], 1);
    let v = w.json(&["sessions", "list", "--parent", "801fb481", "--json"]);
    assert_eq!(v["sessions"][0]["id"], KID);
    assert_eq!(w.json(&["notes", "status", &id[..8], "--json"])["note_id"], id.as_str());

    let posted = posted_notes(&s);
    for args in [vec!["notes", "send", "--session", "01a23abb", "x"], vec!["sessions", "attach", "01a23abb"]] {
        let out = w.run(&args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        let line = one_line(&out);
        assert!(
            line.starts_with("preloop-hooks: 01a23abb is the start of 2 sessions in this account: ")
                && line.contains(CODEX_A)
                && line.contains(CODEX_B),
            "{line}"
        );
    }
    let out = w.run(&["notes", "send", "--session", "7777abcd", "x"]);
    assert_eq!(code(&out), 1);
    assert_eq!(
        one_line(&out),
        "preloop-hooks: no session 7777abcd in this account (no session id is or starts with it; `preloop-hooks sessions list` shows them)"
    );
    assert_eq!(posted_notes(&s), posted, "nothing was sent");
}
