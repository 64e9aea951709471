//! Contract §5.7-§5.9 on the fake: `GET /api/v1/runtime-sessions` with its
//! filters, `GET /api/v1/runtime-sessions/{id}`, the activity timeline
//! `GET /api/v1/runtime-sessions/{id}/activity`, `GET /api/v1/agents`, and
//! the attach socket `/api/v1/ws/runtime-sessions/{id}` (a minimal
//! WebSocket server: `attached`, `ping` → `pong`, then only what a test
//! publishes on the fake's event bus with `POST /_fake/sessions/{id}/events`,
//! like the real server, whose hook routes publish nothing there).
//!
//! As on the real server: the agent's identity session is listed (trap 23),
//! model calls are 0 for hook-only runs, the timeline keeps only the sizes of
//! tool arguments (`arguments_summary`), and the list covers the last 30
//! days by default.

use crate::http::{Request, Response};
use crate::shared_state::Shared;
use crate::state::{Session, State, detail};
use crate::validate::Query;
use preloop_shared::time::Timestamp;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(resp) => return resp,
        }
    };
}

fn require_primary(primary: bool) -> Result<(), Response> {
    if primary { Ok(()) } else { Err(detail(403, "Insufficient permissions. Required: control_managed_agent")) }
}

/// The last activity of a session: start, prompts, turn ends, tool calls,
/// note deliveries.
fn last_activity(st: &State, s: usize) -> Timestamp {
    let sess = &st.sessions[s];
    let mut t = sess.started_at;
    for x in [sess.last_prompt_at, sess.last_turn_end_at, sess.ended_at].into_iter().flatten() {
        t = t.max(x);
    }
    for c in st.tool_calls.iter().filter(|c| c.session == s) {
        t = t.max(c.at);
    }
    for n in st.notes.iter().filter(|n| n.session_id.as_deref() == Some(sess.id.as_str())) {
        if let Some(d) = n.delivered_at {
            t = t.max(d);
        }
    }
    t
}

fn pending_approvals(st: &State, session_id: &str) -> usize {
    st.approvals
        .iter()
        .filter(|a| a.status == "pending")
        .filter(|a| {
            a.tool_args.pointer("/_preloop_origin/runtime_session_id").and_then(Value::as_str) == Some(session_id)
        })
        .count()
}

fn item(st: &State, s: usize, now: Timestamp) -> Value {
    let sess: &Session = &st.sessions[s];
    let agent = sess.agent_id.as_deref().and_then(|a| st.agent_by_id(a)).map(|a| &st.agents[a]);
    let last = last_activity(st, s);
    let active_now = sess.ended_at.is_none() && now.secs() - last.secs() <= 15 * 60;
    let tool_calls = st.tool_calls.iter().filter(|c| c.session == s).count();
    let notes = st.notes.iter().filter(|n| n.session_id.as_deref() == Some(sess.id.as_str())).count();
    json!({
        "id": sess.id,
        "session_source_type": sess.source_type,
        "session_source_id": sess.source_id,
        "session_reference": null,
        "alias": sess.alias,
        "parent_session_id": sess.parent_session_id,
        "runtime_principal_type": sess.principal_type,
        "runtime_principal_id": sess.principal_id,
        "runtime_principal_name": sess.principal_name.clone().or_else(|| agent.map(|a| a.display_name.clone())),
        "title": sess.title,
        "started_at": crate::state::naive(sess.started_at),
        "last_activity_at": crate::state::naive(last),
        "ended_at": sess.ended_at.map(crate::state::naive),
        "agent_id": sess.agent_id,
        "agent_name": agent.map(|a| a.display_name.clone()),
        "managed_agent_id": sess.agent_id,
        "managed_agent_name": agent.map(|a| a.display_name.clone()),
        "agent_kind": agent.map(|a| a.agent_kind.clone()),
        "cwd": sess.cwd,
        "flow_execution_id": null,
        "is_active_now": active_now,
        "activity_status": if sess.ended_at.is_some() { "ended" } else if active_now { "active_now" } else { "idle" },
        // Hook-only runs make no model calls through the gateway (trap 27).
        "total_requests": 0,
        "successful_requests": 0,
        "failed_requests": 0,
        "estimated_cost": 0.0,
        "tool_call_count": tool_calls,
        "pending_approval_count": pending_approvals(st, &sess.id),
        "note_count": notes,
    })
}

