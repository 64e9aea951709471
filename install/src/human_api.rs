//! The operator's side of the Preloop server: the human routes (docs/contracts/preloop-server.md §5)
//! with a user credential (personal API key or JWT), over the shared HTTP
//! layer (`preloop_shared::http`), with typed requests and answers
//! (`preloop_shared::operator`).
//!
//! | command | route |
//! |---|---|
//! | `notes send` | `POST /api/v1/operator-notes` |
//! | `notes list` | `GET /api/v1/operator-notes?runtime_session_id=…|agent_id=…|execution_id=…[&state=…]` |
//! | `notes status` | `GET /api/v1/operator-notes/{id}` |
//! | `notes cancel` | `POST /api/v1/operator-notes/{id}/cancel` |
//! | `sessions list` | `GET /api/v1/runtime-sessions?status&agent&agent_kind&alias&parent_session_id&flow_execution_id&start_date` |
//! | `sessions attach` | `GET /api/v1/runtime-sessions/{id}`, `…/{id}/activity`, the socket `/api/v1/ws/runtime-sessions/{id}` |
//!
//! The token is sent only to the configured origin (no redirects) and never
//! printed: every text a server sends is redacted (also JSON-escaped echoes)
//! before it reaches an error, and a body that is not JSON (an HTML page) is
//! never shown, only named ("does not look like a Preloop server").

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use preloop_shared::config::{Config, Secret};
use preloop_shared::http;
use preloop_shared::operator::{
    ActivityPage, AgentPage, ErrorBody, NoteList, Receipt, RuntimeSessionDetail, RuntimeSessionItem,
    RuntimeSessionPage, SendAnswer, SendNoteBody,
};
use preloop_shared::redact::redact;
use preloop_shared::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;

const MAX_BODY: u64 = 4 << 20;

/// Percent-encode everything but RFC 3986 unreserved characters.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Percent-encode a query or path component.
pub fn pct(s: &str) -> String {
    utf8_percent_encode(s, COMPONENT).to_string()
}

/// An HTTP client of the server's human routes, with the user's token (the
/// [`crate::operator::Operator`] over a server, `operator::server::Server`,
/// holds one).
pub struct HumanApi {
    pub base: String,
    token: Secret,
    /// Every secret a server answer must not show (the user token, the
    /// runtime token of this machine).
    secrets: Vec<Secret>,
    agent: ureq::Agent,
    timeout: Duration,
    /// The user token came from `PRELOOP_USER_TOKEN`, which wins over any
    /// login: a rejection names that one fix (newcomer 4, P15).
    token_from_env: bool,
}

/// One HTTP answer: status, content type, body text (already redacted).
struct Answer {
    status: u16,
    content_type: Option<String>,
    text: String,
}

impl HumanApi {
    pub fn new(
        base: &str,
        token: Secret,
        connect_timeout: Duration,
        timeout: Duration,
        proxy: Option<&http::ProxyUrl>,
    ) -> HumanApi {
        HumanApi {
            base: preloop_shared::config::normalize_url(base),
            secrets: vec![token.clone()],
            token,
            agent: http::agent(connect_timeout, false, proxy),
            timeout,
            token_from_env: false,
        }
    }

    /// The operator for this config: `None` in local mode (no server URL);
    /// an error when a server is configured but no user token is.
    pub fn from_config(config: &Config) -> Result<Option<HumanApi>> {
        let Some((url, origin)) = &config.url else { return Ok(None) };
        let Some((token, token_origin)) = config.user_token.clone() else {
            return Err(Error::Config(format!(
                "server mode ({url}, from {origin}) needs a user token (personal API key or JWT) for operator commands: run `preloop-hooks login --user`, or set PRELOOP_USER_TOKEN"
            )));
        };
        let mut op = HumanApi::new(
            url,
            token,
            Duration::from_millis(config.settings.connect_timeout_ms.max(1000)),
            Duration::from_secs(30),
            config.settings.proxy.as_ref(),
        );
        if let Some(s) = &config.server {
            op.secrets.push(s.token.clone());
        }
        op.token_from_env = matches!(token_origin, preloop_shared::config::TokenOrigin::Env);
        Ok(Some(op))
    }

