//! The Preloop server's redaction of free text, so the local inbox keeps
//! what the server keeps: a session's title is its first prompt as one line,
//! with credential-looking values masked, at most 120 characters
//! (docs/contracts/preloop-server.md §4.1 `first_prompt`; docs/guarantees.md
//! "The local inbox").
//!
//! A port of Preloop 0.17.1's `title_from_prompt`
//! (`services/agent_session_lineage.py`), `redact_text`
//! (`services/session_search_index.py`) and `scrub_secrets`
//! (`utils/secret_scrubbing.py`), in their order:
//!
//! 1. labelled pairs: `api_key: v`, `password=v`, `x-auth-token: "v w"` →
//!    `<label>: [redacted]`;
//! 2. URL userinfo (`https://user:[redacted]@host`, `https://[redacted]@host`),
//!    credential query parameters (`?key=`, `&api_key=`, `&access_token=`),
//!    `Authorization: Bearer|Token|Basic`, `PRIVATE-TOKEN:` and
//!    `X-Gitlab-Token:` headers;
//! 3. known key shapes, keeping their prefix: `github_pat_`, `ghp_` (and
//!    `gho_ ghu_ ghs_ ghr_`), `glpat-`, other GitLab tokens (`gl-token-`),
//!    `AIza`, `sk-ant-`, `sk-`, `preloop_`;
//! 4. PEM private-key blocks.
//!
//! Like the server, this does not catch a high-entropy blob with no known
//! prefix and no label.
//!
//! Where Python's patterns use a lookahead or a bounded repetition too large
//! for a linear-time automaton (`{1,4096}` of a Unicode class), the pattern
//! here matches the unbounded run and the bound is checked on the match:
//! each of those runs is maximal in the Python pattern too (the character
//! that must follow it cannot be part of it), so both find the same matches.
//! The labelled-pair pattern (`[\w.-]{0,64}` around a keyword) would take
//! the regex compiler about 100 ms, so `labelled` walks it by hand, in the
//! order Python's backtracking tries it. Python's `\w` is `str.isalnum()`
//! or `_` (`is_word`), and `(?i)` folds `İ ı` to `i`, `ſ` to `s` and the
//! Kelvin sign to `k` besides ASCII (`ci`, `fold`). Whitespace is
//! collapsed with Python's `str.split()` first, which also splits on
//! U+001C-U+001F; after that the only whitespace is a space, so `\s` means
//! the same in both engines.

use regex::{Captures, Regex, RegexBuilder};
use std::sync::OnceLock;

/// The longest title, in characters (the server's `TITLE_MAX_CHARS`).
pub const TITLE_MAX_CHARS: usize = 120;
/// What replaces a masked value (the server's `REDACTED_VALUE`).
pub const REDACTED: &str = "[redacted]";
/// `scrub_secrets`' own placeholder; `redact_text` turns it into
/// [`REDACTED`] at the end, everywhere in the text.
const SCRUB_PLACEHOLDER: &str = "[REDACTED]";

/// The server's title for a first prompt: whitespace collapsed to single
/// spaces, secrets masked, cut to [`TITLE_MAX_CHARS`] (117 characters, any
/// trailing space dropped, then `...`). `None` for a blank prompt.
pub fn title_from_prompt(prompt: &str) -> Option<String> {
    let collapsed = collapse_whitespace(prompt);
    if collapsed.is_empty() {
        return None;
    }
    let redacted = redact_text(&collapsed);
    if redacted.chars().count() <= TITLE_MAX_CHARS {
        return Some(redacted);
    }
    let cut: String = redacted.chars().take(TITLE_MAX_CHARS - 3).collect();
    Some(format!("{}...", cut.trim_end_matches(is_py_space)))
}

/// `" ".join(text.split())`: Python's whitespace, which is Unicode's
/// `White_Space` plus U+001C-U+001F.
pub fn collapse_whitespace(text: &str) -> String {
    text.split(is_py_space).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ")
}

fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Mask credential-looking values in free text, as the server's
/// `redact_text` does.
pub fn redact_text(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let shaped = scrub_secrets(&labelled(text)).replace(SCRUB_PLACEHOLDER, REDACTED);
    replace_checked(&PEM, &shaped, |c| {
        let body = c.name("body").map_or(0, |m| m.as_str().chars().count());
        (body <= 16_384).then(|| (c.get(0).map_or(0, |m| m.end()), REDACTED.to_string()))
    })
}

