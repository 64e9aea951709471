//! `install` and `uninstall`: put our hook entries into each harness's own
//! config, or take them out, without touching anything else.
//!
//! | harness | user scope | project scope |
//! |---|---|---|
//! | Claude Code | `$CLAUDE_CONFIG_DIR` or `~/.claude`, `settings.json` | `./.claude/settings.json` |
//! | Codex | `$CODEX_HOME` or `~/.codex`, `hooks.json` + trust in `config.toml` | `./.codex/hooks.json` + trust in `$CODEX_HOME/config.toml` |
//! | Cursor | `~/.cursor/hooks.json` | `./.cursor/hooks.json` |
//! | Gemini CLI | `$GEMINI_CLI_HOME` or `~`, `.gemini/settings.json` | `./.gemini/settings.json` |
//! | Copilot CLI | `$COPILOT_HOME` or `~/.copilot`, `hooks/preloop.json` (ours alone) | `./.github/hooks/preloop.json` |
//!
//! Rules: our entries are recognised by their whole command (one of our
//! binaries, no arguments); every other entry, key, comment and their order
//! stay byte for byte; a file that does not parse is refused (with line and
//! column) and left alone; each changed file is written atomically after a
//! backup `<name>.bak.preloop-<time>`; a second install changes nothing;
//! uninstall removes exactly our entries (and the containers that only held
//! them). Installs run one at a time (a lock under `$PRELOOP_HOME`).
//!
//! Missing binaries: a harness is installed whole or not at all. When one
//! of its binaries is missing from the bin dir, that harness is refused and
//! the missing names are listed (with `--harness all`, it is skipped and the
//! others go ahead). Binaries in a cargo target dir (which `cargo clean`
//! deletes) are copied to `$PRELOOP_HOME/bin` first and the hooks point there.

use crate::codex_trust;
use crate::edit::{self, Desired, Owner};
use crate::table::{self, HookDef};
use crate::util;
use preloop_shared::config::{Env, Settings};
use preloop_shared::registry::{self, Carrier};
use preloop_shared::{Error, Harness, Result, fsutil};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// The user's own config in the home directory.
    User,
    /// The current directory's project config.
    Project,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Install,
    Uninstall,
}

/// Where things are (tests build their own).
#[derive(Debug, Clone)]
pub struct Ctx {
    pub env: Env,
    pub home: PathBuf,
    pub cwd: PathBuf,
    /// Where the hook binaries are (the directory of this `preloop-hooks`,
    /// or `--bin-dir`).
    pub bin_dir: PathBuf,
    pub settings: Settings,
    /// `$PRELOOP_HOME`: remembers which config files install created, and
    /// holds the stable copy of binaries found in a cargo target dir.
    pub preloop_home: PathBuf,
}

