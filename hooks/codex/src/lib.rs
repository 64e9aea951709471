//! The Codex CLI adapter (proven against Codex CLI 0.169.0): pure functions
//! from a hook's stdin JSON to a harness-neutral [`Input`], and from an
//! [`Outcome`] to the JSON that event accepts. Everything else is the shared
//! engine, except SessionEnd's hand-off to a detached worker
//! ([`session_end`]), which Codex's ~1 s kill makes necessary.
//!
//! | event | carrier | output | neutral |
//! |---|---|---|---|
//! | SessionStart | `hookSpecificOutput.additionalContext` | context only | nothing |
//! | UserPromptSubmit | `hookSpecificOutput.additionalContext` | context only (sub-agent prompts: stand down) | nothing |
//! | PreToolUse | `hookSpecificOutput.additionalContext` | deny → `permissionDecision: "deny"` + reason; allow → no decision | nothing |
//! | PermissionRequest | none (notes are spooled by the engine) | `decision.behavior` allow, or deny + `message` | nothing (Codex's own approval flow) |
//! | Stop | `reason` of `decision: "block"` (continues the turn once) | block + reason | nothing |
//! | SessionEnd | none | nothing | nothing |
//!
//! Codex 0.169.0 marks a hook Failed and discards its whole output (a note
//! included) for any key it does not support on that event: PreToolUse
//! `permissionDecision` allow/ask, `continue: false`, `suppressOutput`, any
//! unknown key; PermissionRequest anything but `decision.behavior` and
//! `decision.message`; Stop `hookSpecificOutput`. [`allowed_paths`] lists the
//! only key paths [`render`] may produce; the tests hold it to that.

use preloop_shared::Harness;
use preloop_shared::config::Config;
use preloop_shared::flow::{CarrierLimit, Input, InputKind, Outcome};
use preloop_shared::runner::{self, Adapter, HookSpec, Parsed};
use preloop_shared::wire::{Decision, EvaluationPhase};
use serde_json::{Map, Value, json};
use std::time::Duration;

pub mod session_end;

/// Codex cuts hook context past 2,500 "tokens", counted as UTF-8 bytes / 4
/// (observed: 10,000 bytes pass intact, 10,004 are cut in the middle).
pub const CONTEXT_LIMIT: CarrierLimit = CarrierLimit::Bytes(10_000);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PermissionRequest,
    Stop,
    SessionEnd,
}

impl Event {
    pub const ALL: [Event; 6] = [
        Event::SessionStart,
        Event::UserPromptSubmit,
        Event::PreToolUse,
        Event::PermissionRequest,
        Event::Stop,
        Event::SessionEnd,
    ];

    /// The harness's name for the event (`hook_event_name`).
    pub fn name(self) -> &'static str {
        match self {
            Event::SessionStart => "SessionStart",
            Event::UserPromptSubmit => "UserPromptSubmit",
            Event::PreToolUse => "PreToolUse",
            Event::PermissionRequest => "PermissionRequest",
            Event::Stop => "Stop",
            Event::SessionEnd => "SessionEnd",
        }
    }

    /// Our binary for the event.
    pub fn binary(self) -> &'static str {
        match self {
            Event::SessionStart => "preloop-codex-session-start",
            Event::UserPromptSubmit => "preloop-codex-user-prompt-submit",
            Event::PreToolUse => "preloop-codex-pre-tool-use",
            Event::PermissionRequest => "preloop-codex-permission-request",
            Event::Stop => "preloop-codex-stop",
            Event::SessionEnd => "preloop-codex-session-end",
        }
    }

    /// The stem of the event's JSON Schema files in the Codex binary
    /// (`schemas/codex-0.169.0/<stem>.command.{input,output}.schema.json`).
    pub fn schema_stem(self) -> &'static str {
        match self {
            Event::SessionStart => "session-start",
            Event::UserPromptSubmit => "user-prompt-submit",
            Event::PreToolUse => "pre-tool-use",
            Event::PermissionRequest => "permission-request",
            Event::Stop => "stop",
            Event::SessionEnd => "session-end",
        }
    }

    pub fn from_name(name: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.name() == name)
    }

    pub fn spec(self) -> HookSpec {
        HookSpec {
            harness: Harness::Codex,
            event: self.name(),
            adapter: Box::new(self),
            limit: CONTEXT_LIMIT,
            budget: match self {
                // In-process SessionEnd (local mode, or no worker could be
                // started): everything must fit before Codex's ~1 s kill.
                Event::SessionEnd => Some(|c: &Config| Duration::from_millis(c.settings.session_end_budget_ms)),
                _ => None,
            },
            // Codex gives hooks no env file: there is no lineage export.
            side_effects: None,
        }
    }
}

