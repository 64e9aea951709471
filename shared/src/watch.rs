//! The idle watcher's loop, shared by every harness that can wake an idle
//! session (Claude Code's `preloop-claude-code-watch`, Pi's
//! `preloop-pi-watch`, OpenCode's `preloop-opencode-watch`): what each
//! harness owns is how it learns its session, whether its host is still
//! there, and how a block is handed over (Claude Code: stderr and exit 2; Pi
//! and OpenCode: one `continue` answer the extension or plugin applies).
//! The rest is here, once:
//!
//! * polls the local inbox every `watch_poll_ms`; the server's
//!   `notes/pending` (`defer_delivery: true`: a non-empty answer *is* the
//!   claim) every `watch_server_poll_ms`, doubling after every empty poll up
//!   to `watch_server_poll_max_ms`, ±10 % so a fleet does not poll in step;
//!   for the first [`ACTIVE_WINDOW`] of a watch (the session's turn just
//!   ended: its operator is likely still looking) no further than
//!   [`ACTIVE_MAX`] ([`next_server_interval`]). The Preloop server pushes
//!   no note to an agent (docs/performance.md, "Send to model"), so this
//!   poll is how a note reaches an idle session;
//! * stops when the session ends (session file `ended_at`; a session that
//!   ended before the watcher started gets [`REOPEN_GRACE`] to be reopened),
//!   when the host is gone, after `watch_max_secs`, or when the server
//!   refuses the token (401, 403, 404);
//! * on a claim: hands the block over and acks what was taken, or returns
//!   the notes to the spool (SIGTERM, SIGINT and SIGHUP are held off from the
//!   claim to the end, so the steps cannot be cut apart by a signal).
//!
//! Nothing is woken when no note is pending: a poll that claims nothing
//! hands nothing over.

use crate::backend::HookMode;
use crate::config::Config;
use crate::error::Error;
use crate::flow::Engine;
use crate::fsutil;
use crate::log::{LogLine, LogOutcome};
use crate::registry::HookDef;
use crate::session;
use crate::time::Timestamp;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a watcher started right after its session ended waits for a
/// reopen (`claude --resume`, `pi -c`: the session start registers the
/// session again).
pub const REOPEN_GRACE: Duration = Duration::from_secs(10);

/// How long after a watcher starts (a turn ended, or the session started)
/// its server polls stay at most [`ACTIVE_MAX`] apart: an operator sends
/// most notes while watching the session they steer.
pub const ACTIVE_WINDOW: Duration = Duration::from_secs(600);

/// The longest server poll interval within [`ACTIVE_WINDOW`] (unless
/// `watch_server_poll_max_ms` is lower, or `watch_server_poll_ms` higher).
/// 10 s: a note waits ~5 s on average, at most ~11 s, for ~6 requests per
/// minute; 30 s after the window: ~15 s, ~33 s, 2 per minute.
pub const ACTIVE_MAX: Duration = Duration::from_secs(10);

/// The server poll interval after an empty poll at `interval`, `watching`
/// into the watch: doubled, up to `max` (`watch_server_poll_max_ms`), and
/// within [`ACTIVE_WINDOW`] up to [`ACTIVE_MAX`] (never below `first`,
/// `watch_server_poll_ms`).
pub fn next_server_interval(interval: Duration, first: Duration, max: Duration, watching: Duration) -> Duration {
    let ceiling = if watching < ACTIVE_WINDOW { max.min(ACTIVE_MAX).max(first) } else { max };
    (interval * 2).min(ceiling)
}

/// Why a watcher ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The host took a block carrying these notes.
    Delivered(Vec<String>),
    /// Did not run: the reason.
    StandDown(String),
    /// Stopped watching: the reason.
    Stopped(String),
}

/// What a harness owns in the loop.
pub trait Host {
    /// Why the host (the harness process) is gone, if it is.
    fn gone(&self) -> Option<String>;
    /// Hand `block` (the framed notes) to the harness: `Ok` once it took
    /// it, else what went wrong (the notes go back to the spool).
    fn hand_over(&mut self, block: &str) -> Result<(), String>;
}

/// The parent process at the start, to tell when it is gone (a watcher is
/// the harness's child; reparenting means the harness exited).
pub struct Parent(i32);

impl Parent {
    /// The parent now.
    pub fn now() -> Parent {
        // SAFETY: getppid has no preconditions.
        Parent(unsafe { libc::getppid() })
    }

