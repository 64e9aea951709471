//! The Codex CLI adapter (proven against Codex CLI 0.169.0): pure functions
//! from a hook's stdin JSON to a harness-neutral
//! [`Input`](preloop_shared::flow::Input), and from an [`Outcome`] to the
//! typed [`Output`] that event accepts. Everything else is the shared
//! engine, including SessionEnd's hand-off to a detached worker, which
//! Codex's ~1 s kill makes necessary (`preloop_shared::detach`).
//!
//! | event | carrier | output | neutral |
//! |---|---|---|---|
//! | SessionStart | `hookSpecificOutput.additionalContext` | context only | nothing |
//! | UserPromptSubmit | `hookSpecificOutput.additionalContext` | context only (sub-agent prompts: stand down) | nothing |
//! | PreToolUse | `hookSpecificOutput.additionalContext` | deny → `permissionDecision: "deny"` + reason; allow → no decision | nothing |
//! | PermissionRequest | none (notes are spooled by the engine) | `decision.behavior` allow, or deny + `message` | nothing (Codex's own approval flow) |
//! | Stop | `reason` of `decision: "block"` (continues the turn once) | block + reason | nothing |
//! | SessionEnd | none | nothing | nothing |

// Shipped code never panics on a value it did not check: an `unwrap` or
// `expect` outside tests is refused, and each true invariant is allowed by
// name where it is (docs/adding-a-harness.md, "Code rules").
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use preloop_shared::adapter::{ClaudeStyle, deny_reason, parse_claude_style};
use preloop_shared::flow::{Carry, Outcome};
use preloop_shared::registry::{def_of, lower_words};
use preloop_shared::runner::Parsed;
use preloop_shared::wire::Decision;
use serde_json::Value;

pub mod output;

pub use output::Output;
pub use preloop_shared::registry::event::Codex as Event;

preloop_shared::pure_adapter! {
    /// The Codex adapter.
    Codex
}

/// The stem of an event's schema files in the Codex binary
/// (`schemas/codex-0.169.0/<stem>.command.{input,output}.schema.json`): the
/// event name in kebab case.
pub fn schema_stem(event: Event) -> String {
    lower_words(def_of(event).on, '-')
}

/// stdin → input: Codex's payloads are the Claude-style ones
/// ([`parse_claude_style`], which says what a sub-agent's hooks do).
pub fn parse(event: Event, v: &Value) -> Result<Parsed, String> {
    let def = def_of(event);
    let style = match event {
        Event::SessionStart => ClaudeStyle::SessionStart,
        Event::UserPromptSubmit => ClaudeStyle::Prompt,
        Event::PreToolUse => ClaudeStyle::Tool(Carry::of(def.carrier)),
        // PermissionRequest output cannot hold context: never carries.
        Event::PermissionRequest => ClaudeStyle::Tool(Carry::None),
        Event::Stop => ClaudeStyle::Stop,
        Event::SessionEnd => ClaudeStyle::SessionEnd,
    };
    parse_claude_style(def.on, style, v)
}

/// outcome → stdout (`None`: print nothing).
pub fn render(event: Event, o: &Outcome) -> Option<Output> {
    use output::*;
    let ctx = o.context.clone().filter(|c| !c.is_empty());
    match event {
        Event::SessionStart => ctx.map(|c| Output::SessionStart(Context::wrapped(SessionStart::SessionStart, c))),
        Event::UserPromptSubmit => {
            ctx.map(|c| Output::UserPromptSubmit(Context::wrapped(UserPromptSubmit::UserPromptSubmit, c)))
        }
        // Only a deny is a decision: `allow` (and `ask`) make Codex discard
        // the whole output, note included.
        Event::PreToolUse => {
            let reason = (o.decision == Some(Decision::Deny)).then(|| deny_reason(o));
            PreToolUseOutput::wrapped(reason, ctx).map(Output::PreToolUse)
        }
        // No context here, ever: the engine spooled the note for the next
        // carrying hook.
        Event::PermissionRequest => {
            let decision = match o.decision? {
                Decision::Allow => PermissionDecision::Allow,
                Decision::Deny => PermissionDecision::Deny { message: deny_reason(o) },
            };
            Some(Output::PermissionRequest(Wrapped::new(PermissionRequestOutput {
                hook_event_name: PermissionRequest::PermissionRequest,
                decision,
            })))
        }
        // Stop has no hookSpecificOutput in 0.169.0 (it gives Failed);
        // `decision: "block"` + a non-empty `reason` is the one output that
        // reaches the model and runs another request in the same turn.
        Event::Stop => match (o.continue_turn, ctx) {
            (true, Some(c)) => Some(Output::Stop(StopOutput { decision: Block::Block, reason: c })),
            _ => None,
        },
        Event::SessionEnd => None,
    }
}
