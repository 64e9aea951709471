//! The hooks' HTTP/1.1 client for a plain-http server named by an IP address
//! (`http://127.0.0.1:8000`, `http://[::1]:8000/prefix`): the common local
//! deployment, and the one where a general client's set-up is most of a
//! hook's cost. ureq (kept for `https://` and host names, which need TLS or a
//! resolver with a timeout) spends ~90 k instructions and 16 socket syscalls
//! on such a POST: zero-filled buffers, agent construction, a timeout set per
//! read and write, the head and body in two writes, a pool liveness probe
//! (docs/performance.md, "Round two"). Here: one connect with a timeout,
//! the whole request in one write, the answer read into one growing buffer,
//! every read bounded by what is left of the call's one deadline (a typical
//! answer is one read).
//!
//! What it keeps of ureq's rules: redirects are answers, never followed (a
//! bearer token never leaves the configured origin); every status is an
//! answer; the body is capped; a truncated, malformed or oversized answer
//! is an error, never a guess. `Connection: close`: one request per
//! connection, as a hook makes.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Largest response head (status line and headers) we read.
const MAX_HEAD: usize = 32 * 1024;

/// A server this client can reach: `http://`, an IP-literal host, an
/// optional port and path prefix, nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    addr: SocketAddr,
    /// The `Host` header: the authority as written.
    authority: String,
    /// A path prefix without its trailing `/` (`""` for none).
    prefix: String,
}

impl Origin {
    /// `None` for anything this client does not take (`https`, a host name,
    /// user info, a query or fragment): the caller uses its general client.
    pub fn parse(base: &str) -> Option<Origin> {
        let rest = base.strip_prefix("http://")?;
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains('@') || prefix.contains(['?', '#']) {
            return None;
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6.split_once(']')?;
            (host, after)
        } else {
            match authority.rsplit_once(':') {
                Some((host, _)) => (host, &authority[host.len()..]),
                None => (authority, ""),
            }
        };
        let port = match port {
            "" => 80,
            p => p.strip_prefix(':')?.parse::<u16>().ok().filter(|p| *p != 0)?,
        };
        let ip: IpAddr = host.parse().ok()?;
        // A v6 address is only valid in brackets.
        if ip.is_ipv6() != authority.starts_with('[') {
            return None;
        }
        Some(Origin {
            addr: SocketAddr::new(ip, port),
            authority: authority.to_string(),
            prefix: prefix.trim_end_matches('/').to_string(),
        })
    }
}

/// What the server answered.
#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Why there is no answer.
#[derive(Debug)]
pub enum Failure {
    /// Connecting, writing or reading failed (a timeout included).
    Io(io::Error),
    /// The whole call ran past its budget.
    TimedOut,
    /// The body is larger than the cap.
    TooLarge(u64),
    /// Not an HTTP/1.x answer we can read.
    Malformed(&'static str),
}

impl Failure {
    /// One short line without OS error numbers.
    pub fn describe(&self) -> String {
        match self {
            Failure::Io(e) => crate::http::describe_io(e),
            Failure::TimedOut => "timed out".into(),
            Failure::TooLarge(n) => format!("the answer is larger than {n} bytes"),
            Failure::Malformed(what) => format!("not an HTTP answer we can read: {what}"),
        }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        match e.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Failure::TimedOut,
            _ => Failure::Io(e),
        }
    }
}

/// A request sent whose answer is not read yet: the caller does other work
/// (another call) meanwhile and reads it with [`InFlight::answer`].
#[derive(Debug)]
pub struct InFlight {
    stream: TcpStream,
    deadline: Instant,
}

/// POST `body` (JSON) to `origin` + `path` with the given extra headers:
/// connect (within `connect_timeout`) and send the request, all of it in
/// one write; the answer is read by [`InFlight::answer`], the whole call
/// within `timeout`.
pub fn send_json(
    origin: &Origin,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    connect_timeout: Duration,
    timeout: Duration,
) -> Result<InFlight, Failure> {
    let deadline = Instant::now() + timeout;
    let mut stream = TcpStream::connect_timeout(&origin.addr, connect_timeout.min(timeout))?;
    stream.set_write_timeout(Some(left(deadline)?))?;
    stream.write_all(&request(origin, path, headers, body))?;
    Ok(InFlight { stream, deadline })
}