/// §5.7 `GET /api/v1/runtime-sessions`.
pub(crate) fn list(shared: &Shared, req: &Request) -> Response {
    let st = shared.lock();
    let user = tri!(st.auth_user(req.header("authorization")));
    let mut q = Query::new(req);
    let status = q.literal("status", &["all", "active", "ended"]).unwrap_or_else(|| "all".into());
    let agent = q.string("agent");
    let agent_kind = q.string("agent_kind");
    let alias = q.string("alias");
    let parent = q.uuid("parent_session_id", false);
    let execution = q.uuid("flow_execution_id", false);
    let query = q.string("query");
    let within = q.int("active_within_minutes", 0, Some(1), Some(1440));
    let limit = q.int("limit", 20, Some(1), Some(100));
    let offset = q.int("offset", 0, Some(0), None);
    let start = q.string("start_date").map(|s| Timestamp::parse(&s));
    if let Some(None) = start {
        return detail(422, "start_date: Input should be a valid datetime");
    }
    if !q.errors.is_empty() {
        return crate::validate::unprocessable(q.errors);
    }
    tri!(require_primary(user.primary));
    let now = Timestamp::now();
    let period_start = start.flatten().unwrap_or(now.add_secs(-30 * 86_400));
    let mut idx: Vec<usize> = (0..st.sessions.len())
        .filter(|&i| {
            let s = &st.sessions[i];
            let a = s.agent_id.as_deref().and_then(|a| st.agent_by_id(a)).map(|a| &st.agents[a]);
            let last = last_activity(&st, i);
            s.account_id == user.account_id
                && last >= period_start
                && match status.as_str() {
                    "active" => s.ended_at.is_none(),
                    "ended" => s.ended_at.is_some(),
                    _ => true,
                }
                && agent.as_ref().is_none_or(|x| a.is_some_and(|a| &a.id == x || &a.display_name == x))
                // The managed agent's kind only, as the real server (§5.7):
                // a session's own `source` does not count.
                && agent_kind.as_ref().is_none_or(|k| a.is_some_and(|a| &a.agent_kind == k))
                && alias.as_ref().is_none_or(|x| s.alias.as_ref() == Some(x))
                && parent.as_ref().is_none_or(|p| s.parent_session_id.as_ref() == Some(p))
                && execution.is_none()
                && query.as_ref().is_none_or(|qq| {
                    s.source_id.contains(qq.as_str())
                        || s.title.as_deref().is_some_and(|t| t.contains(qq.as_str()))
                        || s.alias.as_deref().is_some_and(|t| t.contains(qq.as_str()))
                })
                && (within == 0 || (s.ended_at.is_none() && now.secs() - last.secs() <= within * 60))
        })
        .collect();
    idx.sort_by_key(|&i| std::cmp::Reverse((last_activity(&st, i), st.sessions[i].started_at)));
    let total = idx.len();
    let items: Vec<Value> =
        idx.into_iter().skip(offset as usize).take(limit as usize).map(|i| item(&st, i, now)).collect();
    let has_more = (offset as usize) + items.len() < total;
    Response::json(
        200,
        &json!({
            "period_start": period_start.to_iso_z(),
            "period_end": now.to_iso_z(),
            "query": query,
            "session_source_type": null,
            "status": status,
            "total": total,
            "has_more": has_more,
            "limit": limit,
            "offset": offset,
            "items": items,
        }),
    )
}

fn session_in_account(st: &State, account_id: &str, raw: &str) -> Result<usize, Response> {
    st.session_idx(account_id, raw).ok_or_else(|| detail(404, "Runtime session not found"))
}

/// §5.7 `GET /api/v1/runtime-sessions/{id}`.
pub(crate) fn get(shared: &Shared, req: &Request, id: &str) -> Response {
    let st = shared.lock();
    let user = tri!(st.auth_user(req.header("authorization")));
    tri!(require_primary(user.primary));
    let s = tri!(session_in_account(&st, &user.account_id, id));
    Response::json(
        200,
        &json!({"period_start": null, "period_end": null, "session": item(&st, s, Timestamp::now()), "usage_by_model": []}),
    )
}

