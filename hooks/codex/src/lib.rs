//! The Codex CLI adapter (proven against Codex CLI 0.169.0): pure functions
//! from a hook's stdin JSON to a harness-neutral [`Input`], and from an
//! [`Outcome`] to the typed [`Output`] that event accepts. Everything else
//! is the shared engine, including SessionEnd's hand-off to a detached
//! worker, which Codex's ~1 s kill makes necessary
//! (`preloop_shared::detach`).
//!
//! | event | carrier | output | neutral |
//! |---|---|---|---|
//! | SessionStart | `hookSpecificOutput.additionalContext` | context only | nothing |
//! | UserPromptSubmit | `hookSpecificOutput.additionalContext` | context only (sub-agent prompts: stand down) | nothing |
//! | PreToolUse | `hookSpecificOutput.additionalContext` | deny → `permissionDecision: "deny"` + reason; allow → no decision | nothing |
//! | PermissionRequest | none (notes are spooled by the engine) | `decision.behavior` allow, or deny + `message` | nothing (Codex's own approval flow) |
//! | Stop | `reason` of `decision: "block"` (continues the turn once) | block + reason | nothing |
//! | SessionEnd | none | nothing | nothing |

use preloop_shared::adapter::deny_reason;
use preloop_shared::flow::{Carry, Input, InputKind, Outcome};
use preloop_shared::json::{non_blank, str_field};
use preloop_shared::registry::{def_of, lower_words};
use preloop_shared::runner::Parsed;
use preloop_shared::wire::Decision;
use serde_json::{Value, json};

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

/// A sub-agent's hooks carry `agent_id` (and the parent's `session_id`);
/// their context reaches only the sub-agent's own thread.
fn is_subagent(v: &Value) -> bool {
    str_field(v, "agent_id").is_some_and(|a| !a.trim().is_empty())
}

/// stdin → input. Lenient: unknown fields are ignored, optional ones may be
/// missing; a session id (and, for tool events, a tool name) is required.
pub fn parse(event: Event, v: &Value) -> Result<Parsed, String> {
    let def = def_of(event);
    if let Some(name) = str_field(v, "hook_event_name")
        && name != def.on
    {
        return Err(format!("hook_event_name {name:?} given to the {} hook", def.on));
    }
    let session_id = non_blank(v, "session_id").ok_or("no session_id")?.to_string();
    let cwd = str_field(v, "cwd").filter(|s| !s.is_empty()).map(str::to_string);
    let transcript_path = str_field(v, "transcript_path").filter(|s| !s.is_empty()).map(str::to_string);
    let tool = |carry: Carry| -> Result<InputKind, String> {
        Ok(InputKind::Tool {
            tool_name: str_field(v, "tool_name").filter(|s| !s.is_empty()).ok_or("no tool_name")?.to_string(),
            tool_input: v.get("tool_input").filter(|t| t.is_object()).cloned().unwrap_or_else(|| json!({})),
            model: str_field(v, "model").filter(|s| !s.is_empty()).map(str::to_string),
            carry,
        })
    };
    let kind = match event {
        Event::SessionStart => InputKind::SessionStart { pull: true },
        Event::UserPromptSubmit => {
            if is_subagent(v) {
                // Observed (0.169.0): a sub-agent's prompt fires
                // UserPromptSubmit with the parent's session_id, and its
                // context lands in the sub-agent's thread only. Neither the
                // title nor a note belongs there.
                return Ok(Parsed::StandDown("sub-agent prompt: its context would reach the sub-agent only"));
            }
            InputKind::Prompt { prompt: str_field(v, "prompt").unwrap_or_default().to_string(), pull: true }
        }
        // A sub-agent's tool call is still checked (a deny must hold), but its
        // context would reach only the sub-agent: a note the server hands
        // back is spooled for the session's own agent instead.
        Event::PreToolUse => tool(if is_subagent(v) { Carry::None } else { Carry::of(def.carrier) })?,
        // PermissionRequest output cannot hold context: never carries.
        Event::PermissionRequest => tool(Carry::None)?,
        Event::Stop => {
            if is_subagent(v) {
                return Ok(Parsed::StandDown("sub-agent stop"));
            }
            InputKind::Stop { may_continue: !v.get("stop_hook_active").and_then(Value::as_bool).unwrap_or(false) }
        }
        Event::SessionEnd => InputKind::SessionEnd {
            reason: str_field(v, "reason").filter(|s| !s.is_empty()).unwrap_or("other").to_string(),
        },
    };
    Ok(Parsed::Run(Input { session_id, cwd, transcript_path, kind }))
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
