//! What the Gemini CLI hooks print: one serde type per output shape
//! (docs/contracts/gemini-cli.md §4, §5). Gemini reads more keys than these
//! (`continue`, `systemMessage`, `suppressOutput`, BeforeTool `tool_input`
//! rewrites, AfterTool `tailToolCallRequest`, AfterAgent `clearContext`, …);
//! none of them may ever come from us, and the types cannot hold them. Our
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

    #[test]
    fn schemas_match_the_types() {
        let context = schema::<Wrapped<Context>>();
        check_output_schemas(
            "gemini-cli-0.61.0",
            [
                ("SessionStart", context.clone()),
                ("BeforeAgent", context.clone()),
                ("AfterTool", context),
                ("BeforeTool", schema::<DenyOutput>()),
                ("AfterAgent", schema::<BlockOutput>()),
            ],
        );
    }
}
