//! The hook log: one line per invocation in `$PRELOOP_HOME/log/hooks.log`,
//! rotated to `hooks.log.1` past `log_max_bytes`. It never holds note text or
//! tokens: callers pass only ids, counts, outcomes and error kinds (and a
//! URL in an error has its credentials hidden here).

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Append one line (a trailing newline is added). Failures are swallowed:
/// a hook must never fail because its log could not be written.
pub fn append(dir: &Path, max_bytes: u64, line: &str) {
    if crate::fsutil::private_dir(dir).is_err() {
        return;
    }
    let path = dir.join("hooks.log");
    if let Ok(meta) = fs::symlink_metadata(&path) {
        if meta.file_type().is_symlink() {
            return;
        }
        if meta.len() > max_bytes {
            let _ = fs::rename(&path, dir.join("hooks.log.1"));
        }
    }
    // No URL's password (red-team 3, N8), and one line with no control
    // character, whatever any field holds (red-team 4, P8).
    let mut buf = escape_line(&crate::redact::redact_url_credentials(line));
    buf.push('\n');
    if let Ok(mut f) = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
    {
        // A single write of an O_APPEND file: lines from concurrent hooks do not interleave.
        let _ = f.write_all(buf.as_bytes());
    }
}

/// The one escaping of every log line, whatever its fields hold (a
/// harness's session id, a server's text, an error): a control character
/// (C0, DEL, C1: `ESC`, `BEL`, CSI, newline, ...) and the characters that
/// reorder or hide text on a terminal (bidi controls, line and paragraph
/// separators, zero-width marks) become `\u{..}`, so a terminal tailing the
/// log never receives an escape sequence and a line stays one line.
pub fn escape_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        if needs_escape(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// A value from outside (the harness's session id) as one word of the line:
/// quoted and escaped as `warn=` is when it holds a space or a quote, so it
/// cannot pass for another field.
fn word(s: &str) -> String {
    if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c == '"' || c == '=') {
        format!("{s:?}")
    } else {
        s.to_string()
    }
}

/// How a hook ended, as its log line says (`outcome=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogOutcome {
    /// Ran; nothing to show.
    #[default]
    Ok,
    /// Its output carried notes.
    Notes,
    /// Its output denied the tool call.
    Deny,
    /// A server-mode SessionEnd handed to the detached worker.
    Detached,
    /// The engine panicked; the fallback answered.
    Panic,
    /// Not ours to answer (another hook's session, a sub-agent's turn end, ...).
    StandDown,
    /// A gate answered deny by its fail policy.
    FailClosed,
    /// A gate answered neutral by its fail policy.
    FailOpen,
    /// The event's neutral answer.
    Neutral,
    /// Started under a name that is no hook command.
    UnknownCommand,
    /// A background watcher (Claude Code's idle wake) stopped (`why=`).
    Stopped,
}

impl LogOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            LogOutcome::Ok => "ok",
            LogOutcome::Notes => "notes",
            LogOutcome::Deny => "deny",
            LogOutcome::Detached => "detached",
            LogOutcome::Panic => "panic",
            LogOutcome::StandDown => "stand_down",
            LogOutcome::FailClosed => "fail_closed",
            LogOutcome::FailOpen => "fail_open",
            LogOutcome::Neutral => "neutral",
            LogOutcome::UnknownCommand => "unknown-command",
            LogOutcome::Stopped => "stopped",
        }
    }
}

/// What a session's end left unread, for its hook log line
/// (`never_read=N never_read_ids=…`): the notes its session never showed
/// (`spool_dropped`, `session_ended`, and those recorded delivered that no
/// output carried). `ids` names those the hook knows: a Preloop server's
/// session-end answers only how many it marked `session_ended`
/// (docs/contracts/preloop-server.md §4.6), so `count` can exceed
/// `ids.len()`. Never a note's text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NeverRead {
    pub count: u64,
    pub ids: Vec<String>,
}

