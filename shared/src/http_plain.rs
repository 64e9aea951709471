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
//! answer; a header value with a control character is never sent; a
//! truncated, malformed or oversized answer is an error, never a guess.
//! One connection per hook where its calls may share one ([`call_json`]):
//! an answer framed by its length (or chunked, or 204/304) from an HTTP/1.1
//! server that did not say `Connection: close` leaves the connection for the
//! hook's next call (SessionStart's pull after its `session-start`, a pull's
//! ack), as the C floor replays them; the others say `Connection: close`.
//! A kept connection the server closed before answering (an idle timeout,
//! a server that closes after each answer without saying so) is retried
//! once on a new connection, within the same deadline; only callers whose
//! request may be sent twice take a kept connection (docs/performance.md,
//! "Round six").
//!
//! Bounded like a library (red-team 3, N1/N3): the request is written and
//! the answer read within the call's one deadline (each `write` and `read`
//! waits at most what is left of it); every head is parsed by `httparse`
//! (the parser under hyper) and is at most [`MAX_HEAD`] bytes; at most
//! [`MAX_INTERIM`] `1xx` heads are skipped; a chunk-size or trailer line is
//! at most [`MAX_LINE`] bytes, with at most [`MAX_TRAILERS`] trailers; chunk
//! sizes are checked against the body cap without overflow; and the whole
//! answer read off the connection is at most [`wire_limit`] bytes. Consumed
//! bytes are dropped as the reader goes, so memory follows what is kept.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Largest response head (status line and headers, through the blank line).
pub const MAX_HEAD: usize = 32 * 1024;
/// Most header fields in one head.
pub const MAX_HEADERS: usize = 64;
/// Most interim (`1xx`) heads skipped before the answer.
pub const MAX_INTERIM: usize = 16;
/// Longest chunk-size or trailer line, its CRLF included.
pub const MAX_LINE: usize = 4096;
/// Most trailer lines after the last chunk.
pub const MAX_TRAILERS: usize = 32;

