//! The physical floor of one hook call: start, read stdin, make one HTTP/1.1
//! POST over a fresh loopback TCP connection, read the answer, exit. No TLS,
//! no JSON, no config. `FLOOR_ADDR=127.0.0.1:PORT FLOOR_PATH=/api/...`.
use std::io::{Read, Write};
use std::net::TcpStream;

fn main() {
    let mut body = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut body);
    let addr = std::env::var("FLOOR_ADDR").unwrap_or_default();
    let path = std::env::var("FLOOR_PATH").unwrap_or_else(|_| "/".into());
    let token = std::env::var("FLOOR_TOKEN").unwrap_or_default();
    let Ok(mut s) = TcpStream::connect(&addr) else { return };
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(&body);
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
}
