//! Helpers shared by the fake-server tests: plain HTTP calls through
//! `preloop_testkit::client`.

#![allow(dead_code)]

use preloop_testkit::FakeServer;
use preloop_testkit::client::{self, HttpResponse};
use serde_json::{Value, json};

/// `POST /api/v1/agents/{route}` with a bearer token.
pub fn hook(s: &FakeServer, route: &str, token: &str, body: Value) -> HttpResponse {
    client::post_json(&format!("{}/api/v1/agents/{route}", s.url()), Some(token), &body).expect("hook call")
}

/// A hook call with the default agent's token, expecting 2xx; the JSON body.
pub fn ok_hook(s: &FakeServer, route: &str, body: Value) -> Value {
    let r = hook(s, route, &s.runtime_token(), body);
    assert!(r.status / 100 == 2, "{route}: {} {}", r.status, r.text());
    r.json()
}

/// `POST /api/v1/{path}` as a user.
pub fn user_post(s: &FakeServer, path: &str, token: Option<&str>, body: Value) -> HttpResponse {
    client::post_json(&format!("{}/api/v1/{path}", s.url()), token, &body).expect("user call")
}

/// `GET /api/v1/{path}` as a user.
pub fn user_get(s: &FakeServer, path: &str, token: Option<&str>) -> HttpResponse {
    client::get(&format!("{}/api/v1/{path}", s.url()), token).expect("user call")
}

/// Register a harness session with session-start; the runtime session id.
pub fn start_session(s: &FakeServer, token: &str, external: &str) -> String {
    let r = hook(s, "session-start", token, json!({"session_id": external, "source": "claude_code"}));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["runtime_session_id"].as_str().unwrap().to_string()
}

/// Send a note addressed to the default agent; its id.
pub fn note_to_agent(s: &FakeServer, text: &str) -> String {
    s.send_note(json!({"agent_id": s.agent_id(), "text": text}))["note_id"].as_str().unwrap().to_string()
}

/// Send a note addressed to a harness session (external id); its id.
pub fn note_to_session(s: &FakeServer, external: &str, text: &str) -> String {
    s.send_note(json!({"external_session_id": external, "text": text}))["note_id"].as_str().unwrap().to_string()
}

/// The ids of a notes/pending answer, in order.
pub fn ids(pending: &Value) -> Vec<String> {
    pending["notes"].as_array().unwrap().iter().map(|n| n["note_id"].as_str().unwrap().to_string()).collect()
}

pub fn state(s: &FakeServer, note_id: &str) -> String {
    s.receipt(note_id)["state"].as_str().unwrap().to_string()
}

/// The raw state, without the lazy expiry a receipt read runs.
pub fn raw_state(s: &FakeServer, note_id: &str) -> String {
    let all = client::get(&format!("{}/_fake/notes", s.url()), None).unwrap().json();
    all["notes"].as_array().unwrap().iter().find(|n| n["note_id"] == note_id).unwrap()["state"]
        .as_str()
        .unwrap()
        .to_string()
}
