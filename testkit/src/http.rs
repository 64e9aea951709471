//! A small HTTP/1.1 server core on `std::net`: one thread per connection,
//! keep-alive, `Content-Length` and chunked request bodies, `Expect:
//! 100-continue`, `Connection: close`. Malformed requests get a 400 (like
//! uvicorn's `Invalid HTTP request received.`) and the connection is closed;
//! nothing here panics on input.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

/// Longest request line or header line accepted.
const MAX_LINE: u64 = 16 * 1024;
/// Most header bytes accepted per request.
const MAX_HEADER_BYTES: usize = 64 * 1024;
const MAX_HEADERS: usize = 128;
/// Largest request body accepted (413 beyond).
pub(crate) const MAX_BODY: usize = 64 * 1024 * 1024;
/// An idle keep-alive connection is closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// One parsed request.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub method: String,
    /// The path without the query string, still percent-encoded.
    pub path: String,
    /// The raw query string (without `?`), possibly empty.
    pub query: String,
    /// Header names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub http10: bool,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Whether the client wants the connection kept open after this request.
    pub fn keep_alive(&self) -> bool {
        let conn = self.header("connection").map(|v| v.to_ascii_lowercase()).unwrap_or_default();
        let has = |t: &str| conn.split(',').any(|p| p.trim() == t);
        if self.http10 { has("keep-alive") } else { !has("close") }
    }

    /// Decoded query parameters (`+` is a space), in order.
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        self.query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (percent_decode(&k.replace('+', " ")), percent_decode(&v.replace('+', " ")))
            })
            .collect()
    }
}

/// Percent-decoding; invalid escapes are kept literally, invalid UTF-8 is
/// replaced.
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = ((b[i + 1] as char).to_digit(16), (b[i + 2] as char).to_digit(16))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One response. `content-length` and `connection` are added when written.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json<T: serde::Serialize + ?Sized>(status: u16, value: &T) -> Response {
        let body = serde_json::to_vec(value).unwrap_or_else(|_| b"null".to_vec());
        Response { status, headers: vec![("content-type".into(), "application/json".into())], body }
    }

    /// A status with no body and no content headers (204).
    pub fn empty(status: u16) -> Response {
        Response { status, headers: Vec::new(), body: Vec::new() }
    }

    pub fn text(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Response {
        Response { status, headers: vec![("content-type".into(), content_type.into())], body: body.into() }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.to_ascii_lowercase(), value.to_string()));
        self
    }

    fn serialize(&self, close: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.body.len() + 160);
        out.extend_from_slice(format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status)).as_bytes());
        out.extend_from_slice(b"server: preloop-fake\r\n");
        for (k, v) in &self.headers {
            out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        // Starlette sends no content-length on 204/304 and 1xx.
        if !(self.status < 200 || self.status == 204 || self.status == 304) {
            out.extend_from_slice(format!("content-length: {}\r\n", self.body.len()).as_bytes());
        }
        if close {
            out.extend_from_slice(b"connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if !(self.status == 204 || self.status == 304) {
            out.extend_from_slice(&self.body);
        }
        out
    }
}

/// What the application wants done with a request.
pub(crate) enum Outcome {
    Respond(Response),
    /// Keep the connection open and never answer (until the peer goes away
    /// or the server stops).
    Hang,
    /// Close the connection without writing anything.
    Close,
    /// Write this answer (a 101), then hand the connection over (a WebSocket).
    Upgrade(Response, Box<dyn FnOnce(TcpStream) + Send>),
}

pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Request Entity Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

enum ReadError {
    /// Malformed: answer 400 and close.
    Bad,
    /// Body too large: answer 413 and close.
    TooLarge,
    /// The socket failed or closed mid-request: just close.
    Io,
}

fn read_line(reader: &mut BufReader<TcpStream>, buf: &mut Vec<u8>) -> Result<usize, ReadError> {
    buf.clear();
    let n = reader.by_ref().take(MAX_LINE).read_until(b'\n', buf).map_err(|_| ReadError::Io)?;
    if n > 0 && !buf.ends_with(b"\n") {
        // Either the line is longer than MAX_LINE or the peer closed mid-line.
        return Err(if n as u64 >= MAX_LINE { ReadError::Bad } else { ReadError::Io });
    }
    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        buf.pop();
    }
    Ok(n)
}

