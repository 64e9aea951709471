//! The plain-http client's response reader (`preloop_shared::http_plain`)
//! against a reference decoder, on seeded generated answers, well-formed and
//! mutated, fed in random pieces: both must agree on whether an answer is
//! read, and on its status and body. The reference takes the whole answer at
//! once: the head by `httparse` (the parser under hyper), the framing
//! straight from RFC 9112 with the client's documented bounds
//! (docs/hardening.md, "Round three"), so the incremental reader, its
//! bounds and its framing are held to a plain statement of the same rules.

use crate::common::Rng;
use preloop_shared::http_plain::{MAX_HEAD, MAX_HEADERS, MAX_INTERIM, MAX_LINE, MAX_TRAILERS, decode, wire_limit};

/// The reference: `Some((status, body))` for an answer the client must
/// read, `None` for one it must refuse.
fn reference(bytes: &[u8], max: u64) -> Option<(u16, Vec<u8>)> {
    let limit = usize::try_from(wire_limit(max)).unwrap();
    let mut pos = 0;
    let mut interim = 0;
    let (status, length, chunked) = loop {
        let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut fields);
        let Ok(httparse::Status::Complete(n)) = resp.parse(&bytes[pos..]) else { return None };
        if n > MAX_HEAD {
            return None;
        }
        let status = resp.code?;
        let (mut length, mut chunked) = (None::<u64>, false);
        for f in resp.headers.iter() {
            let v = std::str::from_utf8(f.value).ok().map(str::trim);
            if f.name.eq_ignore_ascii_case("content-length") {
                let v = v?;
                if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let n: u64 = v.parse().ok()?;
                if length.is_some_and(|m| m != n) {
                    return None;
                }
                length = Some(n);
            } else if f.name.eq_ignore_ascii_case("transfer-encoding") {
                let last = f.value.rsplit(|b| *b == b',').next().unwrap_or_default();
                if !last.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                    return None;
                }
                chunked = true;
            }
        }
        pos += n;
        if (100..200).contains(&status) {
            interim += 1;
            if interim > MAX_INTERIM {
                return None;
            }
            continue;
        }
        break (status, length, chunked);
    };
    let body = if status == 204 || status == 304 {
        Vec::new()
    } else if chunked {
        let mut body = Vec::new();
        loop {
            // chunk-size [SP/HTAB]* [";" ext] CRLF: up to the first CR.
            let cr = pos + bytes[pos..].iter().position(|b| *b == b'\r')?;
            if bytes.get(cr + 1) != Some(&b'\n') || cr + 2 - pos > MAX_LINE {
                return None;
            }
            let line = &bytes[pos..cr];
            let (size_part, _ext) = match line.iter().position(|b| *b == b';') {
                Some(i) => (&line[..i], Some(&line[i + 1..])),
                None => (line, None),
            };
            let digits = size_part.iter().take_while(|b| b.is_ascii_hexdigit()).count();
            if digits == 0 || digits > 16 || !size_part[digits..].iter().all(|b| *b == b' ' || *b == b'\t') {
                return None;
            }
            let size = u64::from_str_radix(std::str::from_utf8(&size_part[..digits]).unwrap(), 16).ok()?;
            pos = cr + 2;
            if size == 0 {
                let mut trailers = 0;
                loop {
                    let end = pos + bytes[pos..].windows(2).position(|w| w == b"\r\n")?;
                    if end + 2 - pos > MAX_LINE {
                        return None;
                    }
                    let empty = end == pos;
                    pos = end + 2;
                    if empty {
                        break;
                    }
                    trailers += 1;
                    if trailers > MAX_TRAILERS {
                        return None;
                    }
                }
                break body;
            }
            if body.len() as u64 + size > max {
                return None;
            }
            let size = size as usize;
            body.extend_from_slice(bytes.get(pos..pos + size)?);
            pos += size;
            if bytes.get(pos..pos + 2)? != b"\r\n" {
                return None;
            }
            pos += 2;
        }
    } else if let Some(n) = length {
        if n > max {
            return None;
        }
        let body = bytes.get(pos..pos + n as usize)?.to_vec();
        pos += n as usize;
        body
    } else {
        if (bytes.len() - pos) as u64 > max {
            return None;
        }
        let body = bytes[pos..].to_vec();
        pos = bytes.len();
        body
    };
    // The client reads no further than it needs; past the wire limit is an error.
    if pos > limit {
        return None;
    }
    Some((status, body))
}

fn hex(r: &mut Rng, n: usize) -> String {
    let s = match r.below(3) {
        0 => format!("{n:x}"),
        1 => format!("{n:X}"),
        _ => format!("{:0>w$x}", n, w = 1 + r.below(18)),
    };
    match r.below(8) {
        0 => format!("{s};ext=1"),
        1 => format!("{s} ;a=\"b c\""),
        2 => format!("{s}\t"),
        _ => s,
    }
}

