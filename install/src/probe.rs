//! Cheap checks of a Preloop server for `doctor` and `login`: does it
//! answer, is it a Preloop server, are the tokens accepted. Every message
//! is one line a person can act on: no HTML body, no raw OS error text, no
//! token (redacted, escaped forms too).
//!
//! | check | request | accepted |
//! |---|---|---|
//! | health | `GET /api/v1/health` (no auth) | 200 `{"status": "healthy", …}` |
//! | runtime token | `POST /api/v1/agents/session-event` for a session id no run uses (changes nothing) | 2xx |
//! | user token | `GET /api/v1/operator-notes/0000000000000000` (a note that cannot exist) | 404 or 200 |

use preloop_shared::config::{Secret, normalize_url};
use preloop_shared::fsutil::io_text;
use preloop_shared::http::ProxyUrl;
use serde_json::{Value, json};
use std::time::Duration;

const MAX_BODY: u64 = 1 << 20;

/// What `GET /api/v1/health` says about the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// A Preloop server that reports itself healthy.
    Preloop,
    /// A Preloop server that reports a problem (its `status`).
    Unhealthy(String),
    /// Something answers, but not a Preloop server (what it answered).
    NotPreloop(String),
    /// Nothing answers (why, for people).
    Unreachable(String),
}

/// What the server says about a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCheck {
    Accepted,
    /// 401/403, with the server's reason.
    Rejected(String),
    /// Could not tell (unreachable, an unexpected answer).
    Unknown(String),
}

/// No proxy but the configured one (never one from the environment:
/// docs/guarantees.md, "A repository cannot move the gate").
fn agent(timeout: Duration, proxy: Option<&ProxyUrl>) -> ureq::Agent {
    preloop_shared::http::builder(timeout.min(Duration::from_secs(3)), false, proxy)
        .timeout_global(Some(timeout))
        .build()
        .new_agent()
}

/// A transport error as one short sentence with what to check.
pub fn describe(e: &ureq::Error, url: &str) -> String {
    match e {
        ureq::Error::Timeout(_) => format!("no answer in time: is {url} reachable from here?"),
        ureq::Error::HostNotFound => format!("host not found: check the host name in {url}"),
        ureq::Error::ConnectionFailed => format!("could not connect: is the server running at {url}?"),
        ureq::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => format!("connection refused: is the server running at {url}?"),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::UnexpectedEof => {
                format!(
                    "the connection was closed: is {url} an HTTP{} server?",
                    if url.starts_with("https") { "S" } else { "" }
                )
            }
            _ => format!("{}: is the server running at {url}?", io_text(io).to_lowercase()),
        },
        ureq::Error::Tls(m) => format!("TLS failed ({m}): does {url} serve HTTPS?"),
        ureq::Error::Rustls(r) => format!("TLS failed ({r}): check the certificate of {url}"),
        ureq::Error::BadUri(_) | ureq::Error::Http(_) => format!("{url:?} is not a usable URL"),
        other => {
            let s = other.to_string();
            let s = s.split(" (os error").next().unwrap_or(&s).to_string();
            format!("{s}: is the server running at {url}?")
        }
    }
}

/// An `https://` URL whose server speaks plain HTTP fails in TLS with
/// rustls' own words (`received corrupt message of type
/// InvalidContentType`): the same host and port asked over `http://`
/// tell it, and the sentence says what to type instead (newcomer 4, P6).
fn plain_http(e: &ureq::Error, base: &str, proxy: Option<&ProxyUrl>) -> Option<String> {
    let rest = base.strip_prefix("https://")?;
    if matches!(e, ureq::Error::Timeout(_) | ureq::Error::HostNotFound | ureq::Error::ConnectionFailed)
        || matches!(e, ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused)
    {
        return None;
    }
    let http = format!("http://{rest}");
    agent(Duration::from_secs(3), proxy).get(&format!("{http}/api/v1/health")).call().ok()?;
    let host = rest.split('/').next().unwrap_or(rest);
    Some(format!("the server at {host} answers plain HTTP: did you mean --url {http}?"))
}

/// A server reason, safe to print: the JSON `detail` (or message) only,
/// one line, at most 200 characters, no control characters, no tokens.
pub fn reason(status: u16, content_type: &str, body: &str, secrets: &[&Secret]) -> String {
    let v: Option<Value> = serde_json::from_str(body).ok();
    let text = match v.as_ref() {
        Some(v) => match v.get("detail").or_else(|| v.get("message")).or_else(|| v.get("error")) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Object(o)) => o
                .get("message")
                .or_else(|| o.get("code"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_default(),
            Some(Value::Array(a)) => {
                a.iter().filter_map(|e| e.get("msg").and_then(Value::as_str)).collect::<Vec<_>>().join("; ")
            }
            _ => String::new(),
        },
        None => String::new(),
    };
    let text: String = one_line(&preloop_shared::redact::redact(&text, secrets)).chars().take(200).collect();
    let kind = content_type.split(';').next().unwrap_or("").trim();
    match (text.trim().is_empty(), kind.is_empty()) {
        (false, _) => format!("HTTP {status}: {}", text.trim()),
        (true, false) => format!("HTTP {status}, {kind}"),
        (true, true) => format!("HTTP {status}"),
    }
}

