//! The Preloop server backend (hook routes, runtime bearer token): our own
//! HTTP/1.1 client for `http://` + an IP address ([`crate::http_plain`]),
//! ureq for everything else.
//!
//! Every call is bounded: a short connect timeout and a whole-call budget
//! (`call_timeout_ms` for notes and lifecycle calls, `permission_timeout_secs`
//! for a permission check, which must outlast the server's approval wait).
//! Redirects are never followed (the bearer token stays with the configured
//! origin); response bodies are capped.

use crate::backend::{Backend, Claimed, PermissionAnswer};
use crate::config::{Secret, ServerConfig, Settings};
use crate::error::{Error, Result};
use crate::http_plain;
use crate::registry::ServerClaim;
use crate::render::{self, NoteElement};
use crate::wire::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::cell::{OnceCell, RefCell};
use std::time::Duration;

/// Largest response body we read from a hook route.
const MAX_BODY: u64 = 1 << 20;

pub struct ServerBackend {
    base: String,
    token: Secret,
    /// `http://` + an IP literal: our own client ([`crate::http_plain`]).
    plain: Option<http_plain::Origin>,
    /// Everything else (TLS, host names): ureq, built on first use.
    agent: OnceCell<ureq::Agent>,
    connect_timeout: Duration,
    /// The proxy `config.json` names (never one from the environment).
    proxy: Option<crate::http::ProxyUrl>,
    call_timeout: Duration,
    permission_timeout: Duration,
    /// Requests sent whose answers [`Backend::settle`] reads.
    in_flight: RefCell<Vec<(&'static str, http_plain::InFlight)>>,
    /// The connection the last [`KEPT_ROUTES`] call left open, for the next.
    kept: RefCell<Option<http_plain::Kept>>,
}

/// The routes whose calls share one kept-alive connection (plain http):
/// the ones a server may receive twice, because a kept connection the
/// server closed before answering is retried on a new one
/// ([`http_plain::call_json`]). `session-start` registers or reopens the
/// session by its id; a pull whose answer never came carries nothing
/// whether or not it is sent again, and sending it again can only carry
/// what is still pending; an ack names its notes. A permission check (a
/// second approval request), a turn-end report and a session end are never
/// sent twice: they keep a connection of their own.
const KEPT_ROUTES: &[&str] = &["session-start", "notes/pending", "notes/ack"];

impl ServerBackend {
    pub fn new(server: &ServerConfig, settings: &Settings) -> ServerBackend {
        ServerBackend {
            base: server.url.clone(),
            token: server.token.clone(),
            // A configured proxy carries every call, also to an IP address.
            plain: if settings.proxy.is_some() { None } else { http_plain::Origin::parse(&server.url) },
            agent: OnceCell::new(),
            connect_timeout: Duration::from_millis(settings.connect_timeout_ms),
            proxy: settings.proxy.clone(),
            call_timeout: Duration::from_millis(settings.call_timeout_ms),
            permission_timeout: Duration::from_secs(settings.permission_timeout_secs),
            in_flight: RefCell::new(Vec::new()),
            kept: RefCell::new(None),
        }
    }

    fn agent(&self) -> &ureq::Agent {
        self.agent.get_or_init(|| {
            ureq::Agent::with_parts(
                crate::http::config(self.connect_timeout, true, self.proxy.as_ref()),
                ureq::unversioned::transport::DefaultConnector::default(),
                LiteralResolver::default(),
            )
        })
    }

