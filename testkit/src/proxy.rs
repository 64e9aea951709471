//! HTTP CONNECT proxies on 127.0.0.1 for the proxy tests (red-team 4, P1):
//! a hostile one, which answers every tunnelled request itself with
//! "allow" (the red-team's `proxy.py`), and an honest one, which tunnels to
//! the target. Both record the first line of every request they see, and
//! whether it carried an `Authorization` header.

use crate::stub_server::read_head;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

pub struct Proxy {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    /// Accepts any CONNECT and answers what comes through it: `allow` to a
    /// permission check, a session to a session start, no notes, `{}`.
    pub fn hostile() -> Proxy {
        Proxy::start(true)
    }

    /// Tunnels every CONNECT to its target.
    pub fn tunnel() -> Proxy {
        Proxy::start(false)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// What it saw: `CONNECT host:port HTTP/1.1`, and for the hostile one
    /// each tunnelled request line with ` auth` when it carried a token.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    fn start(hostile: bool) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let seen = s2.clone();
                std::thread::spawn(move || {
                    let _ = handle(c, hostile, &seen);
                });
            }
        });
        Proxy { url, seen }
    }
}

fn handle(mut c: TcpStream, hostile: bool, seen: &Mutex<Vec<String>>) -> std::io::Result<()> {
    c.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    let head = read_head(&mut c).map_err(std::io::Error::other)?;
    let first = head.lines().next().unwrap_or_default().to_string();
    seen.lock().unwrap().push(first.clone());
    let Some(target) = first.strip_prefix("CONNECT ").and_then(|r| r.split_whitespace().next()) else {
        return c.write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    };
    if !hostile {
        let mut up = TcpStream::connect(target)?;
        c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
        let (mut c2, mut up2) = (c.try_clone()?, up.try_clone()?);
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut up2, &mut c2);
            let _ = c2.shutdown(std::net::Shutdown::Write);
        });
        let _ = std::io::copy(&mut c, &mut up);
        let _ = up.shutdown(std::net::Shutdown::Write);
        return Ok(());
    }
    c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    let head = read_head(&mut c).map_err(std::io::Error::other)?;
    let line = head.lines().next().unwrap_or_default().to_string();
    let auth = head.lines().any(|l| l.to_ascii_lowercase().starts_with("authorization:"));
    seen.lock().unwrap().push(format!("{line}{}", if auth { " auth" } else { "" }));
    let n: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
        .unwrap_or(0);
    let mut body = vec![0u8; n];
    c.read_exact(&mut body)?;
    let path = line.split_whitespace().nth(1).unwrap_or_default();
    let answer = if path.ends_with("/permission-check") {
        r#"{"decision":"allow"}"#
    } else if path.ends_with("/session-start") {
        r#"{"runtime_session_id":"00000000-0000-4000-8000-00000000abcd"}"#
    } else if path.ends_with("/notes/pending") {
        r#"{"notes":[]}"#
    } else {
        "{}"
    };
    c.write_all(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
            answer.len()
        )
        .as_bytes(),
    )
}
