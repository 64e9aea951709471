//! Token redaction for everything we print, log or write that a server (or
//! a proxy in front of it) produced. A hostile or broken server can echo the
//! bearer token back, as is or escaped: JSON `\u0061gt_…` escapes, percent
//! encoding, `\/`. [`redact`] finds the token in the text as a reader or a
//! JSON/URL decoder would see it and replaces the whole original span, and
//! [`redact_value`] does the same inside every string of a parsed document.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// A bearer token. Never printed: `Debug` and `Display` redact it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }
    /// The token itself, for the Authorization header and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// A short, safe hint: the token kind prefix and length.
    pub fn hint(&self) -> String {
        let prefix = self.0.split('_').next().filter(|p| p.len() <= 5 && self.0.contains('_')).unwrap_or("");
        if prefix.is_empty() {
            format!("<{} chars>", self.0.len())
        } else {
            format!("{prefix}_… <{} chars>", self.0.len())
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// What replaces a token.
pub const REDACTED: &str = "[redacted]";

/// `text` with every occurrence of each secret replaced by [`REDACTED`],
/// whether it appears plainly or escaped (JSON `\uXXXX` and `\/`, `%XX`).
pub fn redact(text: &str, secrets: &[&Secret]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        let token = s.expose();
        if token.len() >= 4 {
            out = redact_one(&out, token);
        }
    }
    out
}

/// Redact every string (and key) of a JSON document in place.
pub fn redact_value(v: &mut Value, secrets: &[&Secret]) {
    match v {
        Value::String(s) => {
            let r = redact(s, secrets);
            if r != *s {
                *s = r;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| redact_value(x, secrets)),
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let r = redact(&k, secrets);
                if let Some(mut inner) = m.remove(&k) {
                    redact_value(&mut inner, secrets);
                    m.insert(r, inner);
                }
            }
        }
        _ => {}
    }
}

/// What replaces the password (or a lone user name) of a URL.
pub const URL_SECRET: &str = "***";

