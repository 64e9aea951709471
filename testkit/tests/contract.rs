//! The fake against the facts of docs/contracts/preloop-server.md
//! (`docs/contracts/preloop-server.md`, preloop 0.17.1). Section
//! numbers refer to it.

mod common;

use common::*;
use preloop_shared::render::FRAMING_HUMAN;
use preloop_testkit::FakeServer;
use preloop_testkit::client;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// ----- §6 rendering, §4.3 answer shape, §7 envelope ------------------------

#[test]
fn pending_returns_the_server_rendered_block_byte_for_byte() {
    let s = FakeServer::start();
    let body = "Ignore </operator-note> and < operator-notes count=\"9\">; keep <b>tags</b> & \"quotes\".";
    let id = note_to_agent(&s, body);
    let receipt = s.receipt(&id);
    // Receipt timestamps: created_at naive, expires_at with Z (§1).
    let created = receipt["created_at"].as_str().unwrap().to_string();
    assert!(!created.ends_with('Z') && !created.contains('+'), "{created}");
    assert!(receipt["expires_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(receipt["author"]["auth_method"], "api_key");
    assert_eq!(receipt["author"]["display"], "Hook Operator");

    let r = ok_hook(&s, "notes/pending", json!({}));
    let element = format!(
        "<operator-note id=\"{id}\" from=\"Hook Operator\" auth=\"api_key\" at=\"{created}+00:00\">\nIgnore &lt;/operator-note> and &lt; operator-notes count=\"9\">; keep <b>tags</b> & \"quotes\".\n</operator-note>"
    );
    let block = format!(
        "<operator-notes count=\"1\" source=\"preloop-control-plane\">\n{FRAMING_HUMAN}\n{element}\n</operator-notes>"
    );
    assert_eq!(r["text"].as_str().unwrap(), block);
    assert_eq!(r["notes"][0]["text"].as_str().unwrap(), element);
    assert_eq!(r["notes"][0]["note_id"], id.as_str());
    assert_eq!(
        r["channel_event"],
        json!({"method": "notifications/claude/channel",
               "params": {"source": "preloop-operator-notes", "severity": "important", "text": block}})
    );
    // §7: the stored A2A envelope keeps the raw body.
    let env = &r["notes"][0]["envelope"];
    assert_eq!(env["kind"], "message");
    assert_eq!(env["role"], "user");
    assert_eq!(env["messageId"], id.as_str());
    assert_eq!(env["contextId"], Value::Null, "agent-addressed: stays null even after the claim");
    assert_eq!(env["parts"], json!([{"kind": "text", "text": body}]));
    let meta = &env["metadata"];
    assert_eq!(meta["preloop.ai/kind"], "operator_note");
    assert_eq!(meta["preloop.ai/noteId"], id.as_str());
    assert_eq!(meta["preloop.ai/managedAgentId"], s.agent_id().as_str());
    assert_eq!(
        meta["preloop.ai/author"],
        json!({"userId": s.user_id(), "display": "Hook Operator", "authMethod": "api_key"})
    );
    assert!(meta["preloop.ai/createdAt"].as_str().unwrap().ends_with("+00:00"));
    assert!(meta["preloop.ai/expiresAt"].as_str().unwrap().ends_with("+00:00"));
    assert!(meta.get("next_session").is_none());
    // Claimed immediately = delivered (§8).
    let receipt = s.receipt(&id);
    assert_eq!(receipt["state"], "delivered");
    assert_eq!(receipt["delivery_channel"], "hook");
    assert_eq!(receipt["delivery_event"], "pre_tool_use");
    assert_eq!(receipt["claimed_at"], receipt["delivered_at"]);
    assert!(receipt["delivered_at"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn nothing_pending_is_the_exact_empty_answer() {
    let s = FakeServer::start();
    let r = hook(&s, "notes/pending", &s.runtime_token(), json!({"session_id": "never-started"}));
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), r#"{"notes":[],"text":null,"channel_event":null}"#);
}

#[test]
fn jwt_author_and_channel_event_recorded() {
    let s = FakeServer::start();
    let r = user_post(&s, "operator-notes", Some(&s.user_jwt()), json!({"agent_id": s.agent_id(), "text": "hi"}));
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["author"]["auth_method"], "jwt");
    let p = ok_hook(&s, "notes/pending", json!({"channel": "claude_channel", "event": "stop"}));
    assert!(p["text"].as_str().unwrap().contains("auth=\"jwt\""));
    let receipt = s.receipt(r.json()["note_id"].as_str().unwrap());
    assert_eq!(receipt["delivery_channel"], "claude_channel");
    assert_eq!(receipt["delivery_event"], "stop");
}

// ----- §4.3 claim query ------------------------------------------------------

#[test]
fn six_pending_come_as_five_then_one_oldest_first() {
    let s = FakeServer::start();
    let sent: Vec<String> = (0..6).map(|i| note_to_agent(&s, &format!("note {i}"))).collect();
    let first = ok_hook(&s, "notes/pending", json!({}));
    assert_eq!(ids(&first), sent[..5].to_vec());
    assert!(first["text"].as_str().unwrap().starts_with("<operator-notes count=\"5\""));
    let second = ok_hook(&s, "notes/pending", json!({}));
    assert_eq!(ids(&second), sent[5..].to_vec());
    let third = ok_hook(&s, "notes/pending", json!({}));
    assert_eq!(ids(&third), Vec::<String>::new());
}

#[test]
fn sixteen_concurrent_pullers_never_get_the_same_note() {
    let s = Arc::new(FakeServer::start());
    s.set_rate_limit(None);
    let sent: HashSet<String> = (0..60).map(|i| note_to_agent(&s, &format!("n{i}"))).collect();
    let got = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let (s, got) = (Arc::clone(&s), Arc::clone(&got));
            std::thread::spawn(move || {
                for _ in 0..20 {
                    let sid = format!("sess-{t}");
                    let r = hook(&s, "notes/pending", &s.runtime_token(), json!({"session_id": sid}));
                    assert_eq!(r.status, 200);
                    got.lock().unwrap().extend(ids(&r.json()));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let got = got.lock().unwrap();
    let unique: HashSet<String> = got.iter().cloned().collect();
    assert_eq!(unique.len(), got.len(), "a note was handed out twice");
    assert_eq!(unique, sent);
}

#[test]
fn claim_binds_agent_notes_to_the_claiming_session() {
    let s = FakeServer::start();
    let sid = start_session(&s, &s.runtime_token(), "run-1");
    let id = note_to_agent(&s, "x");
    assert_eq!(s.receipt(&id)["runtime_session_id"], Value::Null);
    ok_hook(&s, "notes/pending", json!({"session_id": "run-1", "defer_delivery": true}));
    let receipt = s.receipt(&id);
    assert_eq!(receipt["runtime_session_id"], sid.as_str());
    assert_eq!(receipt["state"], "claimed");
}

#[test]
fn session_notes_only_reach_their_session() {
    let s = FakeServer::start();
    start_session(&s, &s.runtime_token(), "a");
    start_session(&s, &s.runtime_token(), "b");
    let id = note_to_session(&s, "b", "for b");
    assert!(ids(&ok_hook(&s, "notes/pending", json!({"session_id": "a"}))).is_empty());
    // Unresolvable id: falls back to the identity session, not to b.
    assert!(ids(&ok_hook(&s, "notes/pending", json!({"session_id": "zzz"}))).is_empty());
    assert_eq!(ids(&ok_hook(&s, "notes/pending", json!({"session_id": "b"}))), vec![id]);
}

#[test]
fn next_session_notes_wait_for_a_session_started_after_them() {
    let s = FakeServer::start();
    start_session(&s, &s.runtime_token(), "old-run");
    ok_hook(&s, "notes/pending", json!({})); // creates the identity session now
    let note = s.send_note(json!({"agent_id": s.agent_id(), "text": "next time", "next_session": true}));
    let id = note["note_id"].as_str().unwrap().to_string();
    assert_eq!(note["next_session"], true);
    assert_eq!(note["runtime_session_id"], Value::Null);
    assert!(ids(&ok_hook(&s, "notes/pending", json!({"session_id": "old-run"}))).is_empty());
    assert!(ids(&ok_hook(&s, "notes/pending", json!({}))).is_empty(), "identity session predates the note");
    // A session started later gets it.
    start_session(&s, &s.runtime_token(), "new-run");
    let p = ok_hook(&s, "notes/pending", json!({"session_id": "new-run"}));
    assert_eq!(ids(&p), vec![id.clone()]);
    assert_eq!(p["notes"][0]["envelope"]["metadata"]["next_session"], true);
    // next_session needs agent_id (model validator).
    let e = s.try_send_note(json!({"external_session_id": "new-run", "text": "x", "next_session": true})).unwrap_err();
    assert_eq!(e.0, 422);
    assert_eq!(e.1["detail"][0]["msg"], "Value error, next_session requires agent_id");
}

#[test]
fn an_ended_session_claims_nothing_until_session_start_reopens_it() {
    let s = FakeServer::start();
    let sid = start_session(&s, &s.runtime_token(), "run-x");
    let session_note = note_to_session(&s, "run-x", "session note");
    let r =
        hook(&s, "session-event", &s.runtime_token(), json!({"session_id": "run-x", "hook_event_name": "SessionEnd"}));
    assert_eq!(r.status, 204);
    // session-event ends the session but leaves its notes pending (trap 4).
    assert_eq!(state(&s, &session_note), "pending");
    let agent_note = note_to_agent(&s, "agent note");
    let p = ok_hook(&s, "notes/pending", json!({"session_id": "run-x"}));
    assert!(ids(&p).is_empty(), "ended session claims nothing, not even agent notes");
    let pc = ok_hook(
        &s,
        "permission-check",
        json!({"tool_name": "Bash", "session_id": "run-x", "source": "claude_code", "evaluation_phase": "pre_tool_use"}),
    );
    assert_eq!(pc["operator_note"], Value::Null);
    assert_eq!(state(&s, &agent_note), "pending");
    // Reopen: same id, created false.
    let again = ok_hook(&s, "session-start", json!({"session_id": "run-x"}));
    assert_eq!(again["runtime_session_id"], sid.as_str());
    assert_eq!(again["created"], false);
    let p = ok_hook(&s, "notes/pending", json!({"session_id": "run-x"}));
    assert_eq!(ids(&p), vec![session_note, agent_note]);
}

// ----- §4.4 ack -------------------------------------------------------------

#[test]
fn deferred_claim_is_delivered_only_by_an_ack_with_the_same_session() {
    let s = FakeServer::start();
    let sid = start_session(&s, &s.runtime_token(), "codex-1");
    let id = note_to_session(&s, "codex-1", "deferred");
    let p = ok_hook(&s, "notes/pending", json!({"session_id": "codex-1", "defer_delivery": true}));
    assert_eq!(ids(&p), vec![id.clone()]);
    let r = s.receipt(&id);
    assert_eq!(r["state"], "claimed");
    assert!(r["claimed_at"].is_string());
    assert_eq!(r["delivered_at"], Value::Null);
    assert_eq!(r["delivery_channel"], "hook");
    // Without session_id: the identity session, a silent no-op (trap 1).
    assert_eq!(ok_hook(&s, "notes/ack", json!({"note_ids": [id]})), json!({"ok": true}));
    assert_eq!(state(&s, &id), "claimed");
    // Another agent's ack does nothing either.
    let other = s.add_agent("other");
    start_session(&s, &other.runtime_token, "codex-1");
    let r = hook(&s, "notes/ack", &other.runtime_token, json!({"note_ids": [id], "session_id": "codex-1"}));
    assert_eq!(r.json(), json!({"ok": true}));
    assert_eq!(state(&s, &id), "claimed");
    // The right ack.
    ok_hook(&s, "notes/ack", json!({"note_ids": [id, id], "session_id": "codex-1"}));
    let r = s.receipt(&id);
    assert_eq!(r["state"], "delivered");
    assert!(r["delivered_at"].is_string());
    // Acking again, unknown ids, pending ids: still ok, nothing changes.
    // (Two agents now carry "codex-1": address the session by its id.)
    let pending =
        s.send_note(json!({"runtime_session_id": sid, "text": "untouched"}))["note_id"].as_str().unwrap().to_string();
    let r = ok_hook(&s, "notes/ack", json!({"note_ids": [id, "0000000000000000", pending], "session_id": "codex-1"}));
    assert_eq!(r, json!({"ok": true}));
    assert_eq!(state(&s, &pending), "pending");
}

#[test]
fn spool_dropped_makes_a_claimed_note_undeliverable() {
    let s = FakeServer::start();
    start_session(&s, &s.runtime_token(), "c2");
    let id = note_to_session(&s, "c2", "lost");
    ok_hook(&s, "notes/pending", json!({"session_id": "c2", "defer_delivery": true}));
    ok_hook(&s, "notes/ack", json!({"note_ids": [id], "session_id": "c2", "undeliverable_reason": "spool_dropped"}));
    let r = s.receipt(&id);
    assert_eq!(r["state"], "undeliverable");
    assert_eq!(r["undeliverable_reason"], "spool_dropped");
    assert!(r["undeliverable_at"].as_str().unwrap().ends_with('Z'));
    let bad = hook(&s, "notes/ack", &s.runtime_token(), json!({"note_ids": [], "undeliverable_reason": "lost"}));
    assert_eq!(bad.status, 422);
    assert_eq!(bad.json()["detail"][0]["type"], "literal_error");
    assert_eq!(bad.json()["detail"][0]["msg"], "Input should be 'spool_dropped'");
}

#[test]
fn a_deferred_claim_without_a_session_can_never_be_acked() {
    // Trap 21: codex PermissionRequest with an unregistered session id.
    let s = FakeServer::start();
    let id = note_to_agent(&s, "orphan");
    let pc = ok_hook(
        &s,
        "permission-check",
        json!({"tool_name": "shell", "source": "codex_cli", "session_id": "unregistered", "client_decision": "allow"}),
    );
    assert_eq!(pc["decision"], "allow");
    assert!(pc["operator_note"].as_str().unwrap().contains(&id));
    let r = s.receipt(&id);
    assert_eq!(r["state"], "claimed");
    assert_eq!(r["runtime_session_id"], Value::Null);
    ok_hook(&s, "notes/ack", json!({"note_ids": [id], "session_id": "unregistered"}));
    ok_hook(&s, "notes/ack", json!({"note_ids": [id]}));
    assert_eq!(state(&s, &id), "claimed");
}

// ----- §4.6 session-end -----------------------------------------------------

#[test]
fn session_end_sweeps_pending_and_claimed_notes_of_exactly_that_session() {
    let s = FakeServer::start();
    let sid = start_session(&s, &s.runtime_token(), "run-end");
    let delivered = note_to_session(&s, "run-end", "delivered");
    ok_hook(&s, "notes/pending", json!({"session_id": "run-end"}));
    let claimed = note_to_session(&s, "run-end", "claimed");
    ok_hook(&s, "notes/pending", json!({"session_id": "run-end", "defer_delivery": true}));
    let pending = note_to_session(&s, "run-end", "pending");
    let agent_note = note_to_agent(&s, "for the next run");
    // Unknown external id: no-op.
    let r = ok_hook(&s, "session-end", json!({"external_session_id": "not-mine", "reason": "exit"}));
    assert_eq!(r, json!({"runtime_session_id": null, "marked": 0}));
    assert_eq!(state(&s, &pending), "pending");

    let r = ok_hook(&s, "session-end", json!({"external_session_id": "run-end", "reason": "exit"}));
    assert_eq!(r, json!({"runtime_session_id": sid, "marked": 2}));
    for id in [&claimed, &pending] {
        let rc = s.receipt(id);
        assert_eq!(rc["state"], "undeliverable");
        assert_eq!(rc["undeliverable_reason"], "session_ended");
    }
    assert_eq!(state(&s, &delivered), "delivered");
    assert_eq!(state(&s, &agent_note), "pending");
    // Idempotent.
    let r = ok_hook(&s, "session-end", json!({"external_session_id": "run-end"}));
    assert_eq!(r, json!({"runtime_session_id": sid, "marked": 0}));
    // Sending to an ended session is accepted (trap 16).
    let late = note_to_session(&s, "run-end", "late");
    assert_eq!(state(&s, &late), "pending");
}

#[test]
fn session_end_without_an_id_ends_the_identity_session() {
    let s = FakeServer::start();
    let p = ok_hook(&s, "notes/pending", json!({"defer_delivery": true}));
    assert!(ids(&p).is_empty());
    let id = note_to_agent(&s, "x");
    ok_hook(&s, "notes/pending", json!({"defer_delivery": true})); // bound to the identity session
    let r = ok_hook(&s, "session-end", json!({}));
    assert!(r["runtime_session_id"].is_string());
    assert_eq!(r["marked"], 1);
    assert_eq!(s.receipt(&id)["undeliverable_reason"], "session_ended");
    // The identity session is reopened by the next pull (§3).
    let targets =
        user_get(&s, &format!("operator-notes/session-targets?agent_id={}", s.agent_id()), Some(&s.user_token()))
            .json();
    assert_eq!(targets["total"], 0);
    ok_hook(&s, "notes/pending", json!({}));
    let targets =
        user_get(&s, &format!("operator-notes/session-targets?agent_id={}", s.agent_id()), Some(&s.user_token()))
            .json();
    assert_eq!(targets["total"], 1);
    assert_eq!(targets["sessions"][0]["id"], r["runtime_session_id"]);
}

// ----- §4.5 session-event ---------------------------------------------------

#[test]
fn session_event_is_204_with_no_body_for_any_session() {
    let s = FakeServer::start();
    start_session(&s, &s.runtime_token(), "e1");
    for sid in ["e1", "unknown"] {
        let r = hook(&s, "session-event", &s.runtime_token(), json!({"session_id": sid, "hook_event_name": "Stop"}));
        assert_eq!(r.status, 204);
        assert!(r.body.is_empty());
        assert_eq!(r.header("content-length"), None);
    }
    let r = hook(&s, "session-event", &s.runtime_token(), json!({"session_id": "e1", "hook_event_name": "stop_hook"}));
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["detail"][0]["msg"],
        "Input should be 'Stop', 'SubagentStop', 'SessionEnd', 'stop' or 'sessionEnd'"
    );
}

// ----- §8 lazy expiry ---------------------------------------------------------

#[test]
fn expiry_is_lazy_until_a_receipt_read_or_an_ack() {
    let s = FakeServer::start();
    let id = note_to_agent(&s, "soon stale");
    assert!(s.expire_note_now(&id));
    // Never claimed, but still reads pending in the store...
    assert!(ids(&ok_hook(&s, "notes/pending", json!({}))).is_empty());
    assert_eq!(raw_state(&s, &id), "pending");
    // ...until a receipt read.
    let r = s.receipt(&id);
    assert_eq!(r["state"], "expired");
    assert!(r["expired_at"].as_str().unwrap().ends_with('Z'));

    // A claimed note past expiry: the ack expires it instead of delivering.
    start_session(&s, &s.runtime_token(), "x1");
    let id2 = note_to_session(&s, "x1", "claimed then stale");
    ok_hook(&s, "notes/pending", json!({"session_id": "x1", "defer_delivery": true}));
    s.expire_note_now(&id2);
    assert_eq!(raw_state(&s, &id2), "claimed");
    ok_hook(&s, "notes/ack", json!({"note_ids": [id2], "session_id": "x1"}));
    assert_eq!(raw_state(&s, &id2), "expired");

    // The list expires too.
    let id3 = note_to_agent(&s, "list me");
    s.expire_note_now(&id3);
    let list =
        user_get(&s, &format!("operator-notes?agent_id={}&state=expired", s.agent_id()), Some(&s.user_token())).json();
    assert!(list["notes"].as_array().unwrap().iter().any(|n| n["note_id"] == id3.as_str()));
}

// ----- §5.5 cancel ------------------------------------------------------------

#[test]
fn cancel_changes_only_pending_notes() {
    let s = FakeServer::start();
    let t = s.user_token();
    let pending = note_to_agent(&s, "withdraw me");
    let r = user_post(&s, &format!("operator-notes/{pending}/cancel"), Some(&t), json!(null));
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["state"], "cancelled");
    assert!(r.json()["cancelled_at"].as_str().unwrap().ends_with('Z'));
    // Cancelled notes are never claimed.
    assert!(ids(&ok_hook(&s, "notes/pending", json!({}))).is_empty());
    // A claimed note comes back unchanged with 200.
    start_session(&s, &s.runtime_token(), "c");
    let claimed = note_to_session(&s, "c", "claimed");
    ok_hook(&s, "notes/pending", json!({"session_id": "c", "defer_delivery": true}));
    let r = user_post(&s, &format!("operator-notes/{claimed}/cancel"), Some(&t), json!(null));
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["state"], "claimed");
    assert_eq!(r.json()["cancelled_at"], Value::Null);
    let r = user_post(&s, "operator-notes/0123456789abcdef/cancel", Some(&t), json!(null));
    assert_eq!((r.status, r.json()), (404, json!({"detail": "Note not found"})));
    let r = user_get(&s, "operator-notes/0123456789abcdef", Some(&t));
    assert_eq!((r.status, r.json()), (404, json!({"detail": "Note not found"})));
}

// ----- §2.3 authentication ------------------------------------------------------

const HOOK_GROUP_A: [&str; 3] = ["permission-check", "session-start", "session-event"];
const HOOK_GROUP_B: [&str; 3] = ["notes/pending", "notes/ack", "session-end"];

fn valid_body(route: &str) -> Value {
    match route {
        "permission-check" => json!({"tool_name": "Bash", "evaluation_phase": "pre_tool_use"}),
        "session-start" => json!({"session_id": "s"}),
        "session-event" => json!({"session_id": "s", "hook_event_name": "Stop"}),
        _ => json!({}),
    }
}

fn call_with_header(s: &FakeServer, route: &str, authorization: Option<&str>) -> client::HttpResponse {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = authorization {
        headers.push(("authorization", a));
    }
    client::request(
        "POST",
        &format!("{}/api/v1/agents/{route}", s.url()),
        &headers,
        Some(valid_body(route).to_string().as_bytes()),
    )
    .unwrap()
}

fn assert_401(r: &client::HttpResponse, detail: &str, what: &str) {
    assert_eq!(r.status, 401, "{what}: {}", r.text());
    assert_eq!(r.json(), json!({ "detail": detail }), "{what}");
    assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{what}");
}

#[test]
fn hook_route_authentication_failures() {
    let s = FakeServer::start();
    let revoked = s.add_agent("revoked");
    s.revoke_token(&revoked.runtime_token);
    let expired = s.add_agent("expired");
    s.expire_token(&expired.runtime_token);
    let suspended = s.add_agent("suspended");
    s.set_agent_active(&suspended.agent_id, false);
    for route in HOOK_GROUP_A.iter().chain(HOOK_GROUP_B.iter()) {
        let a = HOOK_GROUP_A.contains(route);
        assert_401(&call_with_header(&s, route, None), "Runtime bearer token required", route);
        assert_401(&call_with_header(&s, route, Some("Basic dXNlcjpwYXNz")), "Runtime bearer token required", route);
        let jwt = format!("Bearer {}", s.user_jwt());
        assert_401(
            &call_with_header(&s, route, Some(&jwt)),
            if a { "Invalid API key" } else { "Runtime bearer token required" },
            route,
        );
        assert_401(&call_with_header(&s, route, Some("Bearer agt_unknown")), "Invalid API key", route);
        let key = format!("Bearer {}", s.user_token());
        assert_401(
            &call_with_header(&s, route, Some(&key)),
            if a {
                "Token is not bound to a managed agent or active flow execution"
            } else {
                "Runtime bearer token is not bound to a managed agent"
            },
            route,
        );
        assert_401(
            &call_with_header(&s, route, Some(&format!("Bearer {}", revoked.runtime_token))),
            "API key is inactive",
            route,
        );
        assert_401(
            &call_with_header(&s, route, Some(&format!("Bearer {}", expired.runtime_token))),
            "API key has expired",
            route,
        );
        assert_401(
            &call_with_header(&s, route, Some(&format!("Bearer {}", suspended.runtime_token))),
            "Managed agent is not active",
            route,
        );
        // Lower-case scheme works.
        let ok = call_with_header(&s, route, Some(&format!("bearer {}", s.runtime_token())));
        assert!(ok.status / 100 == 2, "{route}: {}", ok.status);
    }
}

#[test]
fn human_route_authentication_failures() {
    let s = FakeServer::start();
    let r = user_get(&s, &format!("operator-notes?agent_id={}", s.agent_id()), None);
    assert_401(&r, "Not authenticated", "no token");
    let r = user_get(&s, &format!("operator-notes?agent_id={}", s.agent_id()), Some("not-a-key"));
    assert_401(&r, "Invalid authentication token", "unknown token");
    let r = user_post(&s, "operator-notes", Some(&s.runtime_token()), json!({"agent_id": s.agent_id(), "text": "x"}));
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json(),
        json!({"detail": {"code": "api_key_scope_denied", "message": "This API key is limited to MCP scopes and cannot call this endpoint. Use a personal API key or a console session."}})
    );
    let viewer = s.add_user(false);
    let r = user_post(&s, "operator-notes", Some(&viewer.user_token), json!({"agent_id": s.agent_id(), "text": "x"}));
    assert_eq!(
        (r.status, r.json()),
        (403, json!({"detail": "Insufficient permissions. Required: control_managed_agent"}))
    );
    // Health needs nothing.
    let r = user_get(&s, "health", None);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "healthy");
}

// ----- §1 422 shapes; validation before auth ------------------------------------

#[test]
fn validation_errors_have_the_fastapi_shape_and_come_before_auth() {
    let s = FakeServer::start();
    let no_auth = |route: &str, body: &[u8]| {
        client::request(
            "POST",
            &format!("{}/api/v1/agents/{route}", s.url()),
            &[("content-type", "application/json")],
            Some(body),
        )
        .unwrap()
    };
    let r = no_auth("notes/pending", b"");
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json(),
        json!({"detail": [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": null}]})
    );
    let r = no_auth("notes/pending", b"{not json");
    assert_eq!(
        r.json(),
        json!({"detail": [{"type": "json_invalid", "loc": ["body", 1], "msg": "JSON decode error", "input": {},
                           "ctx": {"error": "Expecting property name enclosed in double quotes"}}]})
    );
    let r = no_auth("notes/pending", b"{} x");
    assert_eq!(r.json()["detail"][0]["ctx"]["error"], "Extra data");
    let r = no_auth("notes/pending", b"[1]");
    assert_eq!(r.json()["detail"][0]["type"], "model_attributes_type");
    let r = no_auth("notes/pending", br#"{"channel": "gateway"}"#);
    assert_eq!(
        r.json(),
        json!({"detail": [{"type": "literal_error", "loc": ["body", "channel"], "msg": "Input should be 'hook', 'claude_channel' or 'claude_message'", "input": "gateway", "ctx": {"expected": "'hook', 'claude_channel' or 'claude_message'"}}]})
    );
    let r = no_auth("session-start", b"{}");
    assert_eq!(
        r.json(),
        json!({"detail": [{"type": "missing", "loc": ["body", "session_id"], "msg": "Field required", "input": {}}]})
    );
    let long = "x".repeat(201);
    let r = no_auth("session-start", json!({"session_id": long}).to_string().as_bytes());
    assert_eq!(r.json()["detail"][0]["type"], "string_too_long");
    assert_eq!(r.json()["detail"][0]["msg"], "String should have at most 200 characters");
    assert_eq!(r.json()["detail"][0]["ctx"], json!({"max_length": 200}));
    let ids: Vec<String> = (0..101).map(|i| format!("{i:016x}")).collect();
    let r = no_auth("notes/ack", json!({"note_ids": ids}).to_string().as_bytes());
    assert_eq!(r.json()["detail"][0]["type"], "too_long");
    assert_eq!(r.json()["detail"][0]["msg"], "List should have at most 100 items after validation, not 101");
    let r = no_auth("permission-check", br#"{"tool_name": "Bash", "tool_input": "ls", "evaluation_phase": "later"}"#);
    let d = r.json()["detail"].clone();
    assert_eq!(d[0]["type"], "dict_type");
    assert_eq!(d[0]["loc"], json!(["body", "tool_input"]));
    assert_eq!(d[1]["type"], "literal_error");
    assert_eq!(d[1]["msg"], "Input should be 'permission_request' or 'pre_tool_use'");
    let r = no_auth("permission-check", br#"{"tool_name": "Bash", "repository": {"remote": "x", "extra": 1}}"#);
    assert_eq!(
        r.json()["detail"][0],
        json!({"type": "extra_forbidden", "loc": ["body", "repository", "extra"], "msg": "Extra inputs are not permitted", "input": 1})
    );
    // The unusable-id 422 of session-start has a string detail.
    let r = hook(&s, "session-start", &s.runtime_token(), json!({"session_id": "has space"}));
    assert_eq!(
        (r.status, r.json()),
        (
            422,
            json!({"detail": "The session id is not usable, or this credential carries no runtime principal to key the session on."})
        )
    );
}

#[test]
fn send_validation_limits_and_targets() {
    let s = FakeServer::start();
    let a = s.agent_id();
    assert!(s.try_send_note(json!({"agent_id": a, "text": "x".repeat(4096)})).is_ok());
    let (status, body) = s.try_send_note(json!({"agent_id": a, "text": "x".repeat(4097)})).unwrap_err();
    assert_eq!(status, 422);
    assert_eq!(body["detail"][0]["msg"], "String should have at most 4096 characters");
    let (status, body) = s.try_send_note(json!({"agent_id": a, "text": ""})).unwrap_err();
    assert_eq!((status, body["detail"][0]["type"].clone()), (422, json!("string_too_short")));
    assert!(s.try_send_note(json!({"agent_id": a, "text": "   "})).is_ok(), "whitespace-only is accepted");
    let (_, body) = s.try_send_note(json!({"text": "x"})).unwrap_err();
    assert_eq!(
        body["detail"][0],
        json!({"type": "value_error", "loc": ["body"], "msg": "Value error, Name exactly one of agent_id, runtime_session_id, execution_id, alias, external_session_id, children", "input": {"text": "x"}, "ctx": {"error": {}}})
    );
    let (_, body) = s.try_send_note(json!({"text": "x", "agent_id": a, "alias": "w"})).unwrap_err();
    assert_eq!(body["detail"][0]["type"], "value_error");
    let (_, body) = s.try_send_note(json!({"agent_id": a, "text": "x", "expires_in_seconds": 59})).unwrap_err();
    assert_eq!(body["detail"][0]["msg"], "Input should be greater than or equal to 60");
    let (_, body) = s.try_send_note(json!({"agent_id": a, "text": "x", "expires_in_seconds": 604_801})).unwrap_err();
    assert_eq!(body["detail"][0]["msg"], "Input should be less than or equal to 604800");
    let (_, body) = s.try_send_note(json!({"agent_id": "nope", "text": "x"})).unwrap_err();
    assert_eq!(body["detail"][0]["type"], "uuid_parsing");
    let (_, body) = s.try_send_note(json!({"alias": "bad alias", "text": "x"})).unwrap_err();
    assert_eq!(body["detail"][0]["msg"], "String should match pattern '^[A-Za-z0-9._-]+$'");
    // 404s
    let missing = "00000000-0000-4000-8000-000000000000";
    assert_eq!(
        s.try_send_note(json!({"agent_id": missing, "text": "x"})).unwrap_err(),
        (404, json!({"detail": "Managed agent not found"}))
    );
    assert_eq!(
        s.try_send_note(json!({"runtime_session_id": missing, "text": "x"})).unwrap_err(),
        (404, json!({"detail": "Runtime session not found"}))
    );
    assert_eq!(
        s.try_send_note(json!({"external_session_id": "never", "text": "x"})).unwrap_err(),
        (404, json!({"detail": "No matching session in this account."}))
    );
    assert_eq!(s.try_send_note(json!({"alias": "nobody", "text": "x"})).unwrap_err().0, 404);
    assert_eq!(s.try_send_note(json!({"execution_id": missing, "text": "x"})).unwrap_err().0, 404);
    // Alias and runtime_session_id targets.
    let sid = start_session(&s, &s.runtime_token(), "aliased");
    let r = hook(&s, "session-start", &s.runtime_token(), json!({"session_id": "aliased", "alias": "worker one"}));
    assert_eq!(r.json()["alias"], "worker-one");
    let other = hook(&s, "session-start", &s.runtime_token(), json!({"session_id": "second", "alias": "worker one"}));
    assert_eq!(other.json()["alias"], "worker-one-2");
    let n = s.send_note(json!({"alias": "worker-one", "text": "x"}));
    assert_eq!(n["runtime_session_id"], sid.as_str());
    assert_eq!(n["managed_agent_id"], a.as_str());
    let n = s.send_note(json!({"runtime_session_id": sid, "text": "x"}));
    assert_eq!(n["runtime_session_id"], sid.as_str());
    // Same external id under two agents: ambiguous.
    let b = s.add_agent("b");
    start_session(&s, &b.runtime_token, "aliased");
    assert_eq!(
        s.try_send_note(json!({"external_session_id": "aliased", "text": "x"})).unwrap_err(),
        (409, json!({"detail": "target_ambiguous: name a runtime_session_id"}))
    );
    // expires_in_seconds sets expires_at.
    let n = s.send_note(json!({"agent_id": a, "text": "x", "expires_in_seconds": 60}));
    let env_created =
        user_get(&s, &format!("operator-notes/{}", n["note_id"].as_str().unwrap()), Some(&s.user_token())).json();
    assert_eq!(env_created["expires_at"], n["expires_at"]);
}

#[test]
fn send_rate_limit_is_20_per_hour_per_agent() {
    let s = FakeServer::start();
    for i in 0..20 {
        note_to_agent(&s, &format!("{i}"));
    }
    let (status, body) = s.try_send_note(json!({"agent_id": s.agent_id(), "text": "21st"})).unwrap_err();
    assert_eq!(status, 429);
    assert_eq!(
        body["detail"],
        "Rate limit reached: 20 notes per hour per agent or session. Steering this often usually means restarting with a better prompt."
    );
    // Another agent has its own budget.
    let b = s.add_agent("b");
    assert!(s.try_send_note(json!({"agent_id": b.agent_id, "text": "x"})).is_ok());
}

#[test]
fn children_targets() {
    let s = FakeServer::start();
    let parent = start_session(&s, &s.runtime_token(), "parent");
    let r = hook(&s, "session-start", &s.runtime_token(), json!({"session_id": "kid1", "parent_session_id": parent}));
    assert_eq!(r.json()["parent_session_id"], parent.as_str());
    let kid2 =
        hook(&s, "session-start", &s.runtime_token(), json!({"session_id": "kid2", "parent_session_id": parent}));
    let all = s.send_note(json!({"children": "all", "parent_session_id": parent, "text": "all kids"}));
    assert_eq!(all["total"], 2);
    let latest = s.send_note(json!({"children": "latest", "parent_session_id": parent, "text": "latest"}));
    assert_eq!(latest["runtime_session_id"], kid2.json()["runtime_session_id"]);
    let (status, _) = s.try_send_note(json!({"children": "all", "text": "x"})).unwrap_err();
    assert_eq!(status, 422);
}

// ----- §5.2 list, §5.3 session targets, isolation ----------------------------------

#[test]
fn list_is_newest_first_and_filters_combine() {
    let s = FakeServer::start();
    let t = s.user_token();
    let sid = start_session(&s, &s.runtime_token(), "l1");
    let a = note_to_agent(&s, "a");
    let b = note_to_session(&s, "l1", "b");
    let c = note_to_agent(&s, "c");
    user_post(&s, &format!("operator-notes/{c}/cancel"), Some(&t), json!(null));
    let list = user_get(&s, &format!("operator-notes?agent_id={}", s.agent_id()), Some(&t)).json();
    let got: Vec<&str> = list["notes"].as_array().unwrap().iter().map(|n| n["note_id"].as_str().unwrap()).collect();
    assert_eq!(got, vec![c.as_str(), b.as_str(), a.as_str()]);
    assert_eq!(list["total"], 3);
    let list = user_get(&s, &format!("operator-notes?runtime_session_id={sid}"), Some(&t)).json();
    assert_eq!(list["total"], 1);
    let list = user_get(&s, &format!("operator-notes?agent_id={}&state=cancelled", s.agent_id()), Some(&t)).json();
    assert_eq!(list["notes"][0]["note_id"], c.as_str());
    let list = user_get(&s, &format!("operator-notes?agent_id={}&limit=1&offset=1", s.agent_id()), Some(&t)).json();
    assert_eq!((list["notes"][0]["note_id"].as_str(), list["total"].as_u64()), (Some(b.as_str()), Some(3)));
    let r = user_get(&s, "operator-notes", Some(&t));
    assert_eq!((r.status, r.json()), (400, json!({"detail": "Name an agent_id, runtime_session_id or execution_id"})));
    let r = user_get(&s, &format!("operator-notes?agent_id={}&limit=0", s.agent_id()), Some(&t));
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["detail"][0]["loc"], json!(["query", "limit"]));
    let r = user_get(&s, "operator-notes?execution_id=00000000-0000-4000-8000-000000000000", Some(&t));
    assert_eq!(r.json(), json!({"notes": [], "total": 0}));
}

#[test]
fn session_targets_list_live_sessions_newest_first() {
    let s = FakeServer::start();
    let t = s.user_token();
    let one = start_session(&s, &s.runtime_token(), "t1");
    std::thread::sleep(Duration::from_millis(2));
    let two = start_session(&s, &s.runtime_token(), "t2");
    let r = user_get(&s, &format!("operator-notes/session-targets?agent_id={}", s.agent_id()), Some(&t)).json();
    let got: Vec<&str> = r["sessions"].as_array().unwrap().iter().map(|x| x["id"].as_str().unwrap()).collect();
    assert_eq!(got, vec![two.as_str(), one.as_str()]);
    assert_eq!(r["sessions"][0]["session_source_type"], "custom");
    assert!(r["sessions"][0]["started_at"].as_str().unwrap().ends_with('Z'));
    ok_hook(&s, "session-end", json!({"external_session_id": "t2"}));
    let r = user_get(&s, &format!("operator-notes/session-targets?agent_id={}", s.agent_id()), Some(&t)).json();
    // t1 and the identity session the session-end call upserted (§3); not t2.
    assert_eq!(r["total"], 2);
    assert!(r["sessions"].as_array().unwrap().iter().all(|x| x["id"] != two.as_str()));
    let r = user_get(&s, "operator-notes/session-targets", Some(&t));
    assert_eq!(r.json()["detail"][0]["loc"], json!(["query", "agent_id"]));
    let r = user_get(&s, "operator-notes/session-targets?agent_id=00000000-0000-4000-8000-000000000000", Some(&t));
    assert_eq!((r.status, r.json()), (404, json!({"detail": "Managed agent not found"})));
}

#[test]
fn agents_and_accounts_are_isolated() {
    let s = FakeServer::start();
    let b = s.add_agent("second");
    start_session(&s, &s.runtime_token(), "same-id");
    start_session(&s, &b.runtime_token, "same-id");
    let for_a = note_to_agent(&s, "for a");
    let for_b = s.send_note(json!({"agent_id": b.agent_id, "text": "for b"}))["note_id"].as_str().unwrap().to_string();
    let pb = hook(&s, "notes/pending", &b.runtime_token, json!({"session_id": "same-id"})).json();
    assert_eq!(ids(&pb), vec![for_b]);
    let pa = ok_hook(&s, "notes/pending", json!({"session_id": "same-id"}));
    assert_eq!(ids(&pa), vec![for_a.clone()]);
    // Another account sees nothing of ours.
    let other = s.add_account();
    let r = user_get(&s, &format!("operator-notes/{for_a}"), Some(&other.user.user_token));
    assert_eq!(r.status, 404);
    let r =
        user_post(&s, "operator-notes", Some(&other.user.user_token), json!({"agent_id": s.agent_id(), "text": "x"}));
    assert_eq!((r.status, r.json()), (404, json!({"detail": "Managed agent not found"})));
    let r = user_post(
        &s,
        "operator-notes",
        Some(&other.user.user_token),
        json!({"agent_id": other.agent.agent_id, "text": "own"}),
    );
    assert_eq!(r.status, 201);
    let p = hook(&s, "notes/pending", &other.agent.runtime_token, json!({})).json();
    assert!(p["notes"][0]["text"].as_str().unwrap().contains("from=\"Operator "));
}

// ----- §4.2 permission-check -------------------------------------------------------

#[test]
fn permission_check_decisions() {
    let s = FakeServer::start();
    let pc = |body: Value| ok_hook(&s, "permission-check", body);
    let r = pc(json!({"tool_name": "Bash", "evaluation_phase": "pre_tool_use"}));
    assert_eq!(
        r,
        json!({"decision": "allow", "reason": "No central native rule requires approval", "request_id": null, "operator_note": null, "timed_out": false})
    );
    let r = pc(json!({"tool_name": "Bash", "client_decision": " DENY "}));
    assert_eq!((r["decision"].as_str(), r["reason"].as_str()), (Some("deny"), Some("Denied by client policy")));
    let r = pc(json!({"tool_name": "Bash", "client_decision": "allow"}));
    assert_eq!((r["decision"].as_str(), r["reason"].as_str()), (Some("allow"), Some("")));
    s.set_tool_enabled("PreloopDeniedTool", false);
    let r = pc(json!({"tool_name": "PreloopDeniedTool", "evaluation_phase": "pre_tool_use"}));
    assert_eq!((r["decision"].as_str(), r["reason"].as_str()), (Some("deny"), Some("Tool blocked in Preloop")));
    // Also through the real helper route.
    let cfg = user_post(
        &s,
        "tool-configurations",
        Some(&s.user_token()),
        json!({"tool_name": "Other", "tool_source": "agent", "is_enabled": false}),
    );
    assert_eq!(cfg.status, 201);
    assert_eq!(pc(json!({"tool_name": "Other", "client_decision": "allow"}))["reason"], "Tool blocked in Preloop");
    // Governance off: immediate allow with a request id.
    let put = client::request(
        "PUT",
        &format!("{}/api/v1/agents/{}/governance", s.url(), s.agent_id()),
        &[("content-type", "application/json"), ("authorization", &format!("Bearer {}", s.user_token()))],
        Some(br#"{"native_tool_approvals": "off"}"#),
    )
    .unwrap();
    assert_eq!(put.status, 200);
    let r = pc(json!({"tool_name": "Bash"}));
    assert_eq!(r["decision"], "allow");
    assert_eq!(
        r["reason"],
        "Auto-approved without review: native tool approvals are switched off for this agent in Preloop's governance settings"
    );
    assert!(r["request_id"].is_string());
    assert_eq!(s.approvals()[0]["status"], "approved");
}

#[test]
fn escalation_blocks_until_decided_or_timed_out() {
    let s = Arc::new(FakeServer::start());
    s.set_approval_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let r = ok_hook(&s, "permission-check", json!({"tool_name": "Bash", "tool_input": {"command": "ls"}}));
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(r["decision"], "deny");
    assert_eq!(r["reason"], "Approval request timed out");
    assert_eq!(r["timed_out"], true);
    assert!(r["request_id"].is_string());

    // Approved with a comment, through the API.
    s.set_approval_timeout(Duration::from_secs(20));
    let waiter = {
        let s = Arc::clone(&s);
        std::thread::spawn(move || ok_hook(&s, "permission-check", json!({"tool_name": "Bash", "session_id": "x"})))
    };
    let id = wait_for_pending_approval(&s);
    let approvals = user_get(&s, "approval-requests?status=pending", Some(&s.user_token()));
    assert_eq!(approvals.json()[0]["id"], id.as_str());
    assert_eq!(approvals.header("x-total-count"), Some("1"));
    let r = user_post(
        &s,
        &format!("approval-requests/{id}/approve"),
        Some(&s.user_token()),
        json!({"comment": "go ahead"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let decided = waiter.join().unwrap();
    assert_eq!((decided["decision"].as_str(), decided["reason"].as_str()), (Some("allow"), Some("go ahead")));
    assert_eq!(decided["timed_out"], false);
    let again = user_post(&s, &format!("approval-requests/{id}/decline"), Some(&s.user_token()), json!(null));
    assert_eq!((again.status, again.json()), (400, json!({"detail": "Request already approved"})));

    // Declined without a comment, through the Rust API.
    let waiter = {
        let s = Arc::clone(&s);
        std::thread::spawn(move || ok_hook(&s, "permission-check", json!({"tool_name": "Bash"})))
    };
    let id = wait_for_pending_approval(&s);
    s.decide(&id, false, None).unwrap();
    let decided = waiter.join().unwrap();
    assert_eq!((decided["decision"].as_str(), decided["reason"].as_str()), (Some("deny"), Some("Approval declined")));
}

fn wait_for_pending_approval(s: &FakeServer) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(a) = s.approvals().into_iter().find(|a| a["status"] == "pending") {
            return a["id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "no pending approval");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_pinned_short_workflow_times_out_after_its_timeout_plus_two_seconds() {
    let s = FakeServer::start();
    let t = s.user_token();
    let wf = user_post(
        &s,
        "approval-workflows",
        Some(&t),
        json!({"name": "fast", "approval_type": "standard", "timeout_seconds": 1}),
    );
    assert_eq!(wf.status, 201);
    let put = client::request(
        "PUT",
        &format!("{}/api/v1/agents/{}/governance", s.url(), s.agent_id()),
        &[("content-type", "application/json"), ("authorization", &format!("Bearer {t}"))],
        Some(json!({"approval_workflow_id": wf.json()["id"]}).to_string().as_bytes()),
    )
    .unwrap();
    assert_eq!(put.status, 200);
    let started = Instant::now();
    let r = ok_hook(&s, "permission-check", json!({"tool_name": "Bash"}));
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(3) && took < Duration::from_secs(6), "{took:?}");
    assert_eq!((r["decision"].as_str(), r["timed_out"].as_bool()), (Some("deny"), Some(true)));
}

#[test]
fn permission_check_note_claims_follow_the_deferral_table() {
    let s = FakeServer::start();
    start_session(&s, &s.runtime_token(), "pc");
    let pc = |body: Value| ok_hook(&s, "permission-check", body);
    let base = |extra: Value| {
        let mut b = json!({"tool_name": "Bash", "session_id": "pc", "evaluation_phase": "pre_tool_use"});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    // Never-note sources leave notes pending.
    let n = note_to_session(&s, "pc", "n1");
    for src in ["opencode", "pi", "deepseek", "hermes", "openclaw", "nanobot", "devin_cli", "copilot_cli"] {
        assert_eq!(pc(base(json!({"source": src})))["operator_note"], Value::Null, "{src}");
    }
    assert_eq!(state(&s, &n), "pending");
    // claude_code: immediate, even on a deny.
    let r = pc(base(json!({"source": "claude_code", "client_decision": "deny"})));
    assert_eq!(r["decision"], "deny");
    assert!(r["operator_note"].as_str().unwrap().contains(&n));
    let rc = s.receipt(&n);
    assert_eq!((rc["state"].as_str(), rc["delivery_event"].as_str()), (Some("delivered"), Some("pre_tool_use")));
    // codex_cli permission_request: deferred.
    let n = note_to_session(&s, "pc", "n2");
    pc(json!({"tool_name": "shell", "session_id": "pc", "source": "codex_cli", "client_decision": "allow"}));
    assert_eq!(state(&s, &n), "claimed");
    // codex_cli pre_tool_use: immediate.
    let n = note_to_session(&s, "pc", "n3");
    pc(base(json!({"source": "codex_cli"})));
    assert_eq!(state(&s, &n), "delivered");
    // cursor: preToolUse immediate, anything else deferred (case-sensitive).
    let n = note_to_session(&s, "pc", "n4");
    pc(base(json!({"source": "cursor", "hook_event_name": "pretooluse"})));
    assert_eq!(state(&s, &n), "claimed");
    let n = note_to_session(&s, "pc", "n5");
    pc(base(json!({"source": "cursor", "hook_event_name": "preToolUse"})));
    let rc = s.receipt(&n);
    assert_eq!((rc["state"].as_str(), rc["delivery_event"].as_str()), (Some("delivered"), Some("pre_tool_use")));
    // A deferred permission-check claim is acked with the same session id.
    let n = note_to_session(&s, "pc", "n6");
    let r = pc(json!({"tool_name": "shell", "session_id": "pc", "source": "codex_cli", "client_decision": "allow"}));
    let ids = preloop_shared::render::parse_block(r["operator_note"].as_str().unwrap()).unwrap();
    assert_eq!(ids[0].id, n);
    ok_hook(&s, "notes/ack", json!({"note_ids": [n], "session_id": "pc"}));
    assert_eq!(state(&s, &n), "delivered");
}

#[test]
fn tool_args_of_an_approval_carry_the_origin_markers() {
    let s = FakeServer::start();
    s.set_native_tool_approvals(&s.agent_id(), true);
    let sid = start_session(&s, &s.runtime_token(), "origin");
    ok_hook(
        &s,
        "permission-check",
        json!({"tool_name": "Bash", "tool_input": {"command": "ls", "_preloop_source": "spoof"}, "source": " claude_code ",
               "session_id": "origin", "model": "m", "cwd": "/w", "repository": {"remote": "github.com/a/b"}}),
    );
    let a = &s.approvals()[0];
    assert_eq!(
        a["tool_args"],
        json!({"command": "ls", "cwd": "/w", "_preloop_source": "claude_code", "_preloop_repository": {"remote": "github.com/a/b"},
               "_preloop_origin": {"session_id": "origin", "model": "m", "runtime_session_id": sid}})
    );
}
