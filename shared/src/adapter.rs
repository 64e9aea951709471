//! What several harness adapters share: the reading of the payload fields
//! they name alike ([`check_event_name`], [`tool_input`], [`may_continue`],
//! [`prompt_input`]) and the whole parse of the Claude-style payloads Claude
//! Code and Codex send ([`parse_claude_style`]); the `{"hookSpecificOutput":
//! …}` envelope ([`Wrapped`]), the `hookSpecificOutput` bodies Claude Code
//! and Codex print alike ([`hook_specific_bodies!`](crate::hook_specific_bodies)),
//! the deny reason a harness shows the model ([`deny_reason`]), and the
//! [`Adapter`](crate::runner::Adapter) of a harness whose steps are two pure
//! functions ([`pure_adapter!`](crate::pure_adapter!)(crate::pure_adapter)).
//!
//! Each adapter keeps its own `Output` type, one serde type per event shape;
//! only what two or more of them print the same way is here. The adapters'
//! schema tests derive `schemars::JsonSchema` for these types through this
//! crate's `schema` feature (enabled from their dev-dependencies only).

use crate::flow::{Carry, Input, InputKind, Outcome};
use crate::json::{non_blank, str_field};
use crate::render::is_note_block;
use crate::runner::Parsed;
use serde::Serialize;
use serde_json::{Value, json};

/// Refuses a payload whose `hook_event_name` names an event other than
/// `on`, the hook's own (a payload without one passes).
pub fn check_event_name(v: &Value, on: &str) -> Result<(), String> {
    match str_field(v, "hook_event_name") {
        Some(name) if name != on => Err(format!("hook_event_name {name:?} given to the {on} hook")),
        _ => Ok(()),
    }
}

/// A tool call's input as the server takes it: the payload's object, or
/// `{}` when it is missing or not an object.
pub fn tool_input(v: Option<&Value>) -> Value {
    v.filter(|t| t.is_object()).cloned().unwrap_or_else(|| json!({}))
}

/// Whether a stop may continue the turn: not when the harness says the
/// turn already goes on because of a stop hook (`stop_hook_active`).
pub fn may_continue(v: &Value) -> bool {
    !v.get("stop_hook_active").and_then(Value::as_bool).unwrap_or(false)
}

/// A prompt hook's input (Gemini CLI, Copilot CLI), with a prompt that is
/// one of our own note blocks coming back made empty: a continuation our
/// block reason started fires the prompt hook again with that reason as
/// the prompt, and it must never title the session.
pub fn prompt_input(prompt: &str) -> InputKind {
    let prompt = if is_note_block(prompt) { "" } else { prompt };
    InputKind::Prompt { prompt: prompt.to_string(), pull: true }
}

/// An event of a Claude-style payload, as [`parse_claude_style`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaudeStyle {
    SessionStart,
    Prompt,
    /// A tool call, carrying this outside a sub-agent.
    Tool(Carry),
    Stop,
    SessionEnd,
}

/// A sub-agent's hook: the payload names `agent_id` (beside the parent's
/// `session_id`).
fn in_subagent(v: &Value) -> bool {
    non_blank(v, "agent_id").is_some()
}