impl InFlight {
    /// Read the answer (within what is left of the call's budget).
    pub fn answer(mut self, max_body: u64) -> Result<Response, Failure> {
        read_response(&mut self.stream, self.deadline, max_body)
    }
}

/// The request: head and body in one buffer, written at once.
fn request(origin: &Origin, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut req = Vec::with_capacity(256 + body.len());
    let _ = write!(req, "POST {}{path} HTTP/1.1\r\nHost: {}\r\n", origin.prefix, origin.authority);
    for (name, value) in headers {
        let _ = write!(req, "{name}: {value}\r\n");
    }
    let _ = write!(
        req,
        "User-Agent: preloop-hooks/{}\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION"),
        body.len()
    );
    req.extend_from_slice(body);
    req
}

fn left(deadline: Instant) -> Result<Duration, Failure> {
    let d = deadline.saturating_duration_since(Instant::now());
    // A zero read timeout means "none" to the socket API.
    if d.is_zero() { Err(Failure::TimedOut) } else { Ok(d) }
}

/// Read one answer: skip any 1xx heads, then the body by Content-Length,
/// chunked encoding, or to the end of the connection.
fn read_response(s: &mut impl Socket, deadline: Instant, max_body: u64) -> Result<Response, Failure> {
    let mut r = Reader { s, buf: Vec::with_capacity(4096), pos: 0, deadline };
    loop {
        let head = r.head()?;
        let h = Head::parse(&head)?;
        if (100..200).contains(&h.status) {
            continue;
        }
        let body = if h.status == 204 || h.status == 304 {
            Vec::new()
        } else if h.chunked {
            r.chunked(max_body)?
        } else if let Some(n) = h.length {
            if n > max_body {
                return Err(Failure::TooLarge(max_body));
            }
            r.exactly(n as usize)?
        } else {
            r.until_closed(max_body)?
        };
        return Ok(Response { status: h.status, body });
    }
}

/// What the client needs of a connection (a trait so tests can feed bytes).
trait Socket: Read {
    fn set_read_timeout(&mut self, t: Duration) -> io::Result<()>;
}

impl Socket for TcpStream {
    fn set_read_timeout(&mut self, t: Duration) -> io::Result<()> {
        TcpStream::set_read_timeout(self, Some(t))
    }
}

struct Reader<'a, S: Socket> {
    s: &'a mut S,
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed.
    pos: usize,
    deadline: Instant,
}

impl<S: Socket> Reader<'_, S> {
    /// Read more into `buf`; `Ok(0)` at the end of the connection.
    fn fill(&mut self) -> Result<usize, Failure> {
        // Each read waits at most what is left of the call's budget, so a
        // server trickling bytes cannot stretch the call past it.
        self.s.set_read_timeout(left(self.deadline)?)?;
        if self.buf.capacity() - self.buf.len() < 1024 {
            self.buf.reserve(self.buf.capacity().max(4096));
        }
        let start = self.buf.len();
        self.buf.resize(self.buf.capacity(), 0);
        let n = loop {
            match self.s.read(&mut self.buf[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.buf.truncate(start);
                    return Err(e.into());
                }
            }
        };
        self.buf.truncate(start + n);
        Ok(n)
    }

    fn unread(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// The next head, through its blank line.
    fn head(&mut self) -> Result<Vec<u8>, Failure> {
        let mut searched: usize = 0;
        loop {
            let avail = self.unread();
            let from = searched.saturating_sub(3);
            if let Some(i) = avail[from..].windows(4).position(|w| w == b"\r\n\r\n") {
                let end = from + i + 4;
                let head = avail[..end].to_vec();
                self.pos += end;
                return Ok(head);
            }
            searched = avail.len();
            if searched > MAX_HEAD {
                return Err(Failure::Malformed("a head larger than 32 KiB"));
            }
            if self.fill()? == 0 {
                return Err(Failure::Malformed("the connection closed before the head ended"));
            }
        }
    }

    fn exactly(&mut self, n: usize) -> Result<Vec<u8>, Failure> {
        while self.unread().len() < n {
            if self.fill()? == 0 {
                return Err(Failure::Malformed("the connection closed before the body ended"));
            }
        }
        let body = self.unread()[..n].to_vec();
        self.pos += n;
        Ok(body)
    }

    fn until_closed(&mut self, max: u64) -> Result<Vec<u8>, Failure> {
        loop {
            if self.unread().len() as u64 > max {
                return Err(Failure::TooLarge(max));
            }
            if self.fill()? == 0 {
                return Ok(self.unread().to_vec());
            }
        }
    }

    /// A line through its CRLF (the CRLF not returned).
    fn line(&mut self) -> Result<Vec<u8>, Failure> {
        loop {
            if let Some(i) = self.unread().windows(2).position(|w| w == b"\r\n") {
                let line = self.unread()[..i].to_vec();
                self.pos += i + 2;
                return Ok(line);
            }
            if self.unread().len() > 4096 {
                return Err(Failure::Malformed("a chunk line longer than 4 KiB"));
            }
            if self.fill()? == 0 {
                return Err(Failure::Malformed("the connection closed inside a chunk"));
            }
        }
    }

    fn chunked(&mut self, max: u64) -> Result<Vec<u8>, Failure> {
        let mut body = Vec::new();
        loop {
            let line = self.line()?;
            let size = std::str::from_utf8(&line)
                .ok()
                .map(|l| l.split(';').next().unwrap_or("").trim())
                .and_then(|hex| u64::from_str_radix(hex, 16).ok())
                .ok_or(Failure::Malformed("a bad chunk size"))?;
            if size == 0 {
                // Trailers, if any, up to the blank line.
                while !self.line()?.is_empty() {}
                return Ok(body);
            }
            if body.len() as u64 + size > max {
                return Err(Failure::TooLarge(max));
            }
            body.extend_from_slice(&self.exactly(size as usize)?);
            if !self.line()?.is_empty() {
                return Err(Failure::Malformed("a chunk longer than its size"));
            }
        }
    }
}

