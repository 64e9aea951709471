//! `preloop-claude-code-watch`: wake an idle Claude Code session when a note
//! arrives.
//!
//! Claude Code (2.1.328) runs a command hook declared `"async": true,
//! "asyncRewake": true` in the background; when it exits with code 2 its
//! **stderr** (stdout if stderr is empty) reaches the model at once, even when
//! the session sits idle at its prompt, as a user-role system reminder
//! `<rewakeMessage or "Stop hook blocking error from command \"<Event>\":"> <text>`
//! (observed; see hooks/claude-code/README.md).
//!
//! The watcher is registered that way on Stop (a turn ended: the session may
//! now be idle) and SessionStart. It:
//!
//! * stands down at once (exit 0) when `watch` is off, in headless runs
//!   (`CLAUDE_CODE_ENTRYPOINT=sdk-*`), or when another watcher of the session
//!   holds `$PRELOOP_HOME/run/<session>.watch` (an exclusive lock holding the
//!   watcher's pid): one watcher per session;
//! * polls: the local inbox every `watch_poll_ms` (a claim first lists the
//!   session's two queue directories and takes no lock when both are empty);
//!   the server's `notes/pending` (`defer_delivery: true`: a non-empty answer
//!   *is* the claim) every `watch_server_poll_ms`, doubling after every empty
//!   poll up to `watch_server_poll_max_ms`;
//! * on a claim: writes the framed block to stderr, flushes, acks what it
//!   wrote, exits 2 (SIGTERM/SIGINT/SIGHUP are held off from the claim to the
//!   exit, so the steps cannot be cut apart by a signal);
//! * exits 0 when its session ends (session file `ended_at`), when Claude is
//!   gone (`CLAUDE_PID` no longer exists, or its parent changed), after
//!   `watch_max_secs`, or when the server refuses its token.
//!
//! The SessionEnd hook stops it first thing ([`stop`]: SIGTERM to the pid in
//! the lock file while the lock is held).
//!
//! Delivery stays exactly-once: the claim decides between the watcher and the
//! PreToolUse/Stop hooks, and the watcher acks only what it wrote.

use preloop_shared::Harness;
use preloop_shared::config::{Config, Env, preloop_home};
use preloop_shared::error::Error;
use preloop_shared::fsutil;
use preloop_shared::watch::{self as shared_watch, Host, Parent, process_exists};
use serde_json::Value;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use preloop_shared::watch::End;

/// The binary's name.
pub const BINARY: &str = "preloop-claude-code-watch";
/// Exit code that makes Claude Code deliver the output and wake the model.
pub const EXIT_WAKE: i32 = 2;
/// Largest stdin we read (a hook payload is a few hundred bytes).
const MAX_STDIN: u64 = 1 << 20;
/// How long SessionEnd waits for a signalled watcher to let go of its lock.
const STOP_WAIT: Duration = Duration::from_millis(300);

/// The exit code of a watcher that ended so: [`EXIT_WAKE`] when it handed
/// notes over (Claude Code then delivers its stderr), else 0.
pub fn exit_code(end: &End) -> i32 {
    match end {
        End::Delivered(_) => EXIT_WAKE,
        _ => 0,
    }
}

/// Run the watcher; returns its exit code.
pub fn main() -> i32 {
    preloop_shared::runner::prepare_process();
    // A stdin that never closes must not keep the watcher from its bounds.
    let buf = preloop_shared::runner::read_stdin(Duration::from_secs(5)).unwrap_or_default();
    let code = std::panic::catch_unwind(|| {
        let end = run(&Env::process(), &mut &buf[..], &mut std::io::stderr().lock());
        exit_code(&end)
    });
    code.unwrap_or(0)
}

/// Whether this Claude Code process is a headless/SDK run (no idle prompt to
/// wake): `CLAUDE_CODE_ENTRYPOINT` is `sdk-cli` for `claude -p`, `cli` for the
/// interactive TUI.
pub fn is_headless(env: &Env) -> bool {
    env.get("CLAUDE_CODE_ENTRYPOINT").is_some_and(|e| e.starts_with("sdk"))
}

/// The watcher: read the hook payload, then watch until a note arrives or a
/// reason to stop. `out` is the stream Claude Code delivers (stderr).
pub fn run(env: &Env, stdin: &mut dyn Read, out: &mut dyn Write) -> End {
    let started = Instant::now();
    let config = Config::load_from(env, Some(Harness::ClaudeCode));
    // Read the payload in any case: Claude Code writes it before anything else.
    let mut buf = Vec::new();
    let _ = stdin.take(MAX_STDIN).read_to_end(&mut buf);
    let end = if !config.settings.watch {
        End::StandDown("watch is off".into())
    } else if is_headless(env) {
        End::StandDown("headless run".into())
    } else {
        match session_id_of(&buf) {
            Err(why) => End::StandDown(why.into()),
            Ok(sid) => watch_session(env, &config, &sid, out, started),
        }
    };
    let session = session_id_of(&buf).ok();
    shared_watch::log(&config, "claude-code", session.as_deref(), &end, started);
    end
}

