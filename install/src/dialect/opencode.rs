//! OpenCode: no hook commands. Our plugin, `preloop.js` (the shim, written
//! from `preloop_opencode::SHIM`, byte for byte this build's), and its
//! manifest `preloop.json` beside it, both ours alone, in
//! `$XDG_CONFIG_HOME/opencode/plugins/` (default
//! `~/.config/opencode/plugins/`) or `./.opencode/plugins/`. OpenCode loads
//! every `{plugin,plugins}/*.{js,ts}` of both with no trust prompt (not
//! `*.json`), and a copy in each twice, so we install in one scope only
//! (docs/contracts/opencode.md §2).
//!
//! With any plugin configured, OpenCode first runs `npm install
//! @opencode-ai/plugin` in each config folder and waits for it (71 s
//! against an unreachable registry), unless the folder has `node_modules/`
//! and a `package-lock.json` whose root lists that package (§1). Our plugin
//! imports nothing, so where either is missing install lays out just that:
//! the lock file and `node_modules/.preloop-hooks` (a marker that makes the
//! folder), and uninstall takes them out again while they are still ours
//! byte for byte. An existing lock file is the user's and stays as it is
//! (doctor says when it would make OpenCode install).
//!
//! The manifest and the shim are written, checked and refused as every
//! plugin harness's are ([`super::plugin`]); OpenCode's manifest adds
//! `stop_rescue_cap` (the shim's own brake on continuations, beside the
//! hook's: OpenCode has none).

use super::api::{Concern, Dialect, FilesDoc, Layout};
use super::plugin::{MANIFEST, Plugin};
use crate::context::{Ctx, FileEdit, Scope, read_opt};
use crate::edit::{Desired, Owner};
use crate::hook_rows::HookDef;
use preloop_shared::config::Settings;
use preloop_shared::{Harness, Result};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub struct OpenCode;

/// What tells OpenCode's plugin apart.
const PLUGIN: Plugin = Plugin {
    name: "OpenCode",
    kind: "plugin",
    shim: &preloop_opencode::SHIM,
    gate_event: "tool.execute.before",
    log: "opencode-plugin.log",
};
/// The package OpenCode installs in each config folder unless its lock
/// file lists it.
pub const PLUGIN_PACKAGE: &str = "@opencode-ai/plugin";
/// What makes `node_modules/` exist, when install made it.
pub const MARKER: &str = ".preloop-hooks";

