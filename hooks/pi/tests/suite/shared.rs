//! The scenarios Pi shares with other harnesses, from
//! `preloop_testkit::hooks`, its hooks picked by what the registry says
//! they do: bad stdin, a quiet session, the stop rescue and its cap (Pi has
//! no brake of its own: ours is the only one), the session end (local and
//! server mode), the registration and the first prompt, and a dead server.
//! Every run speaks the extension's protocol and confirms the answer.

use crate::common::*;

preloop_testkit::hook_scenarios!(
    Pi,
    bad_stdin: [
        br#"{"v":1,"event":"session_start","session_id":7,"has_ui":true}"#.to_vec(),
        br#"{"v":2,"event":"tool_call","session_id":"s","has_ui":true,"tool_name":"bash"}"#.to_vec(),
        br#"{"v":1,"event":"tool_call","session_id":"s","has_ui":true,"tool_name":"bash","extra":1}"#.to_vec(),
    ],
);
