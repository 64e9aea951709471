//! `preloop-opencode-watch`: wake an idle OpenCode session (`serve`, the
//! TUI) when a note arrives.
//!
//! OpenCode starts a turn when a plugin calls
//! `client.session.promptAsync({path: {id}, body: {parts}})` on an idle
//! session in `opencode serve` and the TUI; in `opencode run` the process
//! disposes at the first idle and the message would be stored with no
//! model request (docs/contracts/opencode.md §6, "Idle wake"). Our plugin
//! runs this command as the manifest's `idle` entry on the `session.idle`
//! event, only where OpenCode stays alive (`mode` is not `run`), at most
//! one per session. All the decisions are here; the plugin only applies
//! the answer:
//!
//! * stands down at once (no output) when `watch` is off or `mode` is
//!   `run`;
//! * polls with the Claude Code watcher's cadence and settings
//!   ([`preloop_shared::watch`]): the local inbox every `watch_poll_ms`; the
//!   server's `notes/pending` (`defer_delivery: true`) every
//!   `watch_server_poll_ms`, doubling after every empty poll up to
//!   `watch_server_poll_max_ms`, ±10 %;
//! * on a claim: writes one `continue` answer and acks the notes
//!   `delivered` only once the plugin wrote `applied` back, which it does
//!   once `promptAsync` resolved without an error
//!   ([`preloop_shared::plugin`]); without it they go back to the spool;
//!   then exits (the turn it started ends in `session.idle`, which starts
//!   the next watcher);
//! * exits without output when its session ended, when its parent
//!   (OpenCode's process) is gone, after `watch_max_secs`, or when the
//!   server refuses its token. The plugin stops it (SIGTERM) when a run
//!   starts (`chat.message`, `session.status` busy), at `session.deleted`
//!   and at `dispose`; from the claim to the exit SIGTERM is held off.
//!
//! Nothing is woken when no note is pending: a poll that claims nothing
//! writes nothing.

use crate::wire::{self, Answer, Payload};
use preloop_shared::Harness;
use preloop_shared::config::{Config, Env};
use preloop_shared::plugin;
use preloop_shared::watch::{self as shared_watch, Host, Parent};
use std::io::Write;
use std::time::{Duration, Instant};

pub use preloop_shared::watch::End;

/// Run the watcher under the plugin; always exits 0 (an answer on stdout
/// is the only signal).
pub fn main() -> i32 {
    preloop_shared::runner::prepare_process();
    let env = Env::process();
    let started = Instant::now();
    let config = Config::load_from(&env, Some(Harness::OpenCode));
    let payload = plugin::read_payload(Duration::from_secs(5));
    let (session, end) = match payload.as_deref().map_err(String::clone).and_then(session_of) {
        Err(why) => (None, End::StandDown(why)),
        Ok((_, false)) => (None, End::StandDown("opencode run disposes at the first idle: nothing to wake".into())),
        Ok(_) if !config.settings.watch => (None, End::StandDown("watch is off".into())),
        Ok((sid, true)) => {
            let mut out = plugin::Confirmed::stdout(plugin::CONFIRM_WAIT);
            let end = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                watch(&config, &sid, &mut out, started, Parent::now())
            }))
            .unwrap_or_else(|_| End::Stopped("panic".into()));
            (Some(sid), end)
        }
    };
    shared_watch::log(&config, "opencode", session.as_deref(), &end, started);
    0
}

/// The session id of the plugin's `idle` payload, and whether OpenCode
/// stays alive after a run there (every `mode` but `run`).
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
    Ok((sid.to_string(), p.mode.trim() != "run"))
}

/// Watch session `sid` until a note is applied or a reason to stop. `out`
/// is the confirmed stdout (tests: any writer whose `flush` says whether the
/// answer was applied); `parent` is OpenCode's process.
pub fn watch(config: &Config, sid: &str, out: &mut dyn Write, started: Instant, parent: Parent) -> End {
    let def = preloop_shared::registry::def_of(crate::Event::Watch);
    shared_watch::watch(config, def, sid, started, &mut Plugin { parent, out })
}

/// OpenCode's plugin as the watcher's host: alive while OpenCode (our
/// parent) is; takes a block as one `continue` answer, confirmed once
/// applied.
struct Plugin<'a> {
    parent: Parent,
    out: &'a mut dyn Write,
}

impl Host for Plugin<'_> {
    fn gone(&self) -> Option<String> {
        self.parent.gone().then(|| "parent process gone".into())
    }

    fn hand_over(&mut self, block: &str) -> Result<(), String> {
        let mut line = serde_json::to_vec(&Answer::Continue { text: block.to_string() }).unwrap_or_default();
        line.push(b'\n');
        self.out
            .write_all(&line)
            .and_then(|_| self.out.flush())
            .map_err(|_| "the plugin did not apply the answer".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watcher_reads_only_an_idle_payload_with_a_session_and_stands_down_in_run() {
        let p = |s: &str| session_of(s.as_bytes());
        assert_eq!(p(r#"{"v":1,"event":"idle","session_id":" s1 ","mode":"serve"}"#), Ok(("s1".into(), true)));
        assert_eq!(p(r#"{"v":1,"event":"idle","session_id":"s1","mode":"tui"}"#), Ok(("s1".into(), true)));
        assert_eq!(p(r#"{"v":1,"event":"idle","session_id":"s1","mode":"run"}"#), Ok(("s1".into(), false)));
        assert!(p(r#"{"v":1,"event":"session.idle","session_id":"s1","mode":"serve"}"#).is_err());
        assert!(p(r#"{"v":1,"event":"idle","session_id":" ","mode":"serve"}"#).is_err());
        assert!(p(r#"{"v":2,"event":"idle","session_id":"s1","mode":"serve"}"#).is_err());
        assert!(p(r#"{"v":1,"event":"idle","session_id":"s1"}"#).is_err(), "mode is required");
        assert!(p("not json").is_err());
    }
}
