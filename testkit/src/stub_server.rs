//! A loopback HTTP server the fake cannot be: every answer comes from a
//! closure, every request is recorded, and the answer can be written in
//! short writes or one byte at a time. For hostile servers (a deny-all
//! policy, a token echo, a planted config's server) and transport faults.
//!
//! ```ignore
//! let deny = StubServer::start(|req| match req.route() {
//!     "permission-check" => StubResponse::json(200, json!({"decision": "deny", "reason": "central policy"})),
//!     "session-start" => StubResponse::json(200, json!({"runtime_session_id": RUNTIME_ID})),
//!     _ => StubResponse::empty(204),
//! });
//! ```

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A runtime session id a stub can hand out.
pub const STUB_RUNTIME_ID: &str = "5f9c7c7b-e77b-4e3c-99be-5a7a623325db";

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct StubRequest {
    pub method: String,
    pub path: String,
    /// The head's lines after the request line, as sent.
    pub headers: Vec<String>,
    pub body: Vec<u8>,
}

impl StubRequest {
    /// The hook route (`permission-check`, `notes/pending`, ...): the path
    /// after `/api/v1/agents/`, or the whole path.
    pub fn route(&self) -> &str {
        self.path.strip_prefix("/api/v1/agents/").unwrap_or(&self.path)
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find_map(|h| {
            let (k, v) = h.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then_some(v.trim())
        })
    }
}

/// How the answer goes out on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// One write.
    Whole,
    /// Writes of at most this many bytes, with a pause between them.
    Chunks(usize, Duration),
}

#[derive(Debug, Clone)]
pub struct StubResponse {
    pub status: u16,
    pub body: Vec<u8>,
    pub content_type: &'static str,
    pub extra_headers: Vec<String>,
    /// Close without answering at all.
    pub drop_connection: bool,
}

impl StubResponse {
    pub fn json(status: u16, body: Value) -> StubResponse {
        StubResponse::raw(status, body.to_string().into_bytes())
    }
    /// A body sent exactly as given (e.g. JSON with hand-made escapes).
    pub fn raw(status: u16, body: impl Into<Vec<u8>>) -> StubResponse {
        StubResponse {
            status,
            body: body.into(),
            content_type: "application/json",
            extra_headers: Vec::new(),
            drop_connection: false,
        }
    }
    pub fn empty(status: u16) -> StubResponse {
        StubResponse::raw(status, Vec::new())
    }
    pub fn hang_up() -> StubResponse {
        StubResponse { drop_connection: true, ..StubResponse::empty(0) }
    }
}

type Handler = dyn Fn(&StubRequest) -> StubResponse + Send + Sync;

/// The server; it stops when dropped (its listener thread lingers on an
/// unused port until the test process exits).
pub struct StubServer {
    url: String,
    requests: Arc<Mutex<Vec<StubRequest>>>,
    connections: Arc<AtomicUsize>,
    writes: Arc<Mutex<Writes>>,
}

impl StubServer {
    pub fn start(handler: impl Fn(&StubRequest) -> StubResponse + Send + Sync + 'static) -> StubServer {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let writes = Arc::new(Mutex::new(Writes::Whole));
        let handler: Arc<Handler> = Arc::new(handler);
        let (reqs, conns, w) = (requests.clone(), connections.clone(), writes.clone());
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                conns.fetch_add(1, Ordering::SeqCst);
                let (h, reqs, w) = (handler.clone(), reqs.clone(), w.clone());
                std::thread::spawn(move || serve(s, &*h, &reqs, &w));
            }
        });
        StubServer { url, requests, connections, writes }
    }

    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Write every later answer this way.
    pub fn set_writes(&self, w: Writes) {
        *self.writes.lock().unwrap() = w;
    }

    pub fn requests(&self) -> Vec<StubRequest> {
        self.requests.lock().unwrap().clone()
    }

    /// How many requests hit `route` (see [`StubRequest::route`]).
    pub fn count(&self, route: &str) -> usize {
        self.requests.lock().unwrap().iter().filter(|r| r.route() == route).count()
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn clear(&self) {
        self.requests.lock().unwrap().clear();
    }
}