impl Ctx {
    fn state_path(&self) -> PathBuf {
        self.preloop_home.join("install-state.json")
    }
    /// The config files install created (so uninstall may remove them again).
    pub fn created_files(&self) -> Vec<PathBuf> {
        fsutil::read_json::<Value>(&self.state_path())
            .ok()
            .flatten()
            .and_then(|v| v.get("created").and_then(Value::as_array).cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.as_str().map(PathBuf::from))
            .collect()
    }
    /// Record (or forget) a file install created. Callers hold the install
    /// lock ([`run`]), so concurrent installs do not lose each other's records.
    fn set_created(&self, path: &Path, created: bool) -> Result<()> {
        let mut files = self.created_files();
        files.retain(|p| p != path);
        if created {
            files.push(path.to_path_buf());
        }
        fsutil::private_dir(&self.preloop_home)?;
        fsutil::write_json(&self.state_path(), &json!({"created": files}))
    }
    /// The cargo target dir holding the bin dir, if it is one.
    pub fn target_dir(&self) -> Option<PathBuf> {
        util::in_cargo_target_dir(&self.bin_dir)
    }
    /// The directory our entries point at: the bin dir, or
    /// `$PRELOOP_HOME/bin` when the bin dir is in a cargo target dir.
    pub fn hook_dir(&self) -> PathBuf {
        if self.target_dir().is_some() { self.preloop_home.join("bin") } else { self.bin_dir.clone() }
    }
    pub fn claude_settings(&self, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => self
                .env
                .get("CLAUDE_CONFIG_DIR")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| self.home.join(".claude"))
                .join("settings.json"),
            Scope::Project => self.cwd.join(".claude/settings.json"),
        }
    }
    pub fn codex_home(&self) -> PathBuf {
        self.env
            .get("CODEX_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| self.home.join(".codex"))
    }
    pub fn codex_hooks(&self, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => self.codex_home().join("hooks.json"),
            Scope::Project => self.cwd.join(".codex/hooks.json"),
        }
    }
    pub fn codex_config(&self) -> PathBuf {
        self.codex_home().join("config.toml")
    }
    pub fn cursor_hooks(&self, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => self.home.join(".cursor/hooks.json"),
            Scope::Project => self.cwd.join(".cursor/hooks.json"),
        }
    }
    /// `$GEMINI_CLI_HOME` (it replaces the home directory for `.gemini`) or `~`.
    pub fn gemini_home(&self) -> PathBuf {
        self.env
            .get("GEMINI_CLI_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| self.home.clone())
    }
    pub fn gemini_settings(&self, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => self.gemini_home().join(".gemini/settings.json"),
            Scope::Project => self.cwd.join(".gemini/settings.json"),
        }
    }
    /// `$COPILOT_HOME` (default `~/.copilot`).
    pub fn copilot_home(&self) -> PathBuf {
        self.env
            .get("COPILOT_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| self.home.join(".copilot"))
    }
    pub fn copilot_hooks(&self, scope: Scope) -> PathBuf {
        match scope {
            Scope::User => self.copilot_home().join("hooks/preloop.json"),
            Scope::Project => self.cwd.join(".github/hooks/preloop.json"),
        }
    }
    /// The config files a harness's hooks live in (the first one holds them).
    pub fn files(&self, h: Harness, scope: Scope) -> Vec<PathBuf> {
        match h {
            Harness::ClaudeCode => vec![self.claude_settings(scope)],
            Harness::Codex => vec![self.codex_hooks(scope), self.codex_config()],
            Harness::Cursor => vec![self.cursor_hooks(scope)],
            Harness::Gemini => vec![self.gemini_settings(scope)],
            Harness::Copilot => vec![self.copilot_hooks(scope)],
        }
    }
    /// Where an entry of ours runs the binary from.
    pub fn binary(&self, d: &HookDef) -> PathBuf {
        self.hook_dir().join(d.binary)
    }
    /// The binary as built (in the bin dir).
    pub fn source_binary(&self, d: &HookDef) -> PathBuf {
        self.bin_dir.join(d.binary)
    }
}

/// The entry we write for one hook.
pub fn entry_for(ctx: &Ctx, d: &HookDef) -> Value {
    let command = edit::shell_quote(&ctx.binary(d).to_string_lossy());
    let timeout = table::timeout_value(d, &ctx.settings);
    match d.harness() {
        // The idle-wake watcher (Claude Code 2.1.328 honours both labels, see hooks/claude-code/README.md).
        Harness::ClaudeCode if d.role == table::Role::Watch => json!({
            "type": "command", "command": command, "async": true, "asyncRewake": true, "timeout": timeout,
            "rewakeMessage": "Preloop operator notes arrived while the session was idle:",
            "rewakeSummary": "Preloop operator note"
        }),
        Harness::ClaudeCode => json!({"type": "command", "command": command, "timeout": timeout}),
        // Codex keeps 4 bytes per token of a context handler's output intact:
        // at 5,000 tokens every whole note fits (the registry's Codex limit).
        Harness::Codex if matches!(d.carrier, Carrier::Context(_)) => json!({
            "type": "command", "command": command, "timeout": timeout,
            "additionalContextLimit": registry::CODEX_CONTEXT_LIMIT_TOKENS
        }),
        Harness::Codex => json!({"type": "command", "command": command, "timeout": timeout}),
        // The one loop_limit the adapter checks `loop_count` against.
        Harness::Cursor if d.is_stop() => {
            json!({"command": command, "timeout": timeout, "loop_limit": registry::CURSOR_LOOP_LIMIT})
        }
        Harness::Cursor => json!({"command": command, "timeout": timeout}),
        // Gemini: `name` (what `hooksConfig.disabled` and its messages use), timeout in ms.
        Harness::Gemini => json!({"type": "command", "name": d.binary, "command": command, "timeout": timeout}),
        // Copilot's camelCase dialect.
        Harness::Copilot => json!({"type": "command", "bash": command, "timeoutSec": timeout}),
    }
}

