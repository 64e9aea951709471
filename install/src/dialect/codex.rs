//! Codex: `hooks.json` in `$CODEX_HOME` (or `~/.codex`) and
//! `./.codex/hooks.json`, grouped entries with a `timeout` in seconds (and
//! the context limit on carrying hooks). Codex runs a hook only once it is
//! trusted: the hash of each entry of ours is kept in `config.toml`, which
//! changes with the hook file. A project's file loads only in a trusted
//! project; a top-level key other than `hooks` and `description` voids the
//! whole file.

use super::api::{Concern, Dialect, FilesDoc, FolderTrust, Trust, TrustState};
use crate::codex_trust;
use crate::context::{Ctx, FileEdit, Scope, read_opt, refuse};
use crate::edit::Owner;
use crate::hook_rows::HookDef;
use preloop_shared::config::Settings;
use preloop_shared::registry::{self, Carrier};
use preloop_shared::{Harness, Result};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct Codex;

/// `$CODEX_HOME` (default `~/.codex`).
pub fn codex_home(ctx: &Ctx) -> PathBuf {
    ctx.env.get("CODEX_HOME").filter(|d| !d.is_empty()).map(PathBuf::from).unwrap_or_else(|| ctx.home.join(".codex"))
}

/// Codex's `config.toml` (hook trust, trusted projects).
pub fn codex_config(ctx: &Ctx) -> PathBuf {
    codex_home(ctx).join("config.toml")
}

/// Whether config.toml marks `dir` as a trusted project.
pub fn project_trusted(cfg_text: &str, dir: &Path) -> bool {
    let Ok(doc) = cfg_text.parse::<toml_edit::DocumentMut>() else { return false };
    let canon = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    [dir.to_path_buf(), canon].iter().any(|d| {
        doc.get("projects")
            .and_then(|p| p.get(d.to_string_lossy().as_ref()))
            .and_then(|p| p.get("trust_level"))
            .and_then(|t| t.as_str())
            == Some("trusted")
    })
}

/// Where Codex keys the trust of the entries in `hooks_json`.
fn key_path(hooks_json: &Path) -> PathBuf {
    codex_trust::canonical_dir(hooks_json.parent().unwrap_or(Path::new("/"))).join("hooks.json")
}

impl Dialect for Codex {
    fn harness(&self) -> Harness {
        Harness::Codex
    }

