//! One dialect per harness: everything the installer and `doctor` must know
//! about one harness's own configuration, in one file each.
//!
//! A dialect says where the harness reads hooks from in each scope, how
//! its hook file is laid out and what one entry of ours looks like, whether
//! it takes comments, which other files change with it (Codex's trust in
//! `config.toml`), whether it loads a project's config in this folder, the
//! settings that switch its hooks off, the checks an entry of ours must pass,
//! and the known limits `doctor --verbose` lists. The facts the hooks share
//! with the installer (events, binaries, timeouts, the version we proved)
//! stay in the registry (`preloop_shared::registry`); a dialect reads them
//! from there.
//!
//! `install`, `uninstall` and `doctor` iterate [`all`] or look one up with
//! [`of`]; none of them branches on a harness. Adding a harness is one file
//! here and one line in [`ALL`].

mod claude_code;
mod codex;
mod copilot;
mod cursor;
mod gemini;
mod pi;

use crate::context::{Ctx, FileEdit, Scope};
use crate::edit::{Desired, Entry, Owner, Syntax};
use crate::table::HookDef;
use preloop_shared::config::{Config, Settings};
use preloop_shared::{Harness, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub use codex::codex_config;

/// Every dialect, in registry order.
pub static ALL: [&dyn Dialect; 6] =
    [&claude_code::ClaudeCode, &codex::Codex, &cursor::Cursor, &gemini::Gemini, &copilot::Copilot, &pi::Pi];

/// The dialects, in registry order.
pub fn all() -> impl Iterator<Item = &'static dyn Dialect> {
    ALL.iter().copied()
}

/// The dialect of `h`.
pub fn of(h: Harness) -> &'static dyn Dialect {
    // `dialects_cover_the_registry_in_its_order` proves every harness has one.
    all().find(|d| d.harness() == h).unwrap_or(ALL[0])
}

/// How a harness's hook file holds its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `{"hooks": {"Event": [{"matcher"?, "hooks": [entry, ..]}]}}`, shared
    /// with the user's own settings (Claude Code, Codex, Gemini CLI).
    Grouped,
    /// `{"version": 1, "hooks": {"event": [entry, ..]}}`, shared with the
    /// user's own hooks (Cursor).
    Flat,
    /// A file that is ours alone, written whole by [`Dialect::own_file`]
    /// (Copilot CLI's hooks file, Pi's manifest): whatever it holds is
    /// replaced, uninstall removes it.
    OwnFile,
}

/// Whether the harness loads a project-scope config in the current folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FolderTrust {
    /// It loads it without asking (Claude Code, Cursor).
    NotNeeded,
    /// The folder is trusted.
    Trusted,
    /// The folder is not trusted: the project config is ignored.
    Untrusted,
    /// Decided per session; nothing on disk tells (Copilot CLI).
    PerSession,
}

impl FolderTrust {
    /// As `doctor --json` has it (`folder_trusted`): None where it cannot tell.
    pub fn known(self) -> Option<bool> {
        match self {
            FolderTrust::Trusted => Some(true),
            FolderTrust::Untrusted => Some(false),
            FolderTrust::NotNeeded | FolderTrust::PerSession => None,
        }
    }
}

/// Whether a harness runs an entry of ours (Codex's hook trust).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustState {
    Trusted,
    /// Trusted once, then changed: the harness skips it.
    Modified,
    Untrusted,
}

impl TrustState {
    pub fn as_str(self) -> &'static str {
        match self {
            TrustState::Trusted => "trusted",
            TrustState::Modified => "modified",
            TrustState::Untrusted => "untrusted",
        }
    }
    /// The harness's own word for it (`codex app-server`'s `trustStatus`).
    pub fn parse(s: &str) -> TrustState {
        match s {
            "trusted" => TrustState::Trusted,
            "modified" => TrustState::Modified,
            _ => TrustState::Untrusted,
        }
    }
}

