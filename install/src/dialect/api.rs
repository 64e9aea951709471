//! The seam every dialect implements: the [`Dialect`] trait and the types
//! its methods speak ([`Layout`], [`FolderTrust`], [`Trust`], [`Note`], ...).
//! The dialects (the sibling files) and everything above them depend on
//! this file; it depends on none of them (`mod.rs` only wires them together
//! and re-exports what is here).

use crate::context::{Ctx, FileEdit, Scope};
use crate::edit::{Desired, Entry, Owner, Syntax};
use crate::hook_rows::HookDef;
use preloop_shared::config::{Config, Settings};
use preloop_shared::{Harness, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

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

/// A concern a dialect raises about a harness's setup, which `doctor` files
/// as a problem or a warning (a `doctor::Finding` with its severity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Concern {
    /// Whether it is a problem (exit 6) or a warning.
    pub problem: bool,
    pub what: String,
    pub fix: String,
}

impl Concern {
    pub fn problem(what: impl Into<String>, fix: impl Into<String>) -> Concern {
        Concern { problem: true, what: what.into(), fix: fix.into() }
    }
    pub fn warning(what: impl Into<String>, fix: impl Into<String>) -> Concern {
        Concern { problem: false, what: what.into(), fix: fix.into() }
    }
}

/// Where a dialect's files go in each scope, for people (Markdown): the
/// user scope's words, then the project scope's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilesDoc(pub [&'static str; 2]);

impl FilesDoc {
    /// The words for `scope`.
    pub fn of(self, scope: Scope) -> &'static str {
        match scope {
            Scope::User => self.0[0],
            Scope::Project => self.0[1],
        }
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

    /// Where our files go in `scope`, for people (Markdown: the variables
    /// that move them, what else changes, what the harness needs to load
    /// them): install/README.md's table of files is rendered from it
    /// (`install/tests/suite/readme_files.rs`; `PRELOOP_BLESS=1` rewrites it).
    fn files_doc(&self) -> FilesDoc;
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
    /// (empty: nothing at all). Its format is the dialect's: every dialect
    /// with that layout writes its own (`own_file_dialects_write_their_file`
    /// holds them to it); the others never call it.
    fn own_file(&self, _ctx: &Ctx, _desired: &Desired) -> String {
        String::new()
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
    fn untrusted_folder(&self, _ctx: &Ctx, _config: &Path, _trust: FolderTrust) -> Option<(String, Concern)> {
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

    /// The harness's version, from its `program`: the `package.json` of
    /// the npm package it belongs to when it has one, else `program
    /// --version` with a scratch home. Doctor never lets a harness write
    /// into the user's home just to say its version (`copilot --version`
    /// unpacks 235 MB into `~/.cache/copilot` on first run, `gemini
    /// --version` writes into `~/.gemini`; newcomer 4, N7).
    fn version(&self, program: &Path) -> Option<String> {
        self.harness()
            .def()
            .npm_package
            .and_then(|pkg| npm_package_version(program, pkg))
            .or_else(|| version_in_scratch_home(program))
    }
    /// Other files whose settings can switch the hooks off (read by doctor
    /// and handed to [`Dialect::switched_off`]).
    fn switch_files(&self, _ctx: &Ctx) -> Vec<PathBuf> {
        Vec::new()
    }
    /// The settings that switch our hooks off: in the hook file `doc` (shown
    /// as `file`), whose entries of ours are `found`, and in the
    /// [`Dialect::switch_files`] (shown path, document).
    fn switched_off(&self, _file: &str, _doc: &Value, _found: &[Entry], _others: &[(String, Value)]) -> Vec<Concern> {
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
    fn env_warning(&self, _env: &EnvFacts) -> Option<Concern> {
        None
    }
    /// What is wrong with the files that change with the hook file at
    /// `path` (Pi's extension beside its manifest: missing, or not this
    /// build's byte for byte), once the hook file holds entries of ours.
    fn companion_problems(&self, _ctx: &Ctx, _path: &Path) -> Vec<Concern> {
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

/// The version in the `package.json` of the npm package `program` belongs
/// to (`npm install -g` links the program into the package).
pub fn npm_package_version(program: &Path, package: &str) -> Option<String> {
    let real = std::fs::canonicalize(program).ok()?;
    real.ancestors().skip(1).take(6).find_map(|dir| {
        let text = std::fs::read_to_string(dir.join("package.json")).ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        (v.get("name").and_then(Value::as_str) == Some(package))
            .then(|| v.get("version").and_then(Value::as_str).map(str::to_string))
            .flatten()
    })
}

/// `program --version` with every home a harness writes into (`HOME`, the
/// XDG directories, each harness's own home variable) pointed at a scratch
/// directory that is removed afterwards.
pub fn version_in_scratch_home(program: &Path) -> Option<String> {
    let scratch = std::env::temp_dir().join(format!(
        "preloop-doctor-version-{}-{}",
        std::process::id(),
        preloop_shared::fsutil::note_id()
    ));
    preloop_shared::fsutil::private_dir(&scratch).ok()?;
    let sub = |d: &str| scratch.join(d);
    let (cache, config, data, state) = (sub(".cache"), sub(".config"), sub(".local/share"), sub(".local/state"));
    let v = version_by_running(
        program,
        &[
            ("HOME", &scratch),
            ("XDG_CACHE_HOME", &cache),
            ("XDG_CONFIG_HOME", &config),
            ("XDG_DATA_HOME", &data),
            ("XDG_STATE_HOME", &state),
            ("GEMINI_CLI_HOME", &scratch),
            ("CODEX_HOME", &sub(".codex")),
            ("COPILOT_HOME", &sub(".copilot")),
            ("CLAUDE_CONFIG_DIR", &sub(".claude")),
        ],
    );
    let _ = std::fs::remove_dir_all(&scratch);
    v
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
