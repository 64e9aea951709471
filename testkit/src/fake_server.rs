//! A faithful loopback fake of the Preloop server's hook and operator-note
//! routes (contract: `docs/contracts/preloop-server.md`, PyPI
//! `preloop` 0.17.1), with test controls: fault injection, a request log,
//! more agents/tokens/users/accounts, and the approval API.
//!
//! What it serves (each handler cites its section of docs/contracts/preloop-server.md, see `routes.rs`):
//! * hook routes §4.1-4.6: `POST /api/v1/agents/{session-start,
//!   permission-check, notes/pending, notes/ack, session-event, session-end}`;
//! * human routes §5: `POST|GET /api/v1/operator-notes`, `GET
//!   /api/v1/operator-notes/session-targets`, `GET /api/v1/operator-notes/{id}`,
//!   `POST /api/v1/operator-notes/{id}/cancel`, `GET /api/v1/health`;
//! * runtime sessions §5.7-§5.9 (`routes/runtime_sessions.rs`): `GET
//!   /api/v1/runtime-sessions` with its filters, `GET /api/v1/runtime-sessions/{id}`
//!   and `…/{id}/activity` (tool calls with argument sizes, delivered notes),
//!   `GET /api/v1/agents`, and the attach socket `/api/v1/ws/runtime-sessions/{id}`
//!   (`attached`, `ping`/`pong`, then only what `POST /_fake/sessions/{id}/events`
//!   publishes, as hooks publish nothing there on the real server);
//! * test helpers of the real server §2.2/§5.6: `POST /api/v1/agents`, `POST
//!   /api/v1/agents/{id}/credentials`, `DELETE
//!   /api/v1/agents/{id}/credentials/{credential_id}`, `PUT
//!   /api/v1/agents/{id}/governance`, `POST /api/v1/approval-workflows`, `POST
//!   /api/v1/tool-configurations`, `GET /api/v1/approval-requests[/{id}]`,
//!   `POST /api/v1/approval-requests/{id}/{approve,decline}`;
//! * controls under `/_fake/` (no auth, never logged, never faulted): see
//!   "Control routes" below.
//!
//! Left out of docs/contracts/preloop-server.md (answered simply, or not at all):
//! * flow executions: `execution_id` targets answer 404 `This execution has
//!   no runtime session yet...`, `GET /operator-notes?execution_id=` answers an
//!   empty list; `flow_execution_id` on permission-check is validated and
//!   ignored; flow execution keys do not exist;
//! * session-bound `flow_` runtime tokens (`/auth/runtime-sessions/token`)
//!   and their bound-session rules (§2.3 second half, trap 20): only durable
//!   `agt_` credentials exist; registration/login routes (§2.2) are not
//!   served, the fake mints its users directly;
//! * runner-hosted sessions, bare-id importer/gateway session rows, the model
//!   gateway delivery channel, agent-authored notes (`auth: agent`, only the
//!   renderer supports them), `acknowledged`/`failed` states (unreachable from
//!   these routes anyway);
//! * access rules (allow/deny/require_approval rules): only the disabled tool
//!   configuration and the governance switch decide; AI-driven workflows;
//!   approval `cancelled` can only be reached through the state, not a route;
//! * an agent's "current live session" pointer (`agent.runtime_session_id`):
//!   like an API-created agent on the real server it is never set, so
//!   agent-addressed notes are sent unbound and a durable credential's
//!   permission-check without a registered `session_id` has no session;
//! * audit log, webhooks, model-gateway timeline rows and usage (model calls
//!   are always 0, as for hook-only runs), titles beyond a
//!   stored string, the 503 `PRELOOP_URL is not configured` and pool
//!   saturation errors (use a fault to simulate them), FastAPI's trailing-slash
//!   redirects, `X-Total-Count` on anything but the approval list;
//! * response shapes of the helper routes (agents, credentials, workflows,
//!   tool configurations, approval requests) carry the fields tests need,
//!   not every field of the real models.
//!
//! ## Control routes
//!
//! Under `/_fake/`, no auth, never logged, never faulted. Bodies are JSON.
//!
//! | Route | Body | Answer |
//! | --- | --- | --- |
//! | `GET /_fake/info` | | `{"url", "api_base", "runtime_token", "user_token", "user_jwt", "agent_id", "credential_id", "session_source_id", "account_id", "user_id"}` |
//! | `POST /_fake/faults` | a [`FaultSpec`] or an array of them | `{"ok": true, "faults": N}` |
//! | `GET /_fake/faults` | | `{"faults": [...]}` |
//! | `DELETE /_fake/faults`, `POST /_fake/faults/clear` | | `{"ok": true}` |
//! | `GET /_fake/requests` | | `{"requests": [RecordedRequest...]}` |
//! | `DELETE /_fake/requests`, `POST /_fake/requests/clear` | | `{"ok": true}` |
//! | `POST /_fake/agents` | `{"display_name"?, "agent_kind"?}` | [`AgentHandle`] |
//! | `POST /_fake/agents/{id}/tokens` | | [`AgentHandle`] with a new token |
//! | `POST /_fake/agents/{id}/suspend`, `.../activate` | | `{"ok": true}` |
//! | `POST /_fake/agents/{id}/governance` | `{"native_tool_approvals": "off"\|"enforce"}` | `{"ok": true}` |
//! | `POST /_fake/tokens/revoke`, `/_fake/tokens/expire` | `{"token"}` | `{"ok": bool}` |
//! | `POST /_fake/users` | `{"primary"?: false}` | [`UserHandle`] (primary account) |
//! | `POST /_fake/accounts` | | [`AccountHandle`] |
//! | `POST /_fake/config` | `{"approval_timeout_ms"?, "rate_limit_per_hour"?: N\|null, "record_requests"?: bool}` | `{"ok": true}` |
//! | `POST /_fake/tools` | `{"tool_name", "is_enabled"}` | `{"ok": true}` |
//! | `POST /_fake/notes` | a send body (as the primary user, `api_key`) | the send's status and body |
//! | `GET /_fake/notes` | | `{"notes": [receipt...]}` (every account, no expiry side effect) |
//! | `GET /_fake/notes/{id}` | | the receipt (lazy expiry runs, like a receipt read) |
//! | `POST /_fake/notes/{id}/expire` | | `{"ok": bool}`: `expires_at` set to now (state unchanged: lazy) |
//! | `POST /_fake/sessions/{id}/events` | any JSON object | `{"ok": true}`: published on the event bus the attach socket relays (§5.9) |
//! | `GET /_fake/sessions` | | `{"sessions": [{"id", "agent_id", "source_id", "alias", "started_at", "ended_at", "parent_session_id"}]}` |
//! | `GET /_fake/approvals` | | `{"approvals": [...]}` (every account, newest first) |
//! | `POST /_fake/approvals/{id}/approve`, `.../decline` | `{"comment"?}` | the approval, or the API's error |
//!
//! Fault examples (`POST /_fake/faults`; `path` exact or a prefix ending in
//! `*`, absent = every route; `times` absent = until cleared):
//!
//! ```text
//! {"path": "/api/v1/agents/notes/pending", "action": {"kind": "status", "status": 503,
//!  "body": {"detail": "Database connections are saturated. Please retry shortly."}, "retry_after": "1"}, "times": 1}
//! {"delay_ms": 1500}                                        every route answers 1.5 s late
//! {"path": "/api/v1/agents/permission-check", "action": {"kind": "hang"}}
//! {"path": "/api/v1/agents/*", "action": {"kind": "close"}, "times": 2}
//! {"action": {"kind": "garbage"}}   {"action": {"kind": "huge", "bytes": 5000000}}
//! {"path": "/api/v1/agents/notes/pending", "action": {"kind": "close"}, "after_handling": true}
//! ```

