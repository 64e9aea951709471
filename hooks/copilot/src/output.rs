//! What the Copilot CLI hooks print: top-level objects, one serde type per
//! shape (docs/contracts/copilot-cli.md, Summary and §4). Copilot reads more
//! keys than these (`modifiedPrompt`, `modifiedResult`,
//! `permissionDecision: "allow"`, …); none of them may ever come from us,
//! and the types cannot hold them. The one `modifiedArgs` we print is
//! Preloop's `send_note` with the caller's session id. `hookSpecificOutput` is never used: the
//! camelCase style ignores it entirely (§ Summary). Our schemas, generated
//! from these types, are
//! `schemas/copilot-cli-1.0.102/<event>.output.schema.json`; a unit test
//! fails when they drift.

pub use preloop_shared::adapter::{Block, Deny};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum Output {
    /// sessionStart, userPromptSubmitted, postToolUse.
    Context(ContextOutput),
    PreToolUse(PreToolUseOutput),
    /// agentStop: the turn goes on with `reason` as the next user message.
    Block(BlockOutput),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct ContextOutput {
    /// At most 10,000 characters (postToolUse cuts past 10,240, silently).
    #[cfg_attr(test, schemars(length(min = 1, max = 10000)))]
    pub additional_context: String,
}

/// preToolUse: deny is the only decision; the context (the session's spool)
/// is delivered with a deny as well; a rewrite comes with no decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct PreToolUseOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_decision: Option<Deny>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, schemars(length(min = 1)))]
    pub permission_decision_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, schemars(length(min = 1, max = 10000)))]
    pub additional_context: Option<String>,
    /// The whole input to run instead of the model's (Preloop's `send_note`
    /// with `preloop_caller_session_id` = this session), never with a deny.
    /// Alone it rewrites the call and leaves Copilot's permission flow as it
    /// was (measured on 1.0.102).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified_args: Option<serde_json::Map<String, serde_json::Value>>,
}

/// agentStop: block + a non-empty reason continues the turn once.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BlockOutput {
    pub decision: Block,
    #[cfg_attr(test, schemars(length(min = 1, max = 10000)))]
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use preloop_testkit::golden::{check_output_schemas, schema};

    #[test]
    fn schemas_match_the_types() {
        let context = schema::<ContextOutput>();
        check_output_schemas(
            "copilot-cli-1.0.102",
            [
                ("sessionStart", context.clone()),
                ("userPromptSubmitted", context.clone()),
                ("postToolUse", context),
                ("preToolUse", schema::<PreToolUseOutput>()),
                ("agentStop", schema::<BlockOutput>()),
            ],
        );
    }
}