/// stdin → input for the payloads Claude Code and Codex send alike, as the
/// hook of `on` sees them. Lenient: unknown fields are ignored, optional
/// ones may be missing; a session id (and, for a tool call, a tool name) is
/// required.
///
/// What a sub-agent's hook prints reaches only the sub-agent (Claude Code
/// 2.1.328, docs/contracts/measurements-2026-12.md §1: the main agent sees
/// its final report, not the note; Codex 0.169.0: its prompt fires with the
/// parent's `session_id` and the context lands in its thread only). Its
/// prompt and its stop therefore stand down (neither the title nor a note
/// belongs there); its tool call is still checked, for a deny must hold,
/// but carries nothing: a note the server hands back is spooled for the
/// session's own agent.
pub fn parse_claude_style(on: &str, event: ClaudeStyle, v: &Value) -> Result<Parsed, String> {
    check_event_name(v, on)?;
    let session_id = non_blank(v, "session_id").ok_or("no session_id")?.to_string();
    let some_text = |key| str_field(v, key).filter(|s| !s.is_empty());
    let cwd = some_text("cwd").map(str::to_string);
    let transcript_path = some_text("transcript_path").map(str::to_string);
    let kind = match event {
        ClaudeStyle::SessionStart => InputKind::SessionStart { pull: true },
        ClaudeStyle::Prompt if in_subagent(v) => {
            return Ok(Parsed::StandDown("sub-agent prompt: its context would reach the sub-agent only"));
        }
        ClaudeStyle::Prompt => {
            InputKind::Prompt { prompt: str_field(v, "prompt").unwrap_or_default().to_string(), pull: true }
        }
        ClaudeStyle::Tool(carry) => InputKind::Tool {
            tool_name: some_text("tool_name").ok_or("no tool_name")?.to_string(),
            mcp_tool: None,
            tool_input: tool_input(v.get("tool_input")),
            model: some_text("model").map(str::to_string),
            carry: if in_subagent(v) { Carry::None } else { carry },
        },
        ClaudeStyle::Stop if in_subagent(v) => return Ok(Parsed::StandDown("sub-agent stop")),
        ClaudeStyle::Stop => InputKind::Stop { may_continue: may_continue(v) },
        ClaudeStyle::SessionEnd => InputKind::SessionEnd { reason: some_text("reason").unwrap_or("other").to_string() },
    };
    Ok(Parsed::Run(Input { session_id, cwd, transcript_path, parent_session_id: None, kind }))
}

/// The reason a deny gives when the outcome has none.
const DEFAULT_DENY_REASON: &str = "Denied by Preloop";

/// A deny's reason as the model reads it (Codex, Gemini CLI, Copilot CLI):
/// the outcome's, trimmed, or "Denied by Preloop" when it is blank.
pub fn deny_reason(o: &Outcome) -> String {
    o.reason.as_deref().map(str::trim).filter(|r| !r.is_empty()).unwrap_or(DEFAULT_DENY_REASON).to_string()
}

/// The same, with a reason that is not blank kept exactly as given (Claude
/// Code, Cursor).
pub fn deny_reason_verbatim(o: &Outcome) -> String {
    o.reason.clone().filter(|r| !r.trim().is_empty()).unwrap_or_else(|| DEFAULT_DENY_REASON.into())
}

/// `{"hookSpecificOutput": body}`: the envelope of Claude Code's and Codex's
/// event outputs and of Gemini CLI's context outputs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
// The harnesses' schemas under `schemas/` give the envelope no description.
#[cfg_attr(feature = "schema", schemars(description = ""))]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct Wrapped<T> {
    pub hook_specific_output: T,
}

impl<T> Wrapped<T> {
    /// `{"hookSpecificOutput": body}`.
    pub fn new(body: T) -> Wrapped<T> {
        Wrapped { hook_specific_output: body }
    }
}

/// `"deny"`: the decision value Codex, Gemini CLI and Copilot CLI outputs
/// hold (Claude Code's keeps its own, whose doc its schema quotes).
// The doc below is the value's description in those harnesses' schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(description = "`\"deny\"`"))]
pub enum Deny {
    #[serde(rename = "deny")]
    Deny,
}

/// `"block"`: the decision that continues a turn once (Codex's Stop, Gemini
/// CLI's AfterAgent, Copilot CLI's agentStop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(description = "`\"block\"`"))]
pub enum Block {
    #[serde(rename = "block")]
    Block,
}