/// The most bytes one answer may take off the connection for a body cap of
/// `max_body`: the body plus as much again (at least 256 KiB) for heads,
/// chunk framing and trailers. Past it the call fails.
pub fn wire_limit(max_body: u64) -> u64 {
    max_body.saturating_add(max_body.max(256 * 1024))
}

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
    /// The answer ran past another of the client's bounds (its total size,
    /// the number of interim heads or trailers).
    Bounded(&'static str),
    /// Not an HTTP/1.x answer we can read.
    Malformed(&'static str),
    /// The request was not sent: a header we were given cannot be written
    /// as it is (a CR, LF or other control character in a value).
    Unsendable(&'static str),
}

impl Failure {
    /// One short line without OS error numbers.
    pub fn describe(&self) -> String {
        match self {
            Failure::Io(e) => crate::http::describe_io(e),
            Failure::TimedOut => "timed out".into(),
            Failure::TooLarge(n) => format!("the answer is larger than {n} bytes"),
            Failure::Bounded(what) => format!("the answer is past a bound: {what}"),
            Failure::Malformed(what) => format!("not an HTTP answer we can read: {what}"),
            Failure::Unsendable(what) => format!("the request was not sent: {what}"),
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

/// A connection whose last answer was read whole and may carry the next
/// request ([`call_json`]).
#[derive(Debug)]
pub struct Kept(TcpStream);

/// POST `body` (JSON) and read the answer, the whole call within `timeout`,
/// on `kept` when given (the connection a previous [`call_json`] returned)
/// or a new one. Returns the answer and, when the server left it open and
/// the answer was framed, the connection for the next call. Give `kept`
/// only for a request the server may receive twice: when the kept
/// connection fails before the first byte of an answer (the server closed
/// it meanwhile), the request is sent again on a new connection.
#[allow(clippy::too_many_arguments)]
pub fn call_json(
    origin: &Origin,
    kept: Option<Kept>,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    connect_timeout: Duration,
    timeout: Duration,
    max_body: u64,
) -> (Result<Response, Failure>, Option<Kept>) {
    let deadline = Instant::now() + timeout;
    let req = match request(origin, path, headers, body, true) {
        Ok(r) => r,
        Err(e) => return (Err(e), None),
    };
    if let Some(Kept(mut stream)) = kept {
        match exchange(&mut stream, &req, deadline, max_body) {
            Exchange::Done(r, keep) => return (Ok(r), keep.then_some(Kept(stream))),
            Exchange::Failed(e) => return (Err(e), None),
            // Closed before any answer: a new connection below.
            Exchange::Unanswered(_) => {}
        }
    }
    let left = match left(deadline) {
        Ok(d) => d,
        Err(e) => return (Err(e), None),
    };
    let mut stream = match TcpStream::connect_timeout(&origin.addr, connect_timeout.min(left)) {
        Ok(s) => s,
        Err(e) => return (Err(e.into()), None),
    };
    match exchange(&mut stream, &req, deadline, max_body) {
        Exchange::Done(r, keep) => (Ok(r), keep.then_some(Kept(stream))),
        Exchange::Failed(e) | Exchange::Unanswered(e) => (Err(e), None),
    }
}

/// How one request on one connection went.
enum Exchange {
    /// The answer, and whether the connection may carry another request.
    Done(Response, bool),
    /// The write failed or the connection ended before the answer's first
    /// byte (not a timeout).
    Unanswered(Failure),
    /// Anything else.
    Failed(Failure),
}

fn exchange(stream: &mut TcpStream, req: &[u8], deadline: Instant, max_body: u64) -> Exchange {
    if let Err(e) = write_within(stream, req, deadline) {
        return match e {
            Failure::Io(_) => Exchange::Unanswered(e),
            e => Exchange::Failed(e),
        };
    }
    let mut r = Reader::new(stream, deadline, max_body);
    match answer_of(&mut r, max_body) {
        Ok((resp, keep)) => Exchange::Done(resp, keep),
        Err(e) if r.received() == 0 && matches!(e, Failure::Io(_) | Failure::Malformed(CLOSED_BEFORE_HEAD)) => {
            Exchange::Unanswered(e)
        }
        Err(e) => Exchange::Failed(e),
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
/// connect (within `connect_timeout`) and send the request (head and body
/// in one buffer); the answer is read by [`InFlight::answer`], the whole
/// call, the write included, within `timeout`.
pub fn send_json(
    origin: &Origin,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    connect_timeout: Duration,
    timeout: Duration,
) -> Result<InFlight, Failure> {
    let deadline = Instant::now() + timeout;
    let req = request(origin, path, headers, body, false)?;
    let mut stream = TcpStream::connect_timeout(&origin.addr, connect_timeout.min(timeout))?;
    write_within(&mut stream, &req, deadline)?;
    Ok(InFlight { stream, deadline })
}

impl InFlight {
    /// Read the answer (within what is left of the call's budget).
    pub fn answer(mut self, max_body: u64) -> Result<Response, Failure> {
        read_response(&mut self.stream, self.deadline, max_body)
    }
}

/// Read one answer from `bytes`, as from a connection that hands them over
/// at most `piece` bytes per read and then ends: the reader of
/// [`InFlight::answer`] without a socket (the hardening suite compares it
/// with a reference parser).
pub fn decode(bytes: &[u8], piece: usize, max_body: u64) -> Result<Response, Failure> {
    let mut feed = Pieces { rest: bytes, piece: piece.max(1) };
    read_response(&mut feed, Instant::now() + Duration::from_secs(3600), max_body)
}

struct Pieces<'a> {
    rest: &'a [u8],
    piece: usize,
}

impl Read for Pieces<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.rest.len().min(out.len()).min(self.piece);
        out[..n].copy_from_slice(&self.rest[..n]);
        self.rest = &self.rest[n..];
        Ok(n)
    }
}

impl Socket for Pieces<'_> {
    fn set_read_timeout(&mut self, _: Duration) -> io::Result<()> {
        Ok(())
    }
}

/// Whether a header name is an RFC 9110 token and its value holds no
/// control character but HTAB: what may be written into a head as is.
fn sendable(name: &str, value: &str) -> bool {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    !name.is_empty() && name.bytes().all(tchar) && value.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// The request: head and body in one buffer, written at once. A header
/// that could split the head (CR/LF in a token from the environment) is
/// refused, never sent. `keep`: no `Connection: close` (HTTP/1.1 keeps the
/// connection by default).
fn request(origin: &Origin, path: &str, headers: &[(&str, &str)], body: &[u8], keep: bool) -> Result<Vec<u8>, Failure> {
    if path.bytes().chain(origin.prefix.bytes()).any(|b| b <= 0x20 || b == 0x7f) {
        return Err(Failure::Unsendable("a control character or space in the path"));
    }
    let mut req = Vec::with_capacity(256 + body.len());
    let _ = write!(req, "POST {}{path} HTTP/1.1\r\nHost: {}\r\n", origin.prefix, origin.authority);
    for (name, value) in headers {
        if !sendable(name, value) {
            return Err(Failure::Unsendable("a header with a control character (CR, LF or another)"));
        }
        let _ = write!(req, "{name}: {value}\r\n");
    }
    let _ = write!(
        req,
        "User-Agent: preloop-hooks/{}\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}\r\n",
        env!("CARGO_PKG_VERSION"),
        body.len(),
        if keep { "" } else { "Connection: close\r\n" }
    );
    req.extend_from_slice(body);
    Ok(req)
}

/// What the client needs of a connection to write (a trait so tests can
/// stand in for a socket).
trait Sink: Write {
    fn set_write_timeout(&mut self, t: Duration) -> io::Result<()>;
}

impl Sink for TcpStream {
    fn set_write_timeout(&mut self, t: Duration) -> io::Result<()> {
        TcpStream::set_write_timeout(self, Some(t))
    }
}

/// Write all of `buf`, each `write` waiting at most what is left of the
/// call's budget (N3: a `write_all` under one timeout let a slow reader
/// hold the call for one timeout per partial write).
fn write_within(s: &mut impl Sink, mut buf: &[u8], deadline: Instant) -> Result<(), Failure> {
    while !buf.is_empty() {
        s.set_write_timeout(left(deadline)?)?;
        match s.write(buf) {
            Ok(0) => return Err(Failure::Io(io::ErrorKind::WriteZero.into())),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

fn left(deadline: Instant) -> Result<Duration, Failure> {
    let d = deadline.saturating_duration_since(Instant::now());
    // A zero timeout means "none" to the socket API.
    if d.is_zero() { Err(Failure::TimedOut) } else { Ok(d) }
}

/// Read one answer: skip up to [`MAX_INTERIM`] 1xx heads, then the body by
/// Content-Length, chunked encoding, or to the end of the connection.
fn read_response(s: &mut impl Socket, deadline: Instant, max_body: u64) -> Result<Response, Failure> {
    answer_of(&mut Reader::new(s, deadline, max_body), max_body).map(|(r, _)| r)
}

const CLOSED_BEFORE_HEAD: &str = "the connection closed before the head ended";

/// The answer, and whether the connection may carry another request: an
/// HTTP/1.1 answer without `Connection: close`, framed (a length, chunks,
/// or no body), with nothing after it.
fn answer_of<S: Socket>(r: &mut Reader<'_, S>, max_body: u64) -> Result<(Response, bool), Failure> {
    let mut interim = 0;
    loop {
        let h = r.head()?;
        if (100..200).contains(&h.status) {
            interim += 1;
            if interim > MAX_INTERIM {
                return Err(Failure::Bounded("more than 16 interim (1xx) heads"));
            }
            continue;
        }
        let mut framed = true;
        let body = if h.status == 204 || h.status == 304 {
            Vec::new()
        } else if h.chunked {
            r.chunked(max_body)?
        } else if let Some(n) = h.length {
            if n > max_body {
                return Err(Failure::TooLarge(max_body));
            }
            r.exactly(usize::try_from(n).map_err(|_| Failure::TooLarge(max_body))?)?
        } else {
            framed = false;
            r.until_closed(max_body)?
        };
        let keep = framed && h.keep_alive && r.unread().is_empty();
        return Ok((Response { status: h.status, body }, keep));
    }
}

/// What the client needs of a connection to read (a trait so tests can
/// feed bytes).
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
    /// Bytes of `buf` read (`buf[end..]` is room for the next read).
    end: usize,
    deadline: Instant,
    /// How many more bytes this answer may take off the connection.
    wire_left: u64,
    /// Bytes read off the connection.
    received: u64,
}

impl<'a, S: Socket> Reader<'a, S> {
    fn new(s: &'a mut S, deadline: Instant, max_body: u64) -> Reader<'a, S> {
        Reader { s, buf: vec![0; 4096], pos: 0, end: 0, deadline, wire_left: wire_limit(max_body), received: 0 }
    }

    /// Bytes read off the connection so far.
    fn received(&self) -> u64 {
        self.received
    }

    /// Read more into `buf` (dropping what is consumed first); `Ok(0)` at
    /// the end of the connection. Called only when more bytes are needed,
    /// so a read past the wire limit is an error.
    fn fill(&mut self) -> Result<usize, Failure> {
        // Each read waits at most what is left of the call's budget, so a
        // server trickling bytes cannot stretch the call past it.
        self.s.set_read_timeout(left(self.deadline)?)?;
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        // `buf` is zero-filled once per growth, not per read.
        if self.buf.len() - self.end < 1024 {
            self.buf.resize((2 * self.buf.len()).max(4096), 0);
        }
        // At the limit, one byte more tells the end of the connection from
        // an answer that goes on past it.
        let room = usize::try_from(self.wire_left).unwrap_or(usize::MAX).max(1);
        let to = self.buf.len().min(self.end.saturating_add(room));
        let n = loop {
            match self.s.read(&mut self.buf[self.end..to]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        };
        if n as u64 > self.wire_left {
            return Err(Failure::Bounded("more bytes than the body cap allows for heads and framing"));
        }
        self.end += n;
        self.wire_left -= n as u64;
        self.received += n as u64;
        Ok(n)
    }

    fn unread(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// The next head, parsed: read up to its blank line (at most
    /// [`MAX_HEAD`] bytes), then `httparse`.
    fn head(&mut self) -> Result<Head, Failure> {
        let mut searched: usize = 0;
        loop {
            let avail = self.unread();
            // A head ends with an empty line: LF LF or LF CR LF.
            let from = searched.saturating_sub(2);
            let blank = avail[from..].windows(2).enumerate().any(|(i, w)| {
                w[0] == b'\n' && (w[1] == b'\n' || (w[1] == b'\r' && avail.get(from + i + 2) == Some(&b'\n')))
            });
            if blank {
                let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut resp = httparse::Response::new(&mut fields);
                match resp.parse(avail) {
                    Ok(httparse::Status::Complete(end)) => {
                        if end > MAX_HEAD {
                            return Err(Failure::Malformed("a head larger than 32 KiB"));
                        }
                        let head = Head::of(&resp)?;
                        self.pos += end;
                        return Ok(head);
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(httparse::Error::TooManyHeaders) => {
                        return Err(Failure::Malformed("more than 64 header fields"));
                    }
                    Err(_) => return Err(Failure::Malformed("no HTTP/1.x head")),
                }
            }
            searched = avail.len();
            if searched > MAX_HEAD {
                return Err(Failure::Malformed("a head larger than 32 KiB"));
            }
            if self.fill()? == 0 {
                return Err(Failure::Malformed(CLOSED_BEFORE_HEAD));
            }
        }
    }

    /// At least `n` unread bytes, or an error at the end of the connection.
    fn need(&mut self, n: usize, what: &'static str) -> Result<(), Failure> {
        while self.unread().len() < n {
            if self.fill()? == 0 {
                return Err(Failure::Malformed(what));
            }
        }
        Ok(())
    }

    fn exactly(&mut self, n: usize) -> Result<Vec<u8>, Failure> {
        self.need(n, "the connection closed before the body ended")?;
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

    /// A line through its CRLF (the CRLF not returned), at most
    /// [`MAX_LINE`] bytes with it.
    fn line(&mut self) -> Result<Vec<u8>, Failure> {
        let mut searched: usize = 0;
        loop {
            let avail = self.unread();
            if let Some(i) = avail[searched.saturating_sub(1)..].windows(2).position(|w| w == b"\r\n") {
                let i = searched.saturating_sub(1) + i;
                if i + 2 > MAX_LINE {
                    return Err(Failure::Malformed("a chunk or trailer line longer than 4 KiB"));
                }
                let line = avail[..i].to_vec();
                self.pos += i + 2;
                return Ok(line);
            }
            searched = avail.len();
            if searched > MAX_LINE {
                return Err(Failure::Malformed("a chunk or trailer line longer than 4 KiB"));
            }
            if self.fill()? == 0 {
                return Err(Failure::Malformed("the connection closed inside a chunk"));
            }
        }
    }

    /// The next chunk's size: `httparse`'s chunk-size line (hex digits,
    /// extensions ignored), at most [`MAX_LINE`] bytes.
    fn chunk_size(&mut self) -> Result<u64, Failure> {
        let mut searched: usize = 0;
        loop {
            let avail = self.unread();
            // RFC 9112: chunk-size = 1*HEXDIG (httparse takes an empty one as 0).
            if avail.first().is_some_and(|b| !b.is_ascii_hexdigit()) {
                return Err(Failure::Malformed("a bad chunk size"));
            }
            // The line can only be complete once an LF came.
            let lf = avail[searched..].contains(&b'\n');
            searched = avail.len();
            match if lf { httparse::parse_chunk_size(avail) } else { Ok(httparse::Status::Partial) } {
                Ok(httparse::Status::Complete((n, size))) => {
                    if n > MAX_LINE {
                        return Err(Failure::Malformed("a chunk or trailer line longer than 4 KiB"));
                    }
                    self.pos += n;
                    return Ok(size);
                }
                Ok(httparse::Status::Partial) => {}
                Err(_) => return Err(Failure::Malformed("a bad chunk size")),
            }
            if avail.len() > MAX_LINE {
                return Err(Failure::Malformed("a chunk or trailer line longer than 4 KiB"));
            }
            if self.fill()? == 0 {
                return Err(Failure::Malformed("the connection closed inside a chunk"));
            }
        }
    }

    fn chunked(&mut self, max: u64) -> Result<Vec<u8>, Failure> {
        let mut body = Vec::new();
        loop {
            let size = self.chunk_size()?;
            if size == 0 {
                // Trailers, if any, up to the blank line: a few short lines.
                let mut trailers = 0;
                while !self.line()?.is_empty() {
                    trailers += 1;
                    if trailers > MAX_TRAILERS {
                        return Err(Failure::Bounded("more than 32 trailer lines"));
                    }
                }
                return Ok(body);
            }
            // `body.len() <= max` always: no sum that could wrap.
            if size > max - body.len() as u64 {
                return Err(Failure::TooLarge(max));
            }
            // `size <= max`, which a `Vec` on this target can hold.
            let size = usize::try_from(size).map_err(|_| Failure::TooLarge(max))?;
            body.extend_from_slice(&self.exactly(size)?);
            self.need(2, "the connection closed inside a chunk")?;
            if &self.unread()[..2] != b"\r\n" {
                return Err(Failure::Malformed("a chunk longer than its size"));
            }
            self.pos += 2;
        }
    }
}

/// The parts of a head this client uses.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    status: u16,
    length: Option<u64>,
    chunked: bool,
    /// HTTP/1.1 and no `Connection: close`.
    keep_alive: bool,
}

impl Head {
    fn of(resp: &httparse::Response<'_, '_>) -> Result<Head, Failure> {
        let status = resp.code.ok_or(Failure::Malformed("no HTTP/1.x status line"))?;
        let mut h = Head { status, length: None, chunked: false, keep_alive: resp.version == Some(1) };
        for field in resp.headers.iter() {
            let value = field.value.trim_ascii();
            if field.name.eq_ignore_ascii_case("content-length") {
                // RFC 9112: 1*DIGIT (Rust's `parse` also takes a leading `+`).
                let n = std::str::from_utf8(value)
                    .ok()
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or(Failure::Malformed("a bad Content-Length"))?;
                if h.length.is_some_and(|m| m != n) {
                    return Err(Failure::Malformed("two different Content-Lengths"));
                }
                h.length = Some(n);
            } else if field.name.eq_ignore_ascii_case("connection") {
                if value.split(|b| *b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close")) {
                    h.keep_alive = false;
                }
            } else if field.name.eq_ignore_ascii_case("transfer-encoding") {
                h.chunked = value
                    .rsplit(|b| *b == b',')
                    .next()
                    .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
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
        let req = request(&o, "/api/v1/agents/x", &[("Authorization", "Bearer t")], b"{}", false).unwrap();
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

    /// A source of `head` once, then `unit` repeated up to `total` bytes,
    /// counting what was read off it.
    struct Endless {
        head: Vec<u8>,
        unit: Vec<u8>,
        total: usize,
        sent: usize,
    }

    impl Read for Endless {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let mut n = 0;
            while n < out.len() && self.sent < self.total {
                let src = if self.sent < self.head.len() {
                    &self.head[self.sent..]
                } else {
                    let k = (self.sent - self.head.len()) % self.unit.len();
                    &self.unit[k..]
                };
                let m = src.len().min(out.len() - n).min(self.total - self.sent);
                out[n..n + m].copy_from_slice(&src[..m]);
                n += m;
                self.sent += m;
            }
            Ok(n)
        }
    }

    impl Socket for Endless {
        fn set_read_timeout(&mut self, _: Duration) -> io::Result<()> {
            Ok(())
        }
    }

    fn endless(head: &[u8], unit: &[u8], total: usize, max: u64) -> (Result<Response, Failure>, usize) {
        let mut src = Endless { head: head.to_vec(), unit: unit.to_vec(), total, sent: 0 };
        let r = read_response(&mut src, Instant::now() + Duration::from_secs(30), max);
        (r, src.sent)
    }

    /// Red-team 3, N1: endless `100 Continue` heads end the call after
    /// [`MAX_INTERIM`] of them, having read only those.
    #[test]
    fn endless_interim_heads_are_bounded() {
        let (r, read) = endless(b"", b"HTTP/1.1 100 Continue\r\n\r\n", 64 << 20, 1 << 20);
        assert!(matches!(r, Err(Failure::Bounded(_))), "{r:?}");
        assert!(read < 64 * 1024, "read {read} bytes");
        // Up to the bound they are skipped.
        let mut ok = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(MAX_INTERIM);
        ok.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
        assert_eq!(body(&[&ok]), (200, "{}".into()));
    }

    /// Red-team 3, N1: endless trailers end the call after [`MAX_TRAILERS`].
    #[test]
    fn endless_trailers_are_bounded() {
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n";
        let (r, read) = endless(head, format!("X-T: {}\r\n", "a".repeat(1000)).as_bytes(), 64 << 20, 1 << 20);
        assert!(matches!(r, Err(Failure::Bounded(_))), "{r:?}");
        assert!(read < 256 * 1024, "read {read} bytes");
        let mut ok = head.to_vec();
        ok.extend_from_slice(&b"X-T: v\r\n".repeat(MAX_TRAILERS));
        ok.extend_from_slice(b"\r\n");
        assert_eq!(body(&[&ok]), (200, "{}".into()));
    }

    /// Aesthetics review 3, §2 (a): a chunk size near `u64::MAX` after a
    /// first chunk wrapped `body.len() + size` in a release build and read
    /// without a cap; it is the body cap's error at once.
    #[test]
    fn a_chunk_size_near_u64_max_is_too_large() {
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\nffffffffffffffff\r\n";
        let (r, read) = endless(head, &[b'y'; 4096], 8 << 20, 10);
        assert!(matches!(r, Err(Failure::TooLarge(10))), "{r:?}");
        assert!(read < 64 * 1024, "read {read} bytes");
        let (r, _) =
            endless(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n", b"y", 4096, 10);
        assert!(matches!(r, Err(Failure::Malformed(_))), "{r:?}");
    }

    /// Red-team 3, N1: an answer that goes on past [`wire_limit`] (here 1-byte
    /// chunks with 4 KiB of extensions each) fails, whatever its body.
    #[test]
    fn the_bytes_read_per_answer_are_bounded() {
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let unit = format!("1;{}\r\nx\r\n", "e".repeat(4000));
        let (r, read) = endless(head, unit.as_bytes(), 64 << 20, 1000);
        assert!(matches!(r, Err(Failure::Bounded(_))), "{r:?}");
        assert!(read as u64 <= wire_limit(1000) + 1, "read {read} bytes");
        // A body until the end of the connection is held to the cap.
        let (r, read) = endless(b"HTTP/1.1 200 OK\r\n\r\n", b"z", 64 << 20, 1000);
        assert!(matches!(r, Err(Failure::TooLarge(1000))), "{r:?}");
        assert!(read as u64 <= wire_limit(1000) + 1, "read {read} bytes");
    }

    /// Aesthetics review 3, §2 (c): RFC 9112 lengths are digits only; Rust's
    /// integer parsing takes a leading `+`.
    #[test]
    fn lengths_and_chunk_sizes_take_digits_only() {
        let malformed = |pieces: &[&[u8]]| matches!(answer(pieces, 1 << 20), Err(Failure::Malformed(_)));
        assert!(malformed(&[b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}"]));
        assert!(malformed(&[b"HTTP/1.1 200 OK\r\nContent-Length: -0\r\n\r\n"]));
        assert!(malformed(&[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\n{}\r\n0\r\n\r\n"]));
        assert!(malformed(&[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n"]));
    }

    /// A line longer than [`MAX_LINE`] is refused however it arrives (the
    /// old check applied only while the line was still incomplete).
    #[test]
    fn long_lines_are_refused_in_one_piece_too() {
        let t = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: {}\r\n\r\n", "a".repeat(5000));
        assert!(matches!(answer(&[t.as_bytes()], 1 << 20), Err(Failure::Malformed(_))));
        let h = format!("HTTP/1.1 200 OK\r\nX: {}\r\nContent-Length: 0\r\n\r\n", "a".repeat(40 * 1024));
        assert!(matches!(answer(&[h.as_bytes()], 1 << 20), Err(Failure::Malformed(_))));
    }

    /// Aesthetics review 3, §2 (b): a header value with CR, LF or another
    /// control character (a token from the environment) is never written.
    #[test]
    fn headers_with_control_characters_are_never_sent() {
        let o = Origin::parse("http://127.0.0.1:1").unwrap();
        for value in
            ["Bearer t\r\nX-Injected: 1", "Bearer t\n", "Bearer t\r", "Bearer \0t", "Bearer \x7f", "Bearer \x1b[2J"]
        {
            let r = request(&o, "/x", &[("Authorization", value)], b"{}", false);
            assert!(matches!(r, Err(Failure::Unsendable(_))), "{value:?}");
        }
        assert!(matches!(request(&o, "/x", &[("Bad Name", "v")], b"{}", false), Err(Failure::Unsendable(_))));
        assert!(matches!(request(&o, "/x y", &[], b"{}", false), Err(Failure::Unsendable(_))));
        assert!(request(&o, "/x", &[("Authorization", "Bearer a\tb~!")], b"{}", false).is_ok());
        // And the call fails before it connects (port 1: nothing listens).
        let r = send_json(
            &o,
            "/x",
            &[("Authorization", "Bearer t\r\nX: y")],
            b"{}",
            Duration::from_secs(1),
            Duration::from_secs(1),
        );
        assert!(matches!(r, Err(Failure::Unsendable(_))), "{r:?}");
    }

    /// Red-team 3, N3: a server that drains the request slowly cannot hold
    /// the write past the call's deadline (it held a 24 MiB body for 442 s
    /// under a 5 s budget).
    #[test]
    fn the_write_keeps_the_call_deadline() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let origin = Origin::parse(&format!("http://{}", l.local_addr().unwrap())).unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = done.clone();
        let reader = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut b = vec![0u8; 64 * 1024];
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                match s.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        });
        let body = vec![b'A'; 24 << 20];
        let started = Instant::now();
        let r = send_json(&origin, "/x", &[], &body, Duration::from_secs(1), Duration::from_millis(500));
        let took = started.elapsed();
        assert!(matches!(r, Err(Failure::TimedOut)), "{r:?}");
        assert!(took < Duration::from_secs(3), "the write took {took:?} for a 0.5 s budget");
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        reader.join().unwrap();
    }

    #[test]
    fn a_call_past_its_budget_times_out() {
        let mut feed = Feed(vec![b"HTTP/1.1 200 OK\r\n".to_vec()]);
        let past = Instant::now() - Duration::from_millis(1);
        assert!(matches!(read_response(&mut feed, past, 100), Err(Failure::TimedOut)));
    }

    /// A server on 127.0.0.1 that answers each request it reads with the
    /// answer `answers` gives for (connection number, request number on it,
    /// the request's head), and closes a connection after an answer when
    /// that says so. Returns the origin, and the requests' heads seen as
    /// (connection, head) once `total` were answered.
    fn kept_server(
        total: usize,
        answers: impl Fn(usize, usize, &str) -> (Vec<u8>, bool) + Send + 'static,
    ) -> (Origin, std::thread::JoinHandle<Vec<(usize, String)>>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let origin = Origin::parse(&format!("http://{}", l.local_addr().unwrap())).unwrap();
        let server = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut conn = 0;
            while seen.len() < total {
                let (mut s, _) = l.accept().unwrap();
                conn += 1;
                let mut nth = 0;
                let mut buf = Vec::new();
                loop {
                    // One request: a head and a Content-Length body.
                    let mut b = [0u8; 4096];
                    let end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break Some(i + 4);
                        }
                        match s.read(&mut b) {
                            Ok(0) | Err(_) => break None,
                            Ok(n) => buf.extend_from_slice(&b[..n]),
                        }
                    };
                    let Some(end) = end else { break };
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    while buf.len() < end + len {
                        let n = s.read(&mut b).unwrap();
                        buf.extend_from_slice(&b[..n]);
                    }
                    buf.drain(..end + len);
                    nth += 1;
                    let (answer, close) = answers(conn, nth, &head);
                    seen.push((conn, head));
                    s.write_all(&answer).unwrap();
                    if close || seen.len() == total {
                        break;
                    }
                }
            }
            seen
        });
        (origin, server)
    }

    fn call(origin: &Origin, kept: Option<Kept>) -> (Result<Response, Failure>, Option<Kept>) {
        let t = Duration::from_secs(5);
        call_json(origin, kept, "/x", &[("Authorization", "Bearer t")], b"{}", t, t, 1 << 20)
    }

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";

    /// Round six: a hook's calls share one connection, as the C floor's do:
    /// the second request goes on the connection the first left open, and
    /// neither says `Connection: close` (the in-flight ones still do).
    #[test]
    fn calls_share_one_kept_connection() {
        let (origin, server) = kept_server(3, |_, _, _| (OK.to_vec(), false));
        let (r, kept) = call(&origin, None);
        assert_eq!(r.unwrap().body, b"{}");
        let (r, kept) = call(&origin, Some(kept.expect("an HTTP/1.1 answer with a length keeps the connection")));
        assert_eq!(r.unwrap().status, 200);
        let (r, kept) = call(&origin, kept);
        assert!(r.is_ok() && kept.is_some());
        let seen = server.join().unwrap();
        assert_eq!(seen.iter().map(|(c, _)| *c).collect::<Vec<_>>(), [1, 1, 1], "one connection for three calls");
        assert!(seen.iter().all(|(_, h)| !h.to_ascii_lowercase().contains("connection:")), "{seen:?}");
        let o = Origin::parse("http://127.0.0.1:1").unwrap();
        let req = String::from_utf8(request(&o, "/x", &[], b"{}", false).unwrap()).unwrap();
        assert!(req.contains("\r\nConnection: close\r\n"), "{req}");
    }

    /// An answer that says `Connection: close`, comes from HTTP/1.0, or
    /// runs to the end of the connection leaves no connection to keep.
    #[test]
    fn a_connection_the_answer_ends_is_not_kept() {
        for answer in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive, Close\r\n\r\n{}",
            b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\n\r\n{}",
        ] {
            let (origin, server) = kept_server(1, move |_, _, _| (answer.to_vec(), true));
            let (r, kept) = call(&origin, None);
            assert_eq!(r.unwrap().body, b"{}");
            assert!(kept.is_none(), "{}", String::from_utf8_lossy(answer));
            server.join().unwrap();
        }
        // Bytes after the answer (a second, unasked-for answer): not kept.
        let (origin, server) = kept_server(1, |_, _, _| ([OK, OK].concat(), false));
        let (r, kept) = call(&origin, None);
        assert!(r.is_ok() && kept.is_none());
        server.join().unwrap();
    }

    /// A server that closes the connection after its answer without saying
    /// so (or whose idle timeout ran out): the request on the kept
    /// connection gets no answer, and goes again on a new connection.
    #[test]
    fn a_kept_connection_the_server_closed_is_retried_on_a_new_one() {
        let (origin, server) = kept_server(2, |_, _, _| (OK.to_vec(), true));
        let (r, kept) = call(&origin, None);
        assert!(r.is_ok());
        let kept = kept.expect("the answer did not say close");
        // Let the server's close arrive (as an idle timeout would).
        std::thread::sleep(Duration::from_millis(50));
        let (r, _) = call(&origin, Some(kept));
        assert_eq!(r.unwrap().body, b"{}");
        let seen = server.join().unwrap();
        assert_eq!(seen.iter().map(|(c, _)| *c).collect::<Vec<_>>(), [1, 2], "the second call on a new connection");
    }

    /// A kept connection that fails after the answer began is not retried:
    /// the server has answered (part of) this request.
    #[test]
    fn a_broken_answer_on_a_kept_connection_is_not_retried() {
        let (origin, server) = kept_server(2, |_, nth, _| {
            if nth == 1 { (OK.to_vec(), false) } else { (b"HTTP/1.1 200 OK\r\nContent-Le".to_vec(), true) }
        });
        let (r, kept) = call(&origin, None);
        assert!(r.is_ok());
        let (r, kept) = call(&origin, kept);
        assert!(matches!(r, Err(Failure::Malformed(_))), "{r:?}");
        assert!(kept.is_none());
        let seen = server.join().unwrap();
        assert_eq!(seen.iter().map(|(c, _)| *c).collect::<Vec<_>>(), [1, 1], "no second connection");
    }
}