/// The server's `scrub_secrets`: URL userinfo, credential query parameters,
/// auth headers, then known key shapes, each replaced by a placeholder that
/// keeps what kind of credential it was.
pub fn scrub_secrets(text: &str) -> String {
    // `scheme://user:password@host`: the password goes.
    let s = replace_checked(&URL_PASSWORD, text, |c| {
        let (user, password) = (&c["user"], c.name("password")?);
        let ok = user.chars().count() <= 256 && password.as_str().chars().count() <= 4096;
        ok.then(|| (password.end(), format!("{}{user}:{SCRUB_PLACEHOLDER}", &c["scheme"])))
    });
    // `scheme://token@host`: the whole userinfo goes, unless it is a bare
    // user name that carries no secret (or was masked above).
    let s = replace_checked(&URL_TOKEN, &s, |c| {
        let user = c.name("user")?;
        if user.as_str().chars().count() > 4096 {
            return None;
        }
        let keep =
            user.as_str() == SCRUB_PLACEHOLDER || NON_SECRET_USERINFO.contains(&user.as_str().to_lowercase().as_str());
        let whole = &c[0][..user.end() - c.get(0)?.start()];
        Some((user.end(), if keep { whole.to_string() } else { format!("{}{SCRUB_PLACEHOLDER}", &c["scheme"]) }))
    });
    // `?key=` / `&api_key=` / `&access_token=`: at most 4096 characters of
    // the value go (a longer value keeps its tail, as on the server).
    let s = replace_checked(&QUERY, &s, |c| {
        let value = c.name("value")?;
        let end = value.as_str().char_indices().nth(4096).map_or(value.end(), |(i, _)| value.start() + i);
        Some((end, format!("{}{}={SCRUB_PLACEHOLDER}", &c["prefix"], &c["param"])))
    });
    let mut s = s;
    for h in &HEADERS {
        if let Some(re) = h.for_text(&s) {
            s = re.replace_all(&s, |c: &Captures| format!("{}{SCRUB_PLACEHOLDER}", &c["prefix"])).into_owned();
        }
    }
    for (p, replacement) in &TOKENS {
        if let Some(re) = p.for_text(&s) {
            s = re.replace_all(&s, regex::NoExpand(replacement)).into_owned();
        }
    }
    s
}

/// User names that carry no secret on their own (the server's list).
const NON_SECRET_USERINFO: &[&str] =
    &["git", "oauth2", "gitlab-ci-token", "x-access-token", "x-oauth-basic", "token", "user", "username"];

/// The labelled pairs of `redact_text`, Python's
/// `(?i)\b([\w.-]{0,64}(?:api[_-]?key|authorization|secret|token|password)[\w.-]{0,64})\s*[:=]\s*("[^"]*"|'[^']*'|\S+)`
/// replaced by `<group 1>: [redacted]`.
fn labelled(text: &str) -> String {
    let cs: Vec<char> = text.chars().collect();
    let n = cs.len();
    // run[i]: how many `[\w.-]` characters start at i.
    let mut run = vec![0usize; n + 1];
    for i in (0..n).rev() {
        run[i] = if is_word(cs[i]) || matches!(cs[i], '.' | '-') { run[i + 1] + 1 } else { 0 };
    }
    let word_at = |i: usize| i < n && is_word(cs[i]);
    // At `s`: the end of the label and of the whole match. The prefix is
    // tried longest first; the keyword then has one possible end, the
    // suffix must be the whole run after it (a shorter one is followed by
    // a label character, not by `\s*[:=]`), and so must each `\s*`.
    let match_at = |s: usize| -> Option<(usize, usize)> {
        if word_at(s) == (s > 0 && word_at(s - 1)) {
            return None; // no `\b`
        }
        (0..=run[s].min(64)).rev().find_map(|k| {
            let e = keyword_end(&cs, s + k)?;
            if run[e] > 64 {
                return None;
            }
            let label_end = e + run[e];
            let mut p = label_end;
            while p < n && is_py_space(cs[p]) {
                p += 1;
            }
            if p == n || !matches!(cs[p], ':' | '=') {
                return None;
            }
            p += 1;
            while p < n && is_py_space(cs[p]) {
                p += 1;
            }
            let quoted = |q: char| {
                (cs.get(p) == Some(&q)).then(|| cs[p + 1..].iter().position(|&c| c == q).map(|j| p + j + 2)).flatten()
            };
            let bare = || {
                let j = cs[p..].iter().position(|&c| is_py_space(c)).unwrap_or(n - p);
                (j > 0).then_some(p + j)
            };
            let end = quoted('"').or_else(|| quoted('\'')).or_else(bare)?;
            Some((label_end, end))
        })
    };
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut s) = (0, 0);
    while s < n {
        match match_at(s) {
            Some((label_end, end)) => {
                out.extend(&cs[copied..label_end]);
                out.push_str(": ");
                out.push_str(REDACTED);
                (copied, s) = (end, end);
            }
            None => s += 1,
        }
    }
    out.extend(&cs[copied..]);
    out
}

