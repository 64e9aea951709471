//! Pi: no hook config. Our extension, `preloop.js` (the shim, written from
//! `preloop_pi::SHIM`, byte for byte this build's), and its manifest
//! `preloop.json` beside it, both ours alone, in
//! `$PI_CODING_AGENT_DIR/extensions/` (default `~/.pi/agent/extensions/`)
//! or `./.pi/extensions/`. Pi loads every `*.js` there (not `*.json`), with
//! no trust prompt; it loads a global and a project copy both, so we
//! install in one scope only (docs/contracts/pi.md §2).
//!
//! The manifest and the shim are written, checked and refused as every
//! plugin harness's are ([`super::plugin`]).

use super::api::{Concern, Dialect, FilesDoc, Layout};
use super::plugin::{MANIFEST, Plugin};
use crate::context::{Ctx, FileEdit, Scope};
use crate::edit::{Desired, Owner};
use crate::hook_rows::HookDef;
use preloop_shared::config::Settings;
use preloop_shared::{Harness, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub struct Pi;

/// What tells Pi's extension apart.
const PLUGIN: Plugin =
    Plugin { name: "Pi", kind: "extension", shim: &preloop_pi::SHIM, gate_event: "tool_call", log: "pi-extension.log" };

/// `$PI_CODING_AGENT_DIR` (default `~/.pi/agent`).
pub fn agent_dir(ctx: &Ctx) -> PathBuf {
    ctx.env
        .get("PI_CODING_AGENT_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| ctx.home.join(".pi/agent"))
}

impl Dialect for Pi {
    fn harness(&self) -> Harness {
        Harness::Pi
    }
    fn hooks_file(&self, ctx: &Ctx, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => agent_dir(ctx).join("extensions").join(MANIFEST),
            Scope::Project => ctx.cwd.join(".pi/extensions").join(MANIFEST),
        }
    }

    fn layout(&self) -> Layout {
        Layout::OwnFile
    }

    fn entry(&self, d: &HookDef, command: String, timeout: u64) -> Value {
        PLUGIN.entry(d, command, timeout)
    }

    fn own_file(&self, ctx: &Ctx, desired: &Desired) -> String {
        PLUGIN.own_file(ctx, desired, &[])
    }

    fn companion_edits(
        &self,
        ctx: &Ctx,
        path: &Path,
        _before: &Value,
        after: &Value,
        owner: &Owner,
    ) -> Result<Vec<FileEdit>> {
        Ok(vec![PLUGIN.shim_edit(self, ctx, path, after, owner)?.0])
    }

    fn install_note(&self) -> Option<&'static str> {
        Some("Pi loads the extension at its next start (a running Pi: /reload)")
    }

    fn entry_problem(&self, d: &HookDef, entry: &Value, label: &str) -> Option<String> {
        PLUGIN.entry_problem(d, entry, label)
    }

    fn companion_problems(&self, ctx: &Ctx, path: &Path) -> Vec<Concern> {
        PLUGIN.shim_problems(self, ctx, path)
    }

    fn limits(&self, _s: &Settings) -> Vec<String> {
        vec!["pi: a late note continues the turn only in RPC and interactive mode (in -p and json mode Pi disposes of the session first, so agent_end claims nothing); two notes for tool calls of one batch reach the model one boundary apart (Pi's default steeringMode)".into()]
    }

    fn files_doc(&self) -> FilesDoc {
        FilesDoc(["`$PI_CODING_AGENT_DIR` (default `~/.pi/agent`) `extensions/preloop.js` (our extension, this build's byte for byte) and `extensions/preloop.json` (its manifest), both ours alone", "`./.pi/extensions/` the same two files; one scope only (Pi loads both copies)"])
    }
}