/// One line of the hook log.
#[derive(Default)]
pub struct LogLine {
    pub harness: &'static str,
    pub event: &'static str,
    /// None until the mode is known.
    pub mode: Option<crate::backend::HookMode>,
    pub session: Option<String>,
    pub outcome: LogOutcome,
    pub notes: Vec<String>,
    pub millis: u128,
    pub error: Option<String>,
    pub warnings: Vec<String>,
    /// Written by a detached SessionEnd worker (`<event>:detached`).
    pub worker: bool,
    /// The proxy the server calls go through (`proxy` in config.json),
    /// without its credentials.
    pub proxy: Option<String>,
    /// A session's end: the notes it never showed (count and the ids the
    /// hook knows; never their text).
    pub never_read: Option<NeverRead>,
    /// Why a background watcher ended (`why=`), where that is no error.
    pub why: Option<String>,
}

impl LogLine {
    /// `<time> <harness> <event> mode=.. session=.. outcome=.. notes=.. ms=.. [why=..] [never_read=N [never_read_ids=a,b[,+K]]] [proxy=..] [error=..] [warn=..]`
    /// (`+K`: that many more the hook cannot name, a server's session-end answering a count).
    pub fn render(&self) -> String {
        let mut s = format!(
            "{} {} {}{} mode={} session={} outcome={} notes={} ms={}",
            crate::time::Timestamp::now().to_iso_z(),
            self.harness,
            self.event,
            if self.worker { ":detached" } else { "" },
            self.mode.map_or("-", crate::backend::HookMode::as_str),
            self.session
                .as_deref()
                .map(|s| word(&s.chars().take(80).collect::<String>()))
                .unwrap_or_else(|| "-".into()),
            self.outcome.as_str(),
            if self.notes.is_empty() { "-".into() } else { self.notes.join(",") },
            self.millis
        );
        if let Some(w) = &self.why {
            s.push_str(&format!(" why={w:?}"));
        }
        if let Some(n) = &self.never_read {
            s.push_str(&format!(" never_read={}", n.count));
            let mut ids: Vec<String> = n.ids.iter().map(|i| word(i)).collect();
            let unnamed = n.count.saturating_sub(n.ids.len() as u64);
            if unnamed > 0 {
                ids.push(format!("+{unnamed}"));
            }
            if !ids.is_empty() {
                s.push_str(&format!(" never_read_ids={}", ids.join(",")));
            }
        }
        if let Some(p) = &self.proxy {
            s.push_str(&format!(" proxy={}", word(p)));
        }
        if let Some(e) = &self.error {
            s.push_str(&format!(" error={e:?}"));
        }
        for w in &self.warnings {
            s.push_str(&format!(" warn={w:?}"));
        }
        s
    }

    /// Append the line to the hook log of `config` (which escapes the whole
    /// line: [`crate::log::escape_line`]).
    pub fn append(&self, config: &crate::config::Config) {
        append(&config.log_dir(), config.settings.log_max_bytes, &self.render());
    }
}

/// One line of the hook log read back ([`LogLine::parse`]): the time, the
/// harness, the event, and the `key=value` fields as written (a quoted
/// value, `error="a b"`, is one field, quotes included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry<'a> {
    pub at: crate::time::Timestamp,
    pub harness: &'a str,
    /// The event, without the `:detached` of a SessionEnd worker.
    pub event: &'a str,
    /// Written by a detached SessionEnd worker (`<event>:detached`).
    pub worker: bool,
    fields: Vec<(&'a str, &'a str)>,
}

impl<'a> LogEntry<'a> {
    /// The first value of `key`, as written.
    pub fn field(&self, key: &str) -> Option<&'a str> {
        self.fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// The harness session id, when the line names one (`session=-` does not).
    pub fn session(&self) -> Option<&'a str> {
        self.field("session").filter(|s| *s != "-")
    }

    /// The `outcome=` word.
    pub fn outcome(&self) -> Option<&'a str> {
        self.field("outcome")
    }
}

