//! Claude Code: `settings.json` in `$CLAUDE_CONFIG_DIR` (or `~/.claude`)
//! and `./.claude/settings.json`, grouped entries with a `timeout` in
//! seconds; the idle-wake watcher is an `async` entry; `disableAllHooks`
//! switches every hook off.

use super::api::{Concern, Dialect, FilesDoc};
use crate::context::{Ctx, Scope};
use crate::edit::Entry;
use crate::hook_rows::{HookDef, Role};
use preloop_shared::Harness;
use preloop_shared::config::Settings;
use serde_json::{Value, json};
use std::path::PathBuf;

pub struct ClaudeCode;

impl Dialect for ClaudeCode {
    fn harness(&self) -> Harness {
        Harness::ClaudeCode
    }
    fn hooks_file(&self, ctx: &Ctx, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => ctx
                .env
                .get("CLAUDE_CONFIG_DIR")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| ctx.home.join(".claude"))
                .join("settings.json"),
            Scope::Project => ctx.cwd.join(".claude/settings.json"),
        }
    }

    fn entry(&self, d: &HookDef, command: String, timeout: u64) -> Value {
        if d.role == Role::Watch {
            // The idle-wake watcher (Claude Code 2.1.328 honours both labels, see hooks/claude-code/README.md).
            json!({
                "type": "command", "command": command, "async": true, "asyncRewake": true, "timeout": timeout,
                "rewakeMessage": "Preloop operator notes arrived while the session was idle:",
                "rewakeSummary": "Preloop operator note"
            })
        } else {
            json!({"type": "command", "command": command, "timeout": timeout})
        }
    }

    fn switched_off(&self, file: &str, doc: &Value, _found: &[Entry], _others: &[(String, Value)]) -> Vec<Concern> {
        if doc.get("disableAllHooks") == Some(&Value::Bool(true)) {
            return vec![Concern::problem(
                format!("claude-code: {file} sets \"disableAllHooks\": true, so Claude Code runs no hooks"),
                format!("remove disableAllHooks from {file}"),
            )];
        }
        Vec::new()
    }

    fn limits(&self, s: &Settings) -> Vec<String> {
        vec![
            format!(
                "claude-code: a late note continues a finished turn through Stop at most {} times per session; a note sent after the last Stop is reported undeliverable at SessionEnd",
                s.stop_rescue_cap
            ),
            "claude-code: Cursor (with third-party configs on) also runs ~/.claude/settings.json hooks; ours stand down on Cursor payloads".into(),
        ]
    }

    fn files_doc(&self) -> FilesDoc {
        FilesDoc(["`$CLAUDE_CONFIG_DIR` or `~/.claude`, `settings.json`", "`./.claude/settings.json`"])
    }
}
