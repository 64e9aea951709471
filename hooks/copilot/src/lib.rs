//! The GitHub Copilot CLI adapter (proven against Copilot CLI 1.0.102):
//! pure functions from a hook's stdin JSON to a harness-neutral [`Input`],
//! and from an [`Outcome`] to the typed [`Output`] that event accepts.
//! Everything else is the shared engine.
//!
//! We are installed in the camelCase ("Copilot") style, one file that is
//! entirely ours, `$COPILOT_HOME/hooks/preloop.json`; the parser also takes
//! the snake_case payloads of the PascalCase ("Claude") style, which carries
//! the same top-level outputs (docs/contracts/copilot-cli.md §2).
//!
//! | event | carrier | output | neutral |
//! |---|---|---|---|
//! | sessionStart | `additionalContext` (its own user message) | context only | nothing |
//! | userPromptSubmitted | `additionalContext` (a `<system_reminder>` in the prompt) | context only; a sub-agent's prompt stands down | nothing |
//! | preToolUse | `additionalContext` (a user message after the tool result): the session's spool only | deny → `permissionDecision: "deny"` + reason; allow → no decision; Preloop's `send_note` (`<server>-send_note`) → `modifiedArgs` with the caller's session id, no decision | nothing |
//! | postToolUse | `additionalContext` (appended to the tool message; cut at 10,240 characters) | context only; in a sub-agent: nothing | nothing |
//! | agentStop | `reason` of `decision: "block"` (continues the turn once) | block + reason; in a sub-agent: nothing | nothing |
//! | sessionEnd | none | nothing | nothing |
//!
//! Sub-agents (`agentId` in the payload, `sessionId` = the sub-agent's own
//! id, `parentAgentId` = the session's): what their hooks print reaches only
//! the sub-agent, so they register nothing and carry nothing. Their tool
//! calls are still checked, under the session's id, and a deny holds.

// Shipped code never panics on a value it did not check: an `unwrap` or
// `expect` outside tests is refused, and each true invariant is allowed by
// name where it is (docs/adding-a-harness.md, "Code rules").
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use preloop_shared::adapter::{deny_reason, may_continue, prompt_input, tool_input};
use preloop_shared::flow::{Carry, Input, InputKind, McpTool, Outcome};
use preloop_shared::registry::def_of;
use preloop_shared::runner::Parsed;
use preloop_shared::wire::Decision;
use serde_json::Value;

pub mod output;

pub use output::Output;
pub use preloop_shared::registry::event::Copilot as Event;

preloop_shared::pure_adapter! {
    /// The Copilot CLI adapter.
    Copilot
}

/// The PascalCase ("Claude" style) name of an event, as a snake_case
/// payload's `hook_event_name` gives it.
pub fn pascal_name(event: Event) -> &'static str {
    match event {
        Event::SessionStart => "SessionStart",
        Event::UserPromptSubmitted => "UserPromptSubmit",
        Event::PreToolUse => "PreToolUse",
        Event::PostToolUse => "PostToolUse",
        Event::AgentStop => "Stop",
        Event::SessionEnd => "SessionEnd",
    }
}

/// A field by its camelCase name, or its snake_case twin.
fn field<'a>(v: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    v.get(camel).or_else(|| v.get(snake))
}

fn text<'a>(v: &'a Value, camel: &str, snake: &str) -> Option<&'a str> {
    field(v, camel, snake).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

/// The event a camelCase payload (which names no event) comes from, as far
/// as its fields tell (docs/contracts/copilot-cli.md §3), by our name or the
/// name of an event we do not hook.
fn camel_shape(v: &Value) -> Option<&'static str> {
    let has = |k: &str| v.get(k).is_some();
    Some(if has("hookName") {
        "permissionRequest"
    } else if has("toolResult") {
        "postToolUse"
    } else if has("toolName") && has("error") {
        "postToolUseFailure"
    } else if has("toolName") {
        "preToolUse"
    } else if has("errorContext") {
        "errorOccurred"
    } else if has("agentName") {
        if has("response") { "subagentStop" } else { "subagentStart" }
    } else if has("stopReason") || has("stop_hook_active") {
        "agentStop"
    } else if has("transformedPrompt") {
        "userPromptTransformed"
    } else if has("prompt") {
        "userPromptSubmitted"
    } else if has("initialPrompt") || has("source") {
        "sessionStart"
    } else if has("reason") {
        "sessionEnd"
    } else {
        return None;
    })
}

/// A sub-agent's hook: `agentId` present (docs/contracts/copilot-cli.md §3,
/// e2e/README.md "Sub-agents").
fn is_subagent(v: &Value) -> bool {
    text(v, "agentId", "agent_id").is_some()
}