/// `text` with the credentials of every URL in it hidden: `http://user:pass@host`
/// becomes `http://user:***@host`, and `https://tok@host` (a user name alone,
/// often a token) becomes `https://***@host`. A basic-auth password in front
/// of a reverse proxy is a secret like a token (docs/guarantees.md), so every
/// place a URL is shown passes through here: the operator CLI's output and
/// messages, `doctor` (text and `--json`), the hook log. Text without `://`
/// is returned as is, without a copy.
pub fn redact_url_credentials(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("://") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut from = 0;
    while let Some(at) = text[from..].find("://") {
        let start = from + at + 3;
        // The authority: up to the path, query, fragment, or where the URL plainly ends.
        let len = text[start..]
            .find(|c: char| matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>' | '`') || c.is_whitespace())
            .unwrap_or(text.len() - start);
        let authority = &text[start..start + len];
        if let Some(userinfo_len) = authority.rfind('@').filter(|n| *n > 0) {
            let userinfo = &authority[..userinfo_len];
            let shown_user = match userinfo.split_once(':') {
                Some((user, _)) => format!("{user}:{URL_SECRET}"),
                None => URL_SECRET.to_string(),
            };
            out.push_str(&text[copied..start]);
            out.push_str(&shown_user);
            copied = start + userinfo_len;
        }
        from = start + len;
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}

/// [`redact_url_credentials`] in every string value of a JSON document, in
/// place (keys, and so their order, are left as they are).
pub fn redact_url_value(v: &mut Value) {
    match v {
        Value::String(s) => {
            if let std::borrow::Cow::Owned(r) = redact_url_credentials(s) {
                *s = r;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact_url_value),
        Value::Object(m) => m.values_mut().for_each(redact_url_value),
        _ => {}
    }
}

/// One decoded character and the span of `text` it came from.
struct Unit {
    c: char,
    start: usize,
    end: usize,
}

/// Decode JSON string escapes and percent escapes, keeping positions.
fn decode(text: &str) -> Vec<Unit> {
    let b = text.as_bytes();
    let mut units = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        if let Some(after) = rest.strip_prefix("\\u")
            && let Some(code) = after.get(..4).and_then(|h| u32::from_str_radix(h, 16).ok())
            && let Some(c) = char::from_u32(code)
        {
            units.push(Unit { c, start: i, end: i + 6 });
            i += 6;
            continue;
        }
        if let Some(after) = rest.strip_prefix('\\')
            && let Some(c @ ('/' | '\\' | '"')) = after.chars().next()
        {
            units.push(Unit { c, start: i, end: i + 2 });
            i += 2;
            continue;
        }
        if let Some(after) = rest.strip_prefix('%')
            && let Some(code) = after.get(..2).and_then(|h| u8::from_str_radix(h, 16).ok())
            && code.is_ascii()
        {
            units.push(Unit { c: code as char, start: i, end: i + 3 });
            i += 3;
            continue;
        }
        // `i < b.len()` on a char boundary: `rest` has a first char.
        let Some(c) = rest.chars().next() else { break };
        units.push(Unit { c, start: i, end: i + c.len_utf8() });
        i += c.len_utf8();
    }
    units
}

fn redact_one(text: &str, token: &str) -> String {
    if text.contains(token) && !text.contains(['\\', '%']) {
        return text.replace(token, REDACTED);
    }
    let units = decode(text);
    let want: Vec<char> = token.chars().collect();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i + want.len() <= units.len() {
        if units[i..i + want.len()].iter().zip(&want).all(|(u, c)| u.c == *c) {
            spans.push((units[i].start, units[i + want.len() - 1].end));
            i += want.len();
        } else {
            i += 1;
        }
    }
    if spans.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (start, end) in spans {
        out.push_str(&text[copied..start]);
        out.push_str(REDACTED);
        copied = end;
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc(s: &str) -> String {
        s.chars().map(|c| format!("\\u{:04x}", c as u32)).collect()
    }

    #[test]
    fn plain_and_escaped_echoes_are_redacted() {
        let t = Secret::new("agt_RuntimeSecret_BBBB2222");
        let secrets = [&t];
        assert_eq!(redact("Bearer agt_RuntimeSecret_BBBB2222!", &secrets), "Bearer [redacted]!");
        let json = format!("{{\"detail\":\"Bearer {}\"}}", esc("agt_RuntimeSecret_BBBB2222"));
        let r = redact(&json, &secrets);
        assert!(!r.contains("\\u0061") && r.contains("[redacted]"), "{r}");
        // Half escaped, half plain.
        let mixed = format!("x {}RuntimeSecret_BBBB2222 y", esc("agt_"));
        assert_eq!(redact(&mixed, &secrets), "x [redacted] y");
        assert_eq!(redact("t=agt%5FRuntimeSecret%5FBBBB2222&x", &secrets), "t=[redacted]&x");
        assert_eq!(redact("nothing here \\u0041", &secrets), "nothing here \\u0041");
        // Decoded, the document holds no token either.
        let v: Value = serde_json::from_str(&json).unwrap();
        let mut v2 = v.clone();
        redact_value(&mut v2, &secrets);
        assert_eq!(v2["detail"], "Bearer [redacted]");
    }

    /// Red-team 3, N8.
    #[test]
    fn url_credentials_are_hidden() {
        let r = |t| redact_url_credentials(t).into_owned();
        assert_eq!(
            r("server http://admin:Sup3rS3cretPw@127.0.0.1:18081 unreachable"),
            "server http://admin:***@127.0.0.1:18081 unreachable"
        );
        assert_eq!(r("https://ghp_tok@example.com/api/v1/x?a=b@c"), "https://***@example.com/api/v1/x?a=b@c");
        assert_eq!(r("a http://u:p@h/x and ws://v:q@[::1]:8/y"), "a http://u:***@h/x and ws://v:***@[::1]:8/y");
        assert_eq!(r("http://u:p@ss@h:1"), "http://u:***@h:1");
        assert_eq!(r("(http://u:p@h)"), "(http://u:***@h)");
        for plain in ["no url", "http://127.0.0.1:8080/api", "mailto:a@b", "see https://h/p@x", "://@"] {
            assert_eq!(r(plain), plain);
            assert!(matches!(redact_url_credentials(plain), std::borrow::Cow::Borrowed(_)));
        }
    }

    #[test]
    fn short_or_empty_secrets_are_ignored() {
        let t = Secret::new("");
        assert_eq!(redact("abc", &[&t]), "abc");
    }
}
