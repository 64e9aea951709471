//! Pi: no hook config. Our extension, `preloop.js` (the shim, written from
//! `preloop_pi::shim`, byte for byte this build's), and its manifest
//! `preloop.json` beside it, both ours alone, in
//! `$PI_CODING_AGENT_DIR/extensions/` (default `~/.pi/agent/extensions/`)
//! or `./.pi/extensions/`. Pi loads every `*.js` there (not `*.json`), with
//! no trust prompt; it loads a global and a project copy both, so we
//! install in one scope only (docs/contracts/pi.md §2).
//!
//! The manifest is a flat hooks file (`{"version": 1, "hooks": {event:
//! [entry]}}`, what install, uninstall and doctor read for every harness)
//! plus what the shim needs: each entry's `argv` (`preloop-hooks hook
//! <command>`) and `timeout` (ms), the gate's fail policy (`on_error`) and
//! the shim's log.

use super::api::{Dialect, Layout, Note};
use crate::context::{Ctx, FileEdit, Scope, read_opt, refuse};
use crate::edit::{self, Desired, Owner};
use crate::table::HookDef;
use preloop_shared::config::{FailPolicy, Settings};
use preloop_shared::registry::FailKey;
use preloop_shared::{Harness, Result};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub struct Pi;

/// The manifest's file name (the hooks file).
pub const MANIFEST: &str = "preloop.json";
/// The extension's file name, beside the manifest.
pub const SHIM: &str = "preloop.js";

/// `$PI_CODING_AGENT_DIR` (default `~/.pi/agent`).
pub fn agent_dir(ctx: &Ctx) -> PathBuf {
    ctx.env
        .get("PI_CODING_AGENT_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| ctx.home.join(".pi/agent"))
}

/// The extension this build writes (the template with its version).
pub fn shim_text() -> String {
    preloop_pi::shim::text()
}

/// Whether `text` is an extension of ours (any version).
fn is_our_shim(text: &str) -> bool {
    text.starts_with(preloop_pi::shim::HEADER)
}

impl Pi {
    fn other_scope(ctx: &Ctx, manifest: &Path) -> PathBuf {
        let user = Pi.hooks_file(ctx, Scope::User);
        if manifest == user { Pi.hooks_file(ctx, Scope::Project) } else { user }
    }
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
        // The shim runs `preloop-hooks hook <command>` (no shell, no link
        // needed); `command` is the link beside it, as for every harness.
        let exe = edit::words(&command)
            .and_then(|w| w.into_iter().next())
            .map(|link| Path::new(&link).with_file_name(crate::names::CLI_NAME).to_string_lossy().into_owned())
            .unwrap_or_else(|| crate::names::CLI_NAME.to_string());
        json!({"command": command, "argv": [exe, crate::names::HOOK_ARG, d.binary], "timeout": timeout})
    }

    fn own_file(&self, ctx: &Ctx, desired: &Desired) -> String {
        if desired.is_empty() {
            return String::new();
        }
        let mut hooks = serde_json::Map::new();
        for (e, w) in desired {
            hooks.insert(e.clone(), json!([w]));
        }
        let on_error = match ctx.settings.fail_policy(FailKey::PreToolUse) {
            FailPolicy::Deny => "deny",
            FailPolicy::Open => "allow",
        };
        let doc = json!({
            "version": 1,
            "preloop_hooks": env!("CARGO_PKG_VERSION"),
            "on_error": {"tool_call": on_error},
            "log": ctx.preloop_home.join("log").join("pi-extension.log"),
            "hooks": Value::Object(hooks),
        });
        serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
    }

    fn companion_edits(
        &self,
        ctx: &Ctx,
        path: &Path,
        _before: &Value,
        after: &Value,
        owner: &Owner,
    ) -> Result<Vec<FileEdit>> {
        let shim = path.with_file_name(SHIM);
        let before = read_opt(ctx, &shim)?;
        if let Some(b) = &before
            && !is_our_shim(b)
        {
            return Err(refuse(ctx, &shim, "it is not our Pi extension"));
        }
        let installing = !edit::our_entries(after, owner).is_empty();
        if installing {
            let other = Pi::other_scope(ctx, path);
            let other_doc = read_opt(ctx, &other)?.and_then(|t| edit::parse_config(&t, Pi.syntax()).ok());
            if other_doc.is_some_and(|d| !edit::our_entries(&d, owner).is_empty()) {
                return Err(refuse(
                    ctx,
                    path,
                    format!(
                        "our Pi extension is already installed in {}, and Pi would load both (every hook twice); uninstall that scope first",
                        crate::util::tilde(&ctx.env, &other)
                    ),
                ));
            }
        }
        let mut e = FileEdit::new(shim, before.clone(), if installing { shim_text() } else { String::new() });
        e.backup = false;
        e.delete = !installing && before.is_some();
        Ok(vec![e])
    }

    fn install_note(&self) -> Option<&'static str> {
        Some("Pi loads the extension at its next start (a running Pi: /reload)")
    }

    fn entry_problem(&self, d: &HookDef, entry: &Value, label: &str) -> Option<String> {
        let argv: Vec<&str> =
            entry.get("argv").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let ok = matches!(argv.as_slice(), [exe, arg, bin]
            if exe.ends_with(crate::names::CLI_NAME) && *arg == crate::names::HOOK_ARG && *bin == d.binary);
        (!ok).then(|| format!("{label}: the {} entry's argv is not `preloop-hooks hook {}`", d.on, d.binary))
    }

    fn companion_problems(&self, ctx: &Ctx, path: &Path) -> Vec<Note> {
        let shim = path.with_file_name(SHIM);
        let shown = crate::util::tilde(&ctx.env, &shim);
        match std::fs::read_to_string(&shim) {
            Err(_) => vec![Note::problem(
                format!("pi: {shown} is missing, so Pi runs none of our hooks"),
                "run `preloop-hooks install --harness pi`",
            )],
            Ok(t) if t != shim_text() => vec![Note::problem(
                format!("pi: {shown} is not this build's extension ({})", preloop_pi::shim::version_of(&t)),
                "run `preloop-hooks install --harness pi` to write this build's",
            )],
            Ok(_) => Vec::new(),
        }
    }

    fn limits(&self, _s: &Settings) -> Vec<String> {
        vec!["pi: a late note continues the turn only in RPC and interactive mode (in -p and json mode Pi disposes of the session first, so agent_end claims nothing); two notes for tool calls of one batch reach the model one boundary apart (Pi's default steeringMode)".into()]
    }
}