    pub fn token(&self) -> &Secret {
        &self.token
    }

    /// Every secret a server answer must not show.
    pub fn secrets(&self) -> &[Secret] {
        &self.secrets
    }

    /// Remove every secret from a text a server produced.
    pub fn clean(&self, text: &str) -> String {
        let refs: Vec<&Secret> = self.secrets.iter().collect();
        redact(text, &refs)
    }

    fn url(&self, path: &str, query: &[(&str, String)]) -> String {
        let mut url = format!("{}/api/v1/{path}", self.base);
        if !query.is_empty() {
            let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={}", pct(v))).collect();
            url.push('?');
            url.push_str(&q.join("&"));
        }
        url
    }

    /// Every request: our deadline, the token, a JSON answer wanted.
    fn prepared<B>(&self, r: ureq::RequestBuilder<B>, auth: &str) -> ureq::RequestBuilder<B> {
        r.config()
            .timeout_global(Some(self.timeout))
            .build()
            .header("Authorization", auth)
            .header("Accept", "application/json")
    }

    fn call(&self, method: &str, path: &str, query: &[(&str, String)], body: Option<&[u8]>) -> Result<Answer> {
        let route = route_name(path);
        let url = self.url(path, query);
        let auth = format!("Bearer {}", self.token.expose());
        let resp = match (method, body) {
            ("GET", _) => self.prepared(self.agent.get(&url), &auth).call(),
            (_, Some(b)) => {
                self.prepared(self.agent.post(&url), &auth).header("Content-Type", "application/json").send(b)
            }
            (_, None) => self.prepared(self.agent.post(&url), &auth).send_empty(),
        };
        let mut resp = resp.map_err(|e| Error::Unreachable { route, detail: self.unreachable(&e) })?;
        let status = resp.status().as_u16();
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .map_err(|e| Error::Unreachable { route, detail: self.unreachable(&e) })?;
        Ok(Answer { status, content_type, text: self.clean(&text) })
    }

    fn unreachable(&self, e: &ureq::Error) -> String {
        format!("{} (is the server running at {}?)", self.clean(&http::describe(e)), self.base)
    }

    /// A 2xx answer parsed as `T`; anything else becomes the error that says
    /// what the server said (never an HTML page).
    fn parse<T: DeserializeOwned>(&self, method: &str, path: &str, a: Answer) -> Result<T> {
        let route = route_name(path);
        if !(200..300).contains(&a.status) {
            return Err(self.error(method, path, &a));
        }
        if !http::looks_like_json(&a.text) {
            return Err(Error::Protocol { route, detail: self.not_preloop(method, path, &a) });
        }
        serde_json::from_str(&a.text).map_err(|e| Error::Protocol {
            route,
            detail: format!("{} answered something we cannot read: {e}", self.base),
        })
    }

    /// The sentence for an answer to `method /api/v1/{path}` that is not
    /// JSON, so not from a Preloop server.
    fn not_preloop(&self, method: &str, path: &str, a: &Answer) -> String {
        http::not_preloop(&self.base, method, &format!("/api/v1/{path}"), a.status, a.content_type.as_deref())
    }

    fn error(&self, method: &str, path: &str, a: &Answer) -> Error {
        let route = route_name(path);
        if !http::looks_like_json(&a.text) {
            return Error::Status { route, status: a.status, detail: self.not_preloop(method, path, a) };
        }
        let reason = detail_text(&a.text);
        match a.status {
            401 if self.token_from_env => Error::Config(format!(
                "the server rejected the user token in PRELOOP_USER_TOKEN (401: {reason}); it wins over any login: unset it (`unset PRELOOP_USER_TOKEN`) to use the one `preloop-hooks login --user` stores, or set it to a valid one"
            )),
            401 => Error::Config(format!(
                "the server rejected the user token (401: {reason}); store a valid one with `preloop-hooks login --user`"
            )),
            403 => Error::Refused(format!("forbidden (403): {reason}")),
            404 => Error::NotFound(format!("{reason} (404)")),
            // The send rate limit: the line the local inbox gives too.
            429 if path == "operator-notes" => Error::Refused(preloop_shared::operator::rate_limited(&reason)),
            400 | 409 | 422 | 429 => Error::Refused(format!("the server refused ({}): {reason}", a.status)),
            _ => Error::Status { route, status: a.status, detail: reason },
        }
    }