    /// Whether the parent changed since [`Parent::now`].
    pub fn gone(&self) -> bool {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::getppid() != self.0 }
    }
}

/// Whether a process `pid` exists (signal 0; EPERM means it does).
pub fn process_exists(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A plugin's `idle` payload, read: the session id, and whether the
/// harness stays alive after a run there.
pub type IdleSession = (String, bool);

/// A harness that loads our plugin (Pi, OpenCode): what its watcher
/// (`preloop-<harness>-watch`, the plugin's `idle` entry) owns. The rest
/// is [`PluginWatcher::main`]: read the payload, stand down where the
/// harness does not stay alive or `watch` is off, watch with the harness
/// (our parent) as the host, and hand a block over as one `continue` answer
/// that counts only once the plugin wrote `applied`.
pub struct PluginWatcher {
    pub harness: crate::Harness,
    /// The harness's watch row.
    pub def: &'static HookDef,
    /// The session id of the plugin's `idle` payload, and whether the
    /// harness stays alive after a run there.
    pub session_of: fn(&[u8]) -> Result<IdleSession, String>,
    /// Why there is nothing to wake where it does not stay alive.
    pub no_idle: &'static str,
    /// The adapter's `continue` answer for a block, as one line.
    pub answer: fn(&str) -> Vec<u8>,
    /// What the harness calls our plugin ("extension", "plugin").
    pub plugin: &'static str,
    /// The harness's session-end row, where a watcher that finds its parent
    /// gone (the harness killed with no end of its own: SIGKILL, a crash)
    /// ends the session it watched, still live ([`PARENT_GONE`]); `None`:
    /// it only stops.
    pub end_when_parent_gone: Option<&'static HookDef>,
}

/// Why a plugin watcher stops when the harness process (its parent) is gone.
pub const PARENT_GONE: &str = "parent process gone";

impl PluginWatcher {
    /// Run the watcher under the plugin; always exits 0 (an answer on
    /// stdout is the only signal).
    pub fn main(&self) -> i32 {
        crate::runner::prepare_process();
        let env = crate::config::Env::process();
        let started = Instant::now();
        let config = Config::load_from(&env, Some(self.harness));
        let payload = crate::plugin::read_payload(Duration::from_secs(5));
        let (session, end) = match payload.as_deref().map_err(String::clone).and_then(self.session_of) {
            Err(why) => (None, End::StandDown(why)),
            Ok((_, false)) => (None, End::StandDown(self.no_idle.into())),
            Ok(_) if !config.settings.watch => (None, End::StandDown("watch is off".into())),
            Ok((sid, true)) => {
                let mut out = crate::plugin::Confirmed::stdout(crate::plugin::CONFIRM_WAIT);
                let end = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.watch(&config, &sid, &mut out, started, Parent::now())
                }))
                .unwrap_or_else(|_| End::Stopped("panic".into()));
                let end = match (end, self.end_when_parent_gone) {
                    (End::Stopped(why), Some(def)) if why == PARENT_GONE => {
                        End::Stopped(end_orphaned(&config, def, &sid))
                    }
                    (end, _) => end,
                };
                (Some(sid), end)
            }
        };
        log(&config, self.harness.slug(), session.as_deref(), &end, started);
        0
    }

    /// Watch session `sid` until a note is applied or a reason to stop.
    /// `out` is the confirmed stdout (tests: any writer whose `flush` says
    /// whether the answer was applied); `parent` is the harness's process.
    pub fn watch(
        &self,
        config: &Config,
        sid: &str,
        out: &mut dyn std::io::Write,
        started: Instant,
        parent: Parent,
    ) -> End {
        watch(config, self.def, sid, started, &mut PluginHost { watcher: self, parent, out })
    }
}

/// A plugin harness as the watcher's host: alive while it (our parent) is;
/// takes a block as one `continue` answer, confirmed once applied.
struct PluginHost<'a> {
    watcher: &'a PluginWatcher,
    parent: Parent,
    out: &'a mut dyn std::io::Write,
}

impl Host for PluginHost<'_> {
    fn gone(&self) -> Option<String> {
        self.parent.gone().then(|| PARENT_GONE.into())
    }

    fn hand_over(&mut self, block: &str) -> Result<(), String> {
        let line = (self.watcher.answer)(block);
        self.out
            .write_all(&line)
            .and_then(|_| self.out.flush())
            .map_err(|_| format!("the {} did not apply the answer", self.watcher.plugin))
    }
}

