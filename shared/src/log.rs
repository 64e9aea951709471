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
    let mut buf = String::with_capacity(line.len() + 1);
    // One line, whatever the caller passed, and no URL's password (red-team 3, N8).
    let line = crate::redact::redact_url_credentials(line);
    buf.extend(line.chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }));
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

#[cfg(test)]
mod tests {
    /// Red-team 3, N8: an error that names the server URL keeps no password.
    #[test]
    fn a_url_password_never_reaches_the_log() {
        let dir = std::env::temp_dir().join(format!("preloop-log-test-{}", crate::fsutil::note_id()));
        super::append(&dir, 1 << 20, "outcome=unreachable error=http://admin:Sup3rS3cretPw@proxy:8080/api\nnext");
        let text = std::fs::read_to_string(dir.join("hooks.log")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(text, "outcome=unreachable error=http://admin:***@proxy:8080/api next\n");
    }
}
