//! Hook stdin as harnesses really send it.
//!
//! A tool's input is written by the model, and the harnesses serialize it
//! with their own JSON writers. Three things they produce make `serde_json`
//! refuse the whole payload, and a payload that does not parse would skip
//! the central permission check (docs/guarantees.md, "Unparsable input"):
//!
//! * a lone UTF-16 surrogate escape (`"\ud800"`): Node's `JSON.stringify`
//!   (Claude Code, Cursor, Gemini CLI) writes one for a lone surrogate in a
//!   string; it becomes U+FFFD here, as `JSON.parse` + a UTF-8 encoder would;
//! * nesting deeper than `serde_json`'s recursion limit (128): a container
//!   deeper than [`MAX_DEPTH`] is kept as its raw JSON text, a string, so
//!   the check still sees every key above it (memory stays linear in the
//!   input, whatever the depth);
//! * bytes that are not UTF-8: replaced by U+FFFD.
//!
//! Everything else is plain `serde_json`. The common payload is scanned once
//! and parsed directly.

use serde_json::Value;

/// Containers nested deeper than this are kept as raw JSON text.
pub const MAX_DEPTH: usize = 100;

/// Parse a hook payload: a JSON object, a UTF-8 BOM and surrounding
/// whitespace tolerated.
pub fn parse_payload(buf: &[u8]) -> Result<Value, String> {
    let buf = buf.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(buf);
    if buf.iter().all(u8::is_ascii_whitespace) {
        return Err("empty stdin".into());
    }
    let text = String::from_utf8_lossy(buf);
    let v: Value = match normalize(&text) {
        None => serde_json::from_str(&text),
        Some(fixed) => serde_json::from_str(&fixed),
    }
    .map_err(|e| format!("stdin is not JSON: {e}"))?;
    if !v.is_object() {
        return Err("stdin is not a JSON object".into());
    }
    Ok(v)
}

/// A payload's string field; `None` when it is missing or not a string.
pub fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// A payload's string field, trimmed; `None` when it is missing, not a
/// string, or blank.
pub fn non_blank<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    str_field(v, key).map(str::trim).filter(|s| !s.is_empty())
}

