//! The operator's side of the Preloop server: the human routes (contract §5)
//! with a user credential (personal API key or JWT), over ureq.
//!
//! | command | route |
//! |---|---|
//! | `notes send` | `POST /api/v1/operator-notes` |
//! | `notes list` | `GET /api/v1/operator-notes?runtime_session_id=…|agent_id=…[&state=…]` |
//! | `notes status` | `GET /api/v1/operator-notes/{id}` |
//! | `notes cancel` | `POST /api/v1/operator-notes/{id}/cancel` |
//! | `sessions list --agent` | `GET /api/v1/operator-notes/session-targets?agent_id=…` |
//!
//! The token is sent only to the configured origin (no redirects) and never
//! printed; errors carry the server's `detail`.

use preloop_shared::config::{Config, Secret};
use preloop_shared::operator::Receipt;
use preloop_shared::{Error, Result};
use serde_json::{Value, json};
use std::time::Duration;

const MAX_BODY: u64 = 4 << 20;

pub struct ServerOperator {
    pub base: String,
    token: Secret,
    agent: ureq::Agent,
    timeout: Duration,
}

/// A note's target on the server (exactly one).
#[derive(Debug, Clone)]
pub enum ServerTarget {
    ExternalSession(String),
    Alias(String),
    RuntimeSession(String),
    Agent { agent_id: String, next_session: bool },
}

impl ServerOperator {
    pub fn new(base: &str, token: Secret, connect_timeout: Duration, timeout: Duration) -> ServerOperator {
        let agent = ureq::Agent::config_builder()
            .timeout_connect(Some(connect_timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!("preloop-hooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        ServerOperator { base: preloop_shared::config::normalize_url(base), token, agent, timeout }
    }

    /// The operator for this config: `None` in local mode (no server URL);
    /// an error when a server is configured but no user token is.
    pub fn from_config(config: &Config) -> Result<Option<ServerOperator>> {
        let Some((url, _)) = &config.url else { return Ok(None) };
        let Some((token, _)) = config.user_token.clone() else {
            return Err(Error::Config(format!(
                "server mode ({url}) needs a user token (personal API key or JWT) for operator commands: run `preloop-hooks login --user`, or set PRELOOP_USER_TOKEN"
            )));
        };
        Ok(Some(ServerOperator::new(
            url,
            token,
            Duration::from_millis(config.settings.connect_timeout_ms.max(1000)),
            Duration::from_secs(30),
        )))
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        route: &'static str,
    ) -> Result<(u16, Value)> {
        let mut url = format!("{}/api/v1/{path}", self.base);
        if !query.is_empty() {
            let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={}", pct(v))).collect();
            url.push('?');
            url.push_str(&q.join("&"));
        }
        let auth = format!("Bearer {}", self.token.expose());
        let resp = match (method, body) {
            ("GET", _) => self
                .agent
                .get(&url)
                .config()
                .timeout_global(Some(self.timeout))
                .build()
                .header("Authorization", &auth)
                .header("Accept", "application/json")
                .call(),
            (_, Some(b)) => self
                .agent
                .post(&url)
                .config()
                .timeout_global(Some(self.timeout))
                .build()
                .header("Authorization", &auth)
                .header("Accept", "application/json")
                .header("Content-Type", "application/json")
                .send(serde_json::to_vec(b).unwrap_or_default().as_slice()),
            (_, None) => self
                .agent
                .post(&url)
                .config()
                .timeout_global(Some(self.timeout))
                .build()
                .header("Authorization", &auth)
                .header("Accept", "application/json")
                .send_empty(),
        };
        let mut resp = resp.map_err(|e| Error::Unreachable { route, detail: describe(&e) })?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .map_err(|e| Error::Unreachable { route, detail: describe(&e) })?;
        let v: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text.clone()))
        };
        Ok((status, v))
    }

    fn ok(&self, route: &'static str, status: u16, v: Value) -> Result<Value> {
        if (200..300).contains(&status) {
            return Ok(v);
        }
        let reason = detail(&v);
        Err(match status {
            401 => Error::Config(format!(
                "the server rejected the user token (401: {reason}); run `preloop-hooks login --user`"
            )),
            403 => Error::Refused(format!("forbidden (403): {reason}")),
            404 => Error::NotFound(format!("{reason} (404)")),
            400 | 409 | 422 | 429 => Error::Refused(format!("the server refused ({status}): {reason}")),
            _ => Error::Status { route, status, detail: reason },
        })
    }

    fn receipt(route: &'static str, v: Value) -> Result<Receipt> {
        serde_json::from_value(v.clone())
            .map_err(|e| Error::Protocol { route, detail: format!("{e} in {}", excerpt(&v.to_string())) })
    }

    pub fn send(&self, text: &str, target: &ServerTarget, expires_in_secs: Option<i64>) -> Result<Receipt> {
        let mut body = json!({"text": text});
        match target {
            ServerTarget::ExternalSession(s) => body["external_session_id"] = json!(s),
            ServerTarget::Alias(a) => body["alias"] = json!(a),
            ServerTarget::RuntimeSession(r) => body["runtime_session_id"] = json!(r),
            ServerTarget::Agent { agent_id, next_session } => {
                body["agent_id"] = json!(agent_id);
                if *next_session {
                    body["next_session"] = json!(true);
                }
            }
        }
        if let Some(s) = expires_in_secs {
            body["expires_in_seconds"] = json!(s);
        }
        let (st, v) = self.call("POST", "operator-notes", &[], Some(&body), "operator-notes")?;
        let v = self.ok("operator-notes", st, v)?;
        Self::receipt("operator-notes", v)
    }