/// The parts of a head this client uses.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    status: u16,
    length: Option<u64>,
    chunked: bool,
}

impl Head {
    fn parse(head: &[u8]) -> Result<Head, Failure> {
        let text = std::str::from_utf8(head).map_err(|_| Failure::Malformed("a head that is not text"))?;
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or("");
        let code = parts.next().unwrap_or("");
        if !version.starts_with("HTTP/1.") || code.len() != 3 {
            return Err(Failure::Malformed("no HTTP/1.x status line"));
        }
        let status = code.parse::<u16>().map_err(|_| Failure::Malformed("a bad status code"))?;
        let mut h = Head { status, length: None, chunked: false };
        for line in lines.filter(|l| !l.is_empty()) {
            let Some((name, value)) = line.split_once(':') else {
                return Err(Failure::Malformed("a header line without a colon"));
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                let n = value.parse::<u64>().map_err(|_| Failure::Malformed("a bad Content-Length"))?;
                if h.length.is_some_and(|m| m != n) {
                    return Err(Failure::Malformed("two different Content-Lengths"));
                }
                h.length = Some(n);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                h.chunked = value.rsplit(',').next().is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
                if !h.chunked {
                    return Err(Failure::Malformed("a transfer coding other than chunked"));
                }
            }
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        let o = Origin::parse("http://127.0.0.1:8000").unwrap();
        assert_eq!(o.addr, "127.0.0.1:8000".parse().unwrap());
        assert_eq!((o.authority.as_str(), o.prefix.as_str()), ("127.0.0.1:8000", ""));
        let o = Origin::parse("http://[::1]:9/pre/fix/").unwrap();
        assert_eq!(o.addr, "[::1]:9".parse().unwrap());
        assert_eq!((o.authority.as_str(), o.prefix.as_str()), ("[::1]:9", "/pre/fix"));
        assert_eq!(Origin::parse("http://10.0.0.2").unwrap().addr.port(), 80);
        for other in [
            "https://127.0.0.1:8000",
            "http://localhost:8000",
            "http://preloop.example.com",
            "http://user:pw@127.0.0.1:8000",
            "http://127.0.0.1:8000/?q",
            "http://127.0.0.1:0",
            "http://127.0.0.1:99999",
            "http://::1:8000",
            "http://[127.0.0.1]:8000",
            "http://",
            "ftp://127.0.0.1",
        ] {
            assert_eq!(Origin::parse(other), None, "{other}");
        }
    }

    #[test]
    fn one_write_holds_head_and_body() {
        let o = Origin::parse("http://127.0.0.1:1/p").unwrap();
        let req = request(&o, "/api/v1/agents/x", &[("Authorization", "Bearer t")], b"{}");
        let text = String::from_utf8(req).unwrap();
        assert!(
            text.starts_with("POST /p/api/v1/agents/x HTTP/1.1\r\nHost: 127.0.0.1:1\r\nAuthorization: Bearer t\r\n")
        );
        assert!(text.ends_with("Content-Length: 2\r\nConnection: close\r\n\r\n{}"), "{text}");
    }

    /// Bytes fed in the given pieces.
    struct Feed(Vec<Vec<u8>>);

    impl Read for Feed {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Ok(0);
            }
            let piece = &mut self.0[0];
            let n = piece.len().min(out.len());
            out[..n].copy_from_slice(&piece[..n]);
            piece.drain(..n);
            if piece.is_empty() {
                self.0.remove(0);
            }
            Ok(n)
        }
    }

    impl Socket for Feed {
        fn set_read_timeout(&mut self, _: Duration) -> io::Result<()> {
            Ok(())
        }
    }

    fn answer(pieces: &[&[u8]], max: u64) -> Result<Response, Failure> {
        let mut feed = Feed(pieces.iter().map(|p| p.to_vec()).collect());
        read_response(&mut feed, Instant::now() + Duration::from_secs(5), max)
    }

    fn body(pieces: &[&[u8]]) -> (u16, String) {
        let r = answer(pieces, 1 << 20).unwrap();
        (r.status, String::from_utf8(r.body).unwrap())
    }

    #[test]
    fn bodies_by_length_chunks_and_end() {
        assert_eq!(body(&[b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"]), (200, "{}".into()));
        assert_eq!(body(&[b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}trailing junk"]), (200, "{}".into()));
        assert_eq!(
            body(&[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\n{\"a\r\n4\r\n\":1}\r\n0\r\nT: v\r\n\r\n"]),
            (200, "{\"a\":1}".into())
        );
        assert_eq!(body(&[b"HTTP/1.0 200 OK\r\n\r\n{\"to\":", b"\"the end\"}"]), (200, "{\"to\":\"the end\"}".into()));
        assert_eq!(body(&[b"HTTP/1.1 204 No Content\r\n\r\n"]), (204, String::new()));
        assert_eq!(
            body(&[b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"]),
            (201, String::new())
        );
        assert_eq!(
            body(&[b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://elsewhere/\r\nContent-Length: 0\r\n\r\n"]),
            (307, String::new())
        );
    }

    #[test]
    fn answers_in_pieces_are_read_whole() {
        let whole = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}";
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(body(&bytes), (200, "{\"ok\":true}".into()));
        let sevens: Vec<&[u8]> = whole.chunks(7).collect();
        assert_eq!(body(&sevens), (200, "{\"ok\":true}".into()));
    }

    #[test]
    fn what_is_refused() {
        let malformed = |pieces: &[&[u8]]| matches!(answer(pieces, 1 << 20), Err(Failure::Malformed(_)));
        assert!(malformed(&[b"garbage\r\n\r\n"]));
        assert!(malformed(&[b"<html>Bad Gateway</html>"]));
        assert!(malformed(&[b"HTTP/1.1 200 OK\r\nContent-Length: 4000\r\n\r\n{\"half"]));
        assert!(malformed(&[b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"]));
        assert!(malformed(&[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"]));
        assert!(malformed(&[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]));
        assert!(malformed(&[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}"]));
        assert!(malformed(&[b"HTTP/2 200\r\n\r\n"]));
        let huge_head = [b"HTTP/1.1 200 OK\r\nX: ".as_slice(), &[b'a'; 40 * 1024]].concat();
        assert!(malformed(&[&huge_head]));
        let too_large = |pieces: &[&[u8]]| matches!(answer(pieces, 10), Err(Failure::TooLarge(10)));
        assert!(too_large(&[b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n"]));
        assert!(too_large(&[b"HTTP/1.1 200 OK\r\n\r\n{\"long\": \"enough\"}"]));
        assert!(too_large(&[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n"]));
    }

    #[test]
    fn a_call_past_its_budget_times_out() {
        let mut feed = Feed(vec![b"HTTP/1.1 200 OK\r\n".to_vec()]);
        let past = Instant::now() - Duration::from_millis(1);
        assert!(matches!(read_response(&mut feed, past, 100), Err(Failure::TimedOut)));
    }
}