use crate::http::{self, Outcome, Request, Response};
use crate::routes;
pub use crate::shared_state::{
    AccountHandle, AgentHandle, FaultAction, FaultSpec, MAX_RECORDED_REQUESTS, RecordedRequest, UserHandle,
};
use crate::shared_state::{Shared, relock};
use crate::state::{State, detail};
use preloop_shared::time::Timestamp;
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{TcpListener, TcpStream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

fn user_handle(st: &State, u: usize) -> UserHandle {
    let user = &st.users[u];
    UserHandle {
        user_id: user.id.clone(),
        account_id: user.account_id.clone(),
        user_token: user.api_key.clone(),
        user_jwt: user.jwt.clone(),
        primary: user.primary,
    }
}

fn agent_handle(st: &State, a: usize, c: usize) -> AgentHandle {
    AgentHandle {
        agent_id: st.agents[a].id.clone(),
        runtime_token: st.credentials[c].token.clone(),
        credential_id: st.credentials[c].id.clone(),
        session_source_id: st.agents[a].principal_id.clone(),
        account_id: st.agents[a].account_id.clone(),
    }
}

/// A new agent (with one durable credential minted by the account's
/// primary user) in `account_id`.
fn new_agent(st: &mut State, account_id: &str, display_name: &str, kind: &str) -> AgentHandle {
    let a = st.add_agent(account_id, display_name, kind);
    let owner = st.primary_user_of(account_id).map(|u| st.users[u].id.clone()).unwrap_or_default();
    let c = st.add_credential(a, &owner, "hooks", 365);
    agent_handle(st, a, c)
}

fn new_account(st: &mut State, n: usize) -> AccountHandle {
    let u = st.add_account(&format!("operator{n}"), &format!("Operator {n}"));
    let account_id = st.users[u].account_id.clone();
    let agent = new_agent(st, &account_id, &format!("Agent {n}"), "claude_code");
    AccountHandle { account_id, user: user_handle(st, u), agent }
}

// ===================================================================
// Request handling
// ===================================================================

const GARBAGE_BODY: &str = "<html>not json</html>";

/// The largest `Huge` body the fake will build.
const MAX_HUGE_BODY: usize = 512 * 1024 * 1024;

fn huge_body(bytes: usize) -> Vec<u8> {
    let bytes = bytes.min(MAX_HUGE_BODY);
    if bytes < 10 {
        return vec![b'x'; bytes];
    }
    let mut out = Vec::with_capacity(bytes);
    out.extend_from_slice(b"{\"pad\":\"");
    out.resize(bytes - 2, b'x');
    out.extend_from_slice(b"\"}");
    out
}

/// Run a route handler; a panic becomes the server's 500.
fn run_api(shared: &Shared, req: &Request) -> Response {
    catch_unwind(AssertUnwindSafe(|| routes::api(shared, req))).unwrap_or_else(|_| detail(500, "Internal server error"))
}

fn handle(shared: &Shared, req: &Request) -> Outcome {
    if req.path == "/_fake" || req.path.starts_with("/_fake/") {
        let resp = catch_unwind(AssertUnwindSafe(|| control(shared, req)))
            .unwrap_or_else(|_| detail(500, "Internal server error"));
        return Outcome::Respond(resp);
    }
    let seq = shared.record(req);
    let Some(fault) = shared.take_fault(req) else {
        let resp = run_api(shared, req);
        shared.finish(seq, Some(resp.status), None);
        return Outcome::Respond(resp);
    };
    let label = Some(fault.label());
    if fault.delay_ms > 0 {
        shared.sleep(Duration::from_millis(fault.delay_ms));
        if shared.is_stopping() {
            shared.finish(seq, None, label);
            return Outcome::Close;
        }
    }
    let handled =
        if fault.after_handling || fault.action == FaultAction::None { Some(run_api(shared, req)) } else { None };
    let outcome = match fault.action {
        FaultAction::None => Outcome::Respond(handled.unwrap_or_else(|| run_api(shared, req))),
        FaultAction::Status { status, body, retry_after } => {
            let body = body.unwrap_or_else(|| json!({"detail": http::reason(status)}));
            let mut resp = Response::json(status, &body);
            if let Some(ra) = retry_after {
                resp = resp.with_header("retry-after", &ra);
            }
            Outcome::Respond(resp)
        }
        FaultAction::Hang => Outcome::Hang,
        FaultAction::Close => Outcome::Close,
        FaultAction::Garbage { body } => {
            Outcome::Respond(Response::text(200, "application/json", body.unwrap_or_else(|| GARBAGE_BODY.into())))
        }
        FaultAction::Huge { bytes } => Outcome::Respond(Response::text(200, "application/json", huge_body(bytes))),
    };
    let status = match &outcome {
        Outcome::Respond(r) => Some(r.status),
        _ => None,
    };
    shared.finish(seq, status, label);
    outcome
}

/// The `/_fake/` control routes (the table is in the module docs).
fn control(shared: &Shared, req: &Request) -> Response {
    let segs: Vec<String> = req.path.split('/').filter(|s| !s.is_empty()).map(http::percent_decode).collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let body: Value = if req.body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&req.body) {
            Ok(v) => v,
            Err(e) => return detail(400, &format!("invalid JSON body: {e}")),
        }
    };
    let ok = |b: bool| Response::json(200, &json!({ "ok": b }));
    let server = FakeServerRef(shared);
    match (req.method.as_str(), s.as_slice()) {
        ("GET", ["_fake", "info"]) => Response::json(200, &shared.info()),
        ("POST", ["_fake", "faults"]) => {
            let specs: Result<Vec<FaultSpec>, _> = if body.is_array() {
                serde_json::from_value(body)
            } else {
                serde_json::from_value(body).map(|f| vec![f])
            };
            match specs {
                Ok(specs) => {
                    let mut faults = relock(shared.faults.lock());
                    faults.extend(specs);
                    Response::json(200, &json!({"ok": true, "faults": faults.len()}))
                }
                Err(e) => detail(400, &format!("invalid fault spec: {e}")),
            }
        }
        ("GET", ["_fake", "faults"]) => Response::json(200, &json!({"faults": *relock(shared.faults.lock())})),
        ("DELETE", ["_fake", "faults"]) | ("POST", ["_fake", "faults", "clear"]) => {
            relock(shared.faults.lock()).clear();
            ok(true)
        }
        ("GET", ["_fake", "requests"]) => Response::json(200, &json!({"requests": *relock(shared.log.lock())})),
        ("DELETE", ["_fake", "requests"]) | ("POST", ["_fake", "requests", "clear"]) => {
            relock(shared.log.lock()).clear();
            ok(true)
        }
        ("POST", ["_fake", "agents"]) => {
            let name = body.get("display_name").and_then(Value::as_str).unwrap_or("Test agent").to_string();
            let kind = body.get("agent_kind").and_then(Value::as_str).unwrap_or("claude_code").to_string();
            let mut st = shared.lock();
            Response::json(200, &new_agent(&mut st, &shared.primary_user.account_id, &name, &kind))
        }
        ("POST", ["_fake", "agents", id, "tokens"]) => match server.add_token_handle(id) {
            Some(h) => Response::json(200, &h),
            None => detail(404, "Managed agent not found"),
        },
        ("POST", ["_fake", "agents", id, action @ ("suspend" | "activate")]) => {
            ok(server.set_agent_active(id, *action == "activate"))
        }
        ("POST", ["_fake", "agents", id, "governance"]) => {
            let off = body.get("native_tool_approvals").and_then(Value::as_str) == Some("off");
            ok(server.set_native_tool_approvals(id, off))
        }
        ("POST", ["_fake", "tokens", action @ ("revoke" | "expire")]) => {
            let token = body.get("token").and_then(Value::as_str).unwrap_or("");
            ok(if *action == "revoke" { server.revoke_token(token) } else { server.expire_token(token) })
        }
        ("POST", ["_fake", "users"]) => {
            let primary = body.get("primary").and_then(Value::as_bool).unwrap_or(false);
            Response::json(200, &server.add_user(primary))
        }
        ("POST", ["_fake", "accounts"]) => Response::json(200, &server.add_account()),
        ("POST", ["_fake", "sessions", id, "events"]) => {
            let mut event = body;
            if let Some(o) = event.as_object_mut() {
                o.entry("runtime_session_id").or_insert_with(|| json!(id));
            }
            relock(shared.bus.lock()).push(event);
            ok(true)
        }
        ("POST", ["_fake", "config"]) => {
            if let Some(ms) = body.get("approval_timeout_ms").and_then(Value::as_u64) {
                server.set_approval_timeout(Duration::from_millis(ms));
            }
            if let Some(on) = body.get("record_requests").and_then(Value::as_bool) {
                shared.logging.store(on, Ordering::Relaxed);
            }
            if let Some(v) = body.get("rate_limit_per_hour") {
                server.set_rate_limit(v.as_u64().map(|n| n.min(u64::from(u32::MAX)) as u32));
            }
            ok(true)
        }
        ("POST", ["_fake", "tools"]) => {
            let name = body.get("tool_name").and_then(Value::as_str).unwrap_or("");
            if name.is_empty() {
                return detail(400, "tool_name required");
            }
            server.set_tool_enabled(name, body.get("is_enabled").and_then(Value::as_bool).unwrap_or(false));
            ok(true)
        }
        ("POST", ["_fake", "notes"]) => match server.try_send_note(body) {
            Ok(v) => Response::json(201, &v),
            Err((status, v)) => Response::json(status, &v),
        },
        ("GET", ["_fake", "notes"]) => {
            let st = shared.lock();
            let notes: Vec<_> = (0..st.notes.len()).map(|i| st.note_view(i)).collect();
            Response::json(200, &json!({ "notes": notes }))
        }
        ("GET", ["_fake", "notes", id]) => match server.try_receipt(id) {
            Some(v) => Response::json(200, &v),
            None => detail(404, "Note not found"),
        },
        ("POST", ["_fake", "notes", id, "expire"]) => ok(server.expire_note_now(id)),
        ("GET", ["_fake", "sessions"]) => {
            let st = shared.lock();
            let sessions: Vec<Value> = st
                .sessions
                .iter()
                .map(|x| {
                    json!({
                        "id": x.id, "account_id": x.account_id, "agent_id": x.agent_id, "source_id": x.source_id,
                        "alias": x.alias, "cwd": x.cwd, "parent_session_id": x.parent_session_id,
                        "started_at": x.started_at.to_iso_z(), "ended_at": x.ended_at.map(Timestamp::to_iso_z),
                    })
                })
                .collect();
            Response::json(200, &json!({ "sessions": sessions }))
        }
        ("GET", ["_fake", "approvals"]) => Response::json(200, &json!({ "approvals": server.approvals() })),
        ("POST", ["_fake", "approvals", id, action @ ("approve" | "decline")]) => {
            let comment = body.get("comment").and_then(Value::as_str);
            match server.decide(id, *action == "approve", comment) {
                Ok(v) => Response::json(200, &v),
                Err((status, v)) => Response::json(status, &v),
            }
        }
        _ => detail(404, "Not Found"),
    }
}