/// One generated answer: a few interim heads, a final head with random
/// fields and framing, and a body; `max` is the body cap to read it with.
fn answer(r: &mut Rng, max: usize) -> Vec<u8> {
    let eol: &[u8] = if r.chance(20) { b"\n" } else { b"\r\n" };
    let mut out = Vec::new();
    let interim = if r.chance(10) { r.below(2 * MAX_INTERIM + 2) } else { r.below(3) };
    for _ in 0..interim {
        out.extend_from_slice(if r.chance(2) { b"HTTP/1.1 100 Continue" } else { b"HTTP/1.1 103 Early Hints" });
        out.extend_from_slice(eol);
        out.extend_from_slice(eol);
    }
    let status = *r.pick(&[200u16, 200, 201, 204, 304, 404, 500, 302]);
    let version = if r.chance(8) { "HTTP/1.0" } else { "HTTP/1.1" };
    out.extend_from_slice(format!("{version} {status} Whatever").as_bytes());
    out.extend_from_slice(eol);
    for _ in 0..r.below(4) {
        let field = r.pick(&["Content-Type: application/json", "X-A: v", "Server:  spaced  ", "X-Long: "]).to_string();
        let field = if field == "X-Long: " { format!("X-Long: {}", "l".repeat(r.below(2 * MAX_HEAD))) } else { field };
        out.extend_from_slice(field.as_bytes());
        out.extend_from_slice(eol);
    }
    let len = if r.chance(6) { r.below(2 * max + 2) } else { r.below(max + 1) };
    let body: Vec<u8> = (0..len).map(|i| b"{\"ab\": 1}\r\n0;"[(i + r.below(3)) % 13]).collect();
    let framing = r.below(10);
    match framing {
        0..=3 => {
            let n = match r.below(12) {
                0 => format!("{}", len + 1),
                1 => format!("+{len}"),
                2 => format!(" {len} "),
                _ => len.to_string(),
            };
            out.extend_from_slice(format!("Content-Length: {n}").as_bytes());
            out.extend_from_slice(eol);
            if r.chance(10) {
                out.extend_from_slice(
                    format!("Content-Length: {}", if r.chance(2) { len } else { len + 2 }).as_bytes(),
                );
                out.extend_from_slice(eol);
            }
        }
        4..=7 => {
            let te = *r.pick(&["chunked", "chunked", "gzip, chunked", "Chunked", "gzip", "chunked, gzip"]);
            out.extend_from_slice(format!("Transfer-Encoding: {te}").as_bytes());
            out.extend_from_slice(eol);
        }
        _ => {}
    }
    out.extend_from_slice(eol);
    if (4..=7).contains(&framing) {
        let mut rest = &body[..];
        let tiny = r.chance(40);
        while !rest.is_empty() {
            let n = if tiny { 1 } else { 1 + r.below(rest.len().min(300)) };
            let line = if tiny { format!("1;{}", "e".repeat(4000)) } else { hex(r, n) };
            out.extend_from_slice(format!("{line}\r\n").as_bytes());
            out.extend_from_slice(&rest[..n]);
            out.extend_from_slice(b"\r\n");
            rest = &rest[n..];
        }
        out.extend_from_slice(format!("{}\r\n", hex(r, 0)).as_bytes());
        let trailers = if r.chance(8) { r.below(2 * MAX_TRAILERS + 2) } else { r.below(3) };
        for _ in 0..trailers {
            let v = if r.chance(30) { "t".repeat(MAX_LINE) } else { "v".into() };
            out.extend_from_slice(format!("X-T: {v}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(&body);
    }
    out
}

/// Damage an answer: flip, insert or drop a byte, cut it short, or put a
/// huge chunk size in.
fn mutate(r: &mut Rng, bytes: &mut Vec<u8>) {
    if bytes.is_empty() {
        return;
    }
    for _ in 0..1 + r.below(3) {
        let at = r.below(bytes.len());
        match r.below(6) {
            0 => bytes[at] = *r.pick(b"\r\n:;0fF +-\t\x00\x7fG"),
            1 => bytes.insert(at, *r.pick(b"\r\n:;0fF +-")),
            2 => {
                bytes.remove(at);
            }
            3 => bytes.truncate(at),
            4 => {
                let big = r.pick(&["ffffffffffffffff", "fffffffffffffffff", "7fffffffffffffff", "10000000000000000"]);
                bytes.splice(at..at, big.bytes());
            }
            _ => bytes[at] = r.next() as u8,
        }
        if bytes.is_empty() {
            return;
        }
    }
}

#[test]
fn the_reader_agrees_with_a_reference_decoder() {
    let mut r = Rng(0x5eed_0f47_7100);
    let (mut read, mut refused) = (0, 0);
    for case in 0..4000 {
        let max = *r.pick(&[64usize, 1000, 4096]);
        let mut bytes = answer(&mut r, max);
        if r.chance(3) {
            mutate(&mut r, &mut bytes);
        }
        let piece = match r.below(4) {
            0 => 1 + r.below(8),
            1 => 1 + r.below(4096),
            _ => bytes.len().max(1),
        };
        let ours = decode(&bytes, piece, max as u64).ok().map(|a| (a.status, a.body));
        let want = reference(&bytes, max as u64);
        assert_eq!(
            ours,
            want,
            "case {case} (piece {piece}, max {max}): {:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(600)])
        );
        if want.is_some() { read += 1 } else { refused += 1 }
    }
    // Both kinds are exercised.
    assert!(read > 1000 && refused > 1000, "read {read}, refused {refused}");
}
