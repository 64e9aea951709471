//! The OpenCode adapter (proven against OpenCode 1.18.33): pure functions
//! from our plugin's payload ([`Payload`]) to a harness-neutral [`Input`],
//! and from an [`Outcome`] to the [`Answer`] the plugin applies. Everything
//! else is the shared engine.
//!
//! OpenCode runs no hook commands: it loads our plugin (`shim/source.js`,
//! installed as `preloop.js` in one of OpenCode's plugin folders) in its
//! own process, which spawns `preloop-hooks hook preloop-opencode-<event>`
//! per hook and speaks [`preloop_shared::plugin`]'s protocol: our payload
//! as one line on stdin, our answer as one line on stdout, and `applied`
//! back on stdin once the answer was handed to OpenCode, which is when the
//! notes in it are acked `delivered`.
//!
//! | hook or event | carrier (what the plugin does with the answer) | answer |
//! |---|---|---|
//! | event `session.created` | none: registers the session (not awaited by OpenCode); a sub-agent's (`parentID`) as a child of its parent | nothing |
//! | `chat.message` | a synthetic text part pushed into the prompt's user message | context |
//! | `tool.execute.before` | `throw new Error(reason)`: the tool does not run, its result is the reason; Preloop's `send_note` (an MCP tool, `<server>_send_note`): `output.args` replaced in place, before OpenCode's own permission check | deny, args |
//! | `tool.execute.after` | appended to `output.output`, the tool result the model gets | context |
//! | `experimental.text.complete` | `client.session.prompt({noReply: true})`: a user message the loop answers | continue |
//! | `dispose` | none (awaited), once per session the plugin saw: pending notes become `undeliverable` | nothing |
//! | `idle` (ours: the [`watch`]er, started on the event `session.idle` where OpenCode stays alive: `serve`, TUI) | `client.session.promptAsync`: a new turn | continue |

// Shipped code never panics on a value it did not check: an `unwrap` or
// `expect` outside tests is refused, and each true invariant is allowed by
// name where it is (docs/adding-a-harness.md, "Code rules").
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use preloop_shared::adapter::{deny_reason, prompt_input, tool_input};
use preloop_shared::flow::{Carry, Input, InputKind, McpTool, Outcome};
use preloop_shared::registry::def_of;
use preloop_shared::runner::Parsed;
use preloop_shared::wire::Decision;
use serde_json::Value;

pub mod watch;
pub mod wire;

pub use preloop_shared::registry::event::OpenCode as Event;
pub use wire::{Answer, Payload};

/// What the hooks print: one [`Answer`] line.
pub type Output = Answer;

preloop_shared::plugin_adapter! {
    /// The OpenCode adapter.
    OpenCode, "plugin"
}

/// The plugin's payload → input. Our own format, so it is read strictly
/// ([`Payload`]: unknown fields refused); a payload of another event is
/// refused.
pub fn parse(event: Event, v: &Value) -> Result<Parsed, String> {
    let def = def_of(event);
    let p: Payload = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    let session_id = preloop_shared::plugin::payload_header(p.v, wire::PROTOCOL, &p.event, def.on, &p.session_id)?;
    let kind = match event {
        // Not awaited by OpenCode, so an answer could only wait in the
        // plugin's memory: it registers and claims nothing.
        Event::SessionCreated => InputKind::SessionStart { pull: false },
        Event::ChatMessage => prompt_input(p.prompt.as_deref().unwrap_or_default()),
        Event::ToolExecuteBefore => {
            let tool_name = p.tool_name.filter(|t| !t.trim().is_empty()).ok_or("no tool_name")?;
            // An MCP tool only by the servers OpenCode's config names: a
            // built-in or a plugin's tool is never one (docs/event-matrix.md,
            // "send_note caller session").
            let mcp_tool = Some(mcp_tool(&tool_name, p.mcp_servers.as_deref().unwrap_or_default()));
            InputKind::Tool {
                tool_name,
                tool_input: tool_input(p.tool_input.as_ref()),
                model: None,
                mcp_tool,
                carry: Carry::of(def.carrier),
            }
        }
        Event::ToolExecuteAfter => InputKind::AfterTool { carry: true },
        // `session.prompt` with `noReply` continues a finished turn in
        // every mode (docs/contracts/opencode.md §6); once per stop, and
        // our per-session cap is the only brake.
        Event::TextComplete => InputKind::Stop { may_continue: !p.stop_hook_active },
        Event::Dispose => InputKind::SessionEnd { reason: p.reason.unwrap_or_else(|| "dispose".into()) },
        // Never reached: [`main`] runs the watcher's own loop.
        Event::Watch => return Err("the watcher is not a hook".into()),
    };
    let non_blank = |s: Option<String>| s.filter(|s| !s.trim().is_empty());
    let parent_session_id = non_blank(p.parent_session_id).map(|s| s.trim().to_string());
    Ok(Parsed::Run(Input { session_id, cwd: non_blank(p.cwd), transcript_path: None, parent_session_id, kind }))
}

