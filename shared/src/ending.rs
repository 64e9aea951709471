//! The `run/<session>.ending` marker between a SessionEnd's detached worker
//! and a SessionStart of the same session (why: the detach module's
//! documentation), and whether this process is such a worker. Below both
//! the worker (detach) and the engine (flow), which each read it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

static IN_WORKER: AtomicBool = AtomicBool::new(false);

/// Whether the running flow is a worker's (no in-process budget applies).
pub fn in_worker() -> bool {
    IN_WORKER.load(Ordering::Relaxed)
}

/// This process is a detached worker from now on.
pub(crate) fn enter_worker() {
    IN_WORKER.store(true, Ordering::Relaxed);
}

/// How long a SessionStart waits for a worker still ending its session.
pub const ENDING_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// What `run/<session>.ending` says.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum Ending {
    /// This worker is ending the session.
    Worker { pid: u32 },
    /// A SessionStart gave up waiting: the session runs again.
    Superseded,
}

fn ending_path(home: &Path, session: &str) -> PathBuf {
    crate::session::RunFiles::new(home, session).ending
}

/// The marker, read as every file in our home is (a planted fifo or link
/// is refused, and reads as no marker).
fn read_ending(home: &Path, session: &str) -> Option<Ending> {
    crate::fsutil::read_json(&ending_path(home, session)).ok().flatten()
}

fn write_ending(home: &Path, session: &str, e: &Ending) -> crate::Result<()> {
    crate::fsutil::private_dir(&home.join("run"))?;
    crate::fsutil::write_json_unsynced(&ending_path(home, session), e)
}

/// The hook: a worker (`pid`) is ending `session`.
pub(crate) fn mark_ending(home: &Path, session: &str, pid: u32) -> crate::Result<()> {
    write_ending(home, session, &Ending::Worker { pid })
}

/// The worker, before it touches the local files: whether a SessionStart
/// of its session gave up waiting for it (the session runs again).
pub fn superseded(home: &Path, session: &str) -> bool {
    read_ending(home, session) == Some(Ending::Superseded)
}

/// The worker, when done: remove the marker unless it names another worker.
pub(crate) fn clear_ending(home: &Path, session: &str) {
    let me = std::process::id();
    let ours = match read_ending(home, session) {
        Some(Ending::Superseded) => true,
        Some(Ending::Worker { pid }) => pid == me,
        None => false,
    };
    if ours {
        let _ = std::fs::remove_file(ending_path(home, session));
    }
}

/// A SessionStart: wait (at most `max`) for a worker still ending this
/// session, so the end reaches the server before the new start does. A
/// warning for the log when it gave up. One failed `open` when there is
/// no marker.
pub fn wait_for_ending(home: &Path, session: &str, max: std::time::Duration) -> Option<String> {
    let started = std::time::Instant::now();
    loop {
        let pid = match read_ending(home, session) {
            None | Some(Ending::Superseded) => return None,
            Some(Ending::Worker { pid }) => pid,
        };
        // SAFETY: kill with signal 0 only checks that the process exists.
        let alive = i32::try_from(pid).is_ok_and(|p| p > 0 && unsafe { libc::kill(p, 0) } == 0);
        if !alive {
            let _ = std::fs::remove_file(ending_path(home, session));
            return None;
        }
        if started.elapsed() >= max {
            let _ = write_ending(home, session, &Ending::Superseded);
            return Some(format!(
                "the previous run's SessionEnd worker (pid {pid}) was still ending this session after {} ms; starting anyway",
                max.as_millis()
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn home() -> PathBuf {
        let h = std::env::temp_dir().join(format!("preloop-ending-{}", crate::fsutil::note_id()));
        crate::fsutil::private_dir(&h).unwrap();
        h
    }

    #[test]
    fn a_start_waits_for_a_live_worker_and_marks_it_superseded() {
        let h = home();
        // A dead worker's marker is cleared at once.
        mark_ending(&h, "s", u32::MAX - 1).unwrap();
        assert_eq!(wait_for_ending(&h, "s", Duration::from_secs(3)), None);
        assert_eq!(read_ending(&h, "s"), None);
        // A live one (this process) is waited for, then superseded.
        mark_ending(&h, "s", std::process::id()).unwrap();
        let t = Instant::now();
        assert!(wait_for_ending(&h, "s", Duration::from_millis(50)).is_some());
        assert!(t.elapsed() >= Duration::from_millis(50));
        assert!(superseded(&h, "s"));
        clear_ending(&h, "s");
        assert_eq!(read_ending(&h, "s"), None);
        // Another worker's marker is not ours to clear.
        mark_ending(&h, "s", std::process::id() + 1).unwrap();
        clear_ending(&h, "s");
        assert!(read_ending(&h, "s").is_some());
        let _ = std::fs::remove_dir_all(&h);
    }

    #[test]
    fn a_fifo_planted_as_the_marker_never_blocks_a_start() {
        let h = home();
        crate::fsutil::private_dir(&h.join("run")).unwrap();
        let p = std::ffi::CString::new(ending_path(&h, "s").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(p.as_ptr(), 0o600) }, 0);
        let t = Instant::now();
        assert_eq!(wait_for_ending(&h, "s", Duration::from_secs(3)), None);
        // A blocking open of the fifo would never return; the 3 s wait is
        // not sat out either. Well under that, whatever the machine's load.
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        let _ = std::fs::remove_dir_all(&h);
    }
}
