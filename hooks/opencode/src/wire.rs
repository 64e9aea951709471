//! What our plugin and our hook commands say to each other: our own
//! format, one line of JSON each way (the protocol is
//! [`preloop_shared::plugin`]'s). The schemas, generated from these types,
//! are `schemas/opencode-1.18.33/payload.schema.json` and
//! `schemas/opencode-1.18.33/<event>.output.schema.json`; a unit test fails
//! when they drift. The plugin (`shim/source.js`) builds [`Payload`] from
//! OpenCode's hook input and output and applies [`Answer`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version the plugin sends as `v`: a payload of another
/// version is refused (the gate then follows its fail policy).
pub const PROTOCOL: u32 = 1;

/// One event, as the plugin sends it on the hook's stdin.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Payload {
    /// [`PROTOCOL`].
    pub v: u32,
    /// OpenCode's name for the hook or event (`tool.execute.before`).
    pub event: String,
    /// OpenCode's session id (`ses_` and 26 characters); a sub-agent's
    /// hooks carry its child session's.
    pub session_id: String,
    /// The project folder (`ctx.directory`).
    #[serde(default)]
    pub cwd: Option<String>,
    /// How OpenCode runs: `run` (one prompt, then it disposes), `serve`,
    /// or `tui`. The idle watcher stands down in `run`.
    pub mode: String,
    /// A sub-agent's session (the `task` tool's): OpenCode's id of the
    /// session that started it (`session.created`'s `parentID`), on every
    /// payload of that session. The hook records it as the parent run.
    #[serde(default)]
    pub parent_session_id: Option<String>,
    /// dispose: why the session ends (`dispose`).
    #[serde(default)]
    pub reason: Option<String>,
    /// chat.message: the prompt's text parts, joined.
    #[serde(default)]
    pub prompt: Option<String>,
    /// chat.message, text.complete: OpenCode's message id.
    #[serde(default)]
    pub message_id: Option<String>,
    /// tool.execute.before/after: the tool (`bash`).
    #[serde(default)]
    pub tool_name: Option<String>,
    /// tool.execute.before/after: the model's id of the call.
    #[serde(default)]
    pub call_id: Option<String>,
    /// tool.execute.before: the call's arguments (`{"command": "…"}` for bash).
    #[serde(default)]
    pub tool_input: Option<Value>,
    /// tool.execute.before: the MCP servers OpenCode's config names (the
    /// keys of `mcp`, read by the plugin's `config` hook), so the hook can
    /// tell an MCP tool (`<server>_<tool>`) from a built-in one.
    #[serde(default)]
    pub mcp_servers: Option<Vec<String>>,
    /// text.complete: this text part follows a continuation of ours in the
    /// session with no prompt in between (one continuation per stop, as
    /// `stop_hook_active` elsewhere).
    #[serde(default)]
    pub stop_hook_active: bool,
}

/// What a hook answers: one of three, or nothing at all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Answer {
    /// Text for the model (chat.message: a synthetic part of the prompt;
    /// tool.execute.after: appended to the tool's output).
    Context {
        /// At most 10,000 characters: one framed block of notes.
        #[cfg_attr(test, schemars(length(min = 1, max = 10000)))]
        text: String,
    },
    /// tool.execute.before: the tool does not run; the model gets `reason`
    /// as its result.
    Deny {
        #[cfg_attr(test, schemars(length(min = 1)))]
        reason: String,
    },
    /// tool.execute.before: the call runs with `args` instead of the
    /// model's (Preloop's `send_note` with `preloop_caller_session_id` =
    /// this session); the plugin replaces `output.args`'s keys in place
    /// (OpenCode hands the MCP server that same object). No decision:
    /// OpenCode's own permission check still runs.
    Args { args: serde_json::Map<String, Value> },
    /// text.complete: a user message with `text`, which the session's
    /// loop answers (a late note); idle (the watcher): a new turn with
    /// `text` (`promptAsync`).
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
            "opencode-1.18.33",
            [
                ("chat.message", answer.clone()),
                ("tool.execute.before", answer.clone()),
                ("tool.execute.after", answer.clone()),
                ("experimental.text.complete", answer),
            ],
        );
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas/opencode-1.18.33");
        check_json(&dir.join("payload.schema.json"), &schema::<Payload>());
    }
}