/// Outcome → the answer (`None`: print nothing).
pub fn render(event: Event, o: &Outcome) -> Option<Answer> {
    let ctx = o.context.clone().filter(|c| !c.is_empty());
    match event {
        Event::ChatMessage | Event::ToolExecuteAfter => ctx.map(|text| Answer::Context { text }),
        Event::ToolExecuteBefore => {
            if o.decision == Some(Decision::Deny) {
                return Some(Answer::Deny { reason: deny_reason(o) });
            }
            // Preloop's `send_note` with the caller's session id; no
            // decision: OpenCode's own permission check runs after the
            // plugin, on the tool's name, whatever the arguments.
            match &o.tool_input {
                Some(Value::Object(args)) => Some(Answer::Args { args: args.clone() }),
                _ => None,
            }
        }
        Event::TextComplete => match (o.continue_turn, ctx) {
            (true, Some(text)) => Some(Answer::Continue { text }),
            _ => None,
        },
        Event::SessionCreated | Event::Dispose | Event::Watch => None,
    }
}

/// Which MCP tool `tool_name` is, given the MCP servers OpenCode's config
/// names (`mcp` in opencode.json, as the plugin's `config` hook reads it):
/// OpenCode 1.18.33 names an MCP tool `<server>_<tool>`, each part with
/// every character but `[A-Za-z0-9_-]` made `_` (one per UTF-16 unit, as
/// its JavaScript does). A server name may hold `_`, so a tool is Preloop's
/// `send_note` when some configured server's prefix leaves exactly
/// `send_note`; any other name is [`McpTool::Other`] (a built-in or a
/// plugin's tool called `x_send_note` is not one).
pub fn mcp_tool(tool_name: &str, servers: &[String]) -> McpTool {
    let hit = servers.iter().any(|server| {
        let prefix = format!("{}_", sanitize(server));
        !server.is_empty() && tool_name.strip_prefix(&prefix) == Some("send_note")
    });
    if hit { McpTool::SendNote } else { McpTool::Other }
}

/// OpenCode's `name.replace(/[^a-zA-Z0-9_-]/g, "_")`.
fn sanitize(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            let keep = c.is_ascii_alphanumeric() || c == '_' || c == '-';
            let n = if keep { 1 } else { c.len_utf16() };
            std::iter::repeat_n(if keep { c } else { '_' }, n)
        })
        .collect()
}

/// The plugin OpenCode loads: one static template in this crate
/// (`shim/source.js` with the core all shims share), stamped with this build's version and written byte for
/// byte by `preloop-hooks install --harness opencode`.
pub const SHIM: preloop_shared::plugin::Shim = preloop_shared::plugin::Shim {
    source: include_str!("../shim/source.js"),
    header: "// preloop-hooks OpenCode plugin ",
};
