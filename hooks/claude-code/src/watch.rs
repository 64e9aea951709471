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
use preloop_shared::backend::HookMode;
use preloop_shared::config::{Config, Env, preloop_home};
use preloop_shared::error::Error;
use preloop_shared::flow::Engine;
use preloop_shared::fsutil;
use preloop_shared::log::{LogLine, LogOutcome};
use preloop_shared::session;
use preloop_shared::time::Timestamp;
use serde_json::Value;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The binary's name.
pub const BINARY: &str = "preloop-claude-code-watch";
/// Exit code that makes Claude Code deliver the output and wake the model.
pub const EXIT_WAKE: i32 = 2;
/// Largest stdin we read (a hook payload is a few hundred bytes).
const MAX_STDIN: u64 = 1 << 20;
/// How long a watcher started right after its session ended waits for a
/// reopen (`claude --resume`: SessionStart reopens the session in parallel).
const REOPEN_GRACE: Duration = Duration::from_secs(10);
/// How long SessionEnd waits for a signalled watcher to let go of its lock.
const STOP_WAIT: Duration = Duration::from_millis(300);

/// Why a watcher ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// Handed notes to Claude (exit 2).
    Delivered(Vec<String>),
    /// Did not run: the reason (exit 0).
    StandDown(&'static str),
    /// Stopped watching: the reason (exit 0).
    Stopped(String),
}

impl End {
    pub fn exit_code(&self) -> i32 {
        match self {
            End::Delivered(_) => EXIT_WAKE,
            _ => 0,
        }
    }
}

/// Run the watcher; returns its exit code.
pub fn main() -> i32 {
    preloop_shared::runner::prepare_process();
    // A stdin that never closes must not keep the watcher from its bounds.
    let buf = preloop_shared::runner::read_stdin(Duration::from_secs(5)).unwrap_or_default();
    let code = std::panic::catch_unwind(|| {
        let end = run(&Env::process(), &mut &buf[..], &mut std::io::stderr().lock());
        end.exit_code()
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
        End::StandDown("watch is off")
    } else if is_headless(env) {
        End::StandDown("headless run")
    } else {
        match session_id_of(&buf) {
            Err(why) => End::StandDown(why),
            Ok(sid) => watch_session(env, &config, &sid, out, started),
        }
    };
    let session = session_id_of(&buf).ok();
    log(&config, session.as_deref(), &end, started);
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
    let lock = match WatchLock::acquire(&config.home, sid) {
        Ok(Some(l)) => l,
        Ok(None) => return End::StandDown("another watcher runs for this session"),
        Err(e) => return End::Stopped(format!("lock: {e}")),
    };
    let s = &config.settings;
    let server = config.server.is_some();
    let life = Liveness::new(env);
    let started_at = Timestamp::now();
    let deadline = started + Duration::from_secs(s.watch_max_secs);
    let tick = Duration::from_millis(s.watch_poll_ms.max(10));
    let max_interval = Duration::from_millis(s.watch_server_poll_max_ms.max(s.watch_server_poll_ms).max(10));
    let mut interval = if server { Duration::from_millis(s.watch_server_poll_ms.max(10)) } else { tick };
    let mut next_poll = Instant::now() + jitter(interval, server);
    let mut engine = Engine::new(preloop_shared::registry::def_of(crate::Event::Watch), config.clone(), sid);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return End::Stopped("lifetime".into());
        }
        if let Some(why) = life.gone() {
            return End::Stopped(why.into());
        }
        match session_state(&config.home, sid, started_at) {
            SessionState::Live => {}
            SessionState::Ended => return End::Stopped("session ended".into()),
            SessionState::EndedBefore if started.elapsed() >= REOPEN_GRACE => {
                return End::Stopped("session ended".into());
            }
            SessionState::EndedBefore => {
                std::thread::sleep(tick.min(deadline - now));
                continue;
            }
        }
        if now >= next_poll {
            match deliver(&mut engine, config, sid, &life, started_at, out) {
                Ok(Some(end)) => {
                    drop(lock);
                    return end;
                }
                Ok(None) => {}
                Err(e) => {
                    if let Error::Status { status: 401 | 403 | 404, .. } = e {
                        return End::Stopped(format!("server refused the watcher: {e}"));
                    }
                    engine.warnings.push(format!("poll failed: {e}"));
                }
            }
            if server {
                interval = (interval * 2).min(max_interval);
            }
            next_poll = Instant::now() + jitter(interval, server);
        }
        let now = Instant::now();
        let wait = tick.min(next_poll.saturating_duration_since(now)).min(deadline.saturating_duration_since(now));
        std::thread::sleep(wait.max(Duration::from_millis(1)));
    }
}