// ===================================================================
// The public server handle
// ===================================================================

/// A running fake Preloop server on `127.0.0.1`. Dropping it stops the
/// server and releases every connection (hung ones included).
///
/// ```no_run
/// use preloop_testkit::FakeServer;
/// let server = FakeServer::start();
/// let note = server.send_note(serde_json::json!({"agent_id": server.agent_id(), "text": "run the tests"}));
/// // ... point a hook at server.url() with server.runtime_token() ...
/// assert_eq!(server.receipt(note["note_id"].as_str().unwrap())["state"], "pending");
/// ```
pub struct FakeServer {
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// Borrowed view used by the control routes to reuse the public API.
struct FakeServerRef<'a>(&'a Shared);

impl FakeServer {
    /// Start on an ephemeral port. Panics if loopback cannot be bound.
    pub fn start() -> FakeServer {
        FakeServer::start_on(0).expect("bind 127.0.0.1:0")
    }

    /// Start on `127.0.0.1:port` (0 = ephemeral). The default world: one
    /// account, its registrant "Hook Operator" (`hookoperator`) with a
    /// personal API key and a JWT, and one managed agent ("Hook agent",
    /// `claude_code`) with a durable `agt_` credential.
    pub fn start_on(port: u16) -> io::Result<FakeServer> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let addr = listener.local_addr()?;
        let mut st = State::new();
        let u = st.add_account("hookoperator", "Hook Operator");
        let account_id = st.users[u].account_id.clone();
        let agent = new_agent(&mut st, &account_id, "Hook agent", "claude_code");
        let user = user_handle(&st, u);
        let shared = Arc::new(Shared {
            state: Mutex::new(st),
            decided: Condvar::new(),
            stopping: AtomicBool::new(false),
            stop_lock: Mutex::new(()),
            stop_cv: Condvar::new(),
            faults: Mutex::new(Vec::new()),
            log: Mutex::new(VecDeque::new()),
            log_seq: AtomicU64::new(0),
            bus: Mutex::new(Vec::new()),
            logging: AtomicBool::new(true),
            conns: Mutex::new(HashMap::new()),
            conn_seq: AtomicU64::new(0),
            addr,
            primary_user: user,
            primary_agent: agent,
        });
        let accept_shared = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("preloop-fake-accept".into())
            .spawn(move || accept_loop(listener, accept_shared))?;
        Ok(FakeServer { shared, accept: Some(accept) })
    }

    /// `http://127.0.0.1:PORT` (no `/api/v1`, no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// `http://127.0.0.1:PORT/api/v1`.
    pub fn api_base(&self) -> String {
        format!("{}/api/v1", self.url())
    }

    pub fn port(&self) -> u16 {
        self.shared.addr.port()
    }

    /// The default agent's durable runtime credential (`agt_` + 43).
    pub fn runtime_token(&self) -> String {
        self.shared.primary_agent.runtime_token.clone()
    }

    /// The primary user's personal API key (40 letters/digits).
    pub fn user_token(&self) -> String {
        self.shared.primary_user.user_token.clone()
    }

    /// The primary user's JWT-shaped access token.
    pub fn user_jwt(&self) -> String {
        self.shared.primary_user.user_jwt.clone()
    }

    pub fn agent_id(&self) -> String {
        self.shared.primary_agent.agent_id.clone()
    }

    pub fn account_id(&self) -> String {
        self.shared.primary_user.account_id.clone()
    }

    pub fn user_id(&self) -> String {
        self.shared.primary_user.user_id.clone()
    }

    /// The default agent as a handle.
    pub fn agent(&self) -> AgentHandle {
        self.shared.primary_agent.clone()
    }

    /// What the binary prints: `{"url", "runtime_token", "user_token",
    /// "agent_id", ...}`.
    pub fn info(&self) -> Value {
        self.shared.info()
    }

    /// Send a note as the primary user (auth `api_key`) through the same code
    /// path as `POST /api/v1/operator-notes`. Panics unless it answers 201.
    pub fn send_note(&self, body: Value) -> Value {
        match self.try_send_note(body) {
            Ok(v) => v,
            Err((status, v)) => panic!("send_note answered {status}: {v}"),
        }
    }

    /// Like [`FakeServer::send_note`], returning the error status and body.
    pub fn try_send_note(&self, body: Value) -> Result<Value, (u16, Value)> {
        FakeServerRef(&self.shared).try_send_note(body)
    }

    /// The receipt (`GET /api/v1/operator-notes/{id}`, lazy expiry included).
    /// Panics if the note does not exist.
    pub fn receipt(&self, note_id: &str) -> Value {
        self.try_receipt(note_id).unwrap_or_else(|| panic!("no note {note_id}"))
    }

    pub fn try_receipt(&self, note_id: &str) -> Option<Value> {
        FakeServerRef(&self.shared).try_receipt(note_id)
    }

    /// Add a fault (faults are matched in the order they were added).
    pub fn set_fault(&self, fault: FaultSpec) {
        relock(self.shared.faults.lock()).push(fault);
    }

    pub fn clear_faults(&self) {
        relock(self.shared.faults.lock()).clear();
    }

    /// The faults still armed.
    pub fn faults(&self) -> Vec<FaultSpec> {
        relock(self.shared.faults.lock()).clone()
    }

    /// The recorded requests, oldest first (the last
    /// [`MAX_RECORDED_REQUESTS`]; control routes are never recorded).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        relock(self.shared.log.lock()).iter().cloned().collect()
    }

    /// Turn the request log on (default) or off.
    pub fn set_request_logging(&self, on: bool) {
        self.shared.logging.store(on, Ordering::Relaxed);
    }

    pub fn clear_requests(&self) {
        relock(self.shared.log.lock()).clear();
    }

    /// How long an escalated permission-check blocks before `deny`,
    /// `Approval request timed out`, `timed_out: true` (default 302 s: the
    /// 300 s workflow + the 2 s poll). Agents pinned to a workflow use its
    /// `timeout_seconds` + 2 s instead, like the server.
    pub fn set_approval_timeout(&self, timeout: Duration) {
        FakeServerRef(&self.shared).set_approval_timeout(timeout);
    }

    /// Send rate limit per (author, agent) per rolling hour; `None` disables
    /// it (the server's is 20).
    pub fn set_rate_limit(&self, per_hour: Option<u32>) {
        FakeServerRef(&self.shared).set_rate_limit(per_hour);
    }

    /// Every approval request (all accounts), newest first.
    pub fn approvals(&self) -> Vec<Value> {
        FakeServerRef(&self.shared).approvals()
    }

    /// Approve or decline a pending approval (wakes the blocked
    /// permission-check). Errors are the API's: 404, or 400 `Request already
    /// <status>`.
    pub fn decide(&self, approval_id: &str, approve: bool, comment: Option<&str>) -> Result<Value, (u16, Value)> {
        FakeServerRef(&self.shared).decide(approval_id, approve, comment)
    }

    /// A new managed agent with a durable credential, in the primary account.
    pub fn add_agent(&self, display_name: &str) -> AgentHandle {
        let mut st = self.shared.lock();
        new_agent(&mut st, &self.shared.primary_user.account_id, display_name, "claude_code")
    }

    /// Another durable credential for an existing agent (any account).
    pub fn add_token(&self, agent_id: &str) -> Option<String> {
        FakeServerRef(&self.shared).add_token_handle(agent_id).map(|h| h.runtime_token)
    }

    /// Deactivate a credential: `401 API key is inactive`.
    pub fn revoke_token(&self, token: &str) -> bool {
        FakeServerRef(&self.shared).revoke_token(token)
    }

    /// Expire a credential now: `401 API key has expired`.
    pub fn expire_token(&self, token: &str) -> bool {
        FakeServerRef(&self.shared).expire_token(token)
    }

    /// Suspend (`false`) or reactivate an agent: `401 Managed agent is not active`.
    pub fn set_agent_active(&self, agent_id: &str, active: bool) -> bool {
        FakeServerRef(&self.shared).set_agent_active(agent_id, active)
    }

    /// `PUT /agents/{id}/governance {"native_tool_approvals": "off"}`.
    pub fn set_native_tool_approvals(&self, agent_id: &str, off: bool) -> bool {
        FakeServerRef(&self.shared).set_native_tool_approvals(agent_id, off)
    }

    /// An agent tool configuration in the primary account; disabled =
    /// `deny`, `Tool blocked in Preloop`.
    pub fn set_tool_enabled(&self, tool_name: &str, enabled: bool) {
        FakeServerRef(&self.shared).set_tool_enabled(tool_name, enabled);
    }

    /// Move a note's `expires_at` to now (any account). Its state stays as
    /// it is until a receipt read, the list or an ack (lazy expiry, §8).
    pub fn expire_note_now(&self, note_id: &str) -> bool {
        FakeServerRef(&self.shared).expire_note_now(note_id)
    }

    /// The runtime session id session-start registered for this agent and
    /// harness session id, if any.
    pub fn runtime_session_id(&self, agent_id: &str, external_session_id: &str) -> Option<String> {
        let st = self.shared.lock();
        let a = st.agent_by_id(agent_id)?;
        let key = format!("{}:{}", st.agents[a].principal_id, external_session_id.trim());
        st.sessions.iter().find(|s| s.agent_id.as_deref() == Some(agent_id) && s.source_id == key).map(|s| s.id.clone())
    }

    /// Another user in the primary account; `primary: false` users get 403
    /// on the note routes (roles are not seeded, §2.2).
    pub fn add_user(&self, primary: bool) -> UserHandle {
        FakeServerRef(&self.shared).add_user(primary)
    }

    /// A second (third...) account with its registrant and one agent.
    pub fn add_account(&self) -> AccountHandle {
        FakeServerRef(&self.shared).add_account()
    }

    /// Stop now (the same as dropping it).
    pub fn stop(self) {}

    // ----- what the hook tests ask of the fake, once ---------------------------

    /// Send a note to one harness session (by its own id) as the default
    /// operator; the note id.
    pub fn send_to_session(&self, session: &str, text: &str) -> String {
        let r = self.send_note(json!({"external_session_id": session, "text": text}));
        r["note_id"].as_str().unwrap_or_else(|| panic!("no note id in {r}")).to_string()
    }

    /// A note's receipt as `(state, delivery_event, undeliverable_reason)`.
    pub fn note_state(&self, note_id: &str) -> (String, Option<String>, Option<String>) {
        let r = self.receipt(note_id);
        let s = |k: &str| r[k].as_str().map(str::to_string);
        (s("state").unwrap_or_else(|| panic!("no state in {r}")), s("delivery_event"), s("undeliverable_reason"))
    }

    /// The hook routes (`/api/v1/agents/<route>`) the fake saw, in order, as
    /// `(route, body)`.
    pub fn hook_calls(&self) -> Vec<(String, Value)> {
        self.requests()
            .into_iter()
            .filter_map(|r| Some((r.path.strip_prefix("/api/v1/agents/")?.to_string(), r.body.unwrap_or(Value::Null))))
            .collect()
    }

    /// The routes of [`FakeServer::hook_calls`].
    pub fn hook_routes(&self) -> Vec<String> {
        self.hook_calls().into_iter().map(|(r, _)| r).collect()
    }

    /// The body of the first call to a hook route, or a panic naming it.
    pub fn hook_call(&self, route: &str) -> Value {
        self.hook_calls()
            .into_iter()
            .find(|(r, _)| r == route)
            .unwrap_or_else(|| panic!("no {route} call among {:?}", self.hook_routes()))
            .1
    }
}

