//! `preloop-pi-watch`: wake an idle Pi session (RPC, interactive) when a
//! note arrives.
//!
//! Pi starts a turn when an extension calls `pi.sendMessage(note,
//! {triggerTurn: true})` while it sits idle (docs/contracts/pi.md §5, "Idle
//! wake"). Our extension runs this command as the manifest's `idle` entry
//! after session_start and after an agent_end that did not continue, only
//! where `has_ui` (Pi stays alive), and keeps at most one per process. All
//! the decisions are here; the extension only applies the answer:
//!
//! * stands down at once (no output) when `watch` is off or `has_ui` is
//!   false;
//! * polls with the Claude Code watcher's cadence and settings: the local
//!   inbox every `watch_poll_ms`; the server's `notes/pending`
//!   (`defer_delivery: true`) every `watch_server_poll_ms`, doubling after
//!   every empty poll up to `watch_server_poll_max_ms`, ±10 %;
//! * on a claim: writes one `continue` answer and acks the notes
//!   `delivered` only once the extension wrote `applied` back
//!   ([`preloop_shared::plugin`]); without it they go back to the spool;
//!   then exits (the turn it started ends in agent_end, which starts the
//!   next watcher);
//! * exits without output when its session ended, when its parent (Pi's
//!   Node process) is gone, after `watch_max_secs`, or when the server
//!   refuses its token. The extension stops it (SIGTERM) at
//!   session_shutdown; from the claim to the exit SIGTERM is held off.
//!
//! Nothing is woken when no note is pending: a poll that claims nothing
//! writes nothing.

use crate::wire::{self, Answer, Payload};
use preloop_shared::Harness;
use preloop_shared::config::{Config, Env};
use preloop_shared::error::Error;
use preloop_shared::flow::Engine;
use preloop_shared::plugin;
use preloop_shared::session;
use preloop_shared::time::Timestamp;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a watcher started right after its session ended waits for a
/// reopen (`pi -c`: session_start registers the session again).
const REOPEN_GRACE: Duration = Duration::from_secs(10);

/// Why a watcher ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// Pi applied a continuation with these notes.
    Delivered(Vec<String>),
    /// Did not run: the reason.
    StandDown(String),
    /// Stopped watching: the reason.
    Stopped(String),
}

/// Run the watcher under the extension; always exits 0 (an answer on
/// stdout is the only signal).
pub fn main() -> i32 {
    preloop_shared::runner::prepare_process();
    let env = Env::process();
    let started = Instant::now();
    let config = Config::load_from(&env, Some(Harness::Pi));
    let payload = plugin::read_payload(Duration::from_secs(5));
    let (session, end) = match payload.as_deref().map_err(String::clone).and_then(session_of) {
        Err(why) => (None, End::StandDown(why)),
        Ok((_, false)) => (None, End::StandDown("no UI: Pi does not stay idle (-p, json)".into())),
        Ok(_) if !config.settings.watch => (None, End::StandDown("watch is off".into())),
        Ok((sid, true)) => {
            let mut out = plugin::Confirmed::stdout(plugin::CONFIRM_WAIT);
            let end = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                watch(&config, &sid, &mut out, started, &Parent::now())
            }))
            .unwrap_or_else(|_| End::Stopped("panic".into()));
            (Some(sid), end)
        }
    };
    log(&config, session.as_deref(), &end, started);
    0
}

/// The session id and `has_ui` of the extension's `idle` payload.
pub fn session_of(buf: &[u8]) -> Result<(String, bool), String> {
    let p: Payload = serde_json::from_slice(buf).map_err(|e| format!("payload: {e}"))?;
    if p.v != wire::PROTOCOL {
        return Err(format!("protocol {} (this build speaks {})", p.v, wire::PROTOCOL));
    }
    if p.event != "idle" {
        return Err(format!("a {} payload given to the watcher", p.event));
    }
    let sid = p.session_id.trim();
    if sid.is_empty() {
        return Err("no session_id".into());
    }
    Ok((sid.to_string(), p.has_ui))
}

/// Whether the process that started us (Pi) is still our parent.
pub struct Parent(i32);

impl Parent {
    /// The parent now.
    pub fn now() -> Parent {
        // SAFETY: getppid has no preconditions.
        Parent(unsafe { libc::getppid() })
    }
    fn gone(&self) -> bool {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::getppid() != self.0 }
    }
}