/// Where one of the keywords starting at `a` ends (`api[_-]?key`,
/// `authorization`, `secret`, `token`, `password`, in Python's order and
/// case folding); they start differently, so at most one matches.
fn keyword_end(cs: &[char], a: usize) -> Option<usize> {
    let at = |i: usize, word: &str| {
        let w: Vec<char> = word.chars().collect();
        (cs.len() >= i + w.len() && cs[i..i + w.len()].iter().zip(&w).all(|(&c, &l)| fold(c) == l)).then(|| i + w.len())
    };
    if let Some(i) = at(a, "api") {
        if cs.get(i).is_some_and(|c| matches!(c, '_' | '-'))
            && let Some(e) = at(i + 1, "key")
        {
            return Some(e);
        }
        return at(i, "key");
    }
    ["authorization", "secret", "token", "password"].iter().find_map(|w| at(a, w))
}

/// A character as Python's `(?i)` compares it with an ASCII letter.
fn fold(c: char) -> char {
    match c {
        '\u{130}' | '\u{131}' => 'i',
        '\u{17f}' => 's',
        '\u{212a}' => 'k',
        c => c.to_ascii_lowercase(),
    }
}

/// `word` as a regex matching it the way Python's `(?i)` does.
fn ci(word: &str) -> String {
    word.chars()
        .map(|l| match l {
            'i' => "[iI\u{130}\u{131}]".to_string(),
            's' => "[sS\u{17f}]".to_string(),
            'k' => "[kK\u{212a}]".to_string(),
            l if l.is_ascii_alphabetic() => format!("[{l}{}]", l.to_ascii_uppercase()),
            l => regex::escape(&l.to_string()),
        })
        .collect()
}

/// Python's `\w` in a `str` pattern: `str.isalnum()` or `_` (Rust's
/// `is_alphanumeric` also counts the few combining marks Unicode calls
/// alphabetic).
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// One of the server's patterns, compiled the first time a text holds a
/// literal every match of it contains (most prompts hold none, and a hook
/// should not pay for building automata it does not need).
struct Pattern {
    /// A match contains at least one of these.
    needles: &'static [&'static str],
    source: fn() -> String,
    cell: OnceLock<Regex>,
}

impl Pattern {
    const fn new(needles: &'static [&'static str], source: fn() -> String) -> Pattern {
        Pattern { needles, source, cell: OnceLock::new() }
    }

    /// The compiled pattern, or `None` when it cannot match `text`.
    fn for_text(&'static self, text: &str) -> Option<&'static Regex> {
        self.needles.iter().any(|n| text.contains(n)).then(|| {
            self.cell.get_or_init(|| {
                let p = (self.source)();
                // Fixed patterns, proven by the tests: a failure is a bug here.
                RegexBuilder::new(&p).build().unwrap_or_else(|e| panic!("scrub pattern {p}: {e}"))
            })
        })
    }
}

const SCHEME: &str = r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]{0,63}://)";

// Python's lookahead `(?=@[^\s/@]+)` is matched (one character past the
// `@`) and left in place by `replace_checked`.
static URL_PASSWORD: Pattern =
    Pattern::new(&["://"], || format!(r"{SCHEME}(?P<user>[^\s:/@]+):(?P<password>[^\s/@]+)@[^\s/@]"));