/// The text with lone surrogate escapes replaced and over-deep containers
/// turned into strings, or `None` when it needs neither.
fn normalize(text: &str) -> Option<String> {
    let b = text.as_bytes();
    if !needs_normalizing(b) {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut depth = 0usize;
    let mut i = 0;
    let mut copied = 0; // text[copied..i] is still to be copied
    while i < b.len() {
        match b[i] {
            b'"' => {
                // A string: copy it, fixing lone surrogate escapes.
                out.push_str(&text[copied..i]);
                let end = string_end(b, i);
                push_fixed_string(&mut out, &text[i..end]);
                i = end;
                copied = i;
            }
            b'[' | b'{' if depth == MAX_DEPTH => {
                out.push_str(&text[copied..i]);
                let end = container_end(b, i);
                // serde_json writes a string literal of the raw text.
                out.push_str(&serde_json::to_string(&text[i..end]).unwrap_or_else(|_| "\"\"".into()));
                i = end;
                copied = i;
            }
            b'[' | b'{' => {
                depth += 1;
                i += 1;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[copied..]);
    Some(out)
}

fn needs_normalizing(b: &[u8]) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if in_string {
            match c {
                b'\\' => {
                    if b.get(i + 1) == Some(&b'u') && surrogate_at(b, i + 2).is_some() {
                        return true; // checked precisely later; rare
                    }
                    i += 2;
                    continue;
                }
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match c {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return true;
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        i += 1;
    }
    false
}

/// The index just past the string starting at `start` (a `"`), or the end
/// of the text for an unterminated one.
fn string_end(b: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The index just past the container starting at `start`, or the end of
/// the text for an unterminated one.
fn container_end(b: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = string_end(b, i);
                continue;
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// The surrogate code unit of a `\uXXXX` escape whose hex digits start at `i`.
fn surrogate_at(b: &[u8], i: usize) -> Option<u16> {
    let hex = b.get(i..i + 4)?;
    let s = std::str::from_utf8(hex).ok()?;
    let v = u16::from_str_radix(s, 16).ok()?;
    (0xD800..=0xDFFF).contains(&v).then_some(v)
}

/// Copy one JSON string literal, replacing every lone surrogate escape by
/// `\ufffd` (a high one followed by a low one is a pair and stays).
fn push_fixed_string(out: &mut String, s: &str) {
    let b = s.as_bytes();
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if b.get(i + 1) != Some(&b'u') {
            i += 2;
            continue;
        }
        match surrogate_at(b, i + 2) {
            Some(0xD800..=0xDBFF) => {
                let paired = b.get(i + 6) == Some(&b'\\')
                    && b.get(i + 7) == Some(&b'u')
                    && surrogate_at(b, i + 8).is_some_and(|lo| lo >= 0xDC00);
                if paired {
                    i += 12;
                } else {
                    out.push_str(&s[copied..i]);
                    out.push_str("\\ufffd");
                    i += 6;
                    copied = i;
                }
            }
            Some(_) => {
                // A low surrogate with no high one before it.
                out.push_str(&s[copied..i]);
                out.push_str("\\ufffd");
                i += 6;
                copied = i;
            }
            None => i += 6,
        }
    }
    out.push_str(&s[copied.min(s.len())..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_payloads_parse_as_serde_json_does() {
        let v = parse_payload(br#"{"a":[1,{"b":"c\n\"d"}],"e":"\ud83d\ude00"}"#).unwrap();
        assert_eq!(v, json!({"a": [1, {"b": "c\n\"d"}], "e": "😀"}));
        assert!(normalize(r#"{"a":"\u0041 \\ud800 [[{"}"#).is_none());
        assert_eq!(parse_payload(b"\xEF\xBB\xBF {} ").unwrap(), json!({}));
        assert!(parse_payload(b"  ").is_err());
        assert!(parse_payload(b"[1]").is_err());
        assert!(parse_payload(b"{\"a\":").is_err());
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let v = parse_payload(br#"{"tool_input":{"command":"rm -rf /srv/prod # \ud800"}}"#).unwrap();
        assert_eq!(v["tool_input"]["command"], "rm -rf /srv/prod # \u{fffd}");
        let v = parse_payload(br#"{"a":"\udc00x\uD800\u0041","b":"\ud83d\ude00"}"#).unwrap();
        assert_eq!(v["a"], "\u{fffd}x\u{fffd}A");
        assert_eq!(v["b"], "😀");
        // A surrogate escape in a key too.
        let v = parse_payload(br#"{"\ud800k":1}"#).unwrap();
        assert_eq!(v["\u{fffd}k"], 1);
    }

    #[test]
    fn deep_nesting_is_kept_as_raw_text_below_the_limit() {
        let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
        let payload = format!(r#"{{"tool_name":"db_exec","tool_input":{{"q":"DROP TABLE x","o":{deep}}}}}"#);
        let v = parse_payload(payload.as_bytes()).unwrap();
        assert_eq!(v["tool_name"], "db_exec");
        assert_eq!(v["tool_input"]["q"], "DROP TABLE x");
        // Levels down to MAX_DEPTH are structure; the rest is one string.
        let mut cur = &v["tool_input"]["o"];
        let mut levels = 2; // the payload object and tool_input
        while let Some(a) = cur.as_array() {
            levels += 1;
            cur = &a[0];
        }
        assert_eq!(levels, MAX_DEPTH);
        assert!(cur.as_str().unwrap().starts_with("[["));
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let v = parse_payload(b"{\"a\":\"x\xff\"}").unwrap();
        assert_eq!(v["a"], "x\u{fffd}");
    }

    #[test]
    fn a_million_levels_parse_in_linear_memory() {
        let deep = format!("{{\"a\":{}1{}}}", "{\"b\":".repeat(1_000_000), "}".repeat(1_000_000));
        let v = parse_payload(deep.as_bytes()).unwrap();
        assert!(v["a"]["b"].is_object());
    }
}