    pub fn list(&self, query: &[(&str, String)]) -> Result<Vec<Receipt>> {
        let (st, v) = self.call("GET", "operator-notes", query, None, "operator-notes list")?;
        let v = self.ok("operator-notes list", st, v)?;
        let notes = v.get("notes").and_then(Value::as_array).cloned().unwrap_or_default();
        notes.into_iter().map(|n| Self::receipt("operator-notes list", n)).collect()
    }

    pub fn get(&self, note_id: &str) -> Result<Receipt> {
        let (st, v) = self.call("GET", &format!("operator-notes/{}", pct(note_id)), &[], None, "operator-notes get")?;
        if st == 404 {
            return Err(Error::NotFound(format!("note {note_id} not found in this account ({})", detail(&v))));
        }
        let v = self.ok("operator-notes get", st, v)?;
        Self::receipt("operator-notes get", v)
    }

    pub fn cancel(&self, note_id: &str) -> Result<Receipt> {
        let (st, v) =
            self.call("POST", &format!("operator-notes/{}/cancel", pct(note_id)), &[], None, "operator-notes cancel")?;
        let v = self.ok("operator-notes cancel", st, v)?;
        Self::receipt("operator-notes cancel", v)
    }

    /// Live sessions of an agent: `{id, alias, session_source_type, started_at, session_reference}`.
    pub fn session_targets(&self, agent_id: &str) -> Result<Vec<Value>> {
        let (st, v) = self.call(
            "GET",
            "operator-notes/session-targets",
            &[("agent_id", agent_id.to_string())],
            None,
            "session-targets",
        )?;
        let v = self.ok("session-targets", st, v)?;
        Ok(v.get("sessions").and_then(Value::as_array).cloned().unwrap_or_default())
    }

    /// A cheap authenticated call: reading a note that cannot exist answers
    /// 404 when the token is accepted, 401/403 when not.
    pub fn probe(&self) -> Result<()> {
        let (st, v) = self.call("GET", "operator-notes/0000000000000000", &[], None, "operator-notes get")?;
        match st {
            200 | 404 => Ok(()),
            _ => self.ok("operator-notes get", st, v).map(|_| ()),
        }
    }
}

/// `GET /api/v1/health` (no auth): whether the server answers at all.
pub fn health(base: &str, timeout: Duration) -> Result<()> {
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .new_agent();
    let url = format!("{}/api/v1/health", preloop_shared::config::normalize_url(base));
    let resp = agent.get(&url).call().map_err(|e| Error::Unreachable { route: "health", detail: describe(&e) })?;
    let st = resp.status().as_u16();
    if st == 200 { Ok(()) } else { Err(Error::Status { route: "health", status: st, detail: "not healthy".into() }) }
}

/// A hook-route call with the runtime token that changes nothing: a
/// session-event for a session id no run uses (204 when the token is
/// accepted, 401 when not).
pub fn probe_runtime(base: &str, token: &Secret, timeout: Duration) -> Result<()> {
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .new_agent();
    let url = format!("{}/api/v1/agents/session-event", preloop_shared::config::normalize_url(base));
    let body = json!({"session_id": "preloop-doctor-probe", "hook_event_name": "Stop", "source": "preloop-doctor"});
    let mut resp = agent
        .post(&url)
        .header("Authorization", &format!("Bearer {}", token.expose()))
        .header("Content-Type", "application/json")
        .send(body.to_string().as_bytes())
        .map_err(|e| Error::Unreachable { route: "session-event", detail: describe(&e) })?;
    let st = resp.status().as_u16();
    let text = resp.body_mut().with_config().limit(MAX_BODY).read_to_string().unwrap_or_default();
    match st {
        200..=299 => Ok(()),
        401 | 403 => Err(Error::Config(format!(
            "the server rejected the runtime token ({st}: {})",
            detail(&serde_json::from_str(&text).unwrap_or(Value::String(text)))
        ))),
        _ => Err(Error::Status { route: "session-event", status: st, detail: excerpt(&text) }),
    }
}

/// The server's reason: `detail` as a string, an object's message/code, or
/// a validation list.
pub fn detail(v: &Value) -> String {
    match v.get("detail") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(o)) => o
            .get("message")
            .or_else(|| o.get("code"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| Value::Object(o.clone()).to_string()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|e| {
                let loc = e
                    .get("loc")
                    .and_then(Value::as_array)
                    .map(|l| {
                        l.iter().map(|x| x.to_string().trim_matches('"').to_string()).collect::<Vec<_>>().join(".")
                    })
                    .unwrap_or_default();
                format!("{loc}: {}", e.get("msg").and_then(Value::as_str).unwrap_or("invalid"))
            })
            .collect::<Vec<_>>()
            .join("; "),
        Some(other) => other.to_string(),
        None => match v {
            Value::String(s) => excerpt(s),
            Value::Null => "no details".into(),
            other => excerpt(&other.to_string()),
        },
    }
}

fn excerpt(s: &str) -> String {
    s.chars().take(300).collect::<String>().replace(['\n', '\r'], " ")
}

fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(t) => format!("timed out ({t})"),
        ureq::Error::Io(io) => format!("{:?}: {io}", io.kind()),
        other => other.to_string(),
    }
}

/// Percent-encode a query or path component.
pub fn pct(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