    fn post<B: Serialize, R: DeserializeOwned>(
        &self,
        route: &'static str,
        body: &B,
        timeout: Duration,
    ) -> Result<Option<R>> {
        let (status, text) = match &self.plain {
            Some(origin) if KEPT_ROUTES.contains(&route) => {
                let auth = format!("Bearer {}", self.token.expose());
                let (r, kept) = http_plain::call_json(
                    origin,
                    self.kept.take(),
                    &format!("/api/v1/agents/{route}"),
                    &[("Authorization", &auth)],
                    &encode(route, body)?,
                    self.connect_timeout,
                    timeout,
                    MAX_BODY,
                );
                *self.kept.borrow_mut() = kept;
                let r = r.map_err(|e| Error::Unreachable { route, detail: e.describe() })?;
                let text = String::from_utf8(r.body)
                    .map_err(|_| Error::Protocol { route, detail: "the answer is not UTF-8".into() })?;
                (r.status, text)
            }
            Some(origin) => {
                let r = self
                    .send_plain(origin, route, body, timeout)?
                    .answer(MAX_BODY)
                    .map_err(|e| Error::Unreachable { route, detail: e.describe() })?;
                let text = String::from_utf8(r.body)
                    .map_err(|_| Error::Protocol { route, detail: "the answer is not UTF-8".into() })?;
                (r.status, text)
            }
            None => {
                let payload = encode(route, body)?;
                let url = format!("{}/api/v1/agents/{route}", self.base);
                let resp = self
                    .agent()
                    .post(&url)
                    .config()
                    .timeout_global(Some(timeout))
                    .build()
                    .header("Authorization", &format!("Bearer {}", self.token.expose()))
                    .header("Accept", "application/json")
                    .header("Content-Type", "application/json")
                    .send(&payload[..]);
                let mut resp = resp.map_err(|e| Error::Unreachable { route, detail: crate::http::describe(&e) })?;
                let status = resp.status().as_u16();
                let text = resp
                    .body_mut()
                    .with_config()
                    .limit(MAX_BODY)
                    .read_to_string()
                    .map_err(|e| Error::Unreachable { route, detail: crate::http::describe(&e) })?;
                (status, text)
            }
        };
        // No hook route ever returns our token: a body that echoes it (a
        // hostile server, a proxy's error page), plainly or escaped, must
        // not carry it into a note, a file or the log.
        let text = crate::redact::redact(&text, &[&self.token]);
        if status == 204 {
            return Ok(None);
        }
        if !(200..300).contains(&status) {
            return Err(Error::Status { route, status, detail: excerpt(&text) });
        }
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| Error::Protocol { route, detail: format!("{e} in {}", excerpt(&text)) })
    }

    /// Send a POST to a hook route through our plain-http client; its answer
    /// is read from the [`http_plain::InFlight`].
    fn send_plain<B: Serialize>(
        &self,
        origin: &http_plain::Origin,
        route: &'static str,
        body: &B,
        timeout: Duration,
    ) -> Result<http_plain::InFlight> {
        let auth = format!("Bearer {}", self.token.expose());
        http_plain::send_json(
            origin,
            &format!("/api/v1/agents/{route}"),
            &[("Authorization", &auth)],
            &encode(route, body)?,
            self.connect_timeout,
            timeout,
        )
        .map_err(|e| Error::Unreachable { route, detail: e.describe() })
    }

    fn post_required<B: Serialize, R: DeserializeOwned>(
        &self,
        route: &'static str,
        body: &B,
        timeout: Duration,
    ) -> Result<R> {
        self.post(route, body, timeout)?.ok_or_else(|| Error::Protocol { route, detail: "empty body".into() })
    }
}

impl Drop for ServerBackend {
    /// A report still in flight (the hook ended on an error before its
    /// output) is answered before the connection closes.
    fn drop(&mut self) {
        let _ = self.settle();
    }
}

/// ureq's resolver runs every lookup on a freshly spawned thread when a
/// timeout is set (always, here). An IP-literal host (a loopback server, a
/// proxy by address) needs no lookup: answer it directly and save the thread
/// (clone, a 2 MiB stack mapping, a futex handshake) on every hook call.
/// Names go to ureq's resolver unchanged.
#[derive(Debug, Default)]
struct LiteralResolver(ureq::unversioned::resolver::DefaultResolver);

