//! What several harness adapters share: the `{"hookSpecificOutput": …}`
//! envelope ([`Wrapped`]), the `hookSpecificOutput` bodies Claude Code and
//! Codex print alike ([`hook_specific_bodies!`](crate::hook_specific_bodies)),
//! the deny reason a harness shows the model ([`deny_reason`]), and the
//! [`Adapter`](crate::runner::Adapter) of a harness whose steps are two pure
//! functions ([`pure_adapter!`](crate::pure_adapter)).
//!
//! Each adapter keeps its own `Output` type, one serde type per event shape;
//! only what two or more of them print the same way is here. The adapters'
//! schema tests derive `schemars::JsonSchema` for these types through this
//! crate's `schema` feature (enabled from their dev-dependencies only).

use crate::flow::Outcome;
use serde::Serialize;

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
///   decision either harness gets from us.
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
        }

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
}

/// Defines, in a harness crate's root, the adapter of a harness whose steps
/// are the crate's own pure `parse(event, stdin)` and `render(event,
/// outcome)` (no environment, no side effects, no neutral output), and the
/// `pub fn main(event: Event) -> !` its binaries call. The crate root names
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

        /// Run one hook binary.
        pub fn main(event: Event) -> ! {
            $crate::runner::main::<$name>(event)
        }
    };
}
