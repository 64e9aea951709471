//! The fake's own machinery: fault injection, the request log, the
//! `/_fake/` control routes, HTTP robustness and the binary.

mod common;

use common::*;
use preloop_testkit::client::{self, read_response};
use preloop_testkit::{FakeServer, FaultAction, FaultSpec};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PENDING: &str = "/api/v1/agents/notes/pending";

#[test]
fn status_fault_with_retry_after_for_the_next_request_only() {
    let s = FakeServer::start();
    s.set_fault(
        FaultSpec::route(PENDING)
            .status(503, Some(json!({"detail": "Database connections are saturated. Please retry shortly."})))
            .retry_after("1")
            .times(1),
    );
    let r = hook(&s, "notes/pending", &s.runtime_token(), json!({}));
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.json()["detail"], "Database connections are saturated. Please retry shortly.");
    // Only the next one.
    assert_eq!(hook(&s, "notes/pending", &s.runtime_token(), json!({})).status, 200);
    assert!(s.faults().is_empty());
    // Other routes were never affected.
    s.set_fault(FaultSpec::route(PENDING).status(500, None));
    assert_eq!(hook(&s, "session-start", &s.runtime_token(), json!({"session_id": "x"})).status, 200);
    let r = hook(&s, "notes/pending", &s.runtime_token(), json!({}));
    assert_eq!((r.status, r.json()), (500, json!({"detail": "Internal Server Error"})));
    s.clear_faults();
    assert_eq!(hook(&s, "notes/pending", &s.runtime_token(), json!({})).status, 200);
}

#[test]
fn delay_hang_close_garbage_and_huge() {
    let s = FakeServer::start();
    let url = format!("{}{PENDING}", s.url());
    let auth = format!("Bearer {}", s.runtime_token());
    let headers = [("content-type", "application/json"), ("authorization", auth.as_str())];

    s.set_fault(FaultSpec::all().delay(Duration::from_millis(250)).times(1));
    let t = Instant::now();
    let r = client::request("POST", &url, &headers, Some(b"{}")).unwrap();
    assert_eq!(r.status, 200);
    assert!(t.elapsed() >= Duration::from_millis(250));

    s.set_fault(FaultSpec::route(PENDING).hang().times(1));
    let t = Instant::now();
    let err =
        client::request_with_timeout("POST", &url, &headers, Some(b"{}"), Duration::from_millis(300)).unwrap_err();
    assert!(matches!(err.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut), "{err:?}");
    assert!(t.elapsed() >= Duration::from_millis(300));

    s.set_fault(FaultSpec::route(PENDING).close().times(1));
    assert!(client::request("POST", &url, &headers, Some(b"{}")).is_err());

    s.set_fault(FaultSpec::route(PENDING).garbage().times(1));
    let r = client::request("POST", &url, &headers, Some(b"{}")).unwrap();
    assert_eq!(r.status, 200);
    assert!(serde_json::from_slice::<Value>(&r.body).is_err());

    s.set_fault(FaultSpec::route(PENDING).huge(3_000_000).times(1));
    let r = client::request("POST", &url, &headers, Some(b"{}")).unwrap();
    assert_eq!(r.body.len(), 3_000_000);
    assert!(r.json()["pad"].is_string());

    // And the server is still fine.
    assert_eq!(client::request("POST", &url, &headers, Some(b"{}")).unwrap().status, 200);
    let log = s.requests();
    let faults: Vec<Option<&str>> = log.iter().map(|r| r.fault.as_deref()).collect();
    assert_eq!(
        faults,
        vec![Some("delay 250ms"), Some("hang"), Some("close"), Some("garbage"), Some("huge 3000000"), None]
    );
    assert_eq!(log[1].status, None);
}

#[test]
fn dropping_the_server_releases_hung_connections() {
    let s = FakeServer::start();
    s.set_fault(FaultSpec::all().hang());
    let url = format!("{}/api/v1/health", s.url());
    let t = std::thread::spawn(move || client::request_with_timeout("GET", &url, &[], None, Duration::from_secs(20)));
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    drop(s);
    let r = t.join().unwrap();
    assert!(r.is_err(), "a hung request gets no answer");
    assert!(started.elapsed() < Duration::from_secs(5), "drop released the connection");
}

#[test]
fn a_fault_after_handling_keeps_the_state_change() {
    // "Claiming is the delivery" (docs/contracts/preloop-server.md §10 trap 5): the claim happened, the answer was lost.
    let s = FakeServer::start();
    let id = note_to_agent(&s, "lost in transit");
    s.set_fault(FaultSpec::route(PENDING).close().after_handling().times(1));
    let url = format!("{}{PENDING}", s.url());
    assert!(client::post_json(&url, Some(&s.runtime_token()), &json!({})).is_err());
    assert_eq!(state(&s, &id), "delivered");
}

