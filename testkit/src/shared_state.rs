//! The fake server's state shared by its connection threads ([`Shared`])
//! and the test-control types it records and applies ([`FaultSpec`],
//! [`RecordedRequest`], the handles of agents, users and accounts). Below
//! both `fake_server` (the listener and the test API) and `routes` (the
//! handlers), which each take `&Shared`.

use crate::http::Request;
use crate::state::{State, UserContext};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

// ===================================================================
// Public test-control types
// ===================================================================

/// What a fault does to a matching request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultAction {
    /// Answer normally (after `delay_ms`): a pure delay.
    #[default]
    None,
    /// Answer this status and JSON body (default `{"detail": "<reason
    /// phrase>"}`), with an optional `Retry-After` header.
    Status {
        status: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after: Option<String>,
    },
    /// Accept the request and never answer, until the client gives up or
    /// the server stops.
    Hang,
    /// Close the connection without answering.
    Close,
    /// 200 with `content-type: application/json` and a body that is not
    /// JSON (default `<html>not json</html>`).
    Garbage {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<String>,
    },
    /// 200 with a JSON body of exactly `bytes` bytes (`{"pad":"xxxx..."}`,
    /// at most 512 MiB).
    Huge { bytes: usize },
}

/// One injected fault. JSON form (for `POST /_fake/faults`):
/// `{"path": "/api/v1/agents/notes/pending", "action": {"kind": "status",
/// "status": 503, "retry_after": "1"}, "times": 1}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct FaultSpec {
    /// The request path it applies to: exact (`/api/v1/agents/notes/pending`),
    /// a prefix ending in `*` (`/api/v1/agents/*`), or absent for every route.
    #[serde(default)]
    pub path: Option<String>,
    /// Only this method (`POST`), or absent for any.
    #[serde(default)]
    pub method: Option<String>,
    /// Wait this long before acting (no sleep at all when 0).
    #[serde(default)]
    pub delay_ms: u64,
    #[serde(default)]
    pub action: FaultAction,
    /// Only the next N matching requests; absent = until cleared.
    #[serde(default)]
    pub times: Option<u32>,
    /// Run the real handler first (its state changes happen: a claim is
    /// made, a note is sent), then replace its answer by the action: "the
    /// server did it but the response was lost".
    #[serde(default)]
    pub after_handling: bool,
}

impl FaultSpec {
    /// A fault on every route (configure it with the builder methods).
    pub fn all() -> FaultSpec {
        FaultSpec::default()
    }

    /// A fault on one path (exact, or a prefix ending in `*`).
    pub fn route(path: &str) -> FaultSpec {
        FaultSpec { path: Some(path.to_string()), ..FaultSpec::default() }
    }

    pub fn method(mut self, method: &str) -> FaultSpec {
        self.method = Some(method.to_ascii_uppercase());
        self
    }

    pub fn status(mut self, status: u16, body: Option<Value>) -> FaultSpec {
        let retry_after = match &self.action {
            FaultAction::Status { retry_after, .. } => retry_after.clone(),
            _ => None,
        };
        self.action = FaultAction::Status { status, body, retry_after };
        self
    }

    /// Add `Retry-After` to a status fault (makes it a 503 if it was not one).
    pub fn retry_after(mut self, value: &str) -> FaultSpec {
        self.action = match self.action {
            FaultAction::Status { status, body, .. } => {
                FaultAction::Status { status, body, retry_after: Some(value.into()) }
            }
            _ => FaultAction::Status { status: 503, body: None, retry_after: Some(value.into()) },
        };
        self
    }

    pub fn delay(mut self, delay: Duration) -> FaultSpec {
        self.delay_ms = delay.as_millis() as u64;
        self
    }

    pub fn hang(mut self) -> FaultSpec {
        self.action = FaultAction::Hang;
        self
    }

    pub fn close(mut self) -> FaultSpec {
        self.action = FaultAction::Close;
        self
    }

    pub fn garbage(mut self) -> FaultSpec {
        self.action = FaultAction::Garbage { body: None };
        self
    }

    pub fn huge(mut self, bytes: usize) -> FaultSpec {
        self.action = FaultAction::Huge { bytes };
        self
    }

    /// Only the next `n` matching requests.
    pub fn times(mut self, n: u32) -> FaultSpec {
        self.times = Some(n);
        self
    }