/// Read one request. `Ok(None)` is a clean end of the connection.
fn read_request(reader: &mut BufReader<TcpStream>, writer: &TcpStream) -> Result<Option<Request>, ReadError> {
    let mut line = Vec::new();
    // Skip stray empty lines before a request line (RFC 9112 §2.2).
    let mut skipped = 0;
    loop {
        let n = read_line(reader, &mut line)?;
        if n == 0 {
            return Ok(None);
        }
        if !line.is_empty() {
            break;
        }
        skipped += 1;
        if skipped > 8 {
            return Err(ReadError::Bad);
        }
    }
    let request_line = std::str::from_utf8(&line).map_err(|_| ReadError::Bad)?.to_string();
    let mut parts = request_line.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) => (m.to_string(), t.to_string(), v.to_string()),
        _ => return Err(ReadError::Bad),
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) || !target.starts_with('/') {
        return Err(ReadError::Bad);
    }
    let http10 = match version.as_str() {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => return Err(ReadError::Bad),
    };
    let mut headers: Vec<(String, String)> = Vec::new();
    let mut header_bytes = 0usize;
    loop {
        let n = read_line(reader, &mut line)?;
        if n == 0 {
            return Err(ReadError::Io);
        }
        if line.is_empty() {
            break;
        }
        header_bytes += n;
        if header_bytes > MAX_HEADER_BYTES || headers.len() >= MAX_HEADERS {
            return Err(ReadError::Bad);
        }
        let text = String::from_utf8_lossy(&line);
        let (name, value) = text.split_once(':').ok_or(ReadError::Bad)?;
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
            return Err(ReadError::Bad);
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.clone(), String::new()),
    };
    let mut req = Request { method, path, query, headers, body: Vec::new(), http10 };

    let chunked = match req.header("transfer-encoding") {
        None => false,
        Some(te) if te.eq_ignore_ascii_case("chunked") => true,
        Some(_) => return Err(ReadError::Bad),
    };
    let lengths: Vec<&str> =
        req.headers.iter().filter(|(k, _)| k == "content-length").map(|(_, v)| v.as_str()).collect();
    let content_length = if lengths.is_empty() {
        None
    } else {
        let first = lengths[0];
        if lengths.iter().any(|l| *l != first) || chunked {
            return Err(ReadError::Bad);
        }
        if first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ReadError::Bad);
        }
        Some(first.parse::<usize>().map_err(|_| ReadError::TooLarge)?)
    };
    if content_length.is_some_and(|n| n > MAX_BODY) {
        return Err(ReadError::TooLarge);
    }
    let wants_body = chunked || content_length.unwrap_or(0) > 0;
    if wants_body && req.header("expect").is_some_and(|e| e.eq_ignore_ascii_case("100-continue")) {
        let mut w = writer;
        w.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").map_err(|_| ReadError::Io)?;
    }
    if chunked {
        req.body = read_chunked(reader, &mut line)?;
    } else if let Some(n) = content_length {
        let mut body = vec![0u8; n];
        reader.read_exact(&mut body).map_err(|_| ReadError::Io)?;
        req.body = body;
    }
    Ok(Some(req))
}

fn read_chunked(reader: &mut BufReader<TcpStream>, line: &mut Vec<u8>) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    loop {
        if read_line(reader, line)? == 0 {
            return Err(ReadError::Io);
        }
        let text = std::str::from_utf8(line).map_err(|_| ReadError::Bad)?;
        let size_text = text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| ReadError::Bad)?;
        if size == 0 {
            // Trailers until an empty line.
            loop {
                if read_line(reader, line)? == 0 {
                    return Err(ReadError::Io);
                }
                if line.is_empty() {
                    return Ok(body);
                }
            }
        }
        if body.len() + size > MAX_BODY {
            return Err(ReadError::TooLarge);
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).map_err(|_| ReadError::Io)?;
        if read_line(reader, line)? == 0 || !line.is_empty() {
            return Err(ReadError::Bad);
        }
    }
}

fn write_response(stream: &TcpStream, resp: &Response, close: bool) -> io::Result<()> {
    let mut w = stream;
    w.write_all(&resp.serialize(close))?;
    w.flush()
}

/// Serve one connection until it closes, the client asks to close, or
/// `stopping()` turns true. `handle` decides each request.
pub(crate) fn serve_connection(
    stream: TcpStream,
    stopping: &dyn Fn() -> bool,
    wait_stop: &dyn Fn(Duration),
    handle: &mut dyn FnMut(&Request) -> Outcome,
) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    let reader_stream = match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    };
    let mut reader = BufReader::with_capacity(16 * 1024, reader_stream);
    loop {
        if stopping() {
            break;
        }
        let req = match read_request(&mut reader, &stream) {
            Ok(Some(r)) => r,
            Ok(None) | Err(ReadError::Io) => break,
            Err(ReadError::Bad) => {
                let resp = Response::text(400, "text/plain; charset=utf-8", "Invalid HTTP request received.");
                let _ = write_response(&stream, &resp, true);
                break;
            }
            Err(ReadError::TooLarge) => {
                let resp = Response::json(413, &serde_json::json!({"detail": "Request Entity Too Large"}));
                let _ = write_response(&stream, &resp, true);
                break;
            }
        };
        let keep_alive = req.keep_alive();
        match handle(&req) {
            Outcome::Respond(resp) => {
                let close = !keep_alive || stopping();
                if write_response(&stream, &resp, close).is_err() || close {
                    break;
                }
            }
            Outcome::Close => break,
            Outcome::Upgrade(resp, serve) => {
                if write_response(&stream, &resp, false).is_ok()
                    && let Ok(s) = stream.try_clone()
                {
                    serve(s);
                }
                break;
            }
            Outcome::Hang => {
                hang(&stream, stopping, wait_stop);
                break;
            }
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// Hold the connection without answering until the peer closes it or the
/// server stops.
fn hang(stream: &TcpStream, stopping: &dyn Fn() -> bool, wait_stop: &dyn Fn(Duration)) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut probe = [0u8; 1024];
    loop {
        if stopping() {
            return;
        }
        match stream.peek(&mut probe) {
            Ok(0) => return,
            // The client sent more (pipelined) data: drain it and keep hanging.
            Ok(n) => {
                let mut sink = vec![0u8; n];
                let mut r = stream;
                if r.read(&mut sink).is_err() {
                    return;
                }
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                wait_stop(Duration::from_millis(50));
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_percent() {
        assert_eq!(percent_decode("a%20b"), "a b");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%4"), "%4");
        assert_eq!(percent_decode("%41%42"), "AB");
        assert_eq!(percent_decode("%"), "%");
    }
}