/// Watch session `sid` for `def` (the harness's watch row) until a block is
/// handed over or a reason to stop; `started` is when the process started.
pub fn watch(config: &Config, def: &'static HookDef, sid: &str, started: Instant, host: &mut dyn Host) -> End {
    let s = &config.settings;
    let server = config.server.is_some();
    let started_at = Timestamp::now();
    let deadline = started + Duration::from_secs(s.watch_max_secs);
    let tick = Duration::from_millis(s.watch_poll_ms.max(10));
    let max_interval = Duration::from_millis(s.watch_server_poll_max_ms.max(s.watch_server_poll_ms).max(10));
    let first = Duration::from_millis(s.watch_server_poll_ms.max(10)).min(max_interval);
    let mut interval = if server { first } else { tick };
    let mut next_poll = Instant::now() + jitter(interval, server);
    let mut engine = Engine::new(def, config.clone(), sid);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return End::Stopped("lifetime".into());
        }
        if let Some(why) = host.gone() {
            return End::Stopped(why);
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
            match deliver(&mut engine, config, sid, started_at, host) {
                Ok(Some(end)) => return end,
                Ok(None) => {}
                Err(e) => {
                    if let Error::Status { status: 401 | 403 | 404, .. } = e {
                        return End::Stopped(format!("server refused the watcher: {e}"));
                    }
                    engine.warnings.push(format!("poll failed: {e}"));
                }
            }
            if server {
                interval = next_server_interval(interval, first, max_interval, started.elapsed());
            }
            next_poll = Instant::now() + jitter(interval, server);
        }
        let now = Instant::now();
        let wait = tick.min(next_poll.saturating_duration_since(now)).min(deadline.saturating_duration_since(now));
        std::thread::sleep(wait.max(Duration::from_millis(1)));
    }
}

