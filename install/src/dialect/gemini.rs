//! Gemini CLI: `.gemini/settings.json` under `$GEMINI_CLI_HOME` (or `~`)
//! and in the project, grouped entries with a `name` and a `timeout` in
//! milliseconds, comments allowed (Gemini strips them before `JSON.parse`).
//! A project's settings load only in a trusted folder; `hooksConfig`
//! switches hooks off; in CI it strips `PRELOOP_*` from the hooks'
//! environment.

use super::api::{Concern, Dialect, EnvFacts, FilesDoc, FolderTrust};
use crate::context::{Ctx, Scope};
use crate::edit::{self, Entry};
use crate::hook_rows::HookDef;
use preloop_shared::Harness;
use preloop_shared::config::{Config, Origin, Settings};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub struct Gemini;

/// `$GEMINI_CLI_HOME` (it replaces the home directory for `.gemini`) or `~`.
pub fn gemini_home(ctx: &Ctx) -> PathBuf {
    ctx.env.get("GEMINI_CLI_HOME").filter(|d| !d.is_empty()).map(PathBuf::from).unwrap_or_else(|| ctx.home.clone())
}

/// Whether Gemini CLI trusts the current folder: `GEMINI_CLI_TRUST_WORKSPACE=true`,
/// folder trust switched off in the user's settings, or the longest matching
/// rule of `~/.gemini/trustedFolders.json` trusts it (as Gemini 0.61.0 decides).
pub fn folder_trusted(ctx: &Ctx) -> bool {
    if ctx.env.get("GEMINI_CLI_TRUST_WORKSPACE").as_deref() == Some("true") {
        return true;
    }
    let dir = gemini_home(ctx).join(".gemini");
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).ok().and_then(|t| edit::parse_config(&t, Gemini.syntax()).ok())
    };
    if let Some(s) = read("settings.json")
        && s.pointer("/security/folderTrust/enabled") == Some(&Value::Bool(false))
    {
        return true;
    }
    let Some(rules) = read("trustedFolders.json") else { return false };
    let cwd = std::fs::canonicalize(&ctx.cwd).unwrap_or_else(|_| ctx.cwd.clone());
    let mut best: Option<(usize, &str)> = None;
    for (rule, level) in rules.as_object().into_iter().flatten() {
        let Some(level) = level.as_str() else { continue };
        let p = PathBuf::from(rule);
        let effective = if level == "TRUST_PARENT" { p.parent().map(Path::to_path_buf).unwrap_or(p) } else { p };
        let effective = std::fs::canonicalize(&effective).unwrap_or(effective);
        if cwd.starts_with(&effective) && best.is_none_or(|(n, _)| rule.len() > n) {
            best = Some((rule.len(), level));
        }
    }
    matches!(best, Some((_, "TRUST_FOLDER" | "TRUST_PARENT")))
}

