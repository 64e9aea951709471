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
}