/// stdin → input. Lenient: unknown fields are ignored, optional ones may be
/// missing; a session id (and, for preToolUse, a tool name) is required. A
/// payload whose `hook_event_name` (snake_case style), `hookName` or shape
/// (camelCase style) says it belongs to another event is refused.
pub fn parse(event: Event, v: &Value) -> Result<Parsed, String> {
    let def = def_of(event);
    if !v.is_object() {
        return Err("not a JSON object".into());
    }
    match v.get("hook_event_name").and_then(Value::as_str) {
        Some(name) if name != pascal_name(event) && name != def.on => {
            return Err(format!("hook_event_name {name:?} given to the {} hook", def.on));
        }
        Some(_) => {}
        None => {
            if let Some(shape) = camel_shape(v)
                && shape != def.on
            {
                return Err(format!("a {shape} payload given to the {} hook", def.on));
            }
        }
    }
    let own_id = text(v, "sessionId", "session_id").ok_or("no sessionId")?.to_string();
    let cwd = text(v, "cwd", "cwd").map(str::to_string);
    let transcript_path = text(v, "transcriptPath", "transcript_path").map(str::to_string);
    let sub = is_subagent(v);
    let mut session_id = own_id;
    let kind = match event {
        Event::SessionStart => InputKind::SessionStart { pull: true },
        Event::UserPromptSubmitted => {
            if sub {
                return Ok(Parsed::StandDown("sub-agent prompt: its context would reach the sub-agent only"));
            }
            // An agentStop continuation fires userPromptSubmitted with
            // `prompt` = our block reason (copilot-cli.md §3).
            prompt_input(field(v, "prompt", "prompt").and_then(Value::as_str).unwrap_or_default())
        }
        Event::PreToolUse => {
            let tool_name = text(v, "toolName", "tool_name").ok_or("no toolName")?.to_string();
            let tool_input = tool_input(field(v, "toolArgs", "tool_input"));
            let carry = if sub {
                // Checked under the session's own id (a deny holds), and
                // nothing is carried: the context would reach the sub-agent.
                session_id = text(v, "parentAgentId", "parent_agent_id")
                    .ok_or("a sub-agent's tool call without parentAgentId")?
                    .to_string();
                Carry::None
            } else {
                Carry::of(def.carrier)
            };
            let mcp_tool = mcp_tool(&tool_name).map(McpTool::named);
            InputKind::Tool { tool_name, mcp_tool, tool_input, model: None, carry }
        }
        Event::PostToolUse => {
            if sub {
                return Ok(Parsed::StandDown("sub-agent tool result: its context would reach the sub-agent only"));
            }
            InputKind::AfterTool { carry: true }
        }
        Event::AgentStop => {
            if sub {
                // Copilot ignores a sub-agent's block (e2e/README.md).
                return Ok(Parsed::StandDown("sub-agent stop"));
            }
            InputKind::Stop { may_continue: may_continue(v) }
        }
        Event::SessionEnd => {
            if sub {
                return Ok(Parsed::StandDown("sub-agent session end"));
            }
            InputKind::SessionEnd { reason: text(v, "reason", "reason").unwrap_or("other").to_string() }
        }
    };
    Ok(Parsed::Run(Input { session_id, cwd, transcript_path, parent_session_id: None, kind }))
}

/// The MCP tool's own name in Copilot's spelling of an MCP tool,
/// `<server>-<tool>` (observed with 1.0.102: `preloop-send_note`; the hook
/// payload names no server apart). A server name may hold `-`, so the tool is
/// what follows the last `-`: right for `send_note`, the one name the engine
/// looks for ([`preloop_shared::flow::is_send_note`]). `None` for a name with
/// no `-` or an empty server part (Copilot's built-in tools: `bash`, `view`, …).
pub fn mcp_tool(tool_name: &str) -> Option<&str> {
    match tool_name.rsplit_once('-') {
        Some((server, tool)) if !server.is_empty() && !tool.is_empty() => Some(tool),
        _ => None,
    }
}

/// outcome → stdout (`None`: print nothing).
pub fn render(event: Event, o: &Outcome) -> Option<Output> {
    use output::*;
    let ctx = o.context.clone().filter(|c| !c.is_empty());
    match event {
        Event::SessionStart | Event::UserPromptSubmitted | Event::PostToolUse => {
            ctx.map(|c| Output::Context(ContextOutput { additional_context: c }))
        }
        Event::PreToolUse => {
            // Only a deny is a decision: an allow leaves Copilot's own
            // permission flow alone. `modifiedArgs` without a decision
            // rewrites the call and grants nothing (measured on 1.0.102:
            // docs/event-matrix.md, "send_note caller session").
            let deny = o.decision == Some(Decision::Deny);
            let modified_args = if deny { None } else { o.tool_input.as_ref().and_then(|v| v.as_object()).cloned() };
            if !deny && ctx.is_none() && modified_args.is_none() {
                return None;
            }
            Some(Output::PreToolUse(PreToolUseOutput {
                permission_decision: deny.then_some(Deny::Deny),
                permission_decision_reason: deny.then(|| deny_reason(o)),
                additional_context: ctx,
                modified_args,
            }))
        }
        Event::AgentStop => match (o.continue_turn, ctx) {
            (true, Some(c)) => Some(Output::Block(BlockOutput { decision: Block::Block, reason: c })),
            _ => None,
        },
        Event::SessionEnd => None,
    }
}
