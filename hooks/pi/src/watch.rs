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
use preloop_shared::plugin;
use preloop_shared::watch::{self as shared_watch, Host, Parent};
use std::io::Write;
use std::time::{Duration, Instant};

pub use preloop_shared::watch::End;

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
                watch(&config, &sid, &mut out, started, Parent::now())
            }))
            .unwrap_or_else(|_| End::Stopped("panic".into()));
            (Some(sid), end)
        }
    };
    shared_watch::log(&config, "pi", session.as_deref(), &end, started);
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

/// Watch session `sid` until a note is applied or a reason to stop. `out`
/// is the confirmed stdout (tests: any writer whose `flush` says whether the
/// answer was applied); `parent` is Pi's Node process.
pub fn watch(config: &Config, sid: &str, out: &mut dyn Write, started: Instant, parent: Parent) -> End {
    let def = preloop_shared::registry::def_of(crate::Event::Watch);
    shared_watch::watch(config, def, sid, started, &mut Extension { parent, out })
}

/// Pi's extension as the watcher's host: alive while Pi (our parent) is;
/// takes a block as one `continue` answer, confirmed once applied.
struct Extension<'a> {
    parent: Parent,
    out: &'a mut dyn Write,
}

impl Host for Extension<'_> {
    fn gone(&self) -> Option<String> {
        self.parent.gone().then(|| "parent process gone".into())
    }

    fn hand_over(&mut self, block: &str) -> Result<(), String> {
        let mut line = serde_json::to_vec(&Answer::Continue { text: block.to_string() }).unwrap_or_default();
        line.push(b'\n');
        self.out
            .write_all(&line)
            .and_then(|_| self.out.flush())
            .map_err(|_| "the extension did not apply the answer".into())
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