/// The trust a harness gives each entry of ours, where it has such a thing.
#[derive(Debug, Clone, PartialEq)]
pub struct Trust {
    /// Where the states come from (for people).
    pub source: String,
    /// What asking the harness itself cost and did (it may write its own
    /// state while answering), and how to avoid it: informational, shown
    /// with `--verbose`; None when it was not asked.
    pub asked: Option<String>,
    /// (command, event as the harness keys it, state).
    pub states: Vec<(String, String, TrustState)>,
    /// What the harness reported about the file, one line each.
    pub reported: Vec<String>,
}

/// The facts about the environment a dialect's checks may need.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvFacts {
    /// The server (URL and runtime token) is set only in the environment.
    pub server_only_in_env: bool,
    /// `PRELOOP_HOME` points away from `~/.preloop` through the environment.
    pub home_from_env: bool,
}

/// A finding a dialect makes, before `doctor` files it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Whether it is a problem (exit 6) or a warning.
    pub problem: bool,
    pub what: String,
    pub fix: String,
}

impl Note {
    pub fn problem(what: impl Into<String>, fix: impl Into<String>) -> Note {
        Note { problem: true, what: what.into(), fix: fix.into() }
    }
    pub fn warning(what: impl Into<String>, fix: impl Into<String>) -> Note {
        Note { problem: false, what: what.into(), fix: fix.into() }
    }
}