/// §5.8 `GET /api/v1/runtime-sessions/{id}/activity`: newest first.
pub(crate) fn activity(shared: &Shared, req: &Request, id: &str) -> Response {
    let st = shared.lock();
    let user = tri!(st.auth_user(req.header("authorization")));
    let mut q = Query::new(req);
    let limit = q.int("limit", 100, Some(1), Some(100));
    if !q.errors.is_empty() {
        return crate::validate::unprocessable(q.errors);
    }
    tri!(require_primary(user.primary));
    let s = tri!(session_in_account(&st, &user.account_id, id));
    let sess = &st.sessions[s];
    let mut items: Vec<(Timestamp, Value)> = vec![(
        sess.started_at,
        json!({"activity_id": null, "activity_type": "session_started", "timestamp": sess.started_at.to_iso_z(),
               "title": "Session started", "summary": sess.principal_name, "status": "info", "metadata": {}}),
    )];
    // Preloop's timeline names the end too (what `sessions attach` must not show twice).
    if let Some(end) = sess.ended_at {
        items.push((
            end,
            json!({"activity_id": null, "activity_type": "session_ended", "timestamp": end.to_iso_z(),
                   "title": "Session ended", "summary": sess.principal_name, "status": "info", "metadata": {}}),
        ));
    }
    for c in st.tool_calls.iter().filter(|c| c.session == s) {
        items.push((
            c.at,
            json!({"activity_id": c.id, "activity_type": "tool_call", "timestamp": c.at.to_iso_z(),
                   "title": c.tool_name, "summary": c.reason, "status": c.status, "tool_name": c.tool_name,
                   "server_name": c.source,
                   "metadata": {"origin": "native_hook", "source": c.source, "decision": c.decision,
                                "evaluation_phase": c.phase, "arguments_summary": c.sizes}}),
        ));
    }
    for n in st.notes.iter().filter(|n| n.session_id.as_deref() == Some(sess.id.as_str())) {
        if let Some(d) = n.delivered_at {
            items.push((
                d,
                json!({"activity_id": format!("note-{}", n.note_id), "activity_type": "agent_control_message",
                       "timestamp": d.to_iso_z(), "title": "Operator message", "summary": n.body, "status": "delivered",
                       "metadata": {"kind": "operator_note", "note_id": n.note_id, "delivery_event": n.delivery_event,
                                    "delivery_channel": n.delivery_channel, "author_display": n.author_display,
                                    "author_auth_method": n.auth_method, "turn_index": null}}),
            ));
        }
    }
    items.sort_by_key(|(t, _)| std::cmp::Reverse(*t));
    let items: Vec<Value> = items.into_iter().take(limit as usize).map(|(_, v)| v).collect();
    Response::json(200, &json!({ "items": items }))
}

/// `GET /api/v1/agents`: the account's managed agents (the fields we use).
pub(crate) fn agents(shared: &Shared, req: &Request) -> Response {
    let st = shared.lock();
    let user = tri!(st.auth_user(req.header("authorization")));
    let items: Vec<Value> = st
        .agents
        .iter()
        .filter(|a| a.account_id == user.account_id)
        .map(|a| json!({"id": a.id, "display_name": a.display_name, "agent_kind": a.agent_kind}))
        .collect();
    let total = items.len();
    Response::json(200, &json!({"items": items, "total": total, "limit": 100, "offset": 0}))
}

// ----- the attach socket (§5.9) -------------------------------------------