impl Dialect for Gemini {
    fn harness(&self) -> Harness {
        Harness::Gemini
    }
    fn hooks_file(&self, ctx: &Ctx, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => gemini_home(ctx).join(".gemini/settings.json"),
            Scope::Project => ctx.cwd.join(".gemini/settings.json"),
        }
    }

    fn comments_allowed(&self) -> bool {
        true
    }

    fn entry(&self, d: &HookDef, command: String, timeout: u64) -> Value {
        // `name` (what `hooksConfig.disabled` and its messages use), timeout in ms.
        json!({"type": "command", "name": d.binary, "command": command, "timeout": timeout})
    }

    fn folder_trust(&self, ctx: &Ctx) -> FolderTrust {
        if folder_trusted(ctx) { FolderTrust::Trusted } else { FolderTrust::Untrusted }
    }

    fn untrusted_folder(&self, ctx: &Ctx, config: &Path, trust: FolderTrust) -> Option<(String, Concern)> {
        (trust == FolderTrust::Untrusted).then(|| {
            let cfg = crate::util::tilde(&ctx.env, config);
            (
                format!(
                    "Gemini CLI loads {cfg} only in a trusted folder: trust {} in Gemini (its trust prompt), or set GEMINI_CLI_TRUST_WORKSPACE=true for headless runs",
                    ctx.cwd.display()
                ),
                Concern::problem(
                    format!("gemini: {} is not a trusted folder, so Gemini CLI does not load {cfg}", ctx.cwd.display()),
                    "trust the folder in Gemini (its trust prompt), or run headless with GEMINI_CLI_TRUST_WORKSPACE=true",
                ),
            )
        })
    }

    fn switched_off(&self, file: &str, doc: &Value, found: &[Entry], _others: &[(String, Value)]) -> Vec<Concern> {
        let mut notes = Vec::new();
        if doc.pointer("/hooksConfig/enabled") == Some(&Value::Bool(false)) {
            notes.push(Concern::problem(
                format!("gemini: {file} sets hooksConfig.enabled to false, so Gemini CLI runs no hooks"),
                format!("set hooksConfig.enabled to true in {file}"),
            ));
        }
        let disabled: Vec<&str> = doc
            .pointer("/hooksConfig/disabled")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|d| {
                found.iter().any(|e| e.command == *d || e.value.get("name").and_then(Value::as_str) == Some(*d))
            })
            .collect();
        if !disabled.is_empty() {
            notes.push(Concern::problem(
                format!("gemini: {file} lists our hooks in hooksConfig.disabled ({})", disabled.join(", ")),
                format!("remove them from hooksConfig.disabled in {file}"),
            ));
        }
        notes
    }

    fn env_facts(&self, ctx: &Ctx, config: &Config) -> Option<EnvFacts> {
        Some(EnvFacts {
            server_only_in_env: config.server.as_ref().is_some_and(|s| s.origin == Origin::Env)
                && Config::load_from(&ctx.env.without(&["PRELOOP_URL", "PRELOOP_TOKEN"]), Some(Harness::Gemini))
                    .server
                    .is_none(),
            // Only a PRELOOP_HOME the configuration took: one it ignored
            // (~/.preloop names the server) moves nothing (newcomer 4, P13).
            home_from_env: ctx.env.get("PRELOOP_HOME").is_some_and(|h| {
                !h.is_empty()
                    && config.home == Path::new(&h)
                    && crate::util::home_dir(&ctx.env).map(|u| u.join(".preloop")) != Some(PathBuf::from(&h))
            }),
        })
    }

    /// Gemini in CI (GITHUB_SHA / SURFACE=Github) strips PRELOOP_* from its
    /// hooks' environment: server settings that exist only there never arrive.
    fn env_warning(&self, env: &EnvFacts) -> Option<Concern> {
        (env.server_only_in_env || env.home_from_env).then(|| Concern::warning(
            format!(
                "gemini: {} only in the environment; Gemini CLI strips PRELOOP_* from its hooks when GITHUB_SHA or SURFACE=Github is set (CI), so there they use ~/.preloop and its files",
                if env.server_only_in_env { "the server (PRELOOP_URL, PRELOOP_TOKEN) is set" } else { "PRELOOP_HOME is set" }
            ),
            "store the server in ~/.preloop with `preloop-hooks login --url URL`, or add the variables to security.environmentVariableRedaction.allowed in ~/.gemini/settings.json",
        ))
    }

    fn limits(&self, _s: &Settings) -> Vec<String> {
        vec!["gemini: BeforeTool has no context carrier (a note rides SessionStart, BeforeAgent, AfterTool or AfterAgent); additionalContext reaches the model with < and > escaped; with GITHUB_SHA or SURFACE=Github set, Gemini strips PRELOOP_* from the hooks' environment".into()]
    }

    fn files_doc(&self) -> FilesDoc {
        FilesDoc(["`$GEMINI_CLI_HOME` or `~`, `.gemini/settings.json` (comments allowed and kept)", "`./.gemini/settings.json`; a trusted folder"])
    }
}