/// One harness's dialect. The defaults are the common case; each file
/// overrides what its harness does differently.
pub trait Dialect: Sync {
    fn harness(&self) -> Harness;
    /// What messages call it (default: the registry's name).
    fn short_name(&self) -> &'static str {
        self.harness().name()
    }

    // ---- Files and layout ----

    /// The file our entries live in, in `scope`.
    fn hooks_file(&self, ctx: &Ctx, scope: Scope) -> PathBuf;
    /// How that file holds entries.
    fn layout(&self) -> Layout {
        Layout::Grouped
    }
    /// Every event name the harness knows in its hook file, where one
    /// unknown name voids the file (we never write a name outside it).
    fn known_events(&self) -> Option<&'static [&'static str]> {
        None
    }
    /// Whether the harness's loader takes `//` and `/* */` comments in it.
    fn comments_allowed(&self) -> bool {
        false
    }
    /// What the harness's loader takes in its hook file, for [`crate::edit`]
    /// (its answers to [`Dialect::comments_allowed`] and
    /// [`Dialect::known_events`]; not overridden).
    fn syntax(&self) -> Syntax {
        Syntax { comments: self.comments_allowed(), known_events: self.known_events() }
    }
    /// The entry we write for one hook: `command` (shell-quoted), `timeout`
    /// in the harness's unit.
    fn entry(&self, d: &HookDef, command: String, timeout: u64) -> Value;
    /// The only top-level keys the harness accepts in the hook file (it
    /// ignores the whole file for any other), if it restricts them.
    fn top_level_keys(&self) -> Option<&'static [&'static str]> {
        None
    }
    /// A file of ours alone ([`Layout::OwnFile`]) holding `desired`
    /// (empty: nothing at all). Its format is the dialect's.
    fn own_file(&self, _ctx: &Ctx, desired: &Desired) -> String {
        crate::edit::copilot_file(desired)
    }
    /// Other files that change with the hook file (Codex's `config.toml`).
    fn companion_files(&self, _ctx: &Ctx) -> Vec<PathBuf> {
        Vec::new()
    }
    /// The edits of other files that must change with the hook file (Codex's
    /// trust in `config.toml`), and what the user should know about them.
    /// `before`/`after` are the hook file's documents.
    fn companion_edits(
        &self,
        _ctx: &Ctx,
        _path: &Path,
        _before: &Value,
        _after: &Value,
        _owner: &Owner,
    ) -> Result<Vec<FileEdit>> {
        Ok(Vec::new())
    }

    // ---- Trust ----

    /// Whether the harness loads the project config of the current folder.
    fn folder_trust(&self, _ctx: &Ctx) -> FolderTrust {
        FolderTrust::NotNeeded
    }
    /// What to tell the user when the folder is not (known to be) trusted:
    /// (install's note, doctor's finding). `config` is the project file.
    fn untrusted_folder(&self, _ctx: &Ctx, _config: &Path, _trust: FolderTrust) -> Option<(String, Note)> {
        None
    }
    /// The trust the harness gives each entry of ours in `path`, read from
    /// the harness (`ask`, with its `program`) or derived from its files.
    fn entry_trust(
        &self,
        _ctx: &Ctx,
        _path: &Path,
        _doc: &Value,
        _owner: &Owner,
        _program: Option<&Path>,
        _ask: bool,
    ) -> Option<Trust> {
        None
    }

    // ---- What install says ----

    /// A note after an install that changed something.
    fn install_note(&self) -> Option<&'static str> {
        None
    }
    /// Whether an entry named like ours that is not ours can sit in the file
    /// (not in a file that is ours alone).
    fn has_lookalikes(&self) -> bool {
        self.layout() != Layout::OwnFile
    }

    // ---- doctor ----

    /// How to find the harness's version from its `program` (default: run
    /// `program --version`).
    fn version(&self, program: &Path) -> Option<String> {
        version_by_running(program, &[])
    }
    /// Other files whose settings can switch the hooks off (read by doctor
    /// and handed to [`Dialect::switched_off`]).
    fn switch_files(&self, _ctx: &Ctx) -> Vec<PathBuf> {
        Vec::new()
    }
    /// The settings that switch our hooks off: in the hook file `doc` (shown
    /// as `file`), whose entries of ours are `found`, and in the
    /// [`Dialect::switch_files`] (shown path, document).
    fn switched_off(&self, _file: &str, _doc: &Value, _found: &[Entry], _others: &[(String, Value)]) -> Vec<Note> {
        Vec::new()
    }
    /// What is wrong with one entry of ours beyond its command and timeout,
    /// if anything (`label`: the harness and scope, for the message).
    fn entry_problem(&self, _d: &HookDef, _entry: &Value, _label: &str) -> Option<String> {
        None
    }
    /// What doctor reads about the environment the hooks will see, for
    /// [`Dialect::env_warning`] (None: nothing to read).
    fn env_facts(&self, _ctx: &Ctx, _config: &Config) -> Option<EnvFacts> {
        None
    }
    /// A warning about the environment the hooks will see.
    fn env_warning(&self, _env: &EnvFacts) -> Option<Note> {
        None
    }
    /// What is wrong with the files that change with the hook file at
    /// `path` (Pi's extension beside its manifest: missing, or not this
    /// build's byte for byte), once the hook file holds entries of ours.
    fn companion_problems(&self, _ctx: &Ctx, _path: &Path) -> Vec<Note> {
        Vec::new()
    }
    /// What cannot be helped, for `doctor --verbose`.
    fn limits(&self, _s: &Settings) -> Vec<String> {
        Vec::new()
    }
}

impl dyn Dialect + '_ {
    pub fn slug(&self) -> &'static str {
        self.harness().slug()
    }
    /// The top-level keys of `doc` for which the harness ignores the whole
    /// file (install refuses it, doctor reports it).
    pub fn rejected_keys(&self, doc: &Value) -> Vec<String> {
        let (Some(allowed), Some(o)) = (self.top_level_keys(), doc.as_object()) else { return Vec::new() };
        o.keys().filter(|k| !allowed.contains(&k.as_str())).cloned().collect()
    }
    /// The files a plan of this harness touches in `scope` (the hook file first).
    pub fn files(&self, ctx: &Ctx, scope: Scope) -> Vec<PathBuf> {
        let mut v = vec![self.hooks_file(ctx, scope)];
        v.extend(self.companion_files(ctx));
        v
    }
}

