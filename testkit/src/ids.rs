//! Identifiers and secrets in the shapes the real server mints (docs/contracts/preloop-server.md §1, §2.1),
//! from a small process-wide RNG (splitmix64 seeded from `/dev/urandom`, or
//! from the clock, pid and a counter when that is unavailable). No crates.

use std::io::Read;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static STATE: Mutex<Option<u64>> = Mutex::new(None);
static COUNTER: AtomicU64 = AtomicU64::new(0);

fn seed() -> u64 {
    let mut buf = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom")
        && f.read_exact(&mut buf).is_ok()
    {
        return u64::from_le_bytes(buf);
    }
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The next 64 random bits.
pub(crate) fn next_u64() -> u64 {
    let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let s = guard.get_or_insert_with(seed);
    // splitmix64
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub(crate) fn random_bytes(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        out.extend_from_slice(&next_u64().to_le_bytes());
    }
    out.truncate(n);
    out
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// A random (version 4) UUID, lowercase and hyphenated.
pub(crate) fn uuid4() -> String {
    let mut b = random_bytes(16);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// A note id: the first 16 hex digits of a random UUID4 (§1).
pub(crate) fn note_id() -> String {
    uuid4().replace('-', "")[..16].to_string()
}

/// URL-safe base64 without padding, like Python's `secrets.token_urlsafe`.
pub(crate) fn b64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = match chunk.len() {
            3 => (u32::from(chunk[0]) << 16) | (u32::from(chunk[1]) << 8) | u32::from(chunk[2]),
            2 => (u32::from(chunk[0]) << 16) | (u32::from(chunk[1]) << 8),
            _ => u32::from(chunk[0]) << 16,
        };
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// `secrets.token_urlsafe(n)`: `n` random bytes, base64url, no padding.
pub(crate) fn token_urlsafe(n: usize) -> String {
    b64url(&random_bytes(n))
}

/// A durable managed-agent credential: `agt_` + 43 url-safe chars (§2.1).
pub(crate) fn runtime_token() -> String {
    format!("agt_{}", token_urlsafe(32))
}

/// A managed agent's principal id: `custom_` + 22 url-safe chars (§2.1).
pub(crate) fn custom_principal_id() -> String {
    format!("custom_{}", token_urlsafe(16))
}

/// A personal API key: 40 ASCII letters and digits (§2.1).
pub(crate) fn personal_api_key() -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    (0..40).map(|_| ALNUM[(next_u64() % ALNUM.len() as u64) as usize] as char).collect()
}

/// A JWT-shaped access token (HS256 header, `sub` = user id, random
/// signature). It contains `.`, which is what the hook routes key on (§2.3).
pub(crate) fn user_jwt(user_id: &str, exp_secs: i64) -> String {
    let header = b64url(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = b64url(format!(r#"{{"sub":"{user_id}","exp":{exp_secs},"type":"access"}}"#).as_bytes());
    format!("{header}.{payload}.{}", token_urlsafe(32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let u = uuid4();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        let n = note_id();
        assert_eq!(n.len(), 16);
        assert!(n.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        let t = runtime_token();
        assert_eq!(t.len(), 4 + 43);
        assert!(!t.contains('.'));
        assert_eq!(custom_principal_id().len(), 7 + 22);
        let k = personal_api_key();
        assert_eq!(k.len(), 40);
        assert!(k.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(user_jwt("x", 1).matches('.').count(), 2);
        assert_eq!(b64url(b"f"), "Zg");
        assert_eq!(b64url(b"fo"), "Zm8");
        assert_eq!(b64url(b"foo"), "Zm9v");
        assert_eq!(b64url(&[0xfb, 0xff]), "-_8");
    }
}
