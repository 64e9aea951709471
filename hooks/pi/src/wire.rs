//! What our extension and our hook commands say to each other: our own
//! format, one line of JSON each way (the protocol is
//! [`preloop_shared::plugin`]'s). The schemas, generated from these types,
//! are `schemas/pi-0.73.1/payload.schema.json` and
//! `schemas/pi-0.73.1/<event>.output.schema.json`; a unit test fails when
//! they drift. The extension (`shim/source.js`) builds [`Payload`] from
//! Pi's event and `ctx` and applies [`Answer`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version the extension sends as `v`: a payload of another
/// version is refused (the gate then follows its fail policy).
pub const PROTOCOL: u32 = 1;

/// One event, as the extension sends it on the hook's stdin.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Payload {
    /// [`PROTOCOL`].
    pub v: u32,
    /// Pi's name for the event (`tool_call`).
    pub event: String,
    /// `ctx.sessionManager.getSessionId()` (a UUIDv7, kept by `-c`).
    pub session_id: String,
    /// `ctx.sessionManager.getSessionFile()`: the session's JSONL, null with
    /// `--no-session`.
    #[serde(default)]
    pub session_file: Option<String>,
    /// `ctx.cwd`: the folder Pi runs in.
    #[serde(default)]
    pub cwd: Option<String>,
    /// `ctx.hasUI`: true in RPC and interactive mode, where Pi stays alive
    /// after a run (a continuation can reach the model), false in -p and json.
    pub has_ui: bool,
    /// session_start (`startup`, …), session_shutdown (`quit`, …).
    #[serde(default)]
    pub reason: Option<String>,
    /// before_agent_start: the prompt.
    #[serde(default)]
    pub prompt: Option<String>,
    /// tool_call: the tool (`bash`).
    #[serde(default)]
    pub tool_name: Option<String>,
    /// tool_call: Pi's id of the call.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// tool_call: the call's arguments (`{"command": "…"}` for bash).
    #[serde(default)]
    pub tool_input: Option<Value>,
}

/// What a hook answers: one of three, or nothing at all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Answer {
    /// Text for the model (session_start, before_agent_start, tool_result):
    /// a custom message of ours (role user).
    Context {
        /// At most 10,000 characters: one framed block of notes.
        #[cfg_attr(test, schemars(length(min = 1, max = 10000)))]
        text: String,
    },
    /// tool_call: block the tool; the model gets `reason` as its result.
    Deny {
        #[cfg_attr(test, schemars(length(min = 1)))]
        reason: String,
    },
    /// agent_end: a new run with `text` as its input (a late note).
    Continue {
        #[cfg_attr(test, schemars(length(min = 1, max = 10000)))]
        text: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use preloop_testkit::golden::{check_json, check_output_schemas, schema};

    #[test]
    fn schemas_match_the_types() {
        let answer = schema::<Answer>();
        check_output_schemas(
            "pi-0.73.1",
            [
                ("session_start", answer.clone()),
                ("before_agent_start", answer.clone()),
                ("tool_call", answer.clone()),
                ("tool_result", answer.clone()),
                ("agent_end", answer),
            ],
        );
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas/pi-0.73.1");
        check_json(&dir.join("payload.schema.json"), &schema::<Payload>());
    }
}