impl FakeServerRef<'_> {
    fn try_send_note(&self, body: Value) -> Result<Value, (u16, Value)> {
        let Value::Object(map) = body else {
            return Err((422, json!({"detail": "body must be a JSON object"})));
        };
        let mut st = self.0.lock();
        let user = self.0.primary_context(&st);
        let resp = routes::send_note(&mut st, &user, &map);
        let v: Value = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
        if resp.status == 201 { Ok(v) } else { Err((resp.status, v)) }
    }

    fn try_receipt(&self, note_id: &str) -> Option<Value> {
        let mut st = self.0.lock();
        let account = st.notes.iter().find(|n| n.note_id == note_id)?.account_id.clone();
        let resp = routes::receipt(&mut st, &account, note_id);
        serde_json::from_slice(&resp.body).ok()
    }

    fn set_approval_timeout(&self, timeout: Duration) {
        self.0.lock().approval_wait = timeout;
    }

    fn set_rate_limit(&self, per_hour: Option<u32>) {
        self.0.lock().rate_limit = per_hour;
    }

    fn approvals(&self) -> Vec<Value> {
        let mut st = self.0.lock();
        let accounts: Vec<String> = st.approvals.iter().map(|a| a.account_id.clone()).collect();
        for a in accounts {
            st.expire_stale_approvals(&a);
        }
        let mut idxs: Vec<usize> = (0..st.approvals.len()).collect();
        idxs.sort_by_key(|i| std::cmp::Reverse((st.approvals[*i].requested_at, *i)));
        idxs.into_iter().map(|i| st.approval_view(i)).collect()
    }

    fn decide(&self, approval_id: &str, approve: bool, comment: Option<&str>) -> Result<Value, (u16, Value)> {
        let mut st = self.0.lock();
        let account = match st.approvals.iter().find(|a| a.id == approval_id) {
            Some(a) => a.account_id.clone(),
            None => return Err((404, json!({"detail": "Approval request not found"}))),
        };
        match st.decide(&account, approval_id, approve, comment.map(str::to_string)) {
            Ok(i) => {
                let v = st.approval_view(i);
                drop(st);
                self.0.notify_decision();
                Ok(v)
            }
            Err(resp) => Err((resp.status, serde_json::from_slice(&resp.body).unwrap_or(Value::Null))),
        }
    }

    fn add_token_handle(&self, agent_id: &str) -> Option<AgentHandle> {
        let mut st = self.0.lock();
        let a = st.agent_by_id(agent_id)?;
        let account = st.agents[a].account_id.clone();
        let owner = st.primary_user_of(&account).map(|u| st.users[u].id.clone()).unwrap_or_default();
        let c = st.add_credential(a, &owner, "hooks", 365);
        Some(agent_handle(&st, a, c))
    }

    fn revoke_token(&self, token: &str) -> bool {
        let mut st = self.0.lock();
        match st.credentials.iter_mut().find(|c| c.token == token) {
            Some(c) => {
                c.active = false;
                true
            }
            None => false,
        }
    }

    fn expire_token(&self, token: &str) -> bool {
        let mut st = self.0.lock();
        match st.credentials.iter_mut().find(|c| c.token == token) {
            Some(c) => {
                c.expires_at = Some(Timestamp::now());
                true
            }
            None => false,
        }
    }

    fn set_agent_active(&self, agent_id: &str, active: bool) -> bool {
        let mut st = self.0.lock();
        match st.agent_by_id(agent_id) {
            Some(a) => {
                st.agents[a].lifecycle_state = if active { "active".into() } else { "suspended".into() };
                true
            }
            None => false,
        }
    }

    fn set_native_tool_approvals(&self, agent_id: &str, off: bool) -> bool {
        let mut st = self.0.lock();
        match st.agent_by_id(agent_id) {
            Some(a) => {
                st.agents[a].approvals_off = off;
                true
            }
            None => false,
        }
    }

    fn set_tool_enabled(&self, tool_name: &str, enabled: bool) {
        let mut st = self.0.lock();
        let account = self.0.primary_user.account_id.clone();
        match st
            .tool_configs
            .iter_mut()
            .find(|t| t.account_id == account && t.tool_name == tool_name && t.tool_source == "agent")
        {
            Some(t) => t.is_enabled = enabled,
            None => st.tool_configs.push(crate::state::ToolConfig {
                id: crate::ids::uuid4(),
                account_id: account,
                tool_name: tool_name.to_string(),
                tool_source: "agent".into(),
                is_enabled: enabled,
            }),
        }
    }

    fn expire_note_now(&self, note_id: &str) -> bool {
        let mut st = self.0.lock();
        match st.notes.iter_mut().find(|n| n.note_id == note_id) {
            Some(n) => {
                n.expires_at = Timestamp::now();
                true
            }
            None => false,
        }
    }

    fn add_user(&self, primary: bool) -> UserHandle {
        let mut st = self.0.lock();
        let n = st.users.len() + 1;
        let u = st.add_user(&self.0.primary_user.account_id, &format!("user{n}"), &format!("User {n}"), primary);
        user_handle(&st, u)
    }

    fn add_account(&self) -> AccountHandle {
        let mut st = self.0.lock();
        let n = st.users.len() + 1;
        new_account(&mut st, n)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        let shared = &self.shared;
        shared.stopping.store(true, Ordering::SeqCst);
        {
            let _g = relock(shared.stop_lock.lock());
            shared.stop_cv.notify_all();
        }
        {
            let _g = shared.lock();
            shared.decided.notify_all();
        }
        // Wake the accept loop, then release every open connection.
        let _ = TcpStream::connect_timeout(&shared.addr, Duration::from_millis(500));
        for (_, conn) in relock(shared.conns.lock()).drain() {
            let _ = conn.shutdown(std::net::Shutdown::Both);
        }
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Unregisters a connection when its thread ends, however it ends.
struct ConnGuard<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for ConnGuard<'_> {
    fn drop(&mut self) {
        relock(self.shared.conns.lock()).remove(&self.id);
    }
}