/// Text for a terminal: escape sequences and control characters gone,
/// whitespace runs collapsed to one space.
pub fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI (`ESC [ … final`) or a two-character escape.
            if chars.peek() == Some(&'[') {
                chars.next();
                for n in chars.by_ref() {
                    if ('@'..='~').contains(&n) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
            continue;
        }
        let c = if c.is_control() || c.is_whitespace() { ' ' } else { c };
        if c == ' ' && (out.is_empty() || out.ends_with(' ')) {
            continue;
        }
        out.push(c);
    }
    out.trim_end().to_string()
}

fn content_type(resp: &ureq::http::Response<ureq::Body>) -> String {
    resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}

/// `GET /api/v1/health`.
pub fn health(url: &str, timeout: Duration, proxy: Option<&ProxyUrl>) -> Health {
    let base = normalize_url(url);
    let full = format!("{base}/api/v1/health");
    let mut resp = match agent(timeout, proxy).get(&full).call() {
        Ok(r) => r,
        Err(e) => return Health::Unreachable(plain_http(&e, &base, proxy).unwrap_or_else(|| describe(&e, &base))),
    };
    let status = resp.status().as_u16();
    let ct = content_type(&resp);
    let body = resp.body_mut().with_config().limit(MAX_BODY).read_to_string().unwrap_or_default();
    let v: Option<Value> = serde_json::from_str(&body).ok();
    match v.as_ref().and_then(|v| v.get("status")).and_then(Value::as_str) {
        Some("healthy") if status == 200 => Health::Preloop,
        Some(s) if v.as_ref().is_some_and(Value::is_object) => Health::Unhealthy(format!(
            "GET /api/v1/health → {status}, status {:?}",
            s.chars().take(40).collect::<String>()
        )),
        _ => {
            let kind = ct.split(';').next().unwrap_or("").trim().to_string();
            Health::NotPreloop(format!(
                "GET /api/v1/health → {status}{}",
                if kind.is_empty() { String::new() } else { format!(", {kind}") }
            ))
        }
    }
}

/// The runtime token against a hook route.
pub fn runtime_token(url: &str, token: &Secret, timeout: Duration, proxy: Option<&ProxyUrl>) -> TokenCheck {
    let base = normalize_url(url);
    let full = format!("{base}/api/v1/agents/session-event");
    let body = json!({"session_id": "preloop-doctor-probe", "hook_event_name": "Stop", "source": "preloop-doctor"});
    let resp = agent(timeout, proxy)
        .post(&full)
        .header("Authorization", &format!("Bearer {}", token.expose()))
        .header("Content-Type", "application/json")
        .send(body.to_string().as_bytes());
    classify(resp, &base, token, |s| (200..300).contains(&s))
}

/// The user token against an operator route.
pub fn user_token(url: &str, token: &Secret, timeout: Duration, proxy: Option<&ProxyUrl>) -> TokenCheck {
    let base = normalize_url(url);
    let full = format!("{base}/api/v1/operator-notes/0000000000000000");
    let resp = agent(timeout, proxy)
        .get(&full)
        .header("Authorization", &format!("Bearer {}", token.expose()))
        .header("Accept", "application/json")
        .call();
    classify(resp, &base, token, |s| s == 200 || s == 404)
}

fn classify(
    resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    base: &str,
    token: &Secret,
    ok: impl Fn(u16) -> bool,
) -> TokenCheck {
    let mut resp = match resp {
        Ok(r) => r,
        Err(e) => return TokenCheck::Unknown(describe(&e, base)),
    };
    let status = resp.status().as_u16();
    let ct = content_type(&resp);
    let body = resp.body_mut().with_config().limit(MAX_BODY).read_to_string().unwrap_or_default();
    let why = reason(status, &ct, &body, &[token]);
    match status {
        s if ok(s) => TokenCheck::Accepted,
        401 | 403 => TokenCheck::Rejected(why),
        _ => TokenCheck::Unknown(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_one_safe_line() {
        let t = Secret::new("agt_SecretSecret");
        let r = reason(401, "application/json", r#"{"detail": "bad Bearer agt_SecretSecret\n\u001b[2J"}"#, &[&t]);
        assert_eq!(r, "HTTP 401: bad Bearer [redacted]");
        let r = reason(404, "text/html; charset=utf-8", "<!DOCTYPE HTML><html>…</html>", &[&t]);
        assert_eq!(r, "HTTP 404, text/html");
        let esc: String = "agt_SecretSecret".chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        let r = reason(500, "", &format!("{{\"detail\": \"{esc}\"}}"), &[&t]);
        assert!(!r.contains("Secret"), "{r}");
    }
}
