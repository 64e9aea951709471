//! `install` and `uninstall`: put our hook entries into each harness's own
//! config, or take them out, without touching anything else.
//!
//! | harness | user scope | project scope |
//! |---|---|---|
//! | Claude Code | `$CLAUDE_CONFIG_DIR` or `~/.claude`, `settings.json` | `./.claude/settings.json` |
//! | Codex | `$CODEX_HOME` or `~/.codex`, `hooks.json` + trust in `config.toml` | `./.codex/hooks.json` + trust in `$CODEX_HOME/config.toml` |
//! | Cursor | `~/.cursor/hooks.json` | `./.cursor/hooks.json` |
//!
//! Rules: our entries are recognised by their program (one of our binaries);
//! every other entry, key, comment and their order stay byte for byte; a
//! file that does not parse is refused (with line and column) and left
//! alone; each changed file is written atomically after a backup
//! `<name>.bak.preloop-<time>`; a second install changes nothing; uninstall
//! removes exactly our entries (and the containers that only held them).
//!
//! Missing binaries: a harness is installed whole or not at all. When one
//! of its binaries is missing from the bin dir, that harness is refused and
//! the missing names are listed (with `--harness all`, it is skipped and the
//! others go ahead).

use crate::codex_trust;
use crate::edit::{self, Desired};
use crate::table::{self, HookDef};
use crate::util;
use preloop_shared::config::{Env, Settings};
use preloop_shared::registry::{self, Carrier};
use preloop_shared::{Error, Harness, Result};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// The user's own config in the home directory.
    User,
    /// The current directory's project config.
    Project,
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
    pub bin_dir: PathBuf,
    pub settings: Settings,
    /// `$PRELOOP_HOME`: remembers which config files install created.
    pub preloop_home: PathBuf,
}

impl Ctx {
    fn state_path(&self) -> PathBuf {
        self.preloop_home.join("install-state.json")
    }
    /// The config files install created (so uninstall may remove them again).
    pub fn created_files(&self) -> Vec<PathBuf> {
        preloop_shared::fsutil::read_json::<Value>(&self.state_path())
            .ok()
            .flatten()
            .and_then(|v| v.get("created").and_then(Value::as_array).cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.as_str().map(PathBuf::from))
            .collect()
    }
    fn set_created(&self, path: &Path, created: bool) -> Result<()> {
        let mut files = self.created_files();
        files.retain(|p| p != path);
        if created {
            files.push(path.to_path_buf());
        }
        preloop_shared::fsutil::private_dir(&self.preloop_home)?;
        preloop_shared::fsutil::write_json(&self.state_path(), &json!({"created": files}))
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
    /// The config files a harness's hooks live in (the first one holds them).
    pub fn files(&self, h: Harness, scope: Scope) -> Vec<PathBuf> {
        match h {
            Harness::ClaudeCode => vec![self.claude_settings(scope)],
            Harness::Codex => vec![self.codex_hooks(scope), self.codex_config()],
            Harness::Cursor => vec![self.cursor_hooks(scope)],
        }
    }
    pub fn binary(&self, d: &HookDef) -> PathBuf {
        self.bin_dir.join(d.binary)
    }
}

/// The entry we write for one hook.
pub fn entry_for(ctx: &Ctx, d: &HookDef) -> Value {
    let command = edit::shell_quote(&ctx.binary(d).to_string_lossy());
    let timeout = table::timeout_secs(d, &ctx.settings);
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
    }
}

pub fn desired(ctx: &Ctx, h: Harness) -> Desired {
    table::hooks_for(h).map(|d| (d.on.to_string(), entry_for(ctx, d))).collect()
}

/// The binaries of a harness missing from the bin dir.
pub fn missing_binaries(ctx: &Ctx, h: Harness) -> Vec<&'static str> {
    table::hooks_for(h).filter(|d| !util::is_executable(&ctx.binary(d))).map(|d| d.binary).collect()
}

/// One file's change.
#[derive(Debug, Clone)]
pub struct FileEdit {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: String,
    /// Uninstall emptied a file of ours (`{}` is all that is left): remove it.
    pub delete: bool,
}

