//! The scenarios Gemini shares with other harnesses, from
//! `preloop_testkit::hooks`: bad stdin, a quiet session, the stop rescue and
//! its cap, the session end (local and server mode), and a dead server.

use crate::common::*;
use preloop_gemini::Event;

preloop_testkit::hook_scenarios! {
    Gemini,
    start: Event::SessionStart, end: Event::SessionEnd, "exit",
    stop: Event::AfterAgent, "AfterAgent.stop_hook_active.json",
    bad_stdin: [br#"{"session_id": 7}"#.to_vec(), serde_json::to_vec(&fixture("BeforeModel.json")).unwrap()],
}