fn session_id_of(buf: &[u8]) -> Result<String, &'static str> {
    let v: Value = preloop_shared::json::parse_payload(buf).map_err(|_| "no usable stdin")?;
    if v.get("cursor_version").is_some() {
        return Err("cursor payload");
    }
    v.get("session_id")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or("no session_id")
}

fn watch_session(env: &Env, config: &Config, sid: &str, out: &mut dyn Write, started: Instant) -> End {
    let _lock = match WatchLock::acquire(&config.home, sid) {
        Ok(Some(l)) => l,
        Ok(None) => return End::StandDown("another watcher runs for this session".into()),
        Err(e) => return End::Stopped(format!("lock: {e}")),
    };
    let def = preloop_shared::registry::def_of(crate::Event::Watch);
    shared_watch::watch(config, def, sid, started, &mut Claude { life: Liveness::new(env), out })
}

/// Claude Code as the watcher's host: alive while our parent and
/// `CLAUDE_PID` are; takes a block on stderr.
struct Claude<'a> {
    life: Liveness,
    out: &'a mut dyn Write,
}

impl Host for Claude<'_> {
    fn gone(&self) -> Option<String> {
        self.life.gone().map(str::to_string)
    }

    fn hand_over(&mut self, block: &str) -> Result<(), String> {
        // The block exactly, no trailing newline: Claude Code appends the
        // text to its label as is.
        self.out.write_all(block.as_bytes()).and_then(|_| self.out.flush()).map_err(|_| "stderr write failed".into())
    }
}

// ----- is Claude still there ------------------------------------------------

struct Liveness {
    parent: Parent,
    claude: Option<i32>,
}

impl Liveness {
    fn new(env: &Env) -> Liveness {
        let claude = env.get("CLAUDE_PID").and_then(|p| p.trim().parse::<i32>().ok()).filter(|p| *p > 1);
        Liveness { parent: Parent::now(), claude }
    }

    /// Why Claude is gone, if it is.
    fn gone(&self) -> Option<&'static str> {
        if self.parent.gone() {
            return Some("parent process gone");
        }
        if let Some(pid) = self.claude
            && !process_exists(pid)
        {
            return Some("claude process gone");
        }
        None
    }
}

// ----- one watcher per session ---------------------------------------------

/// `$PRELOOP_HOME/run/<session>.watch`: locked exclusively by the live
/// watcher for its whole life, holding its pid.
pub fn lock_path(home: &Path, session_id: &str) -> PathBuf {
    home.join("run").join(format!("{}.watch", fsutil::session_file_stem(session_id)))
}

struct WatchLock {
    _file: File,
}

fn open_lock(path: &Path, create: bool) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .mode(0o600)
        // From libc, never a literal: the value differs by architecture
        // (0o400000 on x86_64 is O_LARGEFILE on aarch64).
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

impl WatchLock {
    /// The lock, or `None` when another watcher holds it.
    fn acquire(home: &Path, session_id: &str) -> preloop_shared::Result<Option<WatchLock>> {
        let path = lock_path(home, session_id);
        fsutil::private_dir(&home.join("run"))?;
        let mut file = open_lock(&path, true).map_err(|e| Error::io(format!("open {}", path.display()), e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(format!("lock {}", path.display()), e)),
        }
        let pid = format!("{}\n", std::process::id());
        let _ =
            file.set_len(0).and_then(|_| file.seek(SeekFrom::Start(0))).and_then(|_| file.write_all(pid.as_bytes()));
        Ok(Some(WatchLock { _file: file }))
    }
}

/// What [`stop`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// No watcher was running.
    NoneRunning,
    /// A watcher was signalled and let go of its lock.
    Stopped,
    /// A watcher holds the lock and did not let go in time (it exits on its
    /// own once it sees the session ended).
    StillRunning,
}

