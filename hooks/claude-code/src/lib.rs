//! The Claude Code adapter (proven against Claude Code 2.1.328): pure
//! functions from a hook's stdin JSON to a harness-neutral [`Input`], and
//! from an [`Outcome`] to the JSON that event accepts. Everything else is
//! the shared engine.
//!
//! | event | carrier | neutral |
//! |---|---|---|
//! | SessionStart | `hookSpecificOutput.additionalContext` | nothing |
//! | UserPromptSubmit | `hookSpecificOutput.additionalContext` | nothing |
//! | PreToolUse | `additionalContext`; deny → `permissionDecision: "deny"` + reason; allow → no decision | nothing |
//! | Stop | `hookSpecificOutput.additionalContext` (continues the turn once) | nothing |
//! | SessionEnd | none | nothing |
//!
//! Plus a background watcher (`preloop-claude-code-watch`, [`watch`]) that
//! wakes an idle interactive session when a note arrives; SessionEnd stops it.

use preloop_shared::Harness;
use preloop_shared::config::{Config, Env};
use preloop_shared::flow::{CarrierLimit, Input, InputKind, Outcome};
use preloop_shared::runner::{self, Adapter, HookSpec, Parsed};
use preloop_shared::wire::{Decision, EvaluationPhase};
use serde_json::{Value, json};
use std::time::Duration;

pub mod watch;

/// Claude Code shows up to 10,000 characters of `additionalContext` inline;
/// past that the model sees a 2 KB preview and a file path.
pub const CONTEXT_LIMIT: CarrierLimit = CarrierLimit::Chars(10_000);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    Stop,
    SessionEnd,
}

impl Event {
    pub const ALL: [Event; 5] =
        [Event::SessionStart, Event::UserPromptSubmit, Event::PreToolUse, Event::Stop, Event::SessionEnd];

    /// The harness's name for the event.
    pub fn name(self) -> &'static str {
        match self {
            Event::SessionStart => "SessionStart",
            Event::UserPromptSubmit => "UserPromptSubmit",
            Event::PreToolUse => "PreToolUse",
            Event::Stop => "Stop",
            Event::SessionEnd => "SessionEnd",
        }
    }

    /// Our binary for the event.
    pub fn binary(self) -> &'static str {
        match self {
            Event::SessionStart => "preloop-claude-code-session-start",
            Event::UserPromptSubmit => "preloop-claude-code-user-prompt-submit",
            Event::PreToolUse => "preloop-claude-code-pre-tool-use",
            Event::Stop => "preloop-claude-code-stop",
            Event::SessionEnd => "preloop-claude-code-session-end",
        }
    }

    pub fn spec(self) -> HookSpec {
        HookSpec {
            harness: Harness::ClaudeCode,
            event: self.name(),
            adapter: Box::new(self),
            limit: CONTEXT_LIMIT,
            budget: match self {
                Event::SessionEnd => Some(|c: &Config| Duration::from_millis(c.settings.session_end_budget_ms)),
                _ => None,
            },
            side_effects: match self {
                Event::SessionStart => Some(export_lineage),
                // Again by the stdin session id, in case the environment lacked it.
                Event::SessionEnd => Some(|input: &Input, _: &Outcome| {
                    watch::stop(&preloop_shared::config::preloop_home(&Env::process()), &input.session_id);
                }),
                _ => None,
            },
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
    if event == Event::SessionEnd {
        // Before the session ends on the backend: no watcher may claim past it.
        watch::stop_from_env(&Env::process());
    }
    runner::main(event.spec())
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// stdin → input. Lenient: unknown fields are ignored, optional ones may be
/// missing; only a session id is required.
pub fn parse(event: Event, v: &Value) -> Result<Parsed, String> {
    if v.get("cursor_version").is_some() {
        // Cursor runs the hooks it imports from ~/.claude/settings.json with
        // its own payloads; our Cursor hooks handle Cursor.
        return Ok(Parsed::StandDown("cursor payload in a Claude Code hook"));
    }
    if let Some(name) = str_field(v, "hook_event_name")
        && name != event.name()
    {
        return Err(format!("hook_event_name {name:?} given to the {} hook", event.name()));
    }
    let session_id =
        str_field(v, "session_id").map(str::trim).filter(|s| !s.is_empty()).ok_or("no session_id")?.to_string();
    let cwd = str_field(v, "cwd").filter(|s| !s.is_empty()).map(str::to_string);
    let kind = match event {
        Event::SessionStart => {
            InputKind::SessionStart { source: str_field(v, "source").map(str::to_string), pull: true }
        }
        Event::UserPromptSubmit => InputKind::UserPrompt {
            prompt: str_field(v, "prompt").unwrap_or_default().to_string(),
            hook_event_name: "UserPromptSubmit".into(),
            pull: true,
        },
        Event::PreToolUse => InputKind::Tool {
            tool_name: str_field(v, "tool_name").filter(|s| !s.is_empty()).ok_or("no tool_name")?.to_string(),
            tool_input: v.get("tool_input").filter(|t| t.is_object()).cloned().unwrap_or_else(|| json!({})),
            phase: EvaluationPhase::PreToolUse,
            hook_event_name: Some("PreToolUse".into()),
            model: str_field(v, "model").map(str::to_string),
            carries: true,
        },
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
    let ctx = o.context.as_deref();
    match event {
        Event::SessionStart | Event::UserPromptSubmit => {
            ctx.map(|c| json!({"hookSpecificOutput": {"hookEventName": event.name(), "additionalContext": c}}))
        }
        Event::PreToolUse => {
            let mut h = serde_json::Map::new();
            h.insert("hookEventName".into(), json!("PreToolUse"));
            // An allow must not grant Claude's own permission: only a deny is a decision.
            if o.decision == Some(Decision::Deny) {
                h.insert("permissionDecision".into(), json!("deny"));
                h.insert("permissionDecisionReason".into(), json!(o.reason.as_deref().unwrap_or("Denied by Preloop")));
            }
            if let Some(c) = ctx {
                h.insert("additionalContext".into(), json!(c));
            }
            (h.len() > 1).then(|| json!({"hookSpecificOutput": h}))
        }
        // Stop's additionalContext continues the turn once and reaches the model
        // as "Stop hook additional context: <block>" without our command line
        // (a `decision: block` reason would show it and repeat the block).
        Event::Stop => match (o.continue_turn, ctx) {
            (true, Some(c)) => Some(json!({"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": c}})),
            _ => None,
        },
        Event::SessionEnd => None,
    }
}

/// SessionStart side effects: export the runtime id to the commands the run
/// starts (lineage), and name it on stderr in headless runs.
fn export_lineage(_input: &Input, o: &Outcome) {
    let Some(id) = o.runtime_session_id.as_deref() else { return };
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return; // never write anything a shell could misread
    }
    let env = Env::process();
    if let Some(path) = env.get("CLAUDE_ENV_FILE").filter(|p| !p.is_empty()) {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "export PRELOOP_PARENT_SESSION_ID={id}");
        }
    }
    if env.get("CLAUDE_CODE_ENTRYPOINT").as_deref() == Some("sdk-cli") {
        eprintln!("preloop runtime_session_id={id}");
    }
}
