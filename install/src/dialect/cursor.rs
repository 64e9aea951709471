//! Cursor: `~/.cursor/hooks.json` and `./.cursor/hooks.json`, a flat list
//! per event (`{"version": 1, "hooks": {"stop": [entry]}}`), `timeout` in
//! seconds, and on `stop` the `loop_limit` the adapter checks `loop_count`
//! against (the registry's stop brake).

use super::api::{Dialect, FilesDoc, Layout};
use crate::context::{Ctx, Scope};
use crate::hook_rows::HookDef;
use preloop_shared::Harness;
use preloop_shared::registry::StopBrake;
use serde_json::{Value, json};
use std::path::PathBuf;

pub struct Cursor;

/// Every event name Cursor documents for `hooks.json` (docs/contracts/cursor.md §1.2,
/// "Event names"). One unknown key voids the whole file in some CLI builds,
/// so we never write a name outside this list.
pub const KNOWN_EVENTS: &[&str] = &[
    "sessionStart",
    "sessionEnd",
    "beforeSubmitPrompt",
    "beforeShellExecution",
    "afterShellExecution",
    "beforeMCPExecution",
    "afterMCPExecution",
    "beforeReadFile",
    "afterFileEdit",
    "beforeTabFileRead",
    "afterTabFileEdit",
    "preToolUse",
    "postToolUse",
    "postToolUseFailure",
    "subagentStart",
    "subagentStop",
    "preCompact",
    "stop",
    "afterAgentResponse",
    "afterAgentThought",
];

/// The `loop_limit` of our stop entry.
fn loop_limit() -> Option<u32> {
    match Harness::Cursor.def().stop_brake {
        StopBrake::LoopLimit(n) => Some(n),
        StopBrake::StopHookActive | StopBrake::Consecutive(_) | StopBrake::OursOnly => None,
    }
}

impl Dialect for Cursor {
    fn harness(&self) -> Harness {
        Harness::Cursor
    }
    fn hooks_file(&self, ctx: &Ctx, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => ctx.home.join(".cursor/hooks.json"),
            Scope::Project => ctx.cwd.join(".cursor/hooks.json"),
        }
    }

    fn layout(&self) -> Layout {
        Layout::Flat
    }

    fn known_events(&self) -> Option<&'static [&'static str]> {
        Some(KNOWN_EVENTS)
    }

    fn entry(&self, d: &HookDef, command: String, timeout: u64) -> Value {
        match loop_limit() {
            // The one loop_limit the adapter checks `loop_count` against.
            Some(n) if d.is_stop() => json!({"command": command, "timeout": timeout, "loop_limit": n}),
            _ => json!({"command": command, "timeout": timeout}),
        }
    }

    fn install_note(&self) -> Option<&'static str> {
        Some(
            "headless `cursor-agent -p` fires no stop and no beforeSubmitPrompt: a session note that arrives after the run's last tool call ends undeliverable (session_ended) at sessionEnd",
        )
    }

    fn entry_problem(&self, d: &HookDef, entry: &Value, label: &str) -> Option<String> {
        let want = loop_limit().filter(|_| d.is_stop())?;
        let ll = entry.get("loop_limit").and_then(Value::as_u64);
        (ll != Some(u64::from(want))).then(|| {
            format!(
                "{label}: loop_limit {}, expected {want} (the adapter checks loop_count against it)",
                ll.map(|l| l.to_string()).unwrap_or_else(|| "unset".into()),
            )
        })
    }

    fn limits(&self, _s: &preloop_shared::config::Settings) -> Vec<String> {
        vec!["cursor: headless `cursor-agent -p` fires no stop and no beforeSubmitPrompt, so a session note that arrives after the run's last tool call ends undeliverable (session_ended) at sessionEnd, and a note to the agent waits for its next run; sessionEnd is unreliable in the IDE; sessionStart context can be dropped by some IDE builds".into()]
    }

    fn files_doc(&self) -> FilesDoc {
        FilesDoc(["`~/.cursor/hooks.json`", "`./.cursor/hooks.json`"])
    }
}