#[test]
fn the_request_log_redacts_tokens_and_keeps_bodies() {
    let s = FakeServer::start();
    ok_hook(&s, "session-start", json!({"session_id": "logme"}));
    user_get(&s, "health", None);
    client::get(&format!("{}/_fake/info", s.url()), None).unwrap();
    let log = s.requests();
    assert_eq!(log.len(), 2, "control routes are not logged");
    assert_eq!(log[0].method, "POST");
    assert_eq!(log[0].path, "/api/v1/agents/session-start");
    assert_eq!(log[0].body, Some(json!({"session_id": "logme"})));
    assert_eq!(log[0].header("authorization"), Some("Bearer [redacted]"));
    assert_eq!(log[0].token_kind.as_deref(), Some("runtime"));
    assert_eq!(log[0].status, Some(200));
    assert!(!format!("{log:?}").contains(&s.runtime_token()));
    assert_eq!(log[1].token_kind, None);
    s.clear_requests();
    assert!(s.requests().is_empty());
}

#[test]
fn http_control_routes() {
    let s = FakeServer::start();
    let base = s.url();
    let post = |path: &str, body: Value| client::post_json(&format!("{base}{path}"), None, &body).unwrap();
    let info = client::get(&format!("{base}/_fake/info"), None).unwrap().json();
    assert_eq!(info["url"], s.url().as_str());
    assert_eq!(info["runtime_token"], s.runtime_token().as_str());
    assert_eq!(info["agent_id"], s.agent_id().as_str());
    assert_eq!(info["user_token"], s.user_token().as_str());

    let r = post(
        "/_fake/faults",
        json!({"path": PENDING, "action": {"kind": "status", "status": 429, "retry_after": "7"}, "times": 2}),
    );
    assert_eq!(r.json(), json!({"ok": true, "faults": 1}));
    let f = &s.faults()[0];
    assert_eq!(f.action, FaultAction::Status { status: 429, body: None, retry_after: Some("7".into()) });
    assert_eq!(hook(&s, "notes/pending", &s.runtime_token(), json!({})).header("retry-after"), Some("7"));
    assert_eq!(client::request("DELETE", &format!("{base}/_fake/faults"), &[], None).unwrap().status, 200);
    assert!(s.faults().is_empty());
    assert_eq!(post("/_fake/faults", json!({"action": {"kind": "nope"}})).status, 400);

    let agent = post("/_fake/agents", json!({"display_name": "from http"})).json();
    let token = agent["runtime_token"].as_str().unwrap();
    assert!(token.starts_with("agt_") && token.len() == 47);
    assert_eq!(hook(&s, "notes/pending", token, json!({})).status, 200);
    let second = post(&format!("/_fake/agents/{}/tokens", agent["agent_id"].as_str().unwrap()), json!({})).json();
    assert_ne!(second["runtime_token"], agent["runtime_token"]);
    assert_eq!(post("/_fake/tokens/revoke", json!({"token": token})).json(), json!({"ok": true}));
    assert_eq!(hook(&s, "notes/pending", token, json!({})).json()["detail"], "API key is inactive");

    let sent = post("/_fake/notes", json!({"agent_id": s.agent_id(), "text": "via control"}));
    assert_eq!(sent.status, 201);
    let id = sent.json()["note_id"].as_str().unwrap().to_string();
    assert_eq!(post(&format!("/_fake/notes/{id}/expire"), json!({})).json(), json!({"ok": true}));
    let receipt = client::get(&format!("{base}/_fake/notes/{id}"), None).unwrap().json();
    assert_eq!(receipt["state"], "expired");

    post("/_fake/config", json!({"approval_timeout_ms": 100}));
    let r = ok_hook(&s, "permission-check", json!({"tool_name": "Bash"}));
    assert_eq!(r["timed_out"], true);
    let approvals = client::get(&format!("{base}/_fake/approvals"), None).unwrap().json();
    assert_eq!(approvals["approvals"][0]["status"], "expired");

    let account = post("/_fake/accounts", json!({})).json();
    assert_ne!(account["account_id"], s.account_id().as_str());
    let user = post("/_fake/users", json!({"primary": false})).json();
    assert_eq!(user["primary"], false);
    let sessions = client::get(&format!("{base}/_fake/sessions"), None).unwrap().json();
    assert!(sessions["sessions"].is_array());
    assert_eq!(client::get(&format!("{base}/_fake/nope"), None).unwrap().status, 404);
}

/// A raw connection to the fake (reads time out after 5 s).
fn connect(s: &FakeServer) -> TcpStream {
    let stream = TcpStream::connect(s.url().trim_start_matches("http://")).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    stream
}

