//! One small HTTP layer for the CLI and the hooks' server client (its ureq
//! path; `http://` + an IP address goes through [`crate::http_plain`]): the
//! ureq configuration every caller builds the same way, OS-code-free error
//! texts, and the rule that a body that is not JSON (an HTML error page) is
//! never shown, only named. Secrets in what a server answers are removed
//! with [`crate::redact`].

use std::time::Duration;

/// The agent configuration every Preloop call uses: a connect timeout, no
/// redirects (a bearer token never follows one), status codes as answers
/// (not errors), and our user agent. `small_buffers` trims ureq's default
/// 128 KiB per-connection buffers, which it zero-fills per connection (a
/// third of a hook's instructions and 64 page faults, docs/performance.md):
/// our requests and answers are small, bodies stream through the buffer,
/// and 32 KiB still holds any header block.
pub fn config(connect_timeout: Duration, small_buffers: bool) -> ureq::config::Config {
    let b = ureq::Agent::config_builder()
        .timeout_connect(Some(connect_timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(concat!("preloop-hooks/", env!("CARGO_PKG_VERSION")));
    let b = if small_buffers {
        b.input_buffer_size(32 * 1024).max_response_header_size(32 * 1024).output_buffer_size(16 * 1024)
    } else {
        b
    };
    b.build()
}

/// An agent with [`config`].
pub fn agent(connect_timeout: Duration, small_buffers: bool) -> ureq::Agent {
    config(connect_timeout, small_buffers).new_agent()
}

/// A transport error as one short line without OS error numbers:
/// `connection refused`, `timed out after 30s`, `no such host`.
pub fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(t) => format!("timed out ({t})"),
        ureq::Error::Io(io) => describe_io(io),
        ureq::Error::BodyExceedsLimit(n) => format!("the answer is larger than {n} bytes"),
        ureq::Error::HostNotFound => "no such host".into(),
        ureq::Error::ConnectionFailed => "connection failed".into(),
        ureq::Error::TooManyRedirects | ureq::Error::RedirectFailed => "it answered with a redirect".into(),
        other => strip_os_error(&other.to_string()),
    }
}

/// An I/O error as words: the kind for the common ones, else the message
/// without `(os error N)`.
pub fn describe_io(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => "connection refused".into(),
        K::ConnectionReset => "the connection was reset".into(),
        K::ConnectionAborted => "the connection was aborted".into(),
        K::TimedOut | K::WouldBlock => "timed out".into(),
        K::NotConnected => "not connected".into(),
        K::AddrNotAvailable => "address not available".into(),
        K::UnexpectedEof => "the server closed the connection".into(),
        K::HostUnreachable => "host unreachable".into(),
        K::NetworkUnreachable => "network unreachable".into(),
        _ => strip_os_error(&e.to_string()),
    }
}

/// `Connection refused (os error 111)` → `Connection refused`.
pub fn strip_os_error(s: &str) -> String {
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// Whether a response body is something we may show: JSON. An HTML page or
/// other text is described by [`not_preloop`] instead.
pub fn looks_like_json(body: &str) -> bool {
    matches!(body.trim_start().as_bytes().first(), Some(b'{' | b'[' | b'"'))
        && serde_json::from_str::<serde_json::Value>(body).is_ok()
}

/// The sentence for an answer that is not from a Preloop server.
pub fn not_preloop(base: &str, method: &str, path: &str, status: u16, content_type: Option<&str>) -> String {
    let ct = content_type.map(|c| c.split(';').next().unwrap_or(c).trim().to_string()).unwrap_or_default();
    let what = if ct.is_empty() { String::new() } else { format!(", {ct}") };
    format!(
        "{base} does not look like a Preloop server ({method} {path} → HTTP {status}{what}); check the URL (`preloop-hooks doctor`)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_os_error_numbers() {
        let e = std::io::Error::from_raw_os_error(111);
        assert_eq!(describe_io(&e), "connection refused");
        assert_eq!(strip_os_error("Not a directory (os error 20)"), "Not a directory");
    }

    #[test]
    fn html_is_not_json() {
        assert!(!looks_like_json("<!DOCTYPE HTML><html>"));
        assert!(looks_like_json(r#"{"detail": "x"}"#));
    }
}