static URL_TOKEN: Pattern = Pattern::new(&["://"], || format!(r"{SCHEME}(?P<user>[^\s:/@]+)@[^\s/@]"));
static QUERY: Pattern = Pattern::new(&["="], || {
    format!(
        r#"(?P<prefix>[?&])(?P<param>{}|{}|{})=(?P<value>[^\s&"'<>]+)"#,
        ci("key"),
        ci("api_key"),
        ci("access_token")
    )
});
static HEADERS: [Pattern; 3] = [
    Pattern::new(&["uthorization:"], || {
        r#"(?P<prefix>[Aa]uthorization:\s*(?:[Bb]earer|[Tt]oken|[Bb]asic)\s+)(?P<secret>[^\s"']+)"#.into()
    }),
    Pattern::new(&["PRIVATE-TOKEN:"], || r#"(?P<prefix>PRIVATE-TOKEN:\s*)(?P<secret>[^\s"']+)"#.into()),
    Pattern::new(&["itlab-"], || r#"(?P<prefix>[Xx]-[Gg]itlab-[Tt]oken:\s*)(?P<secret>[^\s"']+)"#.into()),
];
/// Known key shapes, most specific first, each with what replaces it.
static TOKENS: [(Pattern, &str); 8] = [
    (Pattern::new(&["github_pat_"], || r"github_pat_[A-Za-z0-9_]{20,}".into()), "github_pat_[REDACTED]"),
    (Pattern::new(&["gh"], || r"\bgh[pousr]_[A-Za-z0-9]{20,}".into()), "ghp_[REDACTED]"),
    (Pattern::new(&["glpat-"], || r"\bglpat-[A-Za-z0-9_\-]{16,}".into()), "glpat-[REDACTED]"),
    (Pattern::new(&["gl"], || r"\bgl(?:ptt|rt|soat|ft|imt|agent)-[A-Za-z0-9_\-]{16,}".into()), "gl-token-[REDACTED]"),
    (Pattern::new(&["AIza"], || r"\bAIza[0-9A-Za-z_\-]{35}\b".into()), "AIza[REDACTED]"),
    (Pattern::new(&["sk-ant-"], || r"\bsk-ant-[A-Za-z0-9_\-]{16,}".into()), "sk-ant-[REDACTED]"),
    (Pattern::new(&["sk-"], || r"\bsk-[A-Za-z0-9_\-]{20,}".into()), "sk-[REDACTED]"),
    (Pattern::new(&["preloop_"], || r"\bpreloop_[A-Za-z0-9_\-]{16,}".into()), "preloop_[REDACTED]"),
];
static PEM: Pattern = Pattern::new(&["-----BEGIN "], || {
    concat!(
        r"-----BEGIN [A-Z0-9 ]{0,64}PRIVATE KEY-----",
        r"(?P<body>[A-Za-z0-9+/=\s]+)",
        r"-----END [A-Z0-9 ]{0,64}PRIVATE KEY-----"
    )
    .into()
});

/// `re.sub` for a pattern whose Python form has a lookahead or a bound the
/// regex here leaves to `f`: for each match, left to right, `f` answers
/// where the replaced span ends (the rest of the match stays and is
/// searched again, as after a lookahead) and what replaces it, or `None`
/// when Python's pattern would not match there (the search goes on one
/// character later).
fn replace_checked(p: &'static Pattern, text: &str, f: impl Fn(&Captures) -> Option<(usize, String)>) -> String {
    let Some(re) = p.for_text(text) else { return text.to_string() };
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut pos) = (0, 0);
    while pos <= text.len() {
        let Some(c) = re.captures_at(text, pos) else { break };
        let Some(m) = c.get(0) else { break };
        match f(&c) {
            Some((end, replacement)) if end > m.start() => {
                out.push_str(&text[copied..m.start()]);
                out.push_str(&replacement);
                (copied, pos) = (end, end);
            }
            _ => pos = m.start() + text[m.start()..].chars().next().map_or(1, char::len_utf8),
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// `[[piece, repeat], ...]` joined.
    fn joined(v: &Value) -> String {
        v.as_array().unwrap().iter().map(|p| p[0].as_str().unwrap().repeat(p[1].as_u64().unwrap() as usize)).collect()
    }

    /// Every case of fixtures/preloop-server-0.17.1/title-redaction.json,
    /// whose outputs Preloop 0.17.1's own functions computed (its
    /// `title_redaction.py` regenerates it).
    #[test]
    fn masks_what_the_server_masks() {
        let cases: Value =
            serde_json::from_str(include_str!("../../fixtures/preloop-server-0.17.1/title-redaction.json")).unwrap();
        let cases = cases.as_array().unwrap();
        assert!(cases.len() >= 40, "{} cases", cases.len());
        for c in cases {
            let input = joined(&c["input"]);
            let want = (!c["output"].is_null()).then(|| joined(&c["output"]));
            let got = match c["fn"].as_str().unwrap() {
                "title_from_prompt" => title_from_prompt(&input),
                "redact_text" => Some(redact_text(&input)),
                "scrub_secrets" => Some(scrub_secrets(&input)),
                f => panic!("unknown function {f}"),
            };
            assert_eq!(got, want, "{}({:?})", c["fn"], input.chars().take(200).collect::<String>());
        }
    }

    #[test]
    fn a_title_never_holds_the_audits_secrets() {
        let t = title_from_prompt(
            "Fix the flaky test with key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx and password=hunter2, then run it",
        )
        .unwrap();
        assert!(!t.contains("AbCd") && !t.contains("hunter2"), "{t}");
        assert!(t.chars().count() <= TITLE_MAX_CHARS);
    }
}