/// Defines, in the calling adapter's output module, the two
/// `hookSpecificOutput` bodies that Claude Code and Codex print alike, each
/// with the caller's doc comment (which is also its description in that
/// harness's schema, so it stays the harness's own):
///
/// * `Context<E>`: `{"hookEventName": E, "additionalContext": "…"}`, built
///   by `Context::wrapped(name, context)`;
/// * `PreToolUseOutput`: `{"hookEventName": "PreToolUse",
///   "permissionDecision": "deny"?, "permissionDecisionReason": "…"?,
///   "additionalContext": "…"?}`, built by
///   `PreToolUseOutput::wrapped(deny_reason, context)`: a deny is the only
///   decision either harness gets from us. Written `PreToolUseOutput +
///   updatedInput;` (Claude Code), it also holds `"updatedInput": {…}?`
///   and `wrapped` takes the rewritten input third (dropped beside a deny).
///
/// The caller defines `PreToolUse` and `Deny` with
/// [`output_names!`](crate::output_names) and depends on serde (and, for its
/// schema tests, schemars and this crate's `schema` feature).
///
/// ```ignore
/// preloop_shared::hook_specific_bodies! {
///     /// Model-visible context.
///     Context;
///     /// PreToolUse: a deny is the only decision.
///     PreToolUseOutput;
/// }
/// ```
#[macro_export]
macro_rules! hook_specific_bodies {
    ($(#[$context_doc:meta])* Context; $(#[$pre_tool_use_doc:meta])* PreToolUseOutput;) => {
        $crate::hook_specific_bodies!(@context $(#[$context_doc])*);
        $crate::hook_specific_bodies!(@pre_tool_use [$(#[$pre_tool_use_doc])*] []);

        impl PreToolUseOutput {
            /// A deny (`Some` reason) and the context beside it; `None` for an
            /// allow with no context: no opinion, print nothing.
            pub fn wrapped(
                deny_reason: Option<String>,
                additional_context: Option<String>,
            ) -> Option<$crate::adapter::Wrapped<Self>> {
                if deny_reason.is_none() && additional_context.is_none() {
                    return None;
                }
                Some($crate::adapter::Wrapped::new(PreToolUseOutput {
                    hook_event_name: PreToolUse::PreToolUse,
                    permission_decision: deny_reason.is_some().then_some(Deny::Deny),
                    permission_decision_reason: deny_reason,
                    additional_context,
                }))
            }
        }
    };
    // Claude Code's PreToolUse also takes `updatedInput` without a decision
    // (docs/event-matrix.md, "send_note caller session").
    ($(#[$context_doc:meta])* Context; $(#[$pre_tool_use_doc:meta])* PreToolUseOutput + updatedInput;) => {
        $crate::hook_specific_bodies!(@context $(#[$context_doc])*);
        $crate::hook_specific_bodies!(@pre_tool_use [$(#[$pre_tool_use_doc])*] [
            /// The tool input to run instead of the model's (never with a
            /// deny, never with a permission decision: it grants nothing).
            #[serde(skip_serializing_if = "Option::is_none")]
            pub updated_input: Option<serde_json::Value>,
        ]);

        impl PreToolUseOutput {
            /// A deny (`Some` reason) and the context beside it, or a
            /// rewritten tool input (dropped beside a deny) with no decision;
            /// `None` when there is nothing to say: print nothing.
            pub fn wrapped(
                deny_reason: Option<String>,
                additional_context: Option<String>,
                updated_input: Option<serde_json::Value>,
            ) -> Option<$crate::adapter::Wrapped<Self>> {
                let updated_input = if deny_reason.is_some() { None } else { updated_input };
                if deny_reason.is_none() && additional_context.is_none() && updated_input.is_none() {
                    return None;
                }
                Some($crate::adapter::Wrapped::new(PreToolUseOutput {
                    hook_event_name: PreToolUse::PreToolUse,
                    permission_decision: deny_reason.is_some().then_some(Deny::Deny),
                    permission_decision_reason: deny_reason,
                    additional_context,
                    updated_input,
                }))
            }
        }
    };
    (@context $(#[$context_doc:meta])*) => {
        $(#[$context_doc])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize)]
        #[cfg_attr(test, derive(schemars::JsonSchema))]
        #[serde(deny_unknown_fields)]
        #[serde(rename_all = "camelCase")]
        pub struct Context<E> {
            pub hook_event_name: E,
            pub additional_context: String,
        }

        impl<E> Context<E> {
            /// `{"hookSpecificOutput": {"hookEventName": name, "additionalContext": context}}`.
            pub fn wrapped(hook_event_name: E, additional_context: String) -> $crate::adapter::Wrapped<Self> {
                $crate::adapter::Wrapped::new(Context { hook_event_name, additional_context })
            }
        }
    };
    (@pre_tool_use [$(#[$pre_tool_use_doc:meta])*] [$($extra:tt)*]) => {
        $(#[$pre_tool_use_doc])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize)]
        #[cfg_attr(test, derive(schemars::JsonSchema))]
        #[serde(deny_unknown_fields)]
        #[serde(rename_all = "camelCase")]
        pub struct PreToolUseOutput {
            pub hook_event_name: PreToolUse,
            #[serde(skip_serializing_if = "Option::is_none")]
            pub permission_decision: Option<Deny>,
            #[serde(skip_serializing_if = "Option::is_none")]
            pub permission_decision_reason: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            pub additional_context: Option<String>,
            $($extra)*
        }
    };
}

/// The `Adapter` impl [`pure_adapter!`](crate::pure_adapter!) and [`plugin_adapter!`](crate::plugin_adapter!) share: the
/// crate's pure `parse` and `render`.
#[macro_export]
#[doc(hidden)]
macro_rules! adapter_impl {
    ($name:ident) => {
        impl $crate::runner::Adapter for $name {
            type Event = Event;
            type Output = Output;

            fn parse(
                event: Event,
                stdin: &serde_json::Value,
                _env: &$crate::config::Env,
            ) -> Result<$crate::runner::Parsed, String> {
                parse(event, stdin)
            }
            fn render(event: Event, outcome: &$crate::flow::Outcome) -> Option<Output> {
                render(event, outcome)
            }
        }
    };
}

/// Defines, in a harness crate's root, the adapter of a harness whose steps
/// are the crate's own pure `parse(event, stdin)` and `render(event,
/// outcome)` (no environment, no side effects, no neutral output), and the
/// `pub fn main(event: Event) -> i32` its binaries call (the exit code). The crate root names
/// `Event`, `Output`, `parse` and `render`.
///
/// ```ignore
/// preloop_shared::pure_adapter! {
///     /// The Codex adapter.
///     Codex
/// }
/// ```
#[macro_export]
macro_rules! pure_adapter {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name;

        $crate::adapter_impl!($name);

        /// Run one hook binary; returns its exit code.
        pub fn main(event: Event) -> i32 {
            $crate::entry::main::<$name>(event)
        }
    };
}

/// A plugin-carried harness's adapter (Pi, OpenCode): the [`pure_adapter!`](crate::pure_adapter!)
/// of a harness whose hooks run under our shim (`crate::plugin`): its `main`
/// runs the shim's protocol ([`crate::entry::plugin_main`]: the answer
/// counts as written once applied), and its `Watch` event the crate's idle
/// watcher (`watch::main`). The crate root names `Event`, `Output`, `parse`,
/// `render` and the module `watch`; the literal says what the harness calls
/// our shim.
///
/// ```ignore
/// preloop_shared::plugin_adapter! {
///     /// The Pi adapter.
///     Pi, "extension"
/// }
/// ```
#[macro_export]
macro_rules! plugin_adapter {
    ($(#[$doc:meta])* $name:ident, $shim:literal) => {
        $(#[$doc])*
        pub struct $name;

        $crate::adapter_impl!($name);

        #[doc = concat!("Run one hook command under the ", $shim, " (the idle watcher for `Watch`); returns its exit code.")]
        pub fn main(event: Event) -> i32 {
            if event == Event::Watch {
                return watch::main();
            }
            $crate::entry::plugin_main::<$name>(event)
        }
    };
}