/// The lock file install writes where there is none: it lists the package
/// OpenCode would install, so it installs nothing at start.
pub fn lock_text() -> String {
    let version = Harness::OpenCode.def().version;
    let doc = json!({
        "name": "opencode-config",
        "lockfileVersion": 3,
        "requires": true,
        "packages": {"": {"dependencies": {PLUGIN_PACKAGE: version}}},
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

const MARKER_TEXT: &str = "Made by `preloop-hooks install --harness opencode` so that OpenCode installs nothing at start;\n`preloop-hooks uninstall --harness opencode` removes it (and this folder, when empty).\n";

/// `$XDG_CONFIG_HOME/opencode` (default `~/.config/opencode`).
pub fn config_dir(ctx: &Ctx) -> PathBuf {
    ctx.env
        .get("XDG_CONFIG_HOME")
        .filter(|d| Path::new(d).is_absolute())
        .map(PathBuf::from)
        .unwrap_or_else(|| ctx.home.join(".config"))
        .join("opencode")
}

/// Whether a lock file lists the package OpenCode would install (its own test).
fn lock_lists_plugin(text: &str) -> bool {
    serde_json::from_str::<Value>(text).ok().and_then(|v| v.pointer("/packages/").cloned()).is_some_and(|root| {
        ["dependencies", "devDependencies", "peerDependencies", "optionalDependencies"]
            .iter()
            .any(|k| root.get(k).and_then(|d| d.get(PLUGIN_PACKAGE)).is_some())
    })
}

impl OpenCode {
    /// The config folder a manifest's plugins folder is in.
    fn config_of(manifest: &Path) -> PathBuf {
        manifest.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_default()
    }

    /// The lock file and the node_modules marker: written where missing on
    /// install, removed on uninstall while still ours byte for byte.
    fn npm_edits(ctx: &Ctx, config: &Path, installing: bool) -> Result<Vec<FileEdit>> {
        let mut out = Vec::new();
        let lock = config.join("package-lock.json");
        let before = read_opt(ctx, &lock)?;
        let ours = lock_text();
        match (&before, installing) {
            (None, true) => out.push(FileEdit::new(lock.clone(), None, ours.clone())),
            (Some(b), false) if *b == ours => {
                let mut e = FileEdit::new(lock.clone(), before.clone(), String::new());
                e.delete = true;
                e.backup = false;
                out.push(e);
            }
            _ => {}
        }
        let modules = config.join("node_modules");
        let marker = modules.join(MARKER);
        let marker_before = read_opt(ctx, &marker)?;
        match (&marker_before, installing) {
            (None, true) if modules.symlink_metadata().is_err() => {
                let mut e = FileEdit::new(marker, None, MARKER_TEXT.to_string());
                e.backup = false;
                out.push(e);
            }
            (Some(_), false) => {
                let mut e = FileEdit::new(marker, marker_before.clone(), String::new());
                e.delete = true;
                e.backup = false;
                out.push(e);
            }
            _ => {}
        }
        for e in out.iter_mut().filter(|e| !e.delete) {
            e.backup = false;
        }
        Ok(out)
    }
}

impl Dialect for OpenCode {
    fn harness(&self) -> Harness {
        Harness::OpenCode
    }
    fn hooks_file(&self, ctx: &Ctx, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => config_dir(ctx).join("plugins").join(MANIFEST),
            Scope::Project => ctx.cwd.join(".opencode/plugins").join(MANIFEST),
        }
    }

    fn layout(&self) -> Layout {
        Layout::OwnFile
    }

    fn entry(&self, d: &HookDef, command: String, timeout: u64) -> Value {
        PLUGIN.entry(d, command, timeout)
    }

    fn own_file(&self, ctx: &Ctx, desired: &Desired) -> String {
        PLUGIN.own_file(ctx, desired, &[("stop_rescue_cap", json!(ctx.settings.stop_rescue_cap))])
    }

    fn companion_edits(
        &self,
        ctx: &Ctx,
        path: &Path,
        _before: &Value,
        after: &Value,
        owner: &Owner,
    ) -> Result<Vec<FileEdit>> {
        let (shim, installing) = PLUGIN.shim_edit(self, ctx, path, after, owner)?;
        let mut out = vec![shim];
        out.extend(OpenCode::npm_edits(ctx, &OpenCode::config_of(path), installing)?);
        Ok(out)
    }

    fn install_note(&self) -> Option<&'static str> {
        Some("OpenCode loads the plugin at its next start")
    }

    fn entry_problem(&self, d: &HookDef, entry: &Value, label: &str) -> Option<String> {
        PLUGIN.entry_problem(d, entry, label)
    }

    fn companion_problems(&self, ctx: &Ctx, path: &Path) -> Vec<Concern> {
        let mut notes = PLUGIN.shim_problems(self, ctx, path);
        let config = OpenCode::config_of(path);
        let lock = config.join("package-lock.json");
        let listed = std::fs::read_to_string(&lock).is_ok_and(|t| lock_lists_plugin(&t));
        if !listed || config.join("node_modules").symlink_metadata().is_err() {
            notes.push(Concern::warning(
                format!(
                    "opencode: {} lacks node_modules/ or a package-lock.json listing {PLUGIN_PACKAGE}, so OpenCode runs `npm install` there at every start (and waits for it: over a minute without a registry)",
                    crate::util::tilde(&ctx.env, &config)
                ),
                "run `preloop-hooks install --harness opencode` (it lays them out where missing), or let OpenCode's install finish once with a registry",
            ));
        }
        notes
    }

    fn limits(&self, _s: &Settings) -> Vec<String> {
        vec!["opencode: a late note continues the turn through `experimental.text.complete` (an experimental hook), at most once per stop and stop_rescue_cap times per session; a note while the session sits idle starts a turn (the idle watcher, `client.session.promptAsync`) in `opencode serve` and the TUI, not in `opencode run`, which ends at the first idle".into()]
    }

    fn files_doc(&self) -> FilesDoc {
        FilesDoc(["`$XDG_CONFIG_HOME/opencode` (default `~/.config/opencode`) `plugins/preloop.js` (our plugin, this build's byte for byte) and `plugins/preloop.json` (its manifest), both ours alone; where the folder lacks them, `package-lock.json` listing `@opencode-ai/plugin` and `node_modules/` (so OpenCode runs no `npm install` at start), removed again by uninstall while still ours", "`./.opencode/` the same; one scope only (OpenCode loads both copies)"])
    }
}
