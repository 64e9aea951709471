//! The scenarios Gemini shares with other harnesses, from
//! `preloop_testkit::hooks`, its hooks picked by what the registry says
//! they do: bad stdin, a quiet session, the stop rescue and its cap, the
//! session end (local and server mode), the registration and the first
//! prompt, and a dead server.

use crate::common::*;

preloop_testkit::hook_scenarios!(
    Gemini,
    bad_stdin: [br#"{"session_id": 7}"#.to_vec(), serde_json::to_vec(&fixture("BeforeModel.json")).unwrap()],
);