/// Stop the session's watcher (SessionEnd): SIGTERM to the pid in the lock
/// file while its lock is held, wait briefly for the lock to be free, then
/// remove the file.
pub fn stop(home: &Path, session_id: &str) -> Stopped {
    let path = lock_path(home, session_id);
    let Ok(mut file) = open_lock(&path, false) else { return Stopped::NoneRunning };
    if file.try_lock().is_ok() {
        let _ = std::fs::remove_file(&path);
        return Stopped::NoneRunning;
    }
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    if let Some(pid) = text.trim().parse::<i32>().ok().filter(|p| *p > 1 && *p as u32 != std::process::id())
        && is_watcher(pid)
    {
        // SAFETY: sending SIGTERM to a process we identified as our watcher.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let until = Instant::now() + STOP_WAIT;
    while Instant::now() < until {
        if file.try_lock().is_ok() {
            let _ = std::fs::remove_file(&path);
            return Stopped::Stopped;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Stopped::StillRunning
}

/// Stop the watcher of the session named by `CLAUDE_CODE_SESSION_ID` (set
/// for every Claude Code hook).
pub fn stop_from_env(env: &Env) -> Option<Stopped> {
    let sid = env.get("CLAUDE_CODE_SESSION_ID").filter(|s| !s.trim().is_empty())?;
    Some(stop(&preloop_home(env, Some(Harness::ClaudeCode)), sid.trim()))
}

/// Whether `pid` runs our watcher binary (Linux: its command line; elsewhere
/// the held lock is taken as proof).
fn is_watcher(pid: i32) -> bool {
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(cmd) => String::from_utf8_lossy(&cmd).contains(BINARY),
        Err(_) => !Path::new("/proc/self").exists(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headless_is_any_sdk_entrypoint() {
        let e = |v: &str| Env::of(&[("CLAUDE_CODE_ENTRYPOINT", v)]);
        assert!(is_headless(&e("sdk-cli")));
        assert!(is_headless(&e("sdk-ts")));
        assert!(!is_headless(&e("cli")));
        assert!(!is_headless(&Env::default()));
    }

    #[test]
    fn settings_default_on_and_env_overrides() {
        let home = std::env::temp_dir().join(format!("preloop-watch-cfg-{}", fsutil::note_id()));
        let h = home.to_str().unwrap().to_string();
        let env = |pairs: &[(&str, &str)]| {
            let mut v = vec![("PRELOOP_HOME".to_string(), h.clone())];
            v.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            Env::fixed(v)
        };
        let s = Config::load_from(&env(&[]), Some(Harness::ClaudeCode)).settings;
        assert!(s.watch);
        assert_eq!(
            (s.watch_max_secs, s.watch_poll_ms, s.watch_server_poll_ms, s.watch_server_poll_max_ms),
            (3600, 1000, 2000, 30_000)
        );
        let c = Config::load_from(
            &env(&[
                ("PRELOOP_WATCH", "off"),
                ("PRELOOP_WATCH_MAX_SECS", "5"),
                ("PRELOOP_WATCH_POLL_MS", "250"),
                ("PRELOOP_WATCH_SERVER_POLL_MS", "500"),
                ("PRELOOP_WATCH_SERVER_POLL_MAX_MS", "9000"),
            ]),
            Some(Harness::ClaudeCode),
        );
        assert!(!c.settings.watch);
        assert_eq!(
            (
                c.settings.watch_max_secs,
                c.settings.watch_poll_ms,
                c.settings.watch_server_poll_ms,
                c.settings.watch_server_poll_max_ms
            ),
            (5, 250, 500, 9000)
        );
        let c = Config::load_from(&env(&[("PRELOOP_WATCH", "maybe")]), Some(Harness::ClaudeCode));
        assert!(c.settings.watch && c.problems.iter().any(|p| p.what.contains("PRELOOP_WATCH")));
        fsutil::private_dir(&home).unwrap();
        fsutil::write_atomic(&home.join("config.json"), br#"{"watch":false,"watch_max_secs":60}"#).unwrap();
        let s = Config::load_from(&env(&[]), Some(Harness::ClaudeCode)).settings;
        assert!(!s.watch);
        assert_eq!(s.watch_max_secs, 60);
        std::fs::remove_dir_all(&home).unwrap();
    }

    /// The watcher's lock is never opened through a symlink (red-team 2 and
    /// aesthetics review 3: the flag was a literal, O_LARGEFILE on aarch64).
    #[test]
    fn watch_lock_never_follows_a_symlink() {
        let dir = std::env::temp_dir().join(format!("preloop-watch-lock-{}", fsutil::note_id()));
        fsutil::private_dir(&dir).unwrap();
        let target = dir.join("target");
        std::fs::write(&target, b"").unwrap();
        let link = dir.join("s.watch");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for create in [false, true] {
            let e = open_lock(&link, create).expect_err("a symlinked lock must not open");
            assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        }
        assert!(open_lock(&target, false).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
