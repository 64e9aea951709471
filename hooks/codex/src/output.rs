//! What the Codex hooks print: one serde type per output shape. Codex
//! 0.169.0 marks a hook Failed and discards its whole output (a note
//! included) for any key it does not support on that event: PreToolUse
//! `permissionDecision` allow/ask, `continue: false`, `suppressOutput`, any
//! unknown key; PermissionRequest anything but `decision.behavior` and
//! `decision.message`; Stop `hookSpecificOutput`
//! (docs/contracts/codex.md). These types cannot hold any of those: the
//! "only these keys" rule is the type. Our schemas, generated from them,
//! are `schemas/codex-0.169.0/preloop/*.output.schema.json`; the tests check
//! every output against Codex's own schemas beside them as well.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum Output {
    SessionStart(Wrapped<Context<SessionStart>>),
    UserPromptSubmit(Wrapped<Context<UserPromptSubmit>>),
    PreToolUse(Wrapped<PreToolUseOutput>),
    PermissionRequest(Wrapped<PermissionRequestOutput>),
    Stop(StopOutput),
}

pub use preloop_shared::adapter::{Block, Deny, Wrapped};

preloop_shared::hook_specific_bodies! {
    /// SessionStart, UserPromptSubmit: context only.
    Context;
    /// PreToolUse: deny is the only decision (allow and ask void the output).
    PreToolUseOutput;
}

/// PermissionRequest: a decision and nothing else, never a context.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct PermissionRequestOutput {
    pub hook_event_name: PermissionRequest,
    pub decision: PermissionDecision,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "behavior", rename_all = "lowercase", deny_unknown_fields)]
pub enum PermissionDecision {
    Allow,
    Deny { message: String },
}

/// Stop: `decision: "block"` + a non-empty `reason` continues the turn once
/// (the model gets it as a `<hook_prompt>` user message).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct StopOutput {
    pub decision: Block,
    /// Never empty (Codex fails an empty one).
    #[cfg_attr(test, schemars(length(min = 1)))]
    pub reason: String,
}

preloop_shared::output_names! {
    SessionStart => "SessionStart",
    UserPromptSubmit => "UserPromptSubmit",
    PreToolUse => "PreToolUse",
    PermissionRequest => "PermissionRequest",
}

#[cfg(test)]
mod tests {
    use super::*;
    use preloop_testkit::golden::{check_output_schemas, schema};

    #[test]
    fn schemas_match_the_types() {
        check_output_schemas(
            "codex-0.169.0/preloop",
            [
                ("session-start", schema::<Wrapped<Context<SessionStart>>>()),
                ("user-prompt-submit", schema::<Wrapped<Context<UserPromptSubmit>>>()),
                ("pre-tool-use", schema::<Wrapped<PreToolUseOutput>>()),
                ("permission-request", schema::<Wrapped<PermissionRequestOutput>>()),
                ("stop", schema::<StopOutput>()),
            ],
        );
    }
}