#[test]
fn keep_alive_pipelining_and_connection_close() {
    let s = FakeServer::start();
    let stream = connect(&s);
    let mut w = &stream;
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let body = "{}";
    let req = format!(
        "POST /api/v1/agents/notes/pending HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer {}\r\ncontent-length: {}\r\n\r\n{body}",
        s.runtime_token(),
        body.len()
    );
    // Two requests in one write (pipelined), then a third on the same socket.
    w.write_all(format!("{req}{req}").as_bytes()).unwrap();
    for _ in 0..2 {
        let r = read_response(&mut reader, false).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("connection"), None);
    }
    w.write_all(b"GET /api/v1/health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").unwrap();
    let r = read_response(&mut reader, false).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("close"));
    let mut rest = Vec::new();
    assert_eq!(reader.read_to_end(&mut rest).unwrap(), 0, "closed after Connection: close");
}

#[test]
fn chunked_bodies_and_expect_continue() {
    let s = FakeServer::start();
    let stream = connect(&s);
    let mut w = &stream;
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let head = format!(
        "POST /api/v1/agents/session-start HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer {}\r\ntransfer-encoding: chunked\r\nexpect: 100-continue\r\n\r\n",
        s.runtime_token()
    );
    w.write_all(head.as_bytes()).unwrap();
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "HTTP/1.1 100 Continue\r\n");
    reader.read_line(&mut line).unwrap();
    w.write_all(b"5\r\n{\"ses\r\n10\r\nsion_id\": \"chunk\r\n2\r\n\"}\r\n0\r\n\r\n").unwrap();
    let r = read_response(&mut reader, false).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["created"], true);
}

#[test]
fn bad_requests_get_400_and_never_hurt_the_server() {
    let s = FakeServer::start();
    let raw = |bytes: &[u8]| {
        let mut stream = connect(&s);
        stream.write_all(bytes).unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        let mut out = Vec::new();
        let _ = stream.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    assert!(raw(b"garbage\r\n\r\n").starts_with("HTTP/1.1 400 Bad Request"));
    assert!(raw(b"GET /x HTTP/9.9\r\n\r\n").starts_with("HTTP/1.1 400"));
    assert!(raw(b"GET /x HTTP/1.1\r\nno colon here\r\n\r\n").starts_with("HTTP/1.1 400"));
    assert!(raw(b"POST /x HTTP/1.1\r\ncontent-length: abc\r\n\r\n").starts_with("HTTP/1.1 400"));
    assert!(raw(b"POST /x HTTP/1.1\r\ncontent-length: 999999999999\r\n\r\n").starts_with("HTTP/1.1 413"));
    let long_header = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(20_000));
    assert!(raw(long_header.as_bytes()).starts_with("HTTP/1.1 400"));
    assert_eq!(raw(b""), "");
    // A truncated body: the client goes away; nothing to answer.
    let mut stream = connect(&s);
    stream.write_all(b"POST /api/v1/agents/notes/pending HTTP/1.1\r\ncontent-length: 100\r\n\r\n{").unwrap();
    drop(stream);
    // HTTP/1.0 closes by default.
    assert!(raw(b"GET /api/v1/health HTTP/1.0\r\n\r\n").contains("\"healthy\""));
    assert!(raw(&[0xff, 0xfe, b'\r', b'\n', b'\r', b'\n']).starts_with("HTTP/1.1 400"));
    assert_eq!(user_get(&s, "health", None).status, 200);
}

#[test]
fn the_binary_prints_its_json_line_and_stops_at_stdin_eof() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_preloop-fake-server"))
        .arg("--print-env")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let info: Value = serde_json::from_str(&line).unwrap();
    for key in ["url", "runtime_token", "user_token", "agent_id"] {
        assert!(info[key].is_string(), "{key} in {line}");
    }
    let mut env = String::new();
    for _ in 0..4 {
        out.read_line(&mut env).unwrap();
    }
    assert!(env.contains(&format!("PRELOOP_URL={}\n", info["url"].as_str().unwrap())));
    assert!(env.contains(&format!("PRELOOP_TOKEN={}\n", info["runtime_token"].as_str().unwrap())));
    let url = info["url"].as_str().unwrap();
    let r = client::post_json(
        &format!("{url}/api/v1/agents/session-start"),
        info["runtime_token"].as_str(),
        &json!({"session_id": "from-binary"}),
    )
    .unwrap();
    assert_eq!(r.status, 200);
    drop(child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success());
            break;
        }
        assert!(Instant::now() < deadline, "the binary did not stop at stdin EOF");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_no_fault_path_is_fast() {
    let s = FakeServer::start();
    let t = Instant::now();
    for _ in 0..200 {
        let r = hook(&s, "notes/pending", &s.runtime_token(), json!({"session_id": "bench"}));
        assert_eq!(r.status, 200);
    }
    // 200 fresh connections, no sleeps: well under a second even unoptimized.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}