    fn short_name(&self) -> &'static str {
        "Codex"
    }
    fn hooks_file(&self, ctx: &Ctx, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => codex_home(ctx).join("hooks.json"),
            Scope::Project => ctx.cwd.join(".codex/hooks.json"),
        }
    }

    fn companion_files(&self, ctx: &Ctx) -> Vec<PathBuf> {
        vec![codex_config(ctx)]
    }

    fn entry(&self, d: &HookDef, command: String, timeout: u64) -> Value {
        if matches!(d.carrier, Carrier::Context(_)) {
            // Codex keeps 4 bytes per token of a context handler's output intact:
            // at 5,000 tokens every whole note fits (the registry's Codex limit).
            json!({
                "type": "command", "command": command, "timeout": timeout,
                "additionalContextLimit": registry::CODEX_CONTEXT_LIMIT_TOKENS
            })
        } else {
            json!({"type": "command", "command": command, "timeout": timeout})
        }
    }

    fn top_level_keys(&self) -> Option<&'static [&'static str]> {
        Some(&["hooks", "description"])
    }

    /// The trust of our entries in `config.toml`: hashes set for the
    /// entries the change writes, removed for those it takes out.
    fn companion_edits(
        &self,
        ctx: &Ctx,
        path: &Path,
        before: &Value,
        after: &Value,
        owner: &Owner,
    ) -> Result<Vec<FileEdit>> {
        let cfg_path = codex_config(ctx);
        let cfg_before = read_opt(ctx, &cfg_path)?;
        let cfg_text = cfg_before.as_deref().unwrap_or("");
        cfg_text
            .parse::<toml_edit::DocumentMut>()
            .map_err(|e| refuse(ctx, &cfg_path, e.to_string().trim().replace('\n', " ")))?;
        let key_path = key_path(path);
        let kb = codex_trust::hook_keys(&key_path, before, owner);
        let ka = codex_trust::hook_keys(&key_path, after, owner);
        let current = codex_trust::trusted_hashes(cfg_text);
        let (set, remove) = codex_trust::plan_trust(&kb, &ka, &current);
        let cfg_after =
            codex_trust::edit_config_toml(cfg_text, &set, &remove).map_err(|e| refuse(ctx, &cfg_path, e))?;
        Ok(vec![FileEdit::new(cfg_path, cfg_before, cfg_after).delete_if_emptied(ctx)])
    }

    fn folder_trust(&self, ctx: &Ctx) -> FolderTrust {
        let text = std::fs::read_to_string(codex_config(ctx)).unwrap_or_default();
        if project_trusted(&text, &ctx.cwd) { FolderTrust::Trusted } else { FolderTrust::Untrusted }
    }

    fn untrusted_folder(&self, ctx: &Ctx, config: &Path, trust: FolderTrust) -> Option<(String, Concern)> {
        (trust == FolderTrust::Untrusted).then(|| {
            let cfg = crate::util::tilde(&ctx.env, config);
            let toml = crate::util::tilde(&ctx.env, &codex_config(ctx));
            let cwd = ctx.cwd.display();
            (
                format!(
                    "Codex loads {cfg} only in a trusted project: trust {cwd} in Codex (accept its prompt there, or add [projects.\"{cwd}\"] trust_level = \"trusted\" to {toml})"
                ),
                Concern::problem(
                    format!("codex: {cwd} is not a trusted project, so Codex does not load {cfg}"),
                    format!(
                        "trust it in Codex (accept its prompt in {cwd}), or add [projects.\"{cwd}\"] trust_level = \"trusted\" to {toml}"
                    ),
                ),
            )
        })
    }

    /// From the real `codex app-server` when asked and available (it
    /// writes Codex's own state into `CODEX_HOME`), else derived from the
    /// hashes in `config.toml`.
    fn entry_trust(
        &self,
        ctx: &Ctx,
        path: &Path,
        doc: &Value,
        owner: &Owner,
        program: Option<&Path>,
        ask: bool,
    ) -> Option<Trust> {
        let program = program.filter(|_| ask);
        let started = std::time::Instant::now();
        let listed = program.and_then(|p| {
            codex_trust::list_hooks_via_app_server(
                p,
                &codex_trust::canonical_dir(&codex_home(ctx)),
                &ctx.cwd,
                &[],
                Duration::from_secs(20),
            )
            .ok()
        });
        let asked = program.map(|_| {
            format!(
                "codex trust was {} `codex app-server` ({:.1} s), which writes Codex's own state (a database, skills) into CODEX_HOME; `preloop-hooks doctor --no-codex-query` derives it from config.toml without starting Codex",
                if listed.is_some() { "read from" } else { "asked of (it did not answer, so it was derived from config.toml)" },
                started.elapsed().as_secs_f64()
            )
        });
        Some(match listed {
            Some((hooks, problems)) => Trust {
                source: "codex app-server hooks/list".into(),
                asked,
                states: hooks
                    .iter()
                    .filter(|k| owner.binary_of(&k.command).is_some())
                    .map(|k| {
                        let ev = k.key.split(':').rev().nth(2).unwrap_or("").to_string();
                        (k.command.clone(), ev, TrustState::parse(&k.trust_status))
                    })
                    .collect(),
                reported: problems,
            },
            None => {
                let cfg = std::fs::read_to_string(codex_config(ctx)).unwrap_or_default();
                let current = codex_trust::trusted_hashes(&cfg);
                let states = codex_trust::hook_keys(&key_path(path), doc, owner)
                    .into_iter()
                    .filter(|k| k.ours)
                    .map(|k| {
                        let state = match current.get(&k.key) {
                            Some(v) if *v == k.hash => TrustState::Trusted,
                            Some(_) => TrustState::Modified,
                            None => TrustState::Untrusted,
                        };
                        (k.command.clone(), codex_trust::snake(&k.event), state)
                    })
                    .collect();
                Trust { source: "derived from config.toml".into(), asked, states, reported: Vec::new() }
            }
        })
    }

    fn limits(&self, _s: &Settings) -> Vec<String> {
        vec![
            "codex: untrusted hooks are skipped silently; editing an entry or moving CODEX_HOME untrusts it (re-run install)".into(),
            "codex: PermissionRequest fires only when Codex asks for approval (never in plain `codex exec`); Codex kills a SessionEnd hook about 1 s in whatever its timeout (in server mode ours hands its calls to a detached worker at once)".into(),
        ]
    }

    fn files_doc(&self) -> FilesDoc {
        FilesDoc(["`$CODEX_HOME` (default `~/.codex`) `hooks.json`, trust in `config.toml`", "`./.codex/hooks.json`, trust in `$CODEX_HOME/config.toml`; a trusted project"])
    }
}
