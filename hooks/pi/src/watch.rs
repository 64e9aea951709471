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
use preloop_shared::watch::PluginWatcher;

pub use preloop_shared::watch::End;

/// The watcher's parts; the rest is [`PluginWatcher::main`].
pub fn watcher() -> PluginWatcher {
    PluginWatcher {
        harness: Harness::Pi,
        def: preloop_shared::registry::def_of(crate::Event::Watch),
        session_of,
        no_idle: "no UI: Pi does not stay idle (-p, json)",
        answer: continue_line,
        plugin: "extension",
        // Not built for Pi: its watcher only stops when Pi is gone (a Pi killed with no
        // session_shutdown leaves its session live until the operator ends it).
        end_when_parent_gone: None,
    }
}

/// Run the watcher under Pi's extension; always exits 0 (an answer on stdout is the
/// only signal).
pub fn main() -> i32 {
    watcher().main()
}

/// One `continue` answer carrying `block`, as a line.
fn continue_line(block: &str) -> Vec<u8> {
    preloop_shared::plugin::answer_line(&Answer::Continue { text: block.to_string() })
}

/// The session id and `has_ui` of the extension's `idle` payload.
pub fn session_of(buf: &[u8]) -> Result<(String, bool), String> {
    let p: Payload = serde_json::from_slice(buf).map_err(|e| format!("payload: {e}"))?;
    let sid = preloop_shared::plugin::payload_header(p.v, wire::PROTOCOL, &p.event, "idle", &p.session_id)?;
    Ok((sid, p.has_ui))
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