/// `program --version`'s first number-like word ("2.1.328 (Claude Code)",
/// "codex-cli 0.169.0", "GitHub Copilot CLI 1.0.102.", "2026.10.01-e373342"),
/// or its first line; `envs` are set for the run.
pub fn version_by_running(program: &Path, envs: &[(&str, &Path)]) -> Option<String> {
    let mut cmd = std::process::Command::new(program);
    cmd.arg("--version");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = crate::util::output_with_timeout(&mut cmd, std::time::Duration::from_secs(15))?;
    Some(first_version(&out))
}

/// The version word of a `--version` output.
pub fn first_version(out: &str) -> String {
    let line = out.lines().next().unwrap_or("").to_string();
    line.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .map(|w| w.trim_end_matches('.').to_string())
        .unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table;
    use preloop_shared::config::Env;
    use serde_json::json;

    fn ctx(env: &[(&str, &str)]) -> Ctx {
        Ctx {
            env: Env::of(env),
            home: "/h".into(),
            cwd: "/p".into(),
            bin_dir: "/b".into(),
            settings: Settings::default(),
            preloop_home: "/h/.preloop".into(),
        }
    }

    #[test]
    fn dialects_cover_the_registry_in_its_order() {
        let ours: Vec<Harness> = all().map(|d| d.harness()).collect();
        assert_eq!(ours, Harness::all().collect::<Vec<_>>());
        for h in Harness::all() {
            assert_eq!(of(h).harness(), h);
        }
    }

    #[test]
    fn user_and_project_files_follow_each_harness_home() {
        let plain = ctx(&[]);
        let moved = ctx(&[
            ("CLAUDE_CONFIG_DIR", "/c"),
            ("CODEX_HOME", "/x"),
            ("GEMINI_CLI_HOME", "/g"),
            ("COPILOT_HOME", "/k"),
            ("PI_CODING_AGENT_DIR", "/q"),
        ]);
        let user = |c: &Ctx| all().map(|d| d.hooks_file(c, Scope::User)).collect::<Vec<_>>();
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(
            user(&plain),
            [
                p("/h/.claude/settings.json"),
                p("/h/.codex/hooks.json"),
                p("/h/.cursor/hooks.json"),
                p("/h/.gemini/settings.json"),
                p("/h/.copilot/hooks/preloop.json"),
                p("/h/.pi/agent/extensions/preloop.json")
            ]
        );
        assert_eq!(
            user(&moved),
            [
                p("/c/settings.json"),
                p("/x/hooks.json"),
                p("/h/.cursor/hooks.json"),
                p("/g/.gemini/settings.json"),
                p("/k/hooks/preloop.json"),
                p("/q/extensions/preloop.json")
            ]
        );
        for d in all() {
            let project = d.hooks_file(&moved, Scope::Project);
            assert!(project.starts_with("/p"), "{project:?}");
        }
        // Codex's trust lives beside its hooks in CODEX_HOME, for either scope.
        assert_eq!(of(Harness::Codex).files(&moved, Scope::Project), [p("/p/.codex/hooks.json"), p("/x/config.toml")]);
        assert_eq!(of(Harness::Cursor).files(&moved, Scope::User).len(), 1);
    }

    #[test]
    fn entries_speak_each_harness_dialect() {
        let s = Settings::default();
        for d in all() {
            for def in table::hooks_for(d.harness()) {
                let t = table::timeout_value(def, &s);
                let e = d.entry(def, "/b/x".into(), t);
                let (cmd, timeout) = match (d.layout(), d.harness()) {
                    (Layout::OwnFile, Harness::Copilot) => ("bash", "timeoutSec"),
                    _ => ("command", "timeout"),
                };
                assert_eq!((e[cmd].as_str(), e[timeout].as_u64()), (Some("/b/x"), Some(t)), "{}", def.binary);
                if let Some(known) = d.known_events() {
                    assert!(known.contains(&def.on), "{}", def.on);
                }
            }
        }
        let def = |h: Harness, on: &str| table::hooks_for(h).find(|d| d.on == on).unwrap();
        let cursor_stop = of(Harness::Cursor).entry(def(Harness::Cursor, "stop"), "c".into(), 20);
        assert_eq!(cursor_stop["loop_limit"], json!(preloop_shared::registry::CURSOR_LOOP_LIMIT));
        assert!(
            of(Harness::Cursor).entry(def(Harness::Cursor, "sessionStart"), "c".into(), 20).get("loop_limit").is_none()
        );
        let gemini = of(Harness::Gemini).entry(def(Harness::Gemini, "AfterTool"), "c".into(), 20_000);
        assert_eq!(gemini["name"], json!("preloop-gemini-after-tool"));
        // Pi's extension runs `preloop-hooks hook <command>` beside the link.
        let pi = of(Harness::Pi).entry(def(Harness::Pi, "tool_call"), "/b/preloop-pi-tool-call".into(), 600_000);
        assert_eq!(pi["argv"], json!(["/b/preloop-hooks", "hook", "preloop-pi-tool-call"]));
        let codex = of(Harness::Codex).entry(def(Harness::Codex, "SessionStart"), "c".into(), 20);
        assert_eq!(codex["additionalContextLimit"], json!(preloop_shared::registry::CODEX_CONTEXT_LIMIT_TOKENS));
        assert!(
            of(Harness::Codex)
                .entry(def(Harness::Codex, "Stop"), "c".into(), 20)
                .get("additionalContextLimit")
                .is_none()
        );
    }

    #[test]
    fn only_gemini_takes_comments_and_only_codex_restricts_top_level_keys() {
        let comments: Vec<Harness> = all().filter(|d| d.comments_allowed()).map(|d| d.harness()).collect();
        assert_eq!(comments, [Harness::Gemini]);
        let doc = json!({"hooks": {}, "description": "x", "extra": 1});
        for d in all() {
            let want: Vec<String> = if d.harness() == Harness::Codex { vec!["extra".into()] } else { Vec::new() };
            assert_eq!(d.rejected_keys(&doc), want, "{}", d.slug());
        }
    }

    #[test]
    fn switches_that_turn_the_hooks_off() {
        let none: &[Entry] = &[];
        let off = json!({"disableAllHooks": true});
        assert_eq!(of(Harness::ClaudeCode).switched_off("f", &off, none, &[]).len(), 1);
        assert!(of(Harness::ClaudeCode).switched_off("f", &json!({}), none, &[]).is_empty());
        assert!(of(Harness::Cursor).switched_off("f", &off, none, &[]).is_empty());
        let gemini = json!({"hooksConfig": {"enabled": false, "disabled": ["preloop-gemini-stop", "theirs"]}});
        let ours = Entry {
            event: "AfterAgent".into(),
            group: Some(0),
            index: 0,
            matcher: false,
            command: "/b/preloop-gemini-stop".into(),
            value: json!({"name": "preloop-gemini-stop"}),
        };
        let notes = of(Harness::Gemini).switched_off("f", &gemini, &[ours], &[]);
        assert_eq!(
            notes.iter().map(|n| n.what.as_str()).collect::<Vec<_>>(),
            [
                "gemini: f sets hooksConfig.enabled to false, so Gemini CLI runs no hooks",
                "gemini: f lists our hooks in hooksConfig.disabled (preloop-gemini-stop)"
            ]
        );
        assert!(notes.iter().all(|n| n.problem));
        let copilot =
            of(Harness::Copilot).switched_off("f", &json!({}), none, &[("s".into(), off), ("c".into(), json!({}))]);
        assert_eq!(copilot.len(), 1);
        assert!(copilot[0].what.starts_with("copilot: s sets"));
    }

    #[test]
    fn version_words() {
        assert_eq!(first_version("2.1.328 (Claude Code)\n"), "2.1.328");
        assert_eq!(first_version("codex-cli 0.169.0"), "0.169.0");
        assert_eq!(first_version("GitHub Copilot CLI 1.0.102."), "1.0.102");
        assert_eq!(first_version("dev build"), "dev build");
    }
}
