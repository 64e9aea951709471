//! Copilot CLI: a file of ours alone, `hooks/preloop.json` under
//! `$COPILOT_HOME` (or `~/.copilot`) and `./.github/hooks/preloop.json`,
//! in its camelCase dialect (`bash`, `timeoutSec`). A project's hooks load
//! only in a folder trusted for the session; `disableAllHooks` in its
//! `settings.json` or `config.json` switches every hook off.

use super::api::{Concern, Dialect, FilesDoc, FolderTrust, Layout};
use crate::context::{Ctx, Scope};
use crate::edit::{Desired, Entry};
use crate::hook_rows::HookDef;
use preloop_shared::Harness;
use preloop_shared::config::Settings;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub struct Copilot;

/// Every event name Copilot CLI 1.0.102 knows in a camelCase hooks file
/// (docs/contracts/copilot-cli.md §2).
pub const KNOWN_EVENTS: &[&str] = &[
    "sessionStart",
    "sessionEnd",
    "userPromptSubmitted",
    "userPromptTransformed",
    "preToolUse",
    "postToolUse",
    "postToolUseFailure",
    "errorOccurred",
    "agentStop",
    "subagentStart",
    "subagentStop",
    "preCompact",
    "permissionRequest",
    "notification",
    "preMcpToolCall",
];

/// `$COPILOT_HOME` (default `~/.copilot`).
pub fn copilot_home(ctx: &Ctx) -> PathBuf {
    ctx.env
        .get("COPILOT_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| ctx.home.join(".copilot"))
}

/// Copilot's `preloop.json`, a file that is entirely ours:
/// `{"version": 1, "hooks": {"<event>": [<entry>, ..]}}`, or nothing.
fn copilot_file(desired: &Desired) -> String {
    if desired.is_empty() {
        return String::new();
    }
    let mut events = serde_json::Map::new();
    for (e, w) in desired {
        if let Value::Array(a) = events.entry(e.clone()).or_insert_with(|| Value::Array(Vec::new())) {
            a.push(w.clone());
        }
    }
    let doc = serde_json::json!({"version": 1, "hooks": Value::Object(events)});
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

impl Dialect for Copilot {
    fn harness(&self) -> Harness {
        Harness::Copilot
    }
    fn hooks_file(&self, ctx: &Ctx, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => copilot_home(ctx).join("hooks/preloop.json"),
            Scope::Project => ctx.cwd.join(".github/hooks/preloop.json"),
        }
    }

    fn layout(&self) -> Layout {
        Layout::OwnFile
    }

    fn own_file(&self, _ctx: &Ctx, desired: &Desired) -> String {
        copilot_file(desired)
    }

    fn known_events(&self) -> Option<&'static [&'static str]> {
        Some(KNOWN_EVENTS)
    }

    fn entry(&self, _d: &HookDef, command: String, timeout: u64) -> Value {
        json!({"type": "command", "bash": command, "timeoutSec": timeout})
    }

    fn folder_trust(&self, _ctx: &Ctx) -> FolderTrust {
        FolderTrust::PerSession
    }

    fn untrusted_folder(&self, ctx: &Ctx, config: &Path, _trust: FolderTrust) -> Option<(String, Concern)> {
        let cfg = crate::util::tilde(&ctx.env, config);
        Some((
            format!(
                "Copilot CLI loads {cfg} only in a trusted folder: run `copilot --trust-folder` there, or set COPILOT_ALLOW_ALL=true or GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true for headless runs"
            ),
            Concern::warning(
                format!("copilot: {cfg} is loaded only in a trusted folder (decided per session)"),
                "run `copilot --trust-folder` there, or set COPILOT_ALLOW_ALL=true or GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true for headless runs",
            ),
        ))
    }

    fn switch_files(&self, ctx: &Ctx) -> Vec<PathBuf> {
        ["settings.json", "config.json"].iter().map(|n| copilot_home(ctx).join(n)).collect()
    }

    fn switched_off(&self, _file: &str, _doc: &Value, _found: &[Entry], others: &[(String, Value)]) -> Vec<Concern> {
        others
            .iter()
            .filter(|(_, v)| v.get("disableAllHooks") == Some(&Value::Bool(true)))
            .map(|(f, _)| {
                Concern::problem(
                    format!("copilot: {f} sets \"disableAllHooks\": true, so Copilot CLI runs no hooks"),
                    format!("remove disableAllHooks from {f}"),
                )
            })
            .collect()
    }

    fn limits(&self, _s: &Settings) -> Vec<String> {
        vec!["copilot: a sub-agent's hooks reach only the sub-agent, so notes wait for the main session; postToolUse context is cut at 10,240 characters; agentStop continues at most 8 times in a row".into()]
    }

    fn files_doc(&self) -> FilesDoc {
        FilesDoc(["`$COPILOT_HOME` (default `~/.copilot`) `hooks/preloop.json`, a file of ours alone", "`./.github/hooks/preloop.json`; a trusted folder"])
    }
}