impl Adapter for Event {
    fn parse(&self, stdin: &Value) -> Result<Parsed, String> {
        parse(*self, stdin)
    }
    fn render(&self, outcome: &Outcome) -> Option<Value> {
        render(*self, outcome)
    }
}

/// Run one hook binary.
pub fn main(event: Event) -> ! {
    match event {
        Event::SessionEnd => session_end::main(),
        _ => runner::main(event.spec()),
    }
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// A sub-agent's hooks carry `agent_id` (and the parent's `session_id`);
/// their context reaches only the sub-agent's own thread.
fn is_subagent(v: &Value) -> bool {
    str_field(v, "agent_id").is_some_and(|a| !a.is_empty())
}

/// stdin → input. Lenient: unknown fields are ignored, optional ones may be
/// missing; a session id (and, for tool events, a tool name) is required.
pub fn parse(event: Event, v: &Value) -> Result<Parsed, String> {
    if let Some(name) = str_field(v, "hook_event_name")
        && name != event.name()
    {
        return Err(format!("hook_event_name {name:?} given to the {} hook", event.name()));
    }
    let session_id =
        str_field(v, "session_id").map(str::trim).filter(|s| !s.is_empty()).ok_or("no session_id")?.to_string();
    let cwd = str_field(v, "cwd").filter(|s| !s.is_empty()).map(str::to_string);
    let tool = |phase: EvaluationPhase, carries: bool| -> Result<InputKind, String> {
        Ok(InputKind::Tool {
            tool_name: str_field(v, "tool_name").filter(|s| !s.is_empty()).ok_or("no tool_name")?.to_string(),
            tool_input: v.get("tool_input").filter(|t| t.is_object()).cloned().unwrap_or_else(|| json!({})),
            phase,
            hook_event_name: Some(event.name().to_string()),
            model: str_field(v, "model").filter(|s| !s.is_empty()).map(str::to_string),
            carries,
        })
    };
    let kind = match event {
        Event::SessionStart => {
            InputKind::SessionStart { source: str_field(v, "source").map(str::to_string), pull: true }
        }
        Event::UserPromptSubmit => {
            if is_subagent(v) {
                // Observed (0.169.0): a sub-agent's first prompt fires
                // UserPromptSubmit with the parent's session_id, and its
                // context lands in the sub-agent's thread only. Neither the
                // title nor a note belongs there.
                return Ok(Parsed::StandDown(
                    "sub-agent prompt: its context would reach the sub-agent, not the session's agent",
                ));
            }
            InputKind::UserPrompt {
                prompt: str_field(v, "prompt").unwrap_or_default().to_string(),
                hook_event_name: "UserPromptSubmit".into(),
                pull: true,
            }
        }
        // A sub-agent's tool call is still checked (a deny must hold), but its
        // context would reach only the sub-agent: a note the server hands
        // back is spooled for the session's own agent instead.
        Event::PreToolUse => tool(EvaluationPhase::PreToolUse, !is_subagent(v))?,
        // PermissionRequest output cannot hold context: never carries.
        Event::PermissionRequest => tool(EvaluationPhase::PermissionRequest, false)?,
        Event::Stop => {
            InputKind::Stop { may_continue: !v.get("stop_hook_active").and_then(Value::as_bool).unwrap_or(false) }
        }
        Event::SessionEnd => InputKind::SessionEnd {
            reason: str_field(v, "reason").filter(|s| !s.is_empty()).unwrap_or("other").to_string(),
        },
    };
    Ok(Parsed::Run(Input { session_id, cwd, kind }))
}

/// outcome → stdout JSON (`None`: print nothing).
pub fn render(event: Event, o: &Outcome) -> Option<Value> {
    let ctx = o.context.as_deref().filter(|c| !c.is_empty());
    match event {
        Event::SessionStart | Event::UserPromptSubmit => {
            ctx.map(|c| json!({"hookSpecificOutput": {"hookEventName": event.name(), "additionalContext": c}}))
        }
        Event::PreToolUse => {
            let mut h = Map::new();
            h.insert("hookEventName".into(), json!("PreToolUse"));
            // Only a deny is a decision: `allow` (and `ask`) make Codex
            // discard the whole output, note included.
            if o.decision == Some(Decision::Deny) {
                h.insert("permissionDecision".into(), json!("deny"));
                h.insert("permissionDecisionReason".into(), json!(deny_reason(o)));
            }
            if let Some(c) = ctx {
                h.insert("additionalContext".into(), json!(c));
            }
            (h.len() > 1).then(|| json!({"hookSpecificOutput": h}))
        }
        // No context here, ever: Codex rejects any extra field, and the
        // engine spooled the note for the next carrying hook.
        Event::PermissionRequest => {
            let decision = match o.decision? {
                Decision::Allow => json!({"behavior": "allow"}),
                Decision::Deny => json!({"behavior": "deny", "message": deny_reason(o)}),
            };
            Some(json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}))
        }
        // Stop has no hookSpecificOutput in 0.169.0 (it gives Failed);
        // `decision: "block"` + a non-empty `reason` is the one output that
        // reaches the model (as a `<hook_prompt>` user message) and runs
        // another request in the same turn.
        Event::Stop => match (o.continue_turn, ctx) {
            (true, Some(c)) => Some(json!({"decision": "block", "reason": c})),
            _ => None,
        },
        Event::SessionEnd => None,
    }
}

