//! The Pi adapter (proven against Pi 0.73.1): pure functions from our
//! extension's payload ([`Payload`]) to a harness-neutral [`Input`], and
//! from an [`Outcome`] to the [`Answer`] the extension applies. Everything
//! else is the shared engine.
//!
//! Pi runs no hook commands from a config file: it loads our extension
//! (`shim/source.js`, installed as `preloop.js` in one of Pi's extension
//! folders), which spawns `preloop-hooks hook preloop-pi-<event>` per
//! event and speaks [`preloop_shared::plugin`]'s protocol: our payload as
//! one line on stdin, our answer as one line on stdout, and `applied`
//! back on stdin once the answer was handed to Pi, which is when the notes
//! in it are acked `delivered`.
//!
//! | event | carrier (what the extension does with the answer) | answer |
//! |---|---|---|
//! | session_start | `pi.sendMessage(note, {deliverAs: "nextTurn"})`: with the first prompt | context |
//! | before_agent_start | `return {message: note}`: its own user message after every prompt | context |
//! | tool_call | `return {block: true, reason}`: the tool does not run, the model gets the reason | deny |
//! | tool_result | `pi.sendMessage(note, {deliverAs: "steer"})`: after this batch's tool results | context |
//! | agent_end | a 0 ms timer, then `pi.sendMessage(note, {triggerTurn: true})`: a new run (only where Pi stays alive: RPC and interactive, `has_ui`) | continue |
//! | session_shutdown | none (awaited): pending notes become `undeliverable` | nothing |
//! | idle (ours: the [`watch`]er, while Pi sits idle, `has_ui`) | `pi.sendMessage(note, {triggerTurn: true})`: a new run | continue |

// Shipped code never panics on a value it did not check: an `unwrap` or
// `expect` outside tests is refused, and each true invariant is allowed by
// name where it is (docs/adding-a-harness.md, "Code rules").
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use preloop_shared::adapter::{deny_reason, prompt_input, tool_input};
use preloop_shared::flow::{Carry, Input, InputKind, Outcome};
use preloop_shared::registry::def_of;
use preloop_shared::runner::Parsed;
use preloop_shared::wire::Decision;
use serde_json::Value;

pub mod watch;
pub mod wire;

pub use preloop_shared::registry::event::Pi as Event;
pub use wire::{Answer, Payload};

/// What the hooks print: one [`Answer`] line.
pub type Output = Answer;

preloop_shared::plugin_adapter! {
    /// The Pi adapter.
    Pi, "extension"
}

/// The extension's payload → input. Our own format, so it is read
/// strictly ([`Payload`]: unknown fields refused); a payload of another
/// event is refused.
pub fn parse(event: Event, v: &Value) -> Result<Parsed, String> {
    let def = def_of(event);
    let p: Payload = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    let session_id = preloop_shared::plugin::payload_header(p.v, wire::PROTOCOL, &p.event, def.on, &p.session_id)?;
    let kind = match event {
        Event::SessionStart => InputKind::SessionStart { pull: true },
        Event::BeforeAgentStart => prompt_input(p.prompt.as_deref().unwrap_or_default()),
        Event::ToolCall => {
            let tool_name = p.tool_name.filter(|t| !t.trim().is_empty()).ok_or("no tool_name")?;
            InputKind::Tool {
                tool_name,
                mcp_tool: None,
                tool_input: tool_input(p.tool_input.as_ref()),
                model: None,
                carry: Carry::of(def.carrier),
            }
        }
        Event::ToolResult => InputKind::AfterTool { carry: true },
        // A continuation reaches the model only where Pi stays alive after
        // the run (RPC, interactive: `has_ui`); in -p and json mode it is
        // sent while Pi disposes of the session and its answer is dropped
        // (docs/contracts/pi.md §5), so nothing is claimed there.
        Event::AgentEnd => InputKind::Stop { may_continue: p.has_ui },
        Event::SessionShutdown => InputKind::SessionEnd { reason: p.reason.unwrap_or_else(|| "quit".into()) },
        // Never reached: [`main`] runs the watcher's own loop.
        Event::Watch => return Err("the watcher is not a hook".into()),
    };
    let non_blank = |s: Option<String>| s.filter(|s| !s.trim().is_empty());
    Ok(Parsed::Run(Input {
        session_id,
        cwd: non_blank(p.cwd),
        transcript_path: non_blank(p.session_file),
        parent_session_id: None,
        kind,
    }))
}

/// Outcome → the answer (`None`: print nothing).
pub fn render(event: Event, o: &Outcome) -> Option<Answer> {
    let ctx = o.context.clone().filter(|c| !c.is_empty());
    match event {
        Event::SessionStart | Event::BeforeAgentStart | Event::ToolResult => ctx.map(|text| Answer::Context { text }),
        Event::ToolCall => (o.decision == Some(Decision::Deny)).then(|| Answer::Deny { reason: deny_reason(o) }),
        Event::AgentEnd => match (o.continue_turn, ctx) {
            (true, Some(text)) => Some(Answer::Continue { text }),
            _ => None,
        },
        Event::SessionShutdown | Event::Watch => None,
    }
}

/// The extension Pi loads: one static template in this crate
/// (`shim/source.js` with the core all shims share), stamped with this build's version and written byte for
/// byte by `preloop-hooks install --harness pi`.
pub const SHIM: preloop_shared::plugin::Shim = preloop_shared::plugin::Shim {
    source: include_str!("../shim/source.js"),
    header: "// preloop-hooks Pi extension ",
};
