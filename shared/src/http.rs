//! One small HTTP layer for the CLI and the hooks' server client (its ureq
//! path; `http://` + an IP address goes through [`crate::http_plain`]): the
//! ureq configuration every caller builds the same way, OS-code-free error
//! texts, and the rule that a body that is not JSON (an HTML error page) is
//! never shown, only named. Secrets in what a server answers are removed
//! with [`crate::redact`].

use std::fmt;
use std::time::Duration;

/// The HTTP(S) proxy the user named as `proxy` in `config.json`: the only
/// proxy any of our clients uses. None is ever taken from the environment
/// (`ALL_PROXY`, `HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`, any case): a
/// repository can set those for the hooks (a Gemini `.env`, a Claude Code
/// `env` block) and would then answer the permission check and read the
/// token (red-team 4, P1; docs/guarantees.md). `Debug` and [`shown`](Self::shown)
/// hide the proxy's credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrl(String);

/// The proxy variables ureq (and curl, and most tools) read, every spelling.
/// Ours never reads them; `doctor` says when one is set.
pub const PROXY_VARS: &[&str] =
    &["ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"];

impl ProxyUrl {
    /// `http://host:port` or `https://host:port` (credentials allowed);
    /// anything else is refused with the reason.
    pub fn parse(s: &str) -> Result<ProxyUrl, String> {
        let t = s.trim();
        let lower = t.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            return Err("an http:// or https:// proxy URL".into());
        }
        match ureq::Proxy::new(t) {
            Ok(_) => Ok(ProxyUrl(t.to_string())),
            Err(_) => Err("an http:// or https:// proxy URL".into()),
        }
    }

    /// The URL without its credentials, for the log and `doctor`.
    pub fn shown(&self) -> String {
        crate::redact::redact_url_credentials(&self.0).into_owned()
    }

    fn ureq(&self) -> Option<ureq::Proxy> {
        ureq::Proxy::new(&self.0).ok()
    }
}

impl fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProxyUrl({})", self.shown())
    }
}

/// The agent configuration every Preloop call uses: a connect timeout, no
/// redirects (a bearer token never follows one), status codes as answers
/// (not errors), our user agent, and no proxy but the one `config.json`
/// names (`proxy`; ureq's default would take one from the environment:
/// [`ProxyUrl`]). `small_buffers` trims ureq's default
/// 128 KiB per-connection buffers, which it zero-fills per connection (a
/// third of a hook's instructions and 64 page faults, docs/performance.md):
/// our requests and answers are small, bodies stream through the buffer,
/// and 32 KiB still holds any header block.
pub fn config(connect_timeout: Duration, small_buffers: bool, proxy: Option<&ProxyUrl>) -> ureq::config::Config {
    builder(connect_timeout, small_buffers, proxy).build()
}

/// [`config`] before it is built, for a caller that adds to it.
pub fn builder(
    connect_timeout: Duration,
    small_buffers: bool,
    proxy: Option<&ProxyUrl>,
) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope> {
    let b = ureq::Agent::config_builder()
        .proxy(proxy.and_then(ProxyUrl::ureq))
        .timeout_connect(Some(connect_timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(concat!("preloop-hooks/", env!("CARGO_PKG_VERSION")));
    if small_buffers {
        b.input_buffer_size(32 * 1024).max_response_header_size(32 * 1024).output_buffer_size(16 * 1024)
    } else {
        b
    }
}

/// An agent with [`config`].
pub fn agent(connect_timeout: Duration, small_buffers: bool, proxy: Option<&ProxyUrl>) -> ureq::Agent {
    config(connect_timeout, small_buffers, proxy).new_agent()
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

    /// Red-team 4, P1: whatever the environment says, the agent has no
    /// proxy but the configured one.
    #[test]
    fn no_proxy_from_the_environment() {
        for var in ["ALL_PROXY", "https_proxy", "HTTP_PROXY"] {
            // SAFETY: this test binary's other tests read none of these
            // variables (ureq's default config is never built elsewhere here).
            unsafe { std::env::set_var(var, "http://127.0.0.1:9") };
        }
        assert!(ureq::config::Config::default().proxy().is_some(), "ureq's default takes the environment's");
        assert!(config(Duration::from_secs(1), true, None).proxy().is_none());
        let p = ProxyUrl::parse("http://u:pw@proxy.corp:3128").unwrap();
        let c = config(Duration::from_secs(1), false, Some(&p));
        assert_eq!(c.proxy().map(|p| (p.host().to_string(), p.port())), Some(("proxy.corp".to_string(), 3128)));
        assert_eq!(p.shown(), "http://u:***@proxy.corp:3128");
        assert!(!format!("{p:?}").contains("pw@"));
        for bad in ["socks5://h:1", "proxy:3128", "", "http://"] {
            assert!(ProxyUrl::parse(bad).is_err(), "{bad}");
        }
        for var in ["ALL_PROXY", "https_proxy", "HTTP_PROXY"] {
            // SAFETY: as for set_var above.
            unsafe { std::env::remove_var(var) };
        }
    }

    #[test]
    fn html_is_not_json() {
        assert!(!looks_like_json("<!DOCTYPE HTML><html>"));
        assert!(looks_like_json(r#"{"detail": "x"}"#));
    }
}