fn deny_reason(o: &Outcome) -> &str {
    o.reason.as_deref().map(str::trim).filter(|r| !r.is_empty()).unwrap_or("Denied by Preloop")
}

/// Every key path [`render`] may emit for `event` (`a.b` = key `b` inside
/// object `a`), and the only string values a constrained key may take. The
/// tests check every rendered output against this list: anything else makes
/// Codex 0.169.0 fail the hook and drop its output.
pub fn allowed_paths(event: Event) -> &'static [(&'static str, Option<&'static [&'static str]>)] {
    match event {
        Event::SessionStart => &[
            ("hookSpecificOutput", None),
            ("hookSpecificOutput.hookEventName", Some(&["SessionStart"])),
            ("hookSpecificOutput.additionalContext", None),
        ],
        Event::UserPromptSubmit => &[
            ("hookSpecificOutput", None),
            ("hookSpecificOutput.hookEventName", Some(&["UserPromptSubmit"])),
            ("hookSpecificOutput.additionalContext", None),
        ],
        Event::PreToolUse => &[
            ("hookSpecificOutput", None),
            ("hookSpecificOutput.hookEventName", Some(&["PreToolUse"])),
            ("hookSpecificOutput.permissionDecision", Some(&["deny"])),
            ("hookSpecificOutput.permissionDecisionReason", None),
            ("hookSpecificOutput.additionalContext", None),
        ],
        Event::PermissionRequest => &[
            ("hookSpecificOutput", None),
            ("hookSpecificOutput.hookEventName", Some(&["PermissionRequest"])),
            ("hookSpecificOutput.decision", None),
            ("hookSpecificOutput.decision.behavior", Some(&["allow", "deny"])),
            ("hookSpecificOutput.decision.message", None),
        ],
        Event::Stop => &[("decision", Some(&["block"])), ("reason", None)],
        Event::SessionEnd => &[],
    }
}

/// The key paths of a JSON value, depth first (see [`allowed_paths`]).
pub fn key_paths(v: &Value) -> Vec<(String, &Value)> {
    fn walk<'a>(prefix: &str, v: &'a Value, out: &mut Vec<(String, &'a Value)>) {
        if let Value::Object(m) = v {
            for (k, child) in m {
                let p = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                out.push((p.clone(), child));
                walk(&p, child, out);
            }
        }
    }
    let mut out = Vec::new();
    walk("", v, &mut out);
    out
}

/// Whether `output` uses only the keys and values Codex 0.169.0 accepts for
/// `event` without failing the hook; `Err` names the first offending path.
pub fn check_output(event: Event, output: &Value) -> Result<(), String> {
    if !output.is_object() {
        return Err("output is not a JSON object".into());
    }
    let allowed = allowed_paths(event);
    for (path, value) in key_paths(output) {
        let Some((_, values)) = allowed.iter().find(|(p, _)| *p == path) else {
            return Err(format!("{path} is not accepted on {}", event.name()));
        };
        if let Some(values) = values
            && !value.as_str().is_some_and(|s| values.contains(&s))
        {
            return Err(format!("{path} = {value} is not accepted on {}", event.name()));
        }
    }
    // Semantic rules of 0.169.0 beyond the key list.
    match event {
        Event::Stop
            if output.get("decision").is_some()
                && output.get("reason").and_then(Value::as_str).is_none_or(str::is_empty) =>
        {
            Err("Stop decision:block needs a non-empty reason".into())
        }
        Event::PermissionRequest if output.pointer("/hookSpecificOutput/decision/behavior").is_none() => {
            Err("PermissionRequest output without decision.behavior".into())
        }
        _ => Ok(()),
    }
}

/// The process environment, one variable (a seam for tests).
pub(crate) fn env_get(key: &str) -> Option<String> {
    std::env::var(key).ok()
}
