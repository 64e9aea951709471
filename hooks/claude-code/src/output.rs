//! What the Claude Code hooks print: one serde type per output shape, so an
//! output can hold only what Claude Code 2.1.328 reads on that event
//! (docs/contracts/claude-code.md). The JSON Schemas in
//! `schemas/claude-code-2.1.328/*.output.schema.json` are generated from
//! these types; a unit test fails when they drift.

use serde::Serialize;

/// Every output: `{"hookSpecificOutput": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum Output {
    SessionStart(Wrapped<Context<SessionStart>>),
    UserPromptSubmit(Wrapped<Context<UserPromptSubmit>>),
    PreToolUse(Wrapped<PreToolUseOutput>),
    Stop(Wrapped<Context<Stop>>),
}

pub use preloop_shared::adapter::Wrapped;

preloop_shared::hook_specific_bodies! {
    /// Model-visible context: SessionStart and UserPromptSubmit show it beside
    /// the event; on Stop it continues the turn once (the model reads
    /// `Stop hook additional context: ` and the block).
    Context;
    /// PreToolUse: a deny is the only decision (an allow would grant Claude
    /// Code's own permission, which a central "no rule" must not); the note
    /// rides beside it. `updatedInput` without a decision rewrites the tool
    /// input and leaves Claude Code's permission flow as it was.
    PreToolUseOutput + updatedInput;
}

preloop_shared::output_names! {
    /// `"SessionStart"`
    SessionStart => "SessionStart",
    /// `"UserPromptSubmit"`
    UserPromptSubmit => "UserPromptSubmit",
    /// `"PreToolUse"`
    PreToolUse => "PreToolUse",
    /// `"Stop"`
    Stop => "Stop",
    /// `"deny"`: the only permission decision we give.
    Deny => "deny",
}

#[cfg(test)]
mod tests {
    use super::*;
    use preloop_testkit::golden::{check_output_schemas, schema};

    /// The schema of each output shape, as checked in under `schemas/`.
    #[test]
    fn schemas_match_the_types() {
        check_output_schemas(
            "claude-code-2.1.328",
            [
                ("SessionStart", schema::<Wrapped<Context<SessionStart>>>()),
                ("UserPromptSubmit", schema::<Wrapped<Context<UserPromptSubmit>>>()),
                ("PreToolUse", schema::<Wrapped<PreToolUseOutput>>()),
                ("Stop", schema::<Wrapped<Context<Stop>>>()),
            ],
        );
    }
}