/// The attach socket (§5.9): the 101 answer, then the socket on its own.
fn attach(shared: &Arc<Shared>, req: &Request) -> Outcome {
    let seq = shared.record(req);
    let Some((resp, first, refuse)) = routes::runtime_sessions::attach(shared, req) else {
        shared.finish(seq, Some(400), None);
        return Outcome::Respond(detail(400, "Missing Sec-WebSocket-Key"));
    };
    shared.finish(seq, Some(101), None);
    let session_id = first.get("runtime_session_id").and_then(Value::as_str).unwrap_or("").to_string();
    let sh = Arc::clone(shared);
    Outcome::Upgrade(
        resp,
        Box::new(move |stream| {
            let bus = |from: usize| {
                let b = relock(sh.bus.lock());
                if from == usize::MAX { (b.len(), Vec::new()) } else { (b.len(), b[from.min(b.len())..].to_vec()) }
            };
            let stopping = || sh.is_stopping();
            routes::runtime_sessions::serve_socket(stream, first, refuse, session_id, &bus, &stopping);
        }),
    )
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for incoming in listener.incoming() {
        if shared.is_stopping() {
            break;
        }
        let stream = match incoming {
            Ok(s) => s,
            Err(_) => {
                // EMFILE and friends: back off briefly instead of spinning.
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
        };
        let id = shared.conn_seq.fetch_add(1, Ordering::SeqCst);
        if let Ok(clone) = stream.try_clone() {
            relock(shared.conns.lock()).insert(id, clone);
        }
        let conn_shared = Arc::clone(&shared);
        let spawned = std::thread::Builder::new().name("preloop-fake-conn".into()).spawn(move || {
            let shared = conn_shared;
            let _guard = ConnGuard { shared: &shared, id };
            let stopping = || shared.is_stopping();
            let wait_stop = |d: Duration| shared.sleep(d);
            let mut handler = |req: &Request| {
                if routes::runtime_sessions::is_attach(req) {
                    return attach(&shared, req);
                }
                handle(&shared, req)
            };
            http::serve_connection(stream, &stopping, &wait_stop, &mut handler);
        });
        if spawned.is_err() {
            relock(shared.conns.lock()).remove(&id);
        }
    }
}