pub fn desired(ctx: &Ctx, h: Harness) -> Desired {
    table::hooks_for(h).map(|d| (d.on.to_string(), entry_for(ctx, d))).collect()
}

/// The binaries of a harness missing from the bin dir.
pub fn missing_binaries(ctx: &Ctx, h: Harness) -> Vec<&'static str> {
    table::hooks_for(h).filter(|d| !util::is_executable(&ctx.source_binary(d))).map(|d| d.binary).collect()
}

/// One file's change.
#[derive(Debug, Clone)]
pub struct FileEdit {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: String,
    /// Uninstall emptied a file of ours: remove it.
    pub delete: bool,
    /// Keep a backup of the previous file (not for a file that is all ours).
    pub backup: bool,
}

impl FileEdit {
    fn new(path: PathBuf, before: Option<String>, after: String) -> FileEdit {
        FileEdit { path, before, after, delete: false, backup: true }
    }
    pub fn changed(&self) -> bool {
        self.delete || self.before.as_deref().unwrap_or("") != self.after
    }
    /// On uninstall: a Claude settings.json, Codex hooks.json or
    /// config.toml, or Gemini settings.json that install created and that
    /// now holds nothing (`{}`, or no TOML at all) is removed again.
    fn delete_if_emptied(mut self, ctx: &Ctx) -> FileEdit {
        // `{}` (a JSON config) or nothing at all (Codex's config.toml).
        let empty = |t: &str| {
            t.trim().is_empty() || matches!(serde_json::from_str::<Value>(t), Ok(Value::Object(m)) if m.is_empty())
        };
        if let Some(b) = &self.before
            && !empty(b)
            && empty(&self.after)
            && ctx.created_files().contains(&self.path)
        {
            self.delete = true;
            self.after = String::new();
        }
        self
    }
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub harness: Harness,
    pub edits: Vec<FileEdit>,
    /// What the user should know (not errors).
    pub notes: Vec<String>,
    /// Entries ours after the change.
    pub entries: usize,
}

