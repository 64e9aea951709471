//! The Claude Code adapter (proven against Claude Code 2.1.328): pure
//! functions from a hook's stdin JSON to a harness-neutral [`Input`], and
//! from an [`Outcome`] to the typed [`Output`] that event accepts.
//! Everything else is the shared engine; which events we hook, their
//! binaries and carriers are the registry's
//! (`preloop_shared::registry`, Claude Code rows).
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

use preloop_shared::adapter::deny_reason_verbatim;
use preloop_shared::config::Env;
use preloop_shared::flow::{Carry, Input, InputKind, Outcome};
use preloop_shared::json::{non_blank, str_field};
use preloop_shared::registry::def_of;
use preloop_shared::runner::{self, Adapter, Parsed};
use preloop_shared::wire::Decision;
use serde_json::{Value, json};

pub mod output;
pub mod watch;

pub use output::Output;
pub use preloop_shared::registry::event::ClaudeCode as Event;

/// The Claude Code adapter.
pub struct ClaudeCode;

impl Adapter for ClaudeCode {
    type Event = Event;
    type Output = Output;

    fn parse(event: Event, stdin: &Value, _env: &Env) -> Result<Parsed, String> {
        parse(event, stdin)
    }
    fn render(event: Event, outcome: &Outcome) -> Option<Output> {
        render(event, outcome)
    }
    fn side_effects(event: Event, input: &Input, outcome: &Outcome, env: &Env) {
        match event {
            Event::SessionStart => export_lineage(outcome, env),
            // Again by the stdin session id, in case the environment lacked it.
            Event::SessionEnd => {
                watch::stop(&preloop_shared::config::preloop_home(env), &input.session_id);
            }
            _ => {}
        }
    }
}

/// Run one hook binary.
pub fn main(event: Event) -> ! {
    if event == Event::SessionEnd {
        // Before the session ends on the backend: no watcher may claim past it.
        watch::stop_from_env(&Env::process());
    }
    runner::main::<ClaudeCode>(event)
}

/// A tool call, prompt or stop inside a sub-agent (the payload names
/// `agent_id`). Observed on 2.1.328 (docs/contracts/measurements-2026-12.md
/// §1): context returned there reaches only the sub-agent's own requests;
/// the main agent sees the sub-agent's final report, not the note.
fn in_subagent(v: &Value) -> bool {
    str_field(v, "agent_id").is_some_and(|a| !a.trim().is_empty())
}

/// stdin → input. Lenient: unknown fields are ignored, optional ones may be
/// missing; only a session id is required.
pub fn parse(event: Event, v: &Value) -> Result<Parsed, String> {
    let def = def_of(event);
    if v.get("cursor_version").is_some() {
        // Cursor runs the hooks it imports from ~/.claude/settings.json with
        // its own payloads; our Cursor hooks handle Cursor.
        return Ok(Parsed::StandDown("cursor payload in a Claude Code hook"));
    }
    if let Some(name) = str_field(v, "hook_event_name")
        && name != def.on
    {
        return Err(format!("hook_event_name {name:?} given to the {} hook", def.on));
    }
    let session_id = non_blank(v, "session_id").ok_or("no session_id")?.to_string();
    let cwd = str_field(v, "cwd").filter(|s| !s.is_empty()).map(str::to_string);
    let transcript_path = str_field(v, "transcript_path").filter(|s| !s.is_empty()).map(str::to_string);
    let kind = match event {
        Event::SessionStart => InputKind::SessionStart { pull: true },
        Event::UserPromptSubmit => {
            if in_subagent(v) {
                return Ok(Parsed::StandDown("sub-agent prompt: its context would reach the sub-agent only"));
            }
            InputKind::Prompt { prompt: str_field(v, "prompt").unwrap_or_default().to_string(), pull: true }
        }
        Event::PreToolUse => InputKind::Tool {
            tool_name: str_field(v, "tool_name").filter(|s| !s.is_empty()).ok_or("no tool_name")?.to_string(),
            tool_input: v.get("tool_input").filter(|t| t.is_object()).cloned().unwrap_or_else(|| json!({})),
            model: str_field(v, "model").map(str::to_string),
            // A sub-agent's tool call is still checked (a deny must hold),
            // but a note it is handed goes to the spool for the main agent.
            carry: if in_subagent(v) { Carry::None } else { Carry::of(def.carrier) },
        },
        Event::Stop => {
            if in_subagent(v) {
                return Ok(Parsed::StandDown("sub-agent stop"));
            }
            InputKind::Stop { may_continue: !v.get("stop_hook_active").and_then(Value::as_bool).unwrap_or(false) }
        }
        Event::SessionEnd => InputKind::SessionEnd {
            reason: str_field(v, "reason").filter(|s| !s.is_empty()).unwrap_or("other").to_string(),
        },
        Event::Watch => return Err("the watcher reads its own payload".into()),
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
        Event::PreToolUse => {
            let reason = (o.decision == Some(Decision::Deny)).then(|| deny_reason_verbatim(o));
            PreToolUseOutput::wrapped(reason, ctx).map(Output::PreToolUse)
        }
        // Stop's additionalContext continues the turn once and reaches the model
        // as "Stop hook additional context: <block>" without our command line
        // (a `decision: block` reason would show it and repeat the block).
        Event::Stop => match (o.continue_turn, ctx) {
            (true, Some(c)) => Some(Output::Stop(Context::wrapped(Stop::Stop, c))),
            _ => None,
        },
        Event::SessionEnd | Event::Watch => None,
    }
}

/// SessionStart: export the runtime id to the commands the run starts
/// (lineage), and name it on stderr in headless runs (it shows in `claude -p
/// --output-format stream-json --verbose` and in the transcript).
fn export_lineage(o: &Outcome, env: &Env) {
    use std::io::Write;
    let Some(id) = o.runtime_session_id.as_deref() else { return };
    if !preloop_shared::flow::is_uuid(id) {
        return; // never write anything a shell could misread
    }
    if let Some(path) = env.get("CLAUDE_ENV_FILE").filter(|p| !p.is_empty())
        && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path)
    {
        let _ = writeln!(f, "export PRELOOP_PARENT_SESSION_ID={id}");
    }
    if env.get("CLAUDE_CODE_ENTRYPOINT").as_deref() == Some("sdk-cli") {
        // A closed or broken stderr must not panic the hook after its claim.
        let _ = writeln!(std::io::stderr(), "preloop runtime_session_id={id}");
    }
}