/// The loop: poll until a note is applied or a reason to stop. `out` is the
/// confirmed stdout (tests: any writer whose `flush` says whether the
/// answer was applied).
pub fn watch(config: &Config, sid: &str, out: &mut dyn Write, started: Instant, parent: &Parent) -> End {
    let s = &config.settings;
    let server = config.server.is_some();
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
        if parent.gone() {
            return End::Stopped("parent process gone".into());
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
            match deliver(&mut engine, config, sid, parent, started_at, out) {
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
                interval = (interval * 2).min(max_interval);
            }
            next_poll = Instant::now() + jitter(interval, server);
        }
        let now = Instant::now();
        let wait = tick.min(next_poll.saturating_duration_since(now)).min(deadline.saturating_duration_since(now));
        std::thread::sleep(wait.max(Duration::from_millis(1)));
    }
}

/// One poll. `Ok(Some(end))`: done (notes applied, or in hand when the
/// session went away, or refused by the extension: back to the spool).
fn deliver(
    engine: &mut Engine,
    config: &Config,
    sid: &str,
    parent: &Parent,
    started_at: Timestamp,
    out: &mut dyn Write,
) -> preloop_shared::Result<Option<End>> {
    let _held = SignalsHeld::new();
    let (outcome, after) = engine.poll_idle()?;
    let Some(text) = outcome.context.clone().filter(|t| !t.is_empty()) else {
        engine.finish(after, true); // owed acks, spool drops
        return Ok(None);
    };
    if parent.gone() || !matches!(session_state(&config.home, sid, started_at), SessionState::Live) {
        engine.finish(after, false);
        return Ok(Some(End::Stopped("session gone with notes in hand; returned to the spool".into())));
    }
    let mut line = serde_json::to_vec(&Answer::Continue { text }).unwrap_or_default();
    line.push(b'\n');
    let applied = out.write_all(&line).and_then(|_| out.flush()).is_ok();
    engine.finish(after, applied);
    Ok(Some(if applied {
        End::Delivered(outcome.note_ids)
    } else {
        End::Stopped("the extension did not apply the answer; notes returned to the spool".into())
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
    let r = u16::from_le_bytes(preloop_shared::fsutil::random_bytes::<2>()) as f64 / u16::MAX as f64;
    d.mul_f64(0.9 + 0.2 * r)
}

fn log(config: &Config, session: Option<&str>, end: &End, started: Instant) {
    let (outcome, notes, why) = match end {
        End::Delivered(ids) => ("notes", ids.join(","), None),
        End::StandDown(w) => ("stand_down", String::new(), Some(w.clone())),
        End::Stopped(w) => ("stopped", String::new(), Some(w.clone())),
    };
    let mut line = format!(
        "{} pi Watch mode={} session={} outcome={} notes={} ms={}",
        Timestamp::now().to_iso_z(),
        if config.server.is_some() { "server" } else { "local" },
        session.map(|s| s.chars().take(80).collect::<String>()).unwrap_or_else(|| "-".into()),
        outcome,
        if notes.is_empty() { "-".into() } else { notes },
        started.elapsed().as_millis()
    );
    if let Some(w) = why {
        line.push_str(&format!(" why={w:?}"));
    }
    preloop_shared::log::append(&config.log_dir(), config.settings.log_max_bytes, &line);
}

/// SIGTERM, SIGINT and SIGHUP held off while alive (left pending: they act
/// on the exit that follows, or when the guard drops), so a claim and its
/// ack or return to the spool are never cut apart.
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
    fn the_watcher_reads_only_an_idle_payload_with_a_session() {
        let p = |s: &str| session_of(s.as_bytes());
        assert_eq!(p(r#"{"v":1,"event":"idle","session_id":" s1 ","has_ui":true}"#), Ok(("s1".into(), true)));
        assert_eq!(p(r#"{"v":1,"event":"idle","session_id":"s1","has_ui":false}"#), Ok(("s1".into(), false)));
        assert!(p(r#"{"v":1,"event":"agent_end","session_id":"s1","has_ui":true}"#).is_err());
        assert!(p(r#"{"v":1,"event":"idle","session_id":" ","has_ui":true}"#).is_err());
        assert!(p(r#"{"v":2,"event":"idle","session_id":"s1","has_ui":true}"#).is_err());
        assert!(p("not json").is_err());
    }
}