    fn get<T: DeserializeOwned>(&self, path: &str, query: &[(&str, String)]) -> Result<T> {
        let a = self.call("GET", path, query, None)?;
        self.parse("GET", path, a)
    }

    fn post<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: Option<&B>) -> Result<T> {
        let bytes = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| Error::Protocol { route: route_name(path), detail: format!("encode: {e}") })?;
        let a = self.call("POST", path, &[], bytes.as_deref())?;
        self.parse("POST", path, a)
    }

    // ----- notes -----------------------------------------------------------

    /// Send one note; `children: "all"` answers one receipt per child.
    pub fn send(&self, body: &SendNoteBody) -> Result<Vec<Receipt>> {
        let a: SendAnswer = self.post("operator-notes", Some(body))?;
        Ok(a.into_vec())
    }

    pub fn list(&self, query: &[(&str, String)]) -> Result<Vec<Receipt>> {
        let l: NoteList = self.get("operator-notes", query)?;
        Ok(l.notes)
    }

    pub fn receipt(&self, note_id: &str) -> Result<Receipt> {
        let path = format!("operator-notes/{}", pct(note_id));
        let a = self.call("GET", &path, &[], None)?;
        if a.status == 404 && http::looks_like_json(&a.text) {
            // Preloop answers "Note not found" for an id this account does
            // not hold; any other 404 (a bare "Not Found") is a server
            // without this route.
            let why = detail_text(&a.text);
            return Err(Error::NotFound(if why.eq_ignore_ascii_case("note not found") {
                format!("note {note_id} not found in this account (404: {why})")
            } else {
                format!(
                    "note {note_id}: the server answered 404 ({why}): no such note in this account, or a server that does not support operator notes (GET /api/v1/operator-notes/<id>)"
                )
            }));
        }
        self.parse("GET", &path, a)
    }

    pub fn cancel(&self, note_id: &str) -> Result<Receipt> {
        self.post::<Value, Receipt>(&format!("operator-notes/{}/cancel", pct(note_id)), None)
    }

    // ----- sessions --------------------------------------------------------

    /// One page of `GET /runtime-sessions` with these query parameters.
    pub fn runtime_sessions(&self, query: &[(&str, String)]) -> Result<RuntimeSessionPage> {
        self.get("runtime-sessions", query)
    }

    pub fn runtime_session(&self, id: &str) -> Result<RuntimeSessionItem> {
        let d: RuntimeSessionDetail = self.get(&format!("runtime-sessions/{}", pct(id)), &[])?;
        Ok(d.session)
    }

    /// The activity timeline of a session, newest first (§5.8).
    pub fn activity(&self, id: &str, limit: u32) -> Result<ActivityPage> {
        self.get(&format!("runtime-sessions/{}/activity", pct(id)), &[("limit", limit.to_string())])
    }

    /// The account's managed agents (id and name), for `notes list --all`.
    pub fn agents(&self) -> Result<AgentPage> {
        self.get("agents", &[("limit", "100".into())])
    }

    /// A cheap authenticated call: reading a note that cannot exist answers
    /// 404 when the token is accepted, 401/403 when not.
    pub fn probe(&self) -> Result<()> {
        let path = "operator-notes/0000000000000000";
        let a = self.call("GET", path, &[], None)?;
        match a.status {
            200 | 404 if http::looks_like_json(&a.text) => Ok(()),
            _ => Err(self.error("GET", path, &a)),
        }
    }

    /// The attach socket's URL (`ws://` or `wss://`).
    pub fn socket_url(&self, runtime_id: &str) -> String {
        let base = self
            .base
            .strip_prefix("https://")
            .map(|r| format!("wss://{r}"))
            .or_else(|| self.base.strip_prefix("http://").map(|r| format!("ws://{r}")))
            .unwrap_or_else(|| self.base.clone());
        format!("{base}/api/v1/ws/runtime-sessions/{}", pct(runtime_id))
    }
}