    pub fn after_handling(mut self) -> FaultSpec {
        self.after_handling = true;
        self
    }

    pub(crate) fn matches(&self, req: &Request) -> bool {
        let path_ok = match &self.path {
            None => true,
            Some(p) => match p.strip_suffix('*') {
                Some(prefix) => req.path.starts_with(prefix),
                None => req.path == *p,
            },
        };
        path_ok && self.method.as_deref().is_none_or(|m| m.eq_ignore_ascii_case(&req.method))
    }

    pub(crate) fn label(&self) -> String {
        match &self.action {
            FaultAction::None => format!("delay {}ms", self.delay_ms),
            FaultAction::Status { status, .. } => format!("status {status}"),
            FaultAction::Hang => "hang".into(),
            FaultAction::Close => "close".into(),
            FaultAction::Garbage { .. } => "garbage".into(),
            FaultAction::Huge { bytes } => format!("huge {bytes}"),
        }
    }
}

/// One request as the fake saw it (control routes under `/_fake/` are not
/// recorded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// 1, 2, 3... in arrival order.
    pub seq: u64,
    pub method: String,
    pub path: String,
    /// The raw query string, possibly empty.
    pub query: String,
    /// Lower-cased names; the `authorization` value is replaced by its scheme
    /// and `[redacted]`.
    pub headers: Vec<(String, String)>,
    /// The kind of bearer token presented, by shape: `runtime` (`agt_`/
    /// `flow_`), `jwt` (contains `.`), `api_key` (40 letters/digits), `other`;
    /// `None` without a bearer token.
    pub token_kind: Option<String>,
    /// The body as JSON; a non-JSON body as a string; `None` when empty.
    pub body: Option<Value>,
    /// The status answered, `None` while in flight, for a hang or a close.
    pub status: Option<u16>,
    /// The fault applied, if any (`status 503`, `hang`, `delay 200ms`...).
    pub fault: Option<String>,
    /// When the fake had read the request (not serialized: `None` in a
    /// copy from the control routes). A test that times a client's polls
    /// reads this, not when its own sampling loop noticed them.
    #[serde(skip)]
    pub at: Option<Instant>,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
    }
}

/// A managed agent and one durable credential for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentHandle {
    pub agent_id: String,
    pub runtime_token: String,
    pub credential_id: String,
    /// The agent's runtime principal id (`custom_<22>`).
    pub session_source_id: String,
    pub account_id: String,
}

/// A user and its two credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserHandle {
    pub user_id: String,
    pub account_id: String,
    /// Personal API key (40 letters/digits): notes sent with it say `api_key`.
    pub user_token: String,
    /// JWT-shaped access token: notes sent with it say `jwt`.
    pub user_jwt: String,
    /// The account's registrant (only a primary user may send notes).
    pub primary: bool,
}

/// A whole second account: its registrant and one agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountHandle {
    pub account_id: String,
    pub user: UserHandle,
    pub agent: AgentHandle,
}

// ===================================================================
// Shared server state
// ===================================================================

/// The request log keeps the most recent this many requests.
pub const MAX_RECORDED_REQUESTS: usize = 10_000;

pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    /// Signalled on approval decisions and on stop (paired with `state`).
    pub(crate) decided: Condvar,
    pub(crate) stopping: AtomicBool,
    pub(crate) stop_lock: Mutex<()>,
    pub(crate) stop_cv: Condvar,
    pub(crate) faults: Mutex<Vec<FaultSpec>>,
    pub(crate) log: Mutex<VecDeque<RecordedRequest>>,
    pub(crate) log_seq: AtomicU64,
    /// The realtime event bus the attach socket relays (§5.9): only what a
    /// test publishes (`POST /_fake/sessions/{id}/events`).
    pub(crate) bus: Mutex<Vec<Value>>,
    /// Whether requests are recorded at all (a benchmark may turn it off).
    pub(crate) logging: AtomicBool,
    pub(crate) conns: Mutex<HashMap<u64, TcpStream>>,
    pub(crate) conn_seq: AtomicU64,
    pub(crate) addr: SocketAddr,
    pub(crate) primary_user: UserHandle,
    pub(crate) primary_agent: AgentHandle,
}

