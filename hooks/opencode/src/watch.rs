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
//!   (OpenCode's process) is gone (then, the session still live, it ends
//!   it as `dispose` would have: OpenCode was killed with no end of its
//!   own), after `watch_max_secs`, or when the
//!   server refuses its token. The plugin stops it (SIGTERM) when a run
//!   starts (`chat.message`, `session.status` busy), at `session.deleted`
//!   and at `dispose`; from the claim to the exit SIGTERM is held off.
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
        harness: Harness::OpenCode,
        def: preloop_shared::registry::def_of(crate::Event::Watch),
        session_of,
        no_idle: "opencode run disposes at the first idle: nothing to wake",
        answer: continue_line,
        plugin: "plugin",
        // OpenCode killed with no `dispose` (SIGKILL, a crash): the session it sat idle in ends.
        end_when_parent_gone: Some(preloop_shared::registry::def_of(crate::Event::Dispose)),
    }
}

/// Run the watcher under OpenCode's plugin; always exits 0 (an answer on stdout is the
/// only signal).
pub fn main() -> i32 {
    watcher().main()
}

/// One `continue` answer carrying `block`, as a line.
fn continue_line(block: &str) -> Vec<u8> {
    preloop_shared::plugin::answer_line(&Answer::Continue { text: block.to_string() })
}

/// The session id of the plugin's `idle` payload, and whether OpenCode
/// stays alive after a run there (every `mode` but `run`).
pub fn session_of(buf: &[u8]) -> Result<(String, bool), String> {
    let p: Payload = serde_json::from_slice(buf).map_err(|e| format!("payload: {e}"))?;
    let sid = preloop_shared::plugin::payload_header(p.v, wire::PROTOCOL, &p.event, "idle", &p.session_id)?;
    Ok((sid, p.mode.trim() != "run"))
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
