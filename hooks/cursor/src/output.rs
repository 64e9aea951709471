//! What the Cursor hooks print: flat snake_case objects, one serde type per
//! shape (docs/contracts/cursor.md). Every event prints one object: Cursor's
//! IDE blocks a gated tool when a permission hook prints nothing or
//! non-JSON (§5.3). The schemas in `schemas/cursor/*.output.schema.json` are
//! generated from these types; a unit test fails when they drift.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum Output {
    SessionStart(SessionStartOutput),
    BeforeSubmitPrompt(ContinueOutput),
    /// beforeShellExecution, beforeMCPExecution: a decision, never a context
    /// (Cursor strips it there).
    Gate(GateOutput),
    /// preToolUse: a decision and the note, on allow and on deny.
    PreToolUse(PreToolUseOutput),
    Stop(StopOutput),
    SessionEnd(Empty),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SessionStartOutput {
    /// Exported to the session's later hooks (lineage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<LineageEnv>,
    /// At most 10,000 characters (Cursor drops a longer one whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, schemars(length(min = 1, max = 10000)))]
    pub additional_context: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LineageEnv {
    #[serde(rename = "PRELOOP_PARENT_SESSION_ID")]
    pub parent_session_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ContinueOutput {
    /// Always true: the prompt goes ahead.
    #[serde(rename = "continue")]
    #[cfg_attr(test, schemars(extend("const" = true)))]
    pub proceed: bool,
}

/// beforeShellExecution, beforeMCPExecution: allow, or deny with the
/// reason (it reaches the model through postToolUseFailure as
/// `user_message`; `agent_message` is documented for it but was not seen
/// arriving).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "permission", rename_all = "lowercase", deny_unknown_fields)]
pub enum GateOutput {
    Allow {},
    Deny { user_message: String, agent_message: String },
}

/// preToolUse: the same decisions, each with the note beside it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "permission", rename_all = "lowercase", deny_unknown_fields)]
pub enum PreToolUseOutput {
    Allow {
        /// At most 10,000 characters (Cursor drops a longer one whole).
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, schemars(length(min = 1, max = 10000)))]
        additional_context: Option<String>,
    },
    Deny {
        user_message: String,
        agent_message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, schemars(length(min = 1, max = 10000)))]
        additional_context: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct StopOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, schemars(length(min = 1, max = 10000)))]
    pub followup_message: Option<String>,
}

/// `{}`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Empty {}

#[cfg(test)]
mod tests {
    use super::*;
    use preloop_testkit::golden::{check_output_schemas, schema};

    #[test]
    fn schemas_match_the_types() {
        check_output_schemas(
            "cursor",
            [
                ("sessionStart", schema::<SessionStartOutput>()),
                ("beforeSubmitPrompt", schema::<ContinueOutput>()),
                ("beforeShellExecution", schema::<GateOutput>()),
                ("beforeMCPExecution", schema::<GateOutput>()),
                ("preToolUse", schema::<PreToolUseOutput>()),
                ("stop", schema::<StopOutput>()),
                ("sessionEnd", schema::<Empty>()),
            ],
        );
    }
}
