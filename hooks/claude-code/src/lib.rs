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
//! | PreToolUse | `additionalContext`; deny → `permissionDecision: "deny"` + reason; allow → no decision; Preloop's `send_note` → `updatedInput` with the caller's session id, no decision | nothing |
//! | Stop | `hookSpecificOutput.additionalContext` (continues the turn once) | nothing |
//! | SessionEnd | none | nothing |
//!
//! Plus a background watcher (`preloop-claude-code-watch`, [`watch`]) that
//! wakes an idle interactive session when a note arrives; SessionEnd stops it.

// Shipped code never panics on a value it did not check: an `unwrap` or
// `expect` outside tests is refused, and each true invariant is allowed by
// name where it is (docs/adding-a-harness.md, "Code rules").
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use preloop_shared::adapter::{ClaudeStyle, deny_reason_verbatim, parse_claude_style};
use preloop_shared::config::Env;
use preloop_shared::flow::{Carry, Input, Outcome};
use preloop_shared::registry::def_of;
use preloop_shared::runner::{Adapter, Parsed};
use preloop_shared::wire::Decision;
use serde_json::Value;

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
                watch::stop(
                    &preloop_shared::config::preloop_home(env, Some(preloop_shared::Harness::ClaudeCode)),
                    &input.session_id,
                );
            }
            _ => {}
        }
    }
}

/// Run one hook (the watcher for [`Event::Watch`]); returns its exit code.
pub fn main(event: Event) -> i32 {
    if event == Event::Watch {
        return watch::main();
    }
    if event == Event::SessionEnd {
        // Before the session ends on the backend: no watcher may claim past it.
        watch::stop_from_env(&Env::process());
    }
    preloop_shared::entry::main::<ClaudeCode>(event)
}

/// stdin → input: Claude Code's payloads are the Claude-style ones
/// ([`parse_claude_style`], which says what a sub-agent's hooks do).
pub fn parse(event: Event, v: &Value) -> Result<Parsed, String> {
    let def = def_of(event);
    if v.get("cursor_version").is_some() {
        // Cursor runs the hooks it imports from ~/.claude/settings.json with
        // its own payloads; our Cursor hooks handle Cursor.
        return Ok(Parsed::StandDown("cursor payload in a Claude Code hook"));
    }
    let style = match event {
        Event::SessionStart => ClaudeStyle::SessionStart,
        Event::UserPromptSubmit => ClaudeStyle::Prompt,
        Event::PreToolUse => ClaudeStyle::Tool(Carry::of(def.carrier)),
        Event::Stop => ClaudeStyle::Stop,
        Event::SessionEnd => ClaudeStyle::SessionEnd,
        Event::Watch => return Err("the watcher reads its own payload".into()),
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
        Event::PreToolUse => {
            let reason = (o.decision == Some(Decision::Deny)).then(|| deny_reason_verbatim(o));
            PreToolUseOutput::wrapped(reason, ctx, o.tool_input.clone()).map(Output::PreToolUse)
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
