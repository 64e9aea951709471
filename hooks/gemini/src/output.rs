//! What the Gemini CLI hooks print: one serde type per output shape
//! (docs/contracts/gemini-cli.md §4, §5). Gemini reads more keys than these
//! (`continue`, `systemMessage`, `suppressOutput`, AfterTool
//! `tailToolCallRequest`, AfterAgent `clearContext`, …); none of them may
//! ever come from us, and the types cannot hold them. The one BeforeTool
//! `tool_input` we print is Preloop's `send_note` with the caller's session
//! id ([`ToolInputRewrite`]). Our
//! schemas, generated from these types, are
//! `schemas/gemini-cli-0.61.0/<Event>.output.schema.json`; a unit test fails
//! when they drift.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum Output {
    /// SessionStart, BeforeAgent, AfterTool.
    Context(Wrapped<Context>),
    /// BeforeTool: the call does not run; the model reads
    /// `Tool execution blocked: <reason>`.
    Deny(DenyOutput),
    /// AfterAgent: the turn goes on with `reason` as the next user message.
    Block(BlockOutput),
    /// BeforeTool: the call's input replaced, no decision.
    Rewrite(Wrapped<ToolInputRewrite>),
}

/// BeforeTool: the tool input to run instead of the model's (Preloop's
/// `send_note` with `preloop_caller_session_id` = this session), and no
/// decision: Gemini 0.61.0 builds the call from `tool_input` (the whole
/// input: its scheduler replaces the arguments) and then runs its own policy
/// check on it, so the harness's approval is untouched.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolInputRewrite {
    /// Not checked by Gemini 0.61.0; written for whoever reads the output.
    #[serde(rename = "hookEventName")]
    pub hook_event_name: BeforeTool,
    /// The whole input, an object.
    pub tool_input: serde_json::Map<String, serde_json::Value>,
}

/// `"BeforeTool"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub enum BeforeTool {
    BeforeTool,
}

pub use preloop_shared::adapter::{Block, Deny, Wrapped};

/// A context carrier: Gemini wraps it in `<hook_context>` and escapes every
/// `<`/`>` in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    /// Not checked by Gemini 0.61.0; written for whoever reads the output.
    pub hook_event_name: EventName,
    #[cfg_attr(test, schemars(length(min = 1)))]
    pub additional_context: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub enum EventName {
    SessionStart,
    BeforeAgent,
    AfterTool,
}

/// BeforeTool: deny + a reason (never `allow`, never `ask`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DenyOutput {
    pub decision: Deny,
    #[cfg_attr(test, schemars(length(min = 1)))]
    pub reason: String,
}

/// AfterAgent: block + a non-empty reason continues the turn once.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BlockOutput {
    pub decision: Block,
    #[cfg_attr(test, schemars(length(min = 1)))]
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use preloop_testkit::golden::{check_output_schemas, schema};

    /// BeforeTool's two shapes.
    #[derive(schemars::JsonSchema)]
    #[serde(untagged)]
    #[allow(dead_code, reason = "a schema-only type")]
    enum BeforeToolOutput {
        Deny(DenyOutput),
        Rewrite(Wrapped<ToolInputRewrite>),
    }

    #[test]
    fn schemas_match_the_types() {
        let context = schema::<Wrapped<Context>>();
        check_output_schemas(
            "gemini-cli-0.61.0",
            [
                ("SessionStart", context.clone()),
                ("BeforeAgent", context.clone()),
                ("AfterTool", context),
                ("BeforeTool", schema::<BeforeToolOutput>()),
                ("AfterAgent", schema::<BlockOutput>()),
            ],
        );
    }
}