pub(crate) fn relock<T>(r: std::sync::LockResult<MutexGuard<'_, T>>) -> MutexGuard<'_, T> {
    r.unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        relock(self.state.lock())
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Wait (releasing the state lock) for an approval decision or stop.
    pub(crate) fn wait_decision<'a>(
        &'a self,
        guard: MutexGuard<'a, State>,
        timeout: Duration,
    ) -> MutexGuard<'a, State> {
        match self.decided.wait_timeout(guard, timeout) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        }
    }

    pub(crate) fn notify_decision(&self) {
        self.decided.notify_all();
    }

    /// Sleep up to `d`, returning early when the server stops.
    pub(crate) fn sleep(&self, d: Duration) {
        let deadline = Instant::now() + d;
        let mut g = relock(self.stop_lock.lock());
        while !self.is_stopping() {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            g = match self.stop_cv.wait_timeout(g, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }

    pub(crate) fn take_fault(&self, req: &Request) -> Option<FaultSpec> {
        let mut faults = relock(self.faults.lock());
        let i = faults.iter().position(|f| f.matches(req))?;
        let spec = faults[i].clone();
        if let Some(n) = faults[i].times.as_mut() {
            *n = n.saturating_sub(1);
            if *n == 0 {
                faults.remove(i);
            }
        }
        Some(spec)
    }

    pub(crate) fn record(&self, req: &Request) -> u64 {
        let seq = self.log_seq.fetch_add(1, Ordering::SeqCst) + 1;
        if !self.logging.load(Ordering::Relaxed) {
            return seq;
        }
        let mut token_kind = None;
        let headers = req
            .headers
            .iter()
            .map(|(k, v)| {
                if k == "authorization" {
                    let (scheme, token) = v.split_once(' ').unwrap_or((v.as_str(), ""));
                    let token = token.trim();
                    if scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() {
                        token_kind = Some(
                            if token.starts_with("agt_") || token.starts_with("flow_") {
                                "runtime"
                            } else if token.contains('.') {
                                "jwt"
                            } else if token.len() == 40 && token.chars().all(|c| c.is_ascii_alphanumeric()) {
                                "api_key"
                            } else {
                                "other"
                            }
                            .to_string(),
                        );
                    }
                    (k.clone(), format!("{scheme} [redacted]"))
                } else {
                    (k.clone(), v.clone())
                }
            })
            .collect();
        let body = if req.body.is_empty() {
            None
        } else {
            Some(
                serde_json::from_slice::<Value>(&req.body)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&req.body).into_owned())),
            )
        };
        let mut log = relock(self.log.lock());
        if log.len() >= MAX_RECORDED_REQUESTS {
            log.pop_front();
        }
        log.push_back(RecordedRequest {
            seq,
            method: req.method.clone(),
            path: req.path.clone(),
            query: req.query.clone(),
            headers,
            token_kind,
            body,
            status: None,
            fault: None,
            at: Some(Instant::now()),
        });
        seq
    }

    pub(crate) fn finish(&self, seq: u64, status: Option<u16>, fault: Option<String>) {
        let mut log = relock(self.log.lock());
        if let Some(r) = log.iter_mut().rev().find(|r| r.seq == seq) {
            r.status = status;
            r.fault = fault;
        }
    }

    pub(crate) fn info(&self) -> Value {
        let url = format!("http://{}", self.addr);
        json!({
            "url": url,
            "api_base": format!("{url}/api/v1"),
            "runtime_token": self.primary_agent.runtime_token,
            "user_token": self.primary_user.user_token,
            "user_jwt": self.primary_user.user_jwt,
            "agent_id": self.primary_agent.agent_id,
            "credential_id": self.primary_agent.credential_id,
            "session_source_id": self.primary_agent.session_source_id,
            "account_id": self.primary_user.account_id,
            "user_id": self.primary_user.user_id,
        })
    }

    /// The primary user of the primary account, authenticated by API key.
    pub(crate) fn primary_context(&self, st: &State) -> UserContext {
        let u = st.users.iter().position(|u| u.id == self.primary_user.user_id).unwrap_or(0);
        UserContext {
            user_idx: u,
            account_id: self.primary_user.account_id.clone(),
            user_id: self.primary_user.user_id.clone(),
            primary: true,
            auth_method: "api_key".into(),
        }
    }
}