impl ureq::unversioned::resolver::Resolver for LiteralResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> std::result::Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let port = uri.port_u16().or(match uri.scheme_str() {
            Some("http") => Some(80),
            Some("https") => Some(443),
            _ => None,
        });
        let ip = uri
            .host()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
            .and_then(|h| h.parse::<std::net::IpAddr>().ok());
        if let (Some(ip), Some(port)) = (ip, port) {
            let mut addrs = self.empty();
            addrs.push(std::net::SocketAddr::new(ip, port));
            return Ok(addrs);
        }
        self.0.resolve(uri, config, timeout)
    }
}

/// Split a server block into its notes. A block we cannot parse (a server
/// that changed its format) is carried whole, acked by the ids we can find.
pub fn claimed_from_block(block: &str, deferred: bool) -> Claimed {
    let notes = render::parse_block(block).unwrap_or_else(|| {
        vec![NoteElement { id: scan_ids(block).join(","), auth: String::new(), element: block.to_string() }]
    });
    Claimed { notes, deferred }
}

fn scan_ids(block: &str) -> Vec<String> {
    block
        .match_indices("<operator-note id=\"")
        .filter_map(|(i, m)| {
            let rest = &block[i + m.len()..];
            rest.find('"').map(|end| rest[..end].to_string())
        })
        .collect()
}

impl Backend for ServerBackend {
    fn mode(&self) -> crate::backend::HookMode {
        crate::backend::HookMode::Server
    }

    fn session_start(&self, req: &SessionStartRequest) -> Result<SessionStartResponse> {
        self.post_required("session-start", req, self.call_timeout)
    }

    fn permission_check(
        &self,
        req: &PermissionCheckRequest,
        claim: ServerClaim,
        _can_carry: bool,
    ) -> Result<PermissionAnswer> {
        let r: PermissionCheckResponse = self.post_required("permission-check", req, self.permission_timeout)?;
        let deferred = claim == ServerClaim::Deferred;
        Ok(PermissionAnswer {
            decision: Some(r.decision),
            reason: r.reason.unwrap_or_default(),
            timed_out: r.timed_out,
            note: r.operator_note.filter(|n| !n.is_empty()).map(|b| claimed_from_block(&b, deferred)),
        })
    }

    fn pull(&self, req: &PendingRequest) -> Result<Option<Claimed>> {
        let r: PendingResponse = self.post_required("notes/pending", req, self.call_timeout)?;
        if r.notes.is_empty() {
            return Ok(None);
        }
        // Prefer the per-note elements (they carry the ids); fall back to the block.
        let elements: Option<Vec<NoteElement>> = r
            .notes
            .iter()
            .map(|n| {
                let mut e = render::parse_element(n.text.as_deref()?)?;
                e.id = n.note_id.clone();
                Some(e)
            })
            .collect();
        let claimed = match (elements, r.text.as_deref()) {
            (Some(notes), _) => Claimed { notes, deferred: req.defer_delivery },
            (None, Some(block)) => claimed_from_block(block, req.defer_delivery),
            (None, None) => {
                return Err(Error::Protocol { route: "notes/pending", detail: "notes without text".into() });
            }
        };
        Ok(Some(claimed))
    }

    fn ack(&self, req: &AckRequest) -> Result<()> {
        if req.note_ids.is_empty() {
            return Ok(());
        }
        let _: Option<serde_json::Value> = self.post("notes/ack", req, self.call_timeout)?;
        Ok(())
    }

    fn session_event(&self, req: &SessionEventRequest) -> Result<()> {
        const ROUTE: &str = "session-event";
        let Some(origin) = &self.plain else {
            let _: Option<serde_json::Value> = self.post(ROUTE, req, self.call_timeout)?;
            return Ok(());
        };
        let sent = self.send_plain(origin, ROUTE, req, self.call_timeout)?;
        self.in_flight.borrow_mut().push((ROUTE, sent));
        Ok(())
    }

    fn settle(&self) -> Vec<Error> {
        let mut failed = Vec::new();
        for (route, sent) in self.in_flight.take() {
            match sent.answer(MAX_BODY) {
                Ok(r) if (200..300).contains(&r.status) => {}
                Ok(r) => {
                    let text = crate::redact::redact(&String::from_utf8_lossy(&r.body), &[&self.token]);
                    failed.push(Error::Status { route, status: r.status, detail: excerpt(&text) });
                }
                Err(e) => failed.push(Error::Unreachable { route, detail: e.describe() }),
            }
        }
        failed
    }

