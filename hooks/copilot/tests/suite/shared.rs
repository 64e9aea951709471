//! The scenarios Copilot shares with other harnesses, from
//! `preloop_testkit::hooks`: bad stdin, a quiet session, the stop rescue and
//! its cap, the session end (local and server mode), and a dead server.

use crate::common::*;
use preloop_copilot::Event;

preloop_testkit::hook_scenarios! {
    Copilot,
    start: Event::SessionStart, end: Event::SessionEnd, "complete",
    stop: Event::AgentStop, "agentStop.stop_hook_active.json",
    bad_stdin: [br#"{"sessionId": 7}"#.to_vec(), serde_json::to_vec(&fixture("camel/permissionRequest.json")).unwrap()],
}