impl LogLine {
    /// Read one line back as [`LogLine::render`] wrote it; `None` for a line
    /// that does not start with a time, a harness and an event.
    pub fn parse(line: &str) -> Option<LogEntry<'_>> {
        let mut words = Words { rest: line };
        let at = crate::time::Timestamp::parse(words.next()?)?;
        let harness = words.next()?;
        let event = words.next()?;
        let (event, worker) = match event.strip_suffix(":detached") {
            Some(e) => (e, true),
            None => (event, false),
        };
        let fields = words.filter_map(|w| w.split_once('=')).collect();
        Some(LogEntry { at, harness, event, worker, fields })
    }
}

/// The words of a log line: split at spaces, except inside a quoted value
/// (`key="a \"b\" c"`, as `{:?}` writes it).
struct Words<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        self.rest = self.rest.trim_start_matches(' ');
        if self.rest.is_empty() {
            return None;
        }
        let (mut quoted, mut escaped) = (false, false);
        let mut end = self.rest.len();
        for (i, c) in self.rest.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if quoted => escaped = true,
                '"' => quoted = !quoted,
                ' ' if !quoted => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        let (word, rest) = self.rest.split_at(end);
        self.rest = rest;
        Some(word)
    }
}

#[cfg(test)]
mod tests {
    /// Red-team 4, P8: whatever a field holds, the line in the file is one
    /// line without a control byte.
    #[test]
    fn a_line_is_escaped_whole() {
        let dir = std::env::temp_dir().join(format!("preloop-log-test-{}", crate::fsutil::note_id()));
        super::append(&dir, 1 << 20, "session=ab\u{1b}]0;X\u{7}c\u{9b}2J\r\nnext\u{202e} \u{85}end");
        let text = std::fs::read_to_string(dir.join("hooks.log")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(text, "session=ab\\u{1b}]0;X\\u{7}c\\u{9b}2J\\u{d}\\u{a}next\\u{202e} \\u{85}end\n");
    }

    /// Red-team 3, N8: an error that names the server URL keeps no password.
    #[test]
    fn a_url_password_never_reaches_the_log() {
        let dir = std::env::temp_dir().join(format!("preloop-log-test-{}", crate::fsutil::note_id()));
        super::append(&dir, 1 << 20, "outcome=unreachable error=http://admin:Sup3rS3cretPw@proxy:8080/api\nnext");
        let text = std::fs::read_to_string(dir.join("hooks.log")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(text, "outcome=unreachable error=http://admin:***@proxy:8080/api\\u{a}next\n");
    }

    /// The writer and the parser agree: every field a line carries is read
    /// back, a quoted value with spaces is one field, a worker's event is
    /// the event.
    #[test]
    fn a_rendered_line_parses_back() {
        let line = super::LogLine {
            harness: "claude-code",
            event: "SessionEnd",
            mode: Some(crate::backend::HookMode::Server),
            session: Some("s 1".into()),
            outcome: super::LogOutcome::Ok,
            notes: vec!["a1".into(), "a2".into()],
            millis: 7,
            error: Some("unreachable: a \"b\" c".into()),
            warnings: vec!["x=y z".into()],
            worker: true,
            proxy: None,
            never_read: Some(super::NeverRead { count: 3, ids: vec!["a3".into()] }),
            why: None,
        }
        .render();
        let e = super::LogLine::parse(&line).unwrap_or_else(|| panic!("{line}"));
        assert_eq!((e.harness, e.event, e.worker), ("claude-code", "SessionEnd", true), "{line}");
        assert_eq!(e.session(), Some("\"s 1\""), "a quoted value is one field, as written");
        assert_eq!(e.outcome(), Some("ok"));
        assert_eq!(e.field("mode"), Some("server"));
        assert_eq!(e.field("notes"), Some("a1,a2"));
        assert_eq!(e.field("never_read"), Some("3"));
        assert_eq!(e.field("never_read_ids"), Some("a3,+2"));
        assert_eq!(e.field("error"), Some("\"unreachable: a \\\"b\\\" c\""));
        assert_eq!(e.field("warn"), Some("\"x=y z\""));
        assert!(super::LogLine::parse("not a line").is_none());
        let mut plain = super::LogLine { harness: "codex", event: "Stop", ..Default::default() };
        plain.session = None;
        let r = plain.render();
        assert_eq!(super::LogLine::parse(&r).and_then(|e| e.session()), None, "session=- names none");
    }
}