/// Whether this request asks for the attach socket.
pub(crate) fn is_attach(req: &Request) -> bool {
    req.path.starts_with("/api/v1/ws/runtime-sessions/")
        && req.header("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
}

/// The 101 answer and what runs on the socket afterwards.
/// The 101 answer, the first message, and a refusal (close code, message) if any.
pub(crate) type Attach = (Response, Value, Option<(u16, Value)>);

pub(crate) fn attach(shared: &Shared, req: &Request) -> Option<Attach> {
    let key = req.header("sec-websocket-key")?;
    let accept = accept_key(key);
    let resp = Response::empty(101)
        .with_header("upgrade", "websocket")
        .with_header("connection", "Upgrade")
        .with_header("sec-websocket-accept", &accept);
    let id = crate::http::percent_decode(req.path.trim_start_matches("/api/v1/ws/runtime-sessions/"));
    let st = shared.lock();
    let user = match st.auth_user(req.header("authorization")) {
        Ok(u) => u,
        Err(_) => {
            let e = json!({"type": "error", "error": "unauthorized", "detail": "A valid bearer token is required"});
            return Some((resp, Value::Null, Some((4401, e))));
        }
    };
    if !user.primary {
        let e = json!({"type": "error", "error": "forbidden", "detail": "You cannot attach to this session"});
        return Some((resp, Value::Null, Some((4403, e))));
    }
    let Some(s) = st.session_idx(&user.account_id, &id) else {
        let e = json!({"type": "error", "error": "not_found", "detail": "Runtime session not found"});
        return Some((resp, Value::Null, Some((4404, e))));
    };
    let sess = &st.sessions[s];
    let attached = json!({"type": "attached", "runtime_session_id": sess.id, "execution_id": null,
                          "ended_at": sess.ended_at.map(|t| t.to_iso_z()), "approvals_visible": true});
    Some((resp, attached, None))
}

/// Serve one attach socket: the first message, then pongs and whatever is
/// published for the session, until either side closes.
pub(crate) fn serve_socket(
    mut stream: TcpStream,
    first: Value,
    refuse: Option<(u16, Value)>,
    session_id: String,
    bus: &dyn Fn(usize) -> (usize, Vec<Value>),
    stopping: &dyn Fn() -> bool,
) {
    if let Some((code, msg)) = refuse {
        let _ = write_frame(&mut stream, 0x1, msg.to_string().as_bytes());
        let mut payload = code.to_be_bytes().to_vec();
        payload.extend_from_slice(b"refused");
        let _ = write_frame(&mut stream, 0x8, &payload);
        return;
    }
    if write_frame(&mut stream, 0x1, first.to_string().as_bytes()).is_err() {
        return;
    }
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let (mut seen, _) = bus(usize::MAX);
    let mut reader = FrameReader::default();
    loop {
        if stopping() {
            let _ = write_frame(&mut stream, 0x8, &1001u16.to_be_bytes());
            return;
        }
        let (next, events) = bus(seen);
        seen = next;
        for e in events {
            if e.get("runtime_session_id").and_then(Value::as_str).is_none_or(|s| s == session_id)
                && write_frame(&mut stream, 0x1, e.to_string().as_bytes()).is_err()
            {
                return;
            }
        }
        match reader.read(&mut stream) {
            Ok(Some((0x1, payload))) => {
                let v: Value = serde_json::from_slice(&payload).unwrap_or(Value::Null);
                if v.get("type").and_then(Value::as_str) == Some("ping")
                    && write_frame(&mut stream, 0x1, br#"{"type":"pong"}"#).is_err()
                {
                    return;
                }
            }
            Ok(Some((0x8, _))) => {
                let _ = write_frame(&mut stream, 0x8, &1000u16.to_be_bytes());
                return;
            }
            Ok(Some((0x9, payload))) => {
                if write_frame(&mut stream, 0xA, &payload).is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(()) => return,
        }
    }
}

fn write_frame(stream: &mut TcpStream, opcode: u8, payload: &[u8]) -> std::io::Result<()> {
    let mut f = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => f.push(n as u8),
        n if n <= 0xffff => {
            f.push(126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(payload);
    stream.write_all(&f)?;
    stream.flush()
}

/// Client frames (masked), read across timeouts.
#[derive(Default)]
struct FrameReader {
    buf: Vec<u8>,
}

impl FrameReader {
    /// `Ok(None)` when no whole frame is there yet; `Err` when the peer is gone.
    fn read(&mut self, stream: &mut TcpStream) -> Result<Option<(u8, Vec<u8>)>, ()> {
        let mut tmp = [0u8; 4096];
        match stream.read(&mut tmp) {
            Ok(0) => return Err(()),
            Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return Err(()),
        }
        if self.buf.len() < 2 {
            return Ok(None);
        }
        let opcode = self.buf[0] & 0x0f;
        let masked = self.buf[1] & 0x80 != 0;
        let mut len = (self.buf[1] & 0x7f) as usize;
        let mut pos = 2;
        if len == 126 {
            if self.buf.len() < 4 {
                return Ok(None);
            }
            len = u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize;
            pos = 4;
        } else if len == 127 {
            if self.buf.len() < 10 {
                return Ok(None);
            }
            let mut b = [0u8; 8];
            b.copy_from_slice(&self.buf[2..10]);
            len = u64::from_be_bytes(b) as usize;
            pos = 10;
        }
        if len > 1 << 20 {
            return Err(());
        }
        let mask_len = if masked { 4 } else { 0 };
        if self.buf.len() < pos + mask_len + len {
            return Ok(None);
        }
        let mask: Vec<u8> = self.buf[pos..pos + mask_len].to_vec();
        let start = pos + mask_len;
        let mut payload = self.buf[start..start + len].to_vec();
        if masked {
            for (i, b) in payload.iter_mut().enumerate() {
                *b ^= mask[i % 4];
            }
        }
        self.buf.drain(..start + len);
        Ok(Some((opcode, payload)))
    }
}

/// `Sec-WebSocket-Accept`: base64(SHA-1(key + GUID)) (RFC 6455 §4.2.2).
fn accept_key(key: &str) -> String {
    base64(&sha1(format!("{}258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key.trim()).as_bytes()))
}

fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    for chunk in msg.chunks(64) {
        let mut w = [0u32; 80];
        for i in 0..16 {
            w[i] = u32::from_be_bytes([chunk[4 * i], chunk[4 * i + 1], chunk[4 * i + 2], chunk[4 * i + 3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let t = a.rotate_left(5).wrapping_add(f).wrapping_add(e).wrapping_add(k).wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, x) in h.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 { T[(n >> 6) as usize & 63] as char } else { '=' });
        out.push(if c.len() > 2 { T[n as usize & 63] as char } else { '=' });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_6455_accept_key() {
        assert_eq!(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }
}
