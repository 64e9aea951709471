//! A tiny blocking HTTP/1.1 client for tests (one connection per request,
//! `Connection: close`), so tests need no HTTP crate. Plain `http://` only.

use serde_json::Value;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A response as received.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    /// Lower-cased names, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
    }

    /// The body as JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Read timeout applied to every request.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// Send one request. `url` is `http://host:port/path?query`; `headers` are
/// sent as given (`Host`, `Content-Length` and `Connection: close` are added).
pub fn request(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> io::Result<HttpResponse> {
    request_with_timeout(method, url, headers, body, TIMEOUT)
}

pub fn request_with_timeout(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> io::Result<HttpResponse> {
    let rest =
        url.strip_prefix("http://").ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "only http:// URLs"))?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let stream = TcpStream::connect(host)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = body.unwrap_or_default();
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        head.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut w = &stream;
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    w.write_all(&out)?;
    read_response(&mut BufReader::new(stream), method == "HEAD")
}

/// Read one response from a stream (used by keep-alive tests too).
pub fn read_response<R: Read>(reader: &mut BufReader<R>, head_only: bool) -> io::Result<HttpResponse> {
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_string());
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before a response"));
        }
        let status: u16 =
            line.split(' ').nth(1).and_then(|s| s.trim().parse().ok()).ok_or_else(|| bad("bad status line"))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Err(bad("eof in headers"));
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        if status == 100 {
            continue;
        }
        let mut resp = HttpResponse { status, headers, body: Vec::new() };
        if head_only || status == 204 || status == 304 {
            return Ok(resp);
        }
        if let Some(n) = resp.header("content-length").and_then(|v| v.parse::<usize>().ok()) {
            let mut body = vec![0u8; n];
            reader.read_exact(&mut body)?;
            resp.body = body;
        } else {
            reader.read_to_end(&mut resp.body)?;
        }
        return Ok(resp);
    }
}

fn auth_headers<'a>(token: Option<&'a str>, buf: &'a mut String) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![("content-type", "application/json")];
    if let Some(t) = token {
        *buf = format!("Bearer {t}");
        h.push(("authorization", buf.as_str()));
    }
    h
}

/// `POST` a JSON body with an optional bearer token.
pub fn post_json(url: &str, token: Option<&str>, body: &Value) -> io::Result<HttpResponse> {
    let mut buf = String::new();
    let headers = auth_headers(token, &mut buf);
    request("POST", url, &headers, Some(body.to_string().as_bytes()))
}

/// `GET` with an optional bearer token.
pub fn get(url: &str, token: Option<&str>) -> io::Result<HttpResponse> {
    let mut buf = String::new();
    let headers = auth_headers(token, &mut buf);
    request("GET", url, &headers[1..], None)
}