/// One poll. `Ok(Some(end))`: the watcher is done (notes handed over, or
/// the session went away while they were in hand, or the host refused them:
/// back to the spool).
fn deliver(
    engine: &mut Engine,
    config: &Config,
    sid: &str,
    started_at: Timestamp,
    host: &mut dyn Host,
) -> crate::Result<Option<End>> {
    // From the claim to the end nothing may cut the steps apart.
    let _held = SignalsHeld::new();
    let (outcome, after) = engine.poll_idle()?;
    let Some(block) = outcome.context.clone().filter(|b| !b.is_empty()) else {
        engine.finish(after, true); // owed acks, spool drops
        return Ok(None);
    };
    // Never wake a session that ended meanwhile: the notes go back to the
    // spool (the session end reports them).
    let gone = host.gone().or_else(|| {
        (!matches!(session_state(&config.home, sid, started_at), SessionState::Live))
            .then(|| "session ended".to_string())
    });
    if let Some(why) = gone {
        engine.finish(after, false);
        return Ok(Some(End::Stopped(format!("{why} with notes in hand; returned to the spool"))));
    }
    let taken = host.hand_over(&block);
    engine.finish(after, taken.is_ok());
    Ok(Some(match taken {
        Ok(()) => End::Delivered(outcome.note_ids),
        Err(why) => End::Stopped(format!("{why}; notes returned to the spool")),
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

/// The harness died without ending the session this watcher watched (its
/// end hook never ran): end it here with `def` (the harness's session-end
/// row), as that hook would have, when it is registered and still live.
/// Returns the watcher's stop reason for the log.
pub fn end_orphaned(config: &Config, def: &'static HookDef, sid: &str) -> String {
    let live = matches!(session::read_session_file(&config.home, sid), Ok(Some(f)) if f.ended_at.is_none());
    if !live {
        return PARENT_GONE.into();
    }
    let mut engine = Engine::new(def, config.clone(), sid);
    let input = crate::flow::Input {
        session_id: sid.to_string(),
        cwd: None,
        transcript_path: None,
        parent_session_id: None,
        kind: crate::flow::InputKind::SessionEnd { reason: "harness gone".into() },
    };
    match engine.handle(&input) {
        Ok((_, after)) => {
            engine.finish(after, true);
            format!("{PARENT_GONE}: session ended")
        }
        Err(e) => format!("{PARENT_GONE}: ending the session failed: {e}"),
    }
}

/// ±10 % around `d` when `on` (server mode), so a fleet started together
/// does not poll in step.
pub fn jitter(d: Duration, on: bool) -> Duration {
    if !on {
        return d;
    }
    let r = u16::from_le_bytes(fsutil::random_bytes::<2>()) as f64 / u16::MAX as f64; // 0..=1
    d.mul_f64(0.9 + 0.2 * r)
}

/// The watcher's one log line ([`crate::log::LogLine`], event `Watch`):
/// outcome `notes`, `stand_down` or `stopped`, with `why=` where it stood
/// down or stopped.
pub fn log(config: &Config, harness: &'static str, session: Option<&str>, end: &End, started: Instant) {
    let (outcome, notes, why) = match end {
        End::Delivered(ids) => (LogOutcome::Notes, ids.clone(), None),
        End::StandDown(w) => (LogOutcome::StandDown, Vec::new(), Some(w.clone())),
        End::Stopped(w) => (LogOutcome::Stopped, Vec::new(), Some(w.clone())),
    };
    LogLine {
        harness,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_ten_percent() {
        for _ in 0..100 {
            let j = jitter(Duration::from_secs(10), true);
            assert!(j >= Duration::from_secs(9) && j <= Duration::from_secs(11), "{j:?}");
        }
        assert_eq!(jitter(Duration::from_secs(10), false), Duration::from_secs(10));
    }

    /// The polls of one watch of `life` with no note: (in the first
    /// minute, in the first ten minutes, in all), jitter left out.
    fn polls(first: Duration, max: Duration, life: Duration) -> (usize, usize, usize) {
        let (mut t, mut interval, mut at) = (Duration::ZERO, first, Vec::new());
        loop {
            t += interval;
            if t >= life {
                break;
            }
            at.push(t);
            interval = next_server_interval(interval, first, max, t);
        }
        let within = |d: Duration| at.iter().filter(|&&p| p < d).count();
        (within(Duration::from_secs(60)), within(Duration::from_secs(600)), at.len())
    }

    #[test]
    fn server_polls_stay_ten_seconds_apart_while_the_operator_is_likely_watching() {
        let (s2, s30) = (Duration::from_secs(2), Duration::from_secs(30));
        let mut seq = Vec::new();
        let (mut i, mut t) = (s2, Duration::ZERO);
        for _ in 0..6 {
            t += i;
            i = next_server_interval(i, s2, s30, t);
            seq.push(i.as_secs());
        }
        assert_eq!(seq, [4, 8, 10, 10, 10, 10]);
        // Past the window: the old backoff to the ceiling.
        let late = ACTIVE_WINDOW + Duration::from_secs(1);
        assert_eq!(next_server_interval(Duration::from_secs(10), s2, s30, late), Duration::from_secs(20));
        assert_eq!(next_server_interval(Duration::from_secs(20), s2, s30, late), s30);
        assert_eq!(next_server_interval(s30, s2, s30, late), s30);
    }

    #[test]
    fn the_settings_still_bound_the_active_cadence() {
        let s = Duration::from_secs;
        // A ceiling below 10 s is kept; a first interval above it is not lowered.
        assert_eq!(next_server_interval(s(4), s(2), s(5), s(0)), s(5));
        assert_eq!(next_server_interval(s(15), s(15), s(60), s(0)), s(15));
        assert_eq!(next_server_interval(s(15), s(15), s(60), ACTIVE_WINDOW), s(30));
    }

    #[test]
    fn an_idle_hour_costs_at_most_a_third_more_requests() {
        let s = Duration::from_secs;
        let (first_min, first_ten, hour) = polls(s(2), s(30), s(3600));
        // 2, 6, 14, 24, ... 54 s: 7 in the first minute; 10 s apart to 600 s.
        assert_eq!(first_min, 7);
        assert_eq!(first_ten, 61);
        // 10 min at ~6 a minute, then ~2 a minute: 162 an hour, against 122
        // for the plain backoff to 30 s (2, 6, 14, 30, 60, 90, ...).
        assert_eq!(hour, 162);
        let old = {
            let (mut t, mut i, mut n) = (s(0), s(2), 0);
            while t + i < s(3600) {
                t += i;
                n += 1;
                i = (i * 2).min(s(30));
            }
            n
        };
        assert_eq!(old, 122);
        assert!(hour * 3 <= old * 4, "{hour} against {old}");
    }

    #[test]
    fn this_process_exists_and_pid_max_plus_one_does_not() {
        assert!(process_exists(std::process::id() as i32));
        assert!(!process_exists(i32::MAX));
    }
}