impl FileEdit {
    fn new(path: PathBuf, before: Option<String>, after: String) -> FileEdit {
        FileEdit { path, before, after, delete: false }
    }
    pub fn changed(&self) -> bool {
        self.delete || self.before.as_deref().unwrap_or("") != self.after
    }
    /// On uninstall: a Claude settings.json or Codex hooks.json that
    /// install created and that now holds only `{}` is removed again.
    fn delete_if_emptied(mut self, ctx: &Ctx) -> FileEdit {
        let empty = |t: &str| matches!(serde_json::from_str::<Value>(t), Ok(Value::Object(m)) if m.is_empty());
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
        Err(e) => Err(Error::io(format!("read {}", path.display()), e)),
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
    let mut notes = Vec::new();
    let mut edits = Vec::new();
    match h {
        Harness::ClaudeCode => {
            let path = ctx.claude_settings(scope);
            let before = read_opt(&path)?;
            let after = edit::edit_grouped(before.as_deref().unwrap_or(""), h, &want).map_err(|e| refuse(&path, e))?;
            edits.push(FileEdit::new(path, before, after).delete_if_emptied(ctx));
        }
        Harness::Cursor => {
            let path = ctx.cursor_hooks(scope);
            let before = read_opt(&path)?;
            let after = edit::edit_flat(before.as_deref().unwrap_or(""), h, &want).map_err(|e| refuse(&path, e))?;
            edits.push(FileEdit::new(path, before, after));
        }
        Harness::Codex => {
            let path = ctx.codex_hooks(scope);
            let before = read_opt(&path)?;
            let before_text = before.as_deref().unwrap_or("");
            let before_doc = if before_text.trim().is_empty() {
                json!({})
            } else {
                edit::parse_strict(before_text).map_err(|e| refuse(&path, e))?
            };
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
            let after = edit::edit_grouped(before_text, h, &want).map_err(|e| refuse(&path, e))?;
            let after_doc = edit::parse_strict(&after).map_err(|e| refuse(&path, e))?;
            let cfg_path = ctx.codex_config();
            let cfg_before = read_opt(&cfg_path)?;
            let cfg_text = cfg_before.as_deref().unwrap_or("");
            cfg_text
                .parse::<toml_edit::DocumentMut>()
                .map_err(|e| refuse(&cfg_path, e.to_string().trim().replace('\n', " ")))?;
            let key_path = codex_trust::canonical_dir(path.parent().unwrap_or(Path::new("/"))).join("hooks.json");
            let kb = codex_trust::hook_keys(&key_path, &before_doc);
            let ka = codex_trust::hook_keys(&key_path, &after_doc);
            let current = codex_trust::trusted_hashes(cfg_text);
            let (set, remove) = codex_trust::plan_trust(&kb, &ka, &current);
            let cfg_after = codex_trust::edit_config_toml(cfg_text, &set, &remove).map_err(|e| refuse(&cfg_path, e))?;
            let project_untrusted =
                scope == Scope::Project && action == Action::Install && !codex_project_trusted(cfg_text, &ctx.cwd);
            edits.push(FileEdit::new(path, before, after).delete_if_emptied(ctx));
            edits.push(FileEdit::new(cfg_path, cfg_before, cfg_after));
            if project_untrusted {
                notes.push(format!(
                    "Codex loads {} only in a trusted project: trust {} in Codex (its prompt, or [projects.\"…\"] trust_level = \"trusted\" in config.toml)",
                    util::tilde(&ctx.env, &ctx.codex_hooks(scope)),
                    ctx.cwd.display()
                ));
            }
        }
    }
    let entries = match edits.first() {
        Some(e) => edit::parse_strict(if e.after.trim().is_empty() { "{}" } else { &e.after })
            .map(|v| edit::our_entries(&v, h).len())
            .unwrap_or(0),
        None => 0,
    };
    if h == Harness::Cursor && action == Action::Install {
        notes.push("headless `cursor-agent -p` fires no stop and no beforeSubmitPrompt: a late note waits for the next session start or tool call".into());
    }
    Ok(Plan { harness: h, edits, notes, entries })
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

/// A unified diff of one edit (for `--dry-run`).
pub fn diff(e: &FileEdit) -> String {
    let before = e.before.as_deref().unwrap_or("");
    let name = e.path.display().to_string();
    let old_name = if e.before.is_some() { format!("a{name}") } else { "/dev/null".to_string() };
    let new_name = if e.delete { "/dev/null".to_string() } else { format!("b{name}") };
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
        let backup =
            if e.delete { util::remove_with_backup(&e.path)? } else { util::write_with_backup(&e.path, &e.after)? };
        if e.delete {
            ctx.set_created(&e.path, false)?;
        } else if e.before.is_none() {
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

pub fn run(ctx: &Ctx, req: &Request) -> Result<()> {
    let mut failures: Vec<String> = Vec::new();
    let mut done = 0;
    let verb = if req.action == Action::Install { "install" } else { "uninstall" };
    for &h in &req.harnesses {
        if req.action == Action::Install {
            let missing = missing_binaries(ctx, h);
            if !missing.is_empty() {
                let msg = format!(
                    "{}: not installed: missing in {}: {} (build them with `cargo build --workspace --release`, or point --bin-dir at them)",
                    h.slug(),
                    ctx.bin_dir.display(),
                    missing.join(", ")
                );
                if req.all {
                    eprintln!("{msg}; skipped");
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
            println!("{:<12} {state} in {main_file}", h.slug());
        } else if req.dry_run {
            println!(
                "{:<12} would {verb}: {}",
                h.slug(),
                changed.iter().map(|e| util::tilde(&ctx.env, &e.path)).collect::<Vec<_>>().join(", ")
            );
            for e in &changed {
                print!("{}", diff(e));
            }
        } else {
            let written = apply(ctx, &plan)?;
            let what = if req.action == Action::Install {
                format!("installed {} hooks in", plan.entries)
            } else {
                "removed our hooks from".into()
            };
            println!("{:<12} {what} {main_file}", h.slug());
            for (p, b) in written {
                let deleted = plan.edits.iter().any(|e| e.delete && e.path == p);
                match b {
                    Some(b) if deleted => println!(
                        "{:<12}   removed {}: nothing else was in it (backup {})",
                        "",
                        util::tilde(&ctx.env, &p),
                        util::tilde(&ctx.env, &b)
                    ),
                    Some(b) => println!(
                        "{:<12}   wrote {} (backup {})",
                        "",
                        util::tilde(&ctx.env, &p),
                        util::tilde(&ctx.env, &b)
                    ),
                    None => println!("{:<12}   created {}", "", util::tilde(&ctx.env, &p)),
                }
            }
        }
        for n in &plan.notes {
            println!("{:<12}   note: {n}", "");
        }
    }
    if req.dry_run && failures.is_empty() {
        println!("(dry run: nothing was written)");
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("preloop-hooks: {f}");
        }
        return Err(Error::Refused(format!("{verb} refused for {} harness(es)", failures.len())));
    }
    if done == 0 && req.action == Action::Install {
        return Err(Error::Refused("no harness could be installed: the hook binaries are missing".into()));
    }
    Ok(())
}