/// Read an HTTP request head byte by byte, through the blank line (at most
/// 64 KiB); `Err` with what came when the stream ended or failed first.
pub fn read_head(s: &mut impl Read) -> Result<String, String> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 << 10 {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return Err(String::from_utf8_lossy(&head).into_owned()),
        }
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

fn serve(mut s: TcpStream, handler: &Handler, reqs: &Mutex<Vec<StubRequest>>, writes: &Mutex<Writes>) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(head) = read_head(&mut s) else { return };
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let headers: Vec<String> = lines.filter(|l| !l.is_empty()).map(str::to_string).collect();
    let len: usize = headers
        .iter()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case("content-length").then(|| v.trim().parse().unwrap_or(0))
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len.min(64 << 20)];
    if s.read_exact(&mut body).is_err() {
        return;
    }
    let req = StubRequest { method, path, headers, body };
    reqs.lock().unwrap().push(req.clone());
    let resp = handler(&req);
    if resp.drop_connection {
        return;
    }
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        resp.status,
        reason(resp.status),
        resp.content_type,
        resp.body.len()
    );
    for h in &resp.extra_headers {
        out.push_str(h);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&resp.body);
    let mode = *writes.lock().unwrap();
    match mode {
        Writes::Whole => {
            let _ = s.write_all(&bytes);
        }
        Writes::Chunks(n, pause) => {
            let _ = s.set_nodelay(true);
            for c in bytes.chunks(n.max(1)) {
                if s.write_all(c).and_then(|_| s.flush()).is_err() {
                    return;
                }
                std::thread::sleep(pause);
            }
        }
    }
    let _ = s.flush();
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        401 => "Unauthorized",
        404 => "Not Found",
        422 => "Unprocessable Entity",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

impl StubServer {
    /// A Preloop server whose central policy denies every tool call: it
    /// registers sessions, has no notes, and records every request (the
    /// red-team's `srv.py deny`).
    pub fn deny_all() -> StubServer {
        StubServer::start(|req| match req.route() {
            "session-start" => {
                StubResponse::json(200, serde_json::json!({"runtime_session_id": STUB_RUNTIME_ID, "created": true}))
            }
            "permission-check" => StubResponse::json(
                200,
                serde_json::json!({"decision": "deny", "reason": "central policy: every tool call is denied"}),
            ),
            "notes/pending" => StubResponse::json(200, serde_json::json!({"notes": []})),
            "session-end" => StubResponse::json(200, serde_json::json!({"marked": 0})),
            "/api/v1/health" => StubResponse::json(200, serde_json::json!({})),
            _ => StubResponse::empty(204),
        })
    }

    /// A hostile server that echoes the bearer token JSON-`\u`-escaped: as
    /// the runtime session id and alias of `session-start`, and in a 500
    /// body of every other route (the red-team's `srv.py escaped`).
    pub fn escaped_token_echo() -> StubServer {
        StubServer::start(|req| {
            let tok = req.header("authorization").and_then(|a| a.split(' ').next_back()).unwrap_or("").to_string();
            match req.route() {
                "session-start" => {
                    let e = json_u_escape(&tok);
                    StubResponse::raw(200, format!(r#"{{"runtime_session_id":"{e}","alias":"{e}","created":true}}"#))
                }
                _ => StubResponse::raw(500, format!(r#"{{"detail":"{}"}}"#, json_u_escape(&format!("Bearer {tok}")))),
            }
        })
    }
}

/// Every character of `s` as a JSON `\uXXXX` escape.
pub fn json_u_escape(s: &str) -> String {
    s.encode_utf16().map(|u| format!("\\u{u:04x}")).collect()
}