fn route_name(path: &str) -> &'static str {
    let p = path.split('?').next().unwrap_or(path);
    let segs: Vec<&str> = p.split('/').collect();
    match segs.as_slice() {
        // What the command was reading or doing, in the user's words (an
        // error line starts with it; never a route name, newcomer 4 P14).
        ["operator-notes"] => "notes",
        ["operator-notes", _, "cancel"] => "cancelling the note",
        ["operator-notes", _] => "the note",
        ["runtime-sessions"] => "sessions",
        ["runtime-sessions", _, "activity"] => "the session's activity",
        ["runtime-sessions", _] => "the session",
        ["agents"] => "the managed agents",
        _ => "the server",
    }
}

/// The server's reason from an error body: `detail` as a string, an
/// object's message/code, or a validation list.
pub fn detail_text(text: &str) -> String {
    let body: ErrorBody = serde_json::from_str(text).unwrap_or_default();
    match body.detail {
        Some(v) => detail(&serde_json::json!({ "detail": v })),
        None => detail(&serde_json::from_str::<Value>(text).unwrap_or(Value::Null)),
    }
}

/// `GET /api/v1/health` (no auth): whether a Preloop server answers at all.
pub fn health(base: &str, timeout: Duration, proxy: Option<&http::ProxyUrl>) -> Result<()> {
    let base = preloop_shared::config::normalize_url(base);
    let agent = http::agent(timeout, false, proxy);
    let url = format!("{base}/api/v1/health");
    let mut resp =
        agent.get(&url).config().timeout_global(Some(timeout)).build().call().map_err(|e| Error::Unreachable {
            route: "health",
            detail: format!("{} (is the server running at {base}?)", http::describe(&e)),
        })?;
    let st = resp.status().as_u16();
    let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
    let text = resp.body_mut().with_config().limit(MAX_BODY).read_to_string().unwrap_or_default();
    if st == 200 && http::looks_like_json(&text) {
        Ok(())
    } else {
        Err(Error::Status {
            route: "health",
            status: st,
            detail: http::not_preloop(&base, "GET", "/api/v1/health", st, ct.as_deref()),
        })
    }
}

/// The server's reason: `detail` as a string, an object's message/code, or
/// a validation list.
pub fn detail(v: &Value) -> String {
    match v.get("detail") {
        Some(Value::String(s)) => one_line(s),
        Some(Value::Object(o)) => o
            .get("message")
            .or_else(|| o.get("code"))
            .and_then(Value::as_str)
            .map(one_line)
            .unwrap_or_else(|| excerpt(&Value::Object(o.clone()).to_string())),
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
        Some(other) => excerpt(&other.to_string()),
        None => match v {
            Value::Null => "no details".into(),
            // Only JSON reaches here; a string body is JSON text too.
            Value::String(s) => excerpt(s),
            other => excerpt(&other.to_string()),
        },
    }
}

fn one_line(s: &str) -> String {
    excerpt(s)
}

fn excerpt(s: &str) -> String {
    crate::output::safe_line(&s.chars().take(300).collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encodes_components() {
        assert_eq!(pct("a b/c?d"), "a%20b%2Fc%3Fd");
        assert_eq!(pct("Release worker"), "Release%20worker");
        assert_eq!(pct("x-1_2.3~"), "x-1_2.3~");
    }

    #[test]
    fn route_names() {
        assert_eq!(route_name("operator-notes/abc/cancel"), "cancelling the note");
        assert_eq!(route_name("runtime-sessions/x/activity"), "the session's activity");
        assert_eq!(route_name("runtime-sessions"), "sessions", "no route name in an error line (newcomer 4, P14)");
    }
}
