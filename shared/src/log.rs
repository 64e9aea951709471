//! The hook log: one line per invocation in `$PRELOOP_HOME/log/hooks.log`,
//! rotated to `hooks.log.1` past `log_max_bytes`. It never holds note text or
//! tokens: callers pass only ids, counts, outcomes and error kinds.

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
    // One line, whatever the caller passed.
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