fn read_opt(path: &Path) -> Result<Option<String>> {
    match std::fs::read(path) {
        Ok(b) => String::from_utf8(b)
            .map(Some)
            .map_err(|_| Error::Refused(format!("{} is not UTF-8 text; not touching it", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Refused(format!("{}: {}; not touching it", path.display(), fsutil::io_text(&e)))),
    }
}

fn refuse(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::Refused(format!("{}: {why}; not touching it (fix or move the file, then run again)", path.display()))
}

/// Work out the change for one harness without writing anything.
pub fn plan(ctx: &Ctx, h: Harness, scope: Scope, action: Action) -> Result<Plan> {
    let want = match action {
        Action::Install => desired(ctx, h),
        Action::Uninstall => Vec::new(),
    };
    let hook_dir = ctx.hook_dir();
    let owner = Owner::new(h, &hook_dir);
    let mut notes = Vec::new();
    let mut edits = Vec::new();
    let path = ctx.files(h, scope)[0].clone();
    let before = read_opt(&path)?;
    let before_text = before.as_deref().unwrap_or("");
    // Copilot's file is ours alone: whatever it holds is replaced.
    let before_doc = match edit::parse_config(before_text, h) {
        Err(_) if h == Harness::Copilot => json!({}),
        parsed => parsed.map_err(|e| refuse(&path, e))?,
    };
    match h {
        Harness::ClaudeCode | Harness::Gemini => {
            let after = edit::edit_grouped(before_text, &owner, &want).map_err(|e| refuse(&path, e))?;
            edits.push(FileEdit::new(path.clone(), before.clone(), after).delete_if_emptied(ctx));
        }
        Harness::Cursor => {
            let after = edit::edit_flat(before_text, &owner, &want).map_err(|e| refuse(&path, e))?;
            edits.push(FileEdit::new(path.clone(), before.clone(), after));
        }
        Harness::Copilot => {
            let after = edit::copilot_file(&want);
            let mut e = FileEdit::new(path.clone(), before.clone(), after);
            e.backup = false;
            if action == Action::Uninstall && before.is_some() {
                e.delete = true;
            }
            edits.push(e);
        }
        Harness::Codex => {
            if let Some(o) = before_doc.as_object() {
                let extra: Vec<&String> = o.keys().filter(|k| *k != "hooks" && *k != "description").collect();
                if !extra.is_empty() {
                    return Err(refuse(
                        &path,
                        format!(
                            "Codex rejects a hooks.json with the top-level key(s) {extra:?} (only \"hooks\" and \"description\" are allowed), so no hook in it runs"
                        ),
                    ));
                }
            }
            let after = edit::edit_grouped(before_text, &owner, &want).map_err(|e| refuse(&path, e))?;
            let after_doc = edit::parse_config(&after, h).map_err(|e| refuse(&path, e))?;
            let cfg_path = ctx.codex_config();
            let cfg_before = read_opt(&cfg_path)?;
            let cfg_text = cfg_before.as_deref().unwrap_or("");
            cfg_text
                .parse::<toml_edit::DocumentMut>()
                .map_err(|e| refuse(&cfg_path, e.to_string().trim().replace('\n', " ")))?;
            let key_path = codex_trust::canonical_dir(path.parent().unwrap_or(Path::new("/"))).join("hooks.json");
            let kb = codex_trust::hook_keys(&key_path, &before_doc, &owner);
            let ka = codex_trust::hook_keys(&key_path, &after_doc, &owner);
            let current = codex_trust::trusted_hashes(cfg_text);
            let (set, remove) = codex_trust::plan_trust(&kb, &ka, &current);
            let cfg_after = codex_trust::edit_config_toml(cfg_text, &set, &remove).map_err(|e| refuse(&cfg_path, e))?;
            let project_untrusted =
                scope == Scope::Project && action == Action::Install && !codex_project_trusted(cfg_text, &ctx.cwd);
            edits.push(FileEdit::new(path.clone(), before.clone(), after).delete_if_emptied(ctx));
            edits.push(FileEdit::new(cfg_path, cfg_before, cfg_after).delete_if_emptied(ctx));
            if project_untrusted {
                notes.push(format!(
                    "Codex loads {} only in a trusted project: trust {} in Codex (accept its prompt there, or add [projects.\"{}\"] trust_level = \"trusted\" to {})",
                    util::tilde(&ctx.env, &path),
                    ctx.cwd.display(),
                    ctx.cwd.display(),
                    util::tilde(&ctx.env, &ctx.codex_config())
                ));
            }
        }
    }
    if action == Action::Install && scope == Scope::Project {
        match h {
            Harness::Gemini if !gemini_folder_trusted(ctx) => notes.push(format!(
                "Gemini CLI loads {} only in a trusted folder: trust {} in Gemini (its trust prompt), or set GEMINI_CLI_TRUST_WORKSPACE=true for headless runs",
                util::tilde(&ctx.env, &path),
                ctx.cwd.display()
            )),
            Harness::Copilot => notes.push(format!(
                "Copilot CLI loads {} only in a trusted folder: run `copilot --trust-folder` there, or set COPILOT_ALLOW_ALL=true or GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true for headless runs",
                util::tilde(&ctx.env, &path)
            )),
            _ => {}
        }
    }
    // What is the user's though it looks like ours, and Preloop's own hooks.
    if h != Harness::Copilot {
        for e in edit::lookalikes(&before_doc, &owner) {
            notes.push(format!(
                "left alone: {} `{}` (named like ours but {}: the user's)",
                e.event,
                e.command,
                if edit::words(&e.command).is_some_and(|w| w.len() > 1) {
                    "it has arguments"
                } else {
                    "it sits under a matcher, outside the bin dir"
                }
            ));
        }
    }
    if action == Action::Install {
        let own = edit::preloop_own_entries(&before_doc);
        if !own.is_empty() {
            notes.push(preloop_own_note(ctx, &path, &own));
        }
    }
    let entries = match edits.first() {
        Some(e) => edit::parse_config(&e.after, h).map(|v| edit::our_entries(&v, &owner).len()).unwrap_or(0),
        None => 0,
    };
    Ok(Plan { harness: h, edits, notes, entries })
}

/// What to say about entries Preloop's own CLI installed next to ours.
pub fn preloop_own_note(ctx: &Ctx, path: &Path, own: &[edit::Entry]) -> String {
    let mut events: Vec<&str> = own.iter().map(|e| e.event.as_str()).collect();
    events.dedup();
    format!(
        "{} also has Preloop's own hooks ({} on {}): with ours every tool call is checked twice and notes are claimed twice; remove those entries from {} (preloop-hooks does the permission check and carries the notes)",
        util::tilde(&ctx.env, path),
        edit::program_of(&own[0].command).rsplit('/').next().unwrap_or("preloop"),
        events.join(", "),
        util::tilde(&ctx.env, path)
    )
}

/// Whether config.toml marks `dir` as a trusted project.
pub fn codex_project_trusted(cfg_text: &str, dir: &Path) -> bool {
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

/// Whether Gemini CLI trusts the current folder: `GEMINI_CLI_TRUST_WORKSPACE=true`,
/// folder trust switched off in the user's settings, or the longest matching
/// rule of `~/.gemini/trustedFolders.json` trusts it (as Gemini 0.61.0 decides).
pub fn gemini_folder_trusted(ctx: &Ctx) -> bool {
    if ctx.env.get("GEMINI_CLI_TRUST_WORKSPACE").as_deref() == Some("true") {
        return true;
    }
    let dir = ctx.gemini_home().join(".gemini");
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).ok().and_then(|t| edit::parse_config(&t, Harness::Gemini).ok())
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

/// A unified diff of one edit (for `--dry-run`), with `~` paths.
pub fn diff(ctx: &Ctx, e: &FileEdit) -> String {
    let before = e.before.as_deref().unwrap_or("");
    let name = util::tilde(&ctx.env, &e.path);
    let old_name = if e.before.is_some() { name.clone() } else { format!("{name} (new)") };
    let new_name = if e.delete {
        format!("{name} (removed)")
    } else if e.before.is_none() {
        format!("{name} (new)")
    } else {
        name
    };
    similar::TextDiff::from_lines(before, &e.after)
        .unified_diff()
        .context_radius(3)
        .header(&old_name, &new_name)
        .to_string()
}

/// Write a plan's changed files. Returns (path, backup) per written file.
pub fn apply(ctx: &Ctx, plan: &Plan) -> Result<Vec<(PathBuf, Option<PathBuf>)>> {
    let mut out = Vec::new();
    for e in plan.edits.iter().filter(|e| e.changed()) {
        let backup = if e.delete {
            util::remove_file(&e.path, e.backup)?
        } else {
            util::write_file(&e.path, &e.after, e.backup)?
        };
        if e.delete {
            ctx.set_created(&e.path, false)?;
        } else if e.before.is_none() && e.backup {
            ctx.set_created(&e.path, true)?;
        }
        out.push((e.path.clone(), backup));
    }
    Ok(out)
}

/// What `install`/`uninstall` run.
pub struct Request {
    pub harnesses: Vec<Harness>,
    /// `--harness all` (or none): skip a harness whose binaries are missing.
    pub all: bool,
    pub scope: Scope,
    pub action: Action,
    pub dry_run: bool,
}

/// Before anything is written: `PRELOOP_HOME` must be a directory we own
/// that no one else can write (created 0700 when missing), else the whole
/// command is refused.
pub fn check_preloop_home(ctx: &Ctx, create: bool) -> Result<()> {
    let home = &ctx.preloop_home;
    if let Err(e) = fsutil::check_owned_dir(home) {
        return Err(Error::Config(format!(
            "PRELOOP_HOME {} is not usable: {e} (point PRELOOP_HOME at a directory you own, or unset it for ~/.preloop); nothing was changed",
            home.display()
        )));
    }
    if create {
        fsutil::private_dir(home).map_err(|e| {
            Error::Config(format!(
                "PRELOOP_HOME {} cannot be created: {} (point PRELOOP_HOME at a directory you can write); nothing was changed",
                home.display(),
                match &e {
                    Error::Io { source, .. } => fsutil::io_text(source),
                    other => other.to_string(),
                }
            ))
        })?;
    }
    Ok(())
}

/// Copy the binaries of `harnesses` from a cargo target dir to the stable
/// `$PRELOOP_HOME/bin`.
fn make_stable_copy(ctx: &Ctx, harnesses: &[Harness], dry_run: bool) -> Result<()> {
    let Some(target) = ctx.target_dir() else { return Ok(()) };
    let names: Vec<&str> = harnesses
        .iter()
        .filter(|h| missing_binaries(ctx, **h).is_empty())
        .flat_map(|h| table::hooks_for(*h).map(|d| d.binary))
        .fold(Vec::new(), |mut v, b| {
            if !v.contains(&b) {
                v.push(b);
            }
            v
        });
    if names.is_empty() {
        return Ok(());
    }
    // This CLI too, so `$PRELOOP_HOME/bin/preloop-hooks doctor` still runs after `cargo clean`.
    let mut names = names;
    if util::is_executable(&ctx.bin_dir.join("preloop-hooks")) {
        names.push("preloop-hooks");
    }
    let dest = ctx.hook_dir();
    if dry_run {
        crate::outln!(
            "(the binaries are in cargo's {}, which `cargo clean` deletes: install would copy them to {})",
            util::tilde(&ctx.env, &target),
            util::tilde(&ctx.env, &dest)
        );
        return Ok(());
    }
    let changed = util::sync_binaries(&ctx.bin_dir, &dest, &names)?;
    if !changed.is_empty() {
        crate::outln!(
            "copied {} {} from {} to {} (cargo's target dir is deleted by `cargo clean`; run install again after a rebuild)",
            changed.len(),
            if changed.len() == 1 { "binary" } else { "binaries" },
            util::tilde(&ctx.env, &ctx.bin_dir),
            util::tilde(&ctx.env, &dest)
        );
    }
    Ok(())
}

pub fn run(ctx: &Ctx, req: &Request) -> Result<()> {
    let verb = if req.action == Action::Install { "install" } else { "uninstall" };
    check_preloop_home(ctx, !req.dry_run)?;
    // One install at a time: the harness files and install-state.json are
    // read, changed and written back.
    let _lock = if req.dry_run {
        None
    } else {
        Some(fsutil::lock(&ctx.preloop_home.join("install.lock"), Duration::from_secs(60))?)
    };
    if req.action == Action::Install {
        make_stable_copy(ctx, &req.harnesses, req.dry_run)?;
    }
    let mut failures: Vec<String> = Vec::new();
    let mut done = 0;
    let mut touched_dirs: Vec<PathBuf> = Vec::new();
    for &h in &req.harnesses {
        if req.action == Action::Install {
            let missing = missing_binaries(ctx, h);
            if !missing.is_empty() {
                let msg = format!(
                    "{}: not installed: missing in {}: {} (build them with `cargo build --release --workspace --bins`, or point --bin-dir at them)",
                    h.slug(),
                    ctx.bin_dir.display(),
                    missing.join(", ")
                );
                if req.all {
                    crate::errln!("preloop-hooks: {msg}; skipped");
                } else {
                    failures.push(msg);
                }
                continue;
            }
        }
        let plan = match plan(ctx, h, req.scope, req.action) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{}: {e}", h.slug()));
                continue;
            }
        };
        done += 1;
        let changed: Vec<&FileEdit> = plan.edits.iter().filter(|e| e.changed()).collect();
        let main_file = util::tilde(&ctx.env, &plan.edits[0].path);
        if changed.is_empty() {
            let state = if req.action == Action::Install {
                format!("already installed ({} hooks)", plan.entries)
            } else {
                "nothing of ours to remove".into()
            };
            crate::outln!("{:<12} {state} in {main_file}", h.slug());
        } else if req.dry_run {
            crate::outln!(
                "{:<12} would {verb}: {}",
                h.slug(),
                changed.iter().map(|e| util::tilde(&ctx.env, &e.path)).collect::<Vec<_>>().join(", ")
            );
            for e in &changed {
                crate::output::text_or_exit(&diff(ctx, e));
            }
        } else {
            let written = apply(ctx, &plan)?;
            let what = if req.action == Action::Install {
                format!("installed {} hooks in", plan.entries)
            } else {
                "removed our hooks from".into()
            };
            crate::outln!("{:<12} {what} {main_file}", h.slug());
            for (p, b) in written {
                if let Some(d) = p.parent()
                    && !touched_dirs.iter().any(|t| t == d)
                {
                    touched_dirs.push(d.to_path_buf());
                }
                let deleted = plan.edits.iter().any(|e| e.delete && e.path == p);
                match b {
                    Some(b) if deleted => crate::outln!(
                        "{:<12}   removed {}: nothing else was in it (backup {})",
                        "",
                        util::tilde(&ctx.env, &p),
                        util::tilde(&ctx.env, &b)
                    ),
                    None if deleted => {
                        crate::outln!("{:<12}   removed {} (it was ours alone)", "", util::tilde(&ctx.env, &p))
                    }
                    Some(b) => crate::outln!(
                        "{:<12}   wrote {} (backup {})",
                        "",
                        util::tilde(&ctx.env, &p),
                        util::tilde(&ctx.env, &b)
                    ),
                    None if plan.edits.iter().any(|e| e.path == p && e.before.is_some()) => {
                        crate::outln!("{:<12}   wrote {}", "", util::tilde(&ctx.env, &p))
                    }
                    None => crate::outln!("{:<12}   created {}", "", util::tilde(&ctx.env, &p)),
                }
            }
        }
        let mut notes = plan.notes.clone();
        if req.action == Action::Install {
            let program = h.def().program;
            if util::find_program(program, &[], &[]).is_none() {
                let how = if req.dry_run { "it would be installed anyway" } else { "installed anyway" };
                notes.insert(0, format!("{program} not found on PATH; {how}"));
            }
            if h == Harness::Cursor && !changed.is_empty() {
                notes.push("headless `cursor-agent -p` fires no stop and no beforeSubmitPrompt: a late note waits for the next session start or tool call".into());
            }
        }
        for n in &notes {
            crate::outln!("{:<12}   note: {n}", "");
        }
    }
    if req.dry_run && failures.is_empty() {
        crate::outln!("(dry run: nothing was written)");
    }
    if req.action == Action::Uninstall && !req.dry_run && failures.is_empty() {
        leftovers(ctx, &touched_dirs);
    }
    if !failures.is_empty() {
        for f in &failures[..failures.len() - 1] {
            crate::errln!("preloop-hooks: {f}");
        }
        let last = failures.last().cloned().unwrap_or_default();
        return Err(Error::Refused(if failures.len() == 1 {
            format!("{verb} refused: {last}")
        } else {
            format!("{last} ({verb} refused for {} harnesses)", failures.len())
        }));
    }
    if done == 0 && req.action == Action::Install {
        return Err(Error::Refused(format!(
            "no harness could be installed: the hook binaries are missing in {} (build them with `cargo build --release --workspace --bins`, or point --bin-dir at them)",
            ctx.bin_dir.display()
        )));
    }
    Ok(())
}

/// After an uninstall: what is left on purpose, and how to remove it.
fn leftovers(ctx: &Ctx, dirs: &[PathBuf]) {
    let mut backups: Vec<PathBuf> = Vec::new();
    for d in dirs {
        for n in fsutil::list_names(d).into_iter().filter(|n| n.contains(".bak.preloop-")) {
            backups.push(d.join(n));
        }
    }
    let mut parts = Vec::new();
    if ctx.preloop_home.exists() {
        parts.push(format!(
            "{} (notes, sessions, log{}: `rm -r {}` when you no longer need them)",
            util::tilde(&ctx.env, &ctx.preloop_home),
            if ctx.preloop_home.join("bin").exists() { ", the copied binaries" } else { "" },
            util::tilde(&ctx.env, &ctx.preloop_home)
        ));
    }
    if !backups.is_empty() {
        let mut globs: Vec<String> = Vec::new();
        for b in &backups {
            let name = b.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let stem = name.split(".bak.preloop-").next().unwrap_or(name);
            let g = util::tilde(&ctx.env, &b.with_file_name(format!("{stem}.bak.preloop-*")));
            if !globs.contains(&g) {
                globs.push(g);
            }
        }
        parts.push(format!("{} backup file(s): {}", backups.len(), globs.join(" ")));
    }
    if !parts.is_empty() {
        crate::outln!("left in place: {}", parts.join("; "));
    }
}