    fn session_end(&self, req: &SessionEndRequest) -> Result<SessionEndResponse> {
        self.post_required("session-end", req, self.call_timeout)
    }
}

fn encode<B: Serialize>(route: &'static str, body: &B) -> Result<Vec<u8>> {
    serde_json::to_vec(body).map_err(|e| Error::Protocol { route, detail: format!("encode: {e}") })
}

fn excerpt(text: &str) -> String {
    let t: String = text.chars().take(200).collect();
    t.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round six: SessionStart's pull goes on the connection its
    /// `session-start` left open, and an ack on the pull's, as the C floor
    /// replays them; a turn-end report (never sent twice) has its own,
    /// closed after its answer.
    #[test]
    fn a_hooks_calls_share_one_connection_where_they_may() {
        use std::io::{BufRead, BufReader, Read, Write};
        use std::sync::{Arc, Mutex};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let seen: Arc<Mutex<Vec<(usize, String, bool)>>> = Arc::default();
        let log = seen.clone();
        std::thread::spawn(move || {
            for (conn, s) in l.incoming().enumerate() {
                let log = log.clone();
                std::thread::spawn(move || {
                    let mut s = BufReader::new(s.unwrap());
                    loop {
                        let (mut path, mut len, mut close) = (String::new(), 0, false);
                        let mut line = String::new();
                        if s.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        path.push_str(line.split(' ').nth(1).unwrap());
                        loop {
                            line.clear();
                            s.read_line(&mut line).unwrap();
                            let l = line.to_ascii_lowercase();
                            if let Some(v) = l.strip_prefix("content-length: ") {
                                len = v.trim().parse().unwrap();
                            }
                            close |= l.starts_with("connection: close");
                            if line == "\r\n" {
                                break;
                            }
                        }
                        s.read_exact(&mut vec![0; len]).unwrap();
                        let body = match path.rsplit('/').next().unwrap() {
                            "session-start" => r#"{"runtime_session_id":"r"}"#,
                            "pending" => r#"{"notes":[]}"#,
                            _ => "{}",
                        };
                        log.lock().unwrap().push((conn, path, close));
                        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                        s.get_mut().write_all(answer.as_bytes()).unwrap();
                        if close {
                            return;
                        }
                    }
                });
            }
        });
        let server = ServerConfig { url, token: Secret::new("t"), origin: crate::config::Origin::Env };
        let b = ServerBackend::new(&server, &Settings::default());
        let start = SessionStartRequest { session_id: "s".into(), ..Default::default() };
        assert_eq!(b.session_start(&start).unwrap().runtime_session_id, "r");
        let pull = PendingRequest {
            channel: "x",
            event: DeliveryEvent::SessionStart,
            defer_delivery: false,
            session_id: "s".into(),
        };
        assert!(b.pull(&pull).unwrap().is_none());
        let event = SessionEventRequest { session_id: "s".into(), hook_event_name: "Stop".into(), source: "x".into() };
        b.session_event(&event).unwrap();
        assert!(b.settle().is_empty());
        b.ack(&AckRequest { note_ids: vec!["n".into()], session_id: "s".into(), undeliverable_reason: None }).unwrap();
        let seen = seen.lock().unwrap().clone();
        let calls: Vec<(usize, &str, bool)> =
            seen.iter().map(|(c, p, close)| (*c, p.trim_start_matches("/api/v1/agents/"), *close)).collect();
        assert_eq!(
            calls,
            [
                (0, "session-start", false),
                (0, "notes/pending", false),
                (1, "session-event", true),
                (0, "notes/ack", false)
            ]
        );
    }

    #[test]
    fn unparseable_block_keeps_ids() {
        let c = claimed_from_block("junk <operator-note id=\"aaaa\" x> <operator-note id=\"bbbb\"", true);
        assert_eq!(c.notes[0].id, "aaaa,bbbb");
    }
}
