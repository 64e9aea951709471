//! SessionEnd in server mode runs in a detached worker. Two reasons:
//!
//! * Some harnesses kill it: Claude Code cancels a SessionEnd hook about
//!   1.5 s in, Codex about 0.96 s in (whatever its `timeout`). The hook owes
//!   the server a `spool_dropped` ack for every deferred note still spooled,
//!   any acks an earlier hook could not send, and the `session-end` call that
//!   turns the session's pending notes `undeliverable`; on a loaded server
//!   those do not fit in a second (measured: 14-16 of 16 concurrent Claude
//!   Code SessionEnds gave up).
//! * The others (Cursor, Gemini CLI, Copilot CLI) wait for it, and pay for
//!   it: besides the round trip, ending a session frees the run state and
//!   rewrites the session file, and freeing a file's blocks costs 0.2-0.3 ms
//!   each on a disk with online discard (docs/performance.md). Nothing in
//!   the harness waits on the end's result.
//!
//! So in server mode the hook hands its stdin to a detached copy of itself
//! (`<hook name> --preloop-detached-worker`: the same executable under the same name, own process group, stdio on
//! `/dev/null` except the piped payload), prints the event's neutral answer
//! and exits at once; the worker runs the SessionEnd flow with the ordinary
//! call timeouts. Local mode (the inbox is the record, and the hook's
//! syncs are what make the end durable before the harness goes on), a
//! payload the hook cannot use, `PRELOOP_SESSION_END_DETACH=0`, or a worker
//! that cannot be started run the flow in-process within
//! `session_end_budget_ms` instead.
//!
//! A resumed session may start before the worker is done (Codex: `codex
//! exec resume` right after a run). The worker's `session-end` would then
//! land after the resume's `session-start` and end the resumed session, and
//! its local clean-up would remove the resumed run's state. So the hook
//! leaves a marker, `run/<session>.ending` holding the worker's pid, that
//! the worker removes when it is done; a SessionStart of that session waits
//! for it (at most [`ENDING_WAIT`]), and when it gives up it writes
//! that it was superseded, and the worker then leaves the local files alone.

use crate::config::{Config, Env};
use crate::registry::{Does, HookDef};
use crate::runner::{Adapter, Parsed};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// The argument that makes a SessionEnd binary the detached worker.
pub const WORKER_ARG: &str = "--preloop-detached-worker";
/// `0`, `false`, `no` or `off`: never detach (run in-process within the budget).
pub const DETACH_ENV: &str = "PRELOOP_SESSION_END_DETACH";

static IN_WORKER: AtomicBool = AtomicBool::new(false);

/// Whether this process is a detached worker.
pub fn is_worker() -> bool {
    crate::args::arg_os(1).is_some_and(|a| a == WORKER_ARG)
}

/// Whether the running flow is a worker's (no in-process budget applies).
pub fn in_worker() -> bool {
    IN_WORKER.load(Ordering::Relaxed)
}

/// The worker: the SessionEnd flow with the ordinary call timeouts.
/// Returns the worker's exit code (the executable's `main` returns it).
pub fn worker_main<A: Adapter>(event: A::Event, env: &Env) -> i32 {
    IN_WORKER.store(true, Ordering::Relaxed);
    // The worker outlives the hook: it must not keep open what the harness
    // (or whatever started it) left open beyond 0-2, such as a pipe the
    // harness reads to its end.
    crate::fsutil::close_fds_above_stdio();
    let def = event.into().def();
    let stdin = crate::runner::read_stdin(std::time::Duration::from_secs(5));
    let config = Config::load_from(env, Some(def.harness()));
    let session =
        stdin.as_deref().ok().and_then(|b| crate::json::parse_payload(b).ok()).and_then(|json| {
            match A::parse(event, &json, env) {
                Ok(Parsed::Run(input)) => Some(input.session_id),
                _ => None,
            }
        });
    let code = crate::runner::run_with::<A>(event, env, &config, stdin, &mut std::io::sink());
    if let Some(s) = session {
        clear_ending(&config.home, &s);
    }
    code
}

/// Whether this SessionEnd should go to a detached worker.
pub fn wanted(def: &HookDef, config: &Config, env: &Env) -> bool {
    def.does == Does::SessionEnd
        && config.server.is_some()
        && env.get(DETACH_ENV).is_none_or(|v| crate::config::parse_switch_str(&v) != Some(false))
}

/// Start the worker with `stdin` when the payload is one the hook can use;
/// `true` if it was handed off (the caller exits at once).
pub fn hand_off<A: Adapter>(event: A::Event, config: &Config, env: &Env, stdin: &[u8]) -> bool {
    let def = event.into().def();
    let Ok(json) = crate::json::parse_payload(stdin) else { return false };
    let session = match A::parse(event, &json, env) {
        Ok(Parsed::Run(input)) => input.session_id,
        _ => return false, // let the in-process run log why
    };
    let mut line = crate::runner::LogLine {
        harness: def.harness().slug(),
        event: def.on,
        mode: Some(crate::backend::HookMode::Server),
        session: Some(session),
        proxy: config.settings.proxy.as_ref().map(crate::http::ProxyUrl::shown),
        ..Default::default()
    };
    match spawn_worker(stdin) {
        Ok(pid) => {
            line.outcome = crate::runner::LogOutcome::Detached;
            line.warnings.push(format!("worker pid {pid}"));
            if let Err(e) = mark_ending(&config.home, line.session.as_deref().unwrap_or_default(), pid) {
                line.warnings.push(format!("no ending marker (a quick resume may race the end): {e}"));
            }
            line.append(config);
            true
        }
        Err(e) => {
            line.warnings.push(format!("no detached worker, running in-process: {e}"));
            line.append(config);
            false
        }
    }
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
fn mark_ending(home: &Path, session: &str, pid: u32) -> crate::Result<()> {
    write_ending(home, session, &Ending::Worker { pid })
}

/// The worker, before it touches the local files: whether a SessionStart
/// of its session gave up waiting for it (the session runs again).
pub fn superseded(home: &Path, session: &str) -> bool {
    read_ending(home, session) == Some(Ending::Superseded)
}

/// The worker, when done: remove the marker unless it names another worker.
fn clear_ending(home: &Path, session: &str) {
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

/// Start the worker with `stdin` as its input; returns its pid.
fn spawn_worker(stdin: &[u8]) -> std::io::Result<u32> {
    // One executable serves every hook by the name it is started as: the
    // worker gets this hook's name as its argv[0] (`current_exe` is the
    // file itself, whatever link started us).
    let exe = std::env::current_exe()?;
    let name = crate::args::invoked_name().ok_or_else(|| std::io::Error::other("no argv[0]"))?;
    let mut child = Command::new(exe)
        .arg0(name)
        .arg(WORKER_ARG)
        .stdin(Stdio::piped())
        // Never the harness's pipes: it must see EOF when this process exits.
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Out of the harness's (and `timeout`'s) process group: a group kill
        // at the harness's exit does not reach the worker.
        .process_group(0)
        .spawn()?;
    let pid = child.id();
    let written = match child.stdin.take() {
        Some(mut pipe) => pipe.write_all(stdin).and_then(|_| pipe.flush()),
        None => Err(std::io::Error::other("no stdin pipe")),
    };
    if let Err(e) = written {
        // It has no usable input: stop it and run in-process instead.
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    Ok(pid)
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
        assert!(t.elapsed() < Duration::from_secs(1));
        let _ = std::fs::remove_dir_all(&h);
    }
}
