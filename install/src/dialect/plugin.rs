//! What every plugin-carried harness's dialect does alike (Pi, OpenCode:
//! a JS module of ours the harness loads, and a manifest of ours beside
//! it). A plugin dialect describes itself in a [`Plugin`] and answers the
//! [`Dialect`] methods below through these functions; only what differs
//! (where the harness looks, what more its loader needs) stays in its file.
//!
//! The manifest is a flat hooks file (`{"version": 1, "hooks": {event:
//! [entry]}}`, what install, uninstall and doctor read for every harness)
//! plus what the shim needs: each entry's `argv` (`preloop-hooks hook
//! <command>`) and `timeout` (ms), the gate's fail policy (`on_error`),
//! the dialect's own fields, and the shim's log.

use super::api::{Concern, Dialect};
use crate::context::{Ctx, FileEdit, read_opt, refuse};
use crate::edit::{self, Desired, Owner};
use crate::hook_rows::HookDef;
use preloop_shared::Result;
use preloop_shared::config::FailPolicy;
use preloop_shared::plugin::Shim;
use preloop_shared::registry::FailKey;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

/// The manifest's file name (the hooks file), for every plugin harness.
pub const MANIFEST: &str = "preloop.json";
/// The shim's file name, beside the manifest.
pub const SHIM: &str = "preloop.js";

/// What tells one plugin harness's shim apart from another's.
pub struct Plugin {
    /// The harness's name as a user reads it ("Pi", "OpenCode").
    pub name: &'static str,
    /// What the harness calls the module ("extension", "plugin").
    pub kind: &'static str,
    /// The shim as the adapter crate ships it.
    pub shim: &'static Shim,
    /// The event the gate's fail policy is keyed by in `on_error`.
    pub gate_event: &'static str,
    /// The shim's log, under `~/.preloop/log/`.
    pub log: &'static str,
}

impl Plugin {
    /// The entry for one hook: the link as every harness has it, and the
    /// `argv` the shim spawns (`preloop-hooks hook <command>`: no shell, no
    /// link needed).
    pub fn entry(&self, d: &HookDef, command: String, timeout: u64) -> Value {
        let exe = edit::words(&command)
            .and_then(|w| w.into_iter().next())
            .map(|link| Path::new(&link).with_file_name(crate::names::CLI_NAME).to_string_lossy().into_owned())
            .unwrap_or_else(|| crate::names::CLI_NAME.to_string());
        json!({"command": command, "argv": [exe, crate::names::HOOK_ARG, d.binary], "timeout": timeout})
    }

    /// The manifest: nothing when no hook is left, else the flat hooks file
    /// with the fields the shim reads (`extra` after the fail policy).
    pub fn own_file(&self, ctx: &Ctx, desired: &Desired, extra: &[(&str, Value)]) -> String {
        if desired.is_empty() {
            return String::new();
        }
        let mut hooks = Map::new();
        for (e, w) in desired {
            hooks.insert(e.clone(), json!([w]));
        }
        let on_error = match ctx.settings.fail_policy(FailKey::PreToolUse) {
            FailPolicy::Deny => "deny",
            FailPolicy::Open => "allow",
        };
        let mut doc = Map::new();
        doc.insert("version".into(), json!(1));
        doc.insert("preloop_hooks".into(), json!(env!("CARGO_PKG_VERSION")));
        doc.insert("on_error".into(), json!({ self.gate_event: on_error }));
        for (k, v) in extra {
            doc.insert((*k).into(), v.clone());
        }
        doc.insert("log".into(), json!(ctx.preloop_home.join("log").join(self.log)));
        doc.insert("hooks".into(), Value::Object(hooks));
        serde_json::to_string_pretty(&Value::Object(doc)).unwrap_or_default() + "\n"
    }

    /// The shim beside the manifest `path`: written with the manifest while
    /// any hook of ours is in it, removed with its last. Refuses a shim that
    /// is not ours, and a second scope while the other has our hooks (the
    /// harness would load both copies: every hook twice). Returns the edit
    /// and whether this is an install.
    pub fn shim_edit(
        &self,
        dialect: &dyn Dialect,
        ctx: &Ctx,
        path: &Path,
        after: &Value,
        owner: &Owner,
    ) -> Result<(FileEdit, bool)> {
        let shim = path.with_file_name(SHIM);
        let before = read_opt(ctx, &shim)?;
        if let Some(b) = &before
            && !self.shim.is_ours(b)
        {
            return Err(refuse(ctx, &shim, format!("it is not our {} {}", self.name, self.kind)));
        }
        let installing = !edit::our_entries(after, owner).is_empty();
        if installing {
            let other = other_scope(dialect, ctx, path);
            let other_doc = read_opt(ctx, &other)?.and_then(|t| edit::parse_config(&t, dialect.syntax()).ok());
            if other_doc.is_some_and(|d| !edit::our_entries(&d, owner).is_empty()) {
                return Err(refuse(
                    ctx,
                    path,
                    format!(
                        "our {} {} is already installed in {}, and {} would load both (every hook twice); uninstall that scope first",
                        self.name,
                        self.kind,
                        crate::util::tilde(&ctx.env, &other),
                        self.name
                    ),
                ));
            }
        }
        let mut e = FileEdit::new(shim, before.clone(), if installing { self.shim.text() } else { String::new() });
        e.backup = false;
        e.delete = !installing && before.is_some();
        Ok((e, installing))
    }

    /// doctor: an entry whose `argv` is not `preloop-hooks hook <binary>`.
    pub fn entry_problem(&self, d: &HookDef, entry: &Value, label: &str) -> Option<String> {
        let argv: Vec<&str> =
            entry.get("argv").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let ok = matches!(argv.as_slice(), [exe, arg, bin]
            if exe.ends_with(crate::names::CLI_NAME) && *arg == crate::names::HOOK_ARG && *bin == d.binary);
        (!ok).then(|| format!("{label}: the {} entry's argv is not `preloop-hooks hook {}`", d.on, d.binary))
    }

    /// doctor: the shim beside the manifest `path` missing or not this build's.
    pub fn shim_problems(&self, dialect: &dyn Dialect, ctx: &Ctx, path: &Path) -> Vec<Concern> {
        let shim = path.with_file_name(SHIM);
        let shown = crate::util::tilde(&ctx.env, &shim);
        let slug = dialect.slug();
        match std::fs::read_to_string(&shim) {
            Err(_) => vec![Concern::problem(
                format!("{slug}: {shown} is missing, so {} runs none of our hooks", self.name),
                format!("run `preloop-hooks install --harness {slug}`"),
            )],
            Ok(t) if t != self.shim.text() => vec![Concern::problem(
                format!("{slug}: {shown} is not this build's {} ({})", self.kind, self.shim.version_of(&t)),
                format!("run `preloop-hooks install --harness {slug}` to write this build's"),
            )],
            Ok(_) => Vec::new(),
        }
    }
}

/// The manifest of the other scope than `manifest`'s.
fn other_scope(dialect: &dyn Dialect, ctx: &Ctx, manifest: &Path) -> PathBuf {
    use crate::context::Scope;
    let user = dialect.hooks_file(ctx, Scope::User);
    if manifest == user { dialect.hooks_file(ctx, Scope::Project) } else { user }
}