/// One poll. `Ok(Some(end))`: the watcher is done (notes handed over, or the
/// session went away while they were in hand).
fn deliver(
    engine: &mut Engine,
    config: &Config,
    sid: &str,
    life: &Liveness,
    started_at: Timestamp,
    out: &mut dyn Write,
) -> preloop_shared::Result<Option<End>> {
    // From the claim to the exit nothing may cut the steps apart.
    let _held = SignalsHeld::new();
    let (outcome, after) = engine.poll_idle()?;
    let Some(block) = outcome.context.clone() else {
        engine.finish(after, true); // owed acks, spool drops
        return Ok(None);
    };
    // Never wake a session that ended meanwhile: the notes go back to the
    // spool (SessionEnd reports them).
    let gone = life.gone().map(str::to_string).or_else(|| {
        matches!(session_state(&config.home, sid, started_at), SessionState::Ended | SessionState::EndedBefore)
            .then(|| "session ended".to_string())
    });
    if let Some(why) = gone {
        engine.finish(after, false);
        return Ok(Some(End::Stopped(format!("{why} with notes in hand; returned to the spool"))));
    }
    // The block exactly, no trailing newline: Claude Code appends the text
    // to its label as is.
    let written = out.write_all(block.as_bytes()).and_then(|_| out.flush()).is_ok();
    engine.finish(after, written);
    Ok(Some(if written {
        End::Delivered(outcome.note_ids)
    } else {
        End::Stopped("stderr write failed; notes returned to the spool".into())
    }))
}

enum SessionState {
    Live,
    /// Ended after this watcher started.
    Ended,
    /// Ended before this watcher started: maybe about to be reopened.
    EndedBefore,
}

fn session_state(home: &Path, sid: &str, started_at: Timestamp) -> SessionState {
    match session::read_session_file(home, sid) {
        Ok(Some(f)) => match f.ended_at {
            Some(t) if t >= started_at => SessionState::Ended,
            Some(_) => SessionState::EndedBefore,
            None => SessionState::Live,
        },
        _ => SessionState::Live, // not registered yet: the poll claims nothing
    }
}

/// ±10 % around `d` in server mode, so a fleet started together does not poll in step.
fn jitter(d: Duration, on: bool) -> Duration {
    if !on {
        return d;
    }
    let r = u16::from_le_bytes(fsutil::random_bytes::<2>()) as f64 / u16::MAX as f64; // 0..=1
    d.mul_f64(0.9 + 0.2 * r)
}

/// The watcher's one line in the hook log, written as every hook's is
/// ([`LogLine`]): `<time> claude-code Watch mode=.. session=.. outcome=.. notes=.. ms=.. [why=..]`.
fn log(config: &Config, session: Option<&str>, end: &End, started: Instant) {
    let (outcome, notes, why) = match end {
        End::Delivered(ids) => (LogOutcome::Notes, ids.clone(), None),
        End::StandDown(w) => (LogOutcome::StandDown, Vec::new(), Some(w.to_string())),
        End::Stopped(w) => (LogOutcome::Stopped, Vec::new(), Some(w.clone())),
    };
    LogLine {
        harness: "claude-code",
        event: "Watch",
        mode: Some(if config.server.is_some() { HookMode::Server } else { HookMode::Local }),
        session: session.map(str::to_string),
        outcome,
        notes,
        millis: started.elapsed().as_millis(),
        why,
        ..LogLine::default()
    }
    .append(config);
}

// ----- is Claude still there ------------------------------------------------

struct Liveness {
    parent: i32,
    claude: Option<i32>,
}

impl Liveness {
    fn new(env: &Env) -> Liveness {
        // SAFETY: getppid has no preconditions.
        let parent = unsafe { libc::getppid() };
        let claude = env.get("CLAUDE_PID").and_then(|p| p.trim().parse::<i32>().ok()).filter(|p| *p > 1);
        Liveness { parent, claude }
    }

    /// Why Claude is gone, if it is.
    fn gone(&self) -> Option<&'static str> {
        // SAFETY: getppid has no preconditions.
        if unsafe { libc::getppid() } != self.parent {
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

fn process_exists(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// SIGTERM, SIGINT and SIGHUP held off while alive (left pending: they act
/// on the exit that follows, or when the guard drops).
struct SignalsHeld {
    old: libc::sigset_t,
}

impl SignalsHeld {
    fn new() -> SignalsHeld {
        // SAFETY: plain sigset manipulation on owned, initialised values.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGHUP);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            SignalsHeld { old }
        }
    }
}

impl Drop for SignalsHeld {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `new`.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut());
        }
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

    #[test]
    fn jitter_stays_within_ten_percent() {
        for _ in 0..100 {
            let j = jitter(Duration::from_secs(10), true);
            assert!(j >= Duration::from_secs(9) && j <= Duration::from_secs(11), "{j:?}");
        }
        assert_eq!(jitter(Duration::from_secs(10), false), Duration::from_secs(10));
    }
}
