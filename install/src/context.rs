//! Where things are and what one planned change of a file is: [`Ctx`]
//! (the home, the folder, the bin dir, the settings, and install's own
//! record `install-state.json`), the [`Scope`]s, [`FileEdit`] and [`Plan`].
//! Below the dialects (which take a `Ctx` and return `FileEdit`s) and below
//! `install`, `doctor` and the CLI, which use both; `install` re-exports
//! these under their old paths.

use crate::hook_rows::HookDef;
use crate::names::CLI_NAME;
use crate::util;
use preloop_shared::config::{Env, Settings};
use preloop_shared::{Error, Harness, Result, fsutil};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

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

/// How the executable got where it is: what puts it back, and what removes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallMethod {
    /// An npm package (`npm install -g preloop-hooks`).
    Npm,
    /// A cargo target dir of a checkout (`cargo build`).
    CargoBuild,
    /// `cargo install` (`~/.cargo/bin`).
    CargoInstall,
    /// The bin dir of a prefix (this one): `scripts/install` from a checkout,
    /// or the release tarball unpacked there.
    Prefix(PathBuf),
}

impl InstallMethod {
    /// The command that puts the executable back in place.
    pub fn reinstall(&self, env: &Env) -> String {
        match self {
            InstallMethod::Npm => "npm install -g preloop-hooks, then `preloop-hooks install`".into(),
            InstallMethod::CargoBuild => {
                "cargo build --release -p preloop-hooks in your checkout, then `preloop-hooks install`".into()
            }
            InstallMethod::CargoInstall => "cargo install --force preloop-hooks, then `preloop-hooks install`".into(),
            InstallMethod::Prefix(prefix) => {
                let p = util::tilde(env, prefix);
                let flag = if p == "~/.local" { String::new() } else { format!(" --prefix {p}") };
                format!(
                    "re-run scripts/install{flag} from your checkout (or unpack the release tarball into {p} again)"
                )
            }
        }
    }
    /// The command that removes the executable `exe` (None: `cargo clean`'s business).
    pub fn remove(&self, env: &Env, exe: &Path) -> Option<String> {
        match self {
            InstallMethod::Npm => Some("npm uninstall -g preloop-hooks".into()),
            InstallMethod::CargoBuild => None,
            InstallMethod::CargoInstall => Some("cargo uninstall preloop-hooks".into()),
            InstallMethod::Prefix(_) => Some(format!("rm {}", util::tilde(env, exe))),
        }
    }
}

/// Where things are (tests build their own).
#[derive(Debug, Clone)]
pub struct Ctx {
    pub env: Env,
    pub home: PathBuf,
    pub cwd: PathBuf,
    /// Where the `preloop-hooks` executable is (the directory of this one,
    /// or `--bin-dir`).
    pub bin_dir: PathBuf,
    pub settings: Settings,
    /// `$PRELOOP_HOME`: remembers which config files install created and
    /// wrote entries into, and holds the stable copy of an executable found
    /// in a cargo target dir or an npm package.
    pub preloop_home: PathBuf,
}

impl Ctx {
    fn state_path(&self) -> PathBuf {
        self.preloop_home.join("install-state.json")
    }
    /// `install-state.json` as an object (empty when missing or unreadable).
    fn state(&self) -> serde_json::Map<String, Value> {
        match fsutil::read_json::<Value>(&self.state_path()) {
            Ok(Some(Value::Object(m))) => m,
            _ => serde_json::Map::new(),
        }
    }
    /// Change one key of `install-state.json`, keeping the others. Callers
    /// hold the install lock ([`crate::install::run`]), so concurrent
    /// installs do not lose each other's records.
    pub(crate) fn update_state(&self, key: &str, value: Value) -> Result<()> {
        let mut state = self.state();
        state.insert(key.to_string(), value);
        for k in ["created", "configs", "commands", "restore", "dirs"] {
            state.entry(k).or_insert_with(|| json!([]));
        }
        fsutil::private_dir(&self.preloop_home)?;
        fsutil::write_json(&self.state_path(), &Value::Object(state))
    }
    /// The config files install created (so uninstall may remove them again).
    pub fn created_files(&self) -> Vec<PathBuf> {
        self.state()
            .get("created")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.as_str().map(PathBuf::from))
            .collect()
    }
    /// Record (or forget) a file install created.
    pub(crate) fn set_created(&self, path: &Path, created: bool) -> Result<()> {
        let mut files = self.created_files();
        files.retain(|p| p != path);
        if created {
            files.push(path.to_path_buf());
        }
        self.update_state("created", json!(files))
    }
    /// The hook commands this HOME's install created (names that did not
    /// exist before it linked them), by directory: the only ones outside
    /// `$PRELOOP_HOME/bin` that uninstall may remove (red-team 4, P2).
    pub fn created_commands(&self) -> Vec<(PathBuf, Vec<String>)> {
        self.state()
            .get("commands")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|c| {
                let dir = PathBuf::from(c.get("dir")?.as_str()?);
                let names = c.get("names")?.as_array()?.iter().filter_map(|n| n.as_str().map(String::from)).collect();
                Some((dir, names))
            })
            .collect()
    }
    /// Add `names` to (or, with `add` false, remove them from) the hook
    /// commands this HOME's install created in `dir`.
    pub(crate) fn record_commands(&self, dir: &Path, names: &[&str], add: bool) -> Result<()> {
        let mut all = self.created_commands();
        let mut mine: Vec<String> = all.iter().find(|(d, _)| d == dir).map(|(_, n)| n.clone()).unwrap_or_default();
        all.retain(|(d, _)| d != dir);
        if add {
            for n in names {
                if !mine.iter().any(|m| m == n) {
                    mine.push(n.to_string());
                }
            }
        } else {
            mine.retain(|m| !names.contains(&m.as_str()));
        }
        if !mine.is_empty() {
            all.push((dir.to_path_buf(), mine));
        }
        let v: Vec<Value> = all.iter().map(|(d, n)| json!({"dir": d, "names": n})).collect();
        self.update_state("commands", json!(v))
    }
    /// The folders install created for a config file (deepest last).
    pub fn created_dirs(&self) -> Vec<PathBuf> {
        self.state()
            .get("dirs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.as_str().map(PathBuf::from))
            .collect()
    }
    /// After an uninstall: remove the folders install created that are
    /// empty now (deepest first), and forget them; a folder holding anything
    /// stays recorded (newcomer-ux-4, P16). Returns the removed ones.
    pub(crate) fn remove_empty_created_dirs(&self) -> Result<Vec<PathBuf>> {
        let mut dirs = self.created_dirs();
        if dirs.is_empty() {
            return Ok(Vec::new());
        }
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        let mut removed = Vec::new();
        let mut keep = Vec::new();
        for d in dirs {
            match std::fs::remove_dir(&d) {
                Ok(()) => removed.push(d),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(_) => keep.push(d),
            }
        }
        self.update_state("dirs", json!(keep))?;
        Ok(removed)
    }
    /// The files uninstall puts back byte for byte: (path, the text before
    /// the first install, the text the last install wrote).
    fn restores(&self) -> Vec<(PathBuf, String, String)> {
        self.state()
            .get("restore")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|r| {
                Some((
                    PathBuf::from(r.get("path")?.as_str()?),
                    r.get("before")?.as_str()?.to_string(),
                    r.get("after")?.as_str()?.to_string(),
                ))
            })
            .collect()
    }
    /// The text to put back in `path` on uninstall: the text before the
    /// first install, when the file still holds exactly what the last one
    /// wrote.
    pub(crate) fn restore_for(&self, path: &Path, now: &str) -> Option<String> {
        self.restores().into_iter().find(|(p, _, after)| p == path && after == now).map(|(_, before, _)| before)
    }
    /// Record (`Some((before, after))`) or forget what uninstall puts back in `path`.
    pub(crate) fn set_restore(&self, path: &Path, rec: Option<(&str, &str)>) -> Result<()> {
        let mut all = self.restores();
        if rec.is_none() && !all.iter().any(|(p, _, _)| p == path) {
            return Ok(());
        }
        all.retain(|(p, _, _)| p != path);
        if let Some((before, after)) = rec {
            all.push((path.to_path_buf(), before.to_string(), after.to_string()));
        }
        let v: Vec<Value> = all.iter().map(|(p, b, a)| json!({"path": p, "before": b, "after": a})).collect();
        self.update_state("restore", json!(v))
    }
    /// The cargo target dir holding the bin dir, if it is one.
    pub fn target_dir(&self) -> Option<PathBuf> {
        util::in_cargo_target_dir(&self.bin_dir)
    }
    /// The npm package holding the bin dir, if it is in one (a directory
    /// under `node_modules`).
    pub fn npm_package_dir(&self) -> Option<PathBuf> {
        let mut dirs = self.bin_dir.ancestors();
        let mut below = None;
        for a in &mut dirs {
            if a.file_name().is_some_and(|n| n == "node_modules") {
                return below;
            }
            below = Some(a.to_path_buf());
        }
        None
    }
    /// Why the executable is not run from where it is, if it is not: the
    /// place that would delete or replace it.
    pub fn unstable_reason(&self) -> Option<String> {
        if let Some(t) = self.target_dir() {
            return Some(format!("cargo's target dir {}, which `cargo clean` deletes", util::tilde(&self.env, &t)));
        }
        self.npm_package_dir().map(|p| {
            format!("the npm package {}, which `npm update` and `npm uninstall` replace", util::tilde(&self.env, &p))
        })
    }
    /// The directory our entries point at: the bin dir, or
    /// `$PRELOOP_HOME/bin` when the bin dir is in a cargo target dir or an
    /// npm package ([`Ctx::unstable_reason`]).
    pub fn hook_dir(&self) -> PathBuf {
        if self.unstable_reason().is_some() { self.preloop_home.join("bin") } else { self.bin_dir.clone() }
    }
    /// How the executable in the bin dir was installed.
    pub fn install_method(&self) -> InstallMethod {
        if self.npm_package_dir().is_some() {
            InstallMethod::Npm
        } else if self.target_dir().is_some() {
            InstallMethod::CargoBuild
        } else if self.bin_dir.ends_with(".cargo/bin") {
            InstallMethod::CargoInstall
        } else {
            InstallMethod::Prefix(self.bin_dir.parent().unwrap_or(&self.bin_dir).to_path_buf())
        }
    }
    /// The executable install links the hook commands to (in the bin dir).
    pub fn exe(&self) -> PathBuf {
        self.bin_dir.join(CLI_NAME)
    }
    /// The executable the hook commands link to (in the hook dir).
    pub fn hook_exe(&self) -> PathBuf {
        self.hook_dir().join(CLI_NAME)
    }
    /// The config files install wrote entries into, with their harness.
    pub fn recorded_configs(&self) -> Vec<(PathBuf, Harness)> {
        self.state()
            .get("configs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|c| {
                let path = PathBuf::from(c.get("path")?.as_str()?);
                let h = Harness::from_slug(c.get("harness")?.as_str()?)?;
                Some((path, h))
            })
            .collect()
    }
    /// Record (or forget) a config file holding entries of ours.
    pub(crate) fn set_config(&self, path: &Path, h: Harness, has_entries: bool) -> Result<()> {
        let mut configs = self.recorded_configs();
        configs.retain(|(p, _)| p != path);
        if has_entries {
            configs.push((path.to_path_buf(), h));
        }
        let v: Vec<Value> = configs.iter().map(|(p, h)| json!({"path": p, "harness": h.slug()})).collect();
        self.update_state("configs", json!(v))
    }
    /// The command an entry of ours runs (a link to [`Ctx::hook_exe`]).
    pub fn binary(&self, d: &HookDef) -> PathBuf {
        self.hook_dir().join(d.binary)
    }
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
    /// On install: the text uninstall must put back byte for byte, when
    /// taking our entries out of `after` would not give it (an empty file,
    /// an empty `"hooks": {}`): recorded in `install-state.json`.
    pub restore: Option<String>,
}

impl FileEdit {
    pub fn new(path: PathBuf, before: Option<String>, after: String) -> FileEdit {
        FileEdit { path, before, after, delete: false, backup: true, restore: None }
    }
    pub fn changed(&self) -> bool {
        self.delete || self.before.as_deref().unwrap_or("") != self.after
    }
    /// On uninstall: a Claude settings.json, Codex hooks.json or
    /// config.toml, or Gemini settings.json that install created and that
    /// now holds nothing (`{}`, or no TOML at all) is removed again, without
    /// a backup.
    pub fn delete_if_emptied(mut self, ctx: &Ctx) -> FileEdit {
        // `{}` (a JSON config) or nothing at all (Codex's config.toml).
        let empty = |t: &str| {
            t.trim().is_empty() || matches!(serde_json::from_str::<Value>(t), Ok(Value::Object(m)) if m.is_empty())
        };
        if let Some(b) = &self.before
            && !empty(b)
            && empty(&self.after)
            && ctx.created_files().contains(&self.path)
        {
            // Install created it and it held only our entries: nothing of
            // the user's to keep a backup of (a project's would be committed).
            self.delete = true;
            self.backup = false;
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

/// The text of `path`, None when it does not exist; a file that is not
/// text or cannot be read is refused, named as doctor names it (`~`).
pub(crate) fn read_opt(ctx: &Ctx, path: &Path) -> Result<Option<String>> {
    let shown = util::tilde(&ctx.env, path);
    match std::fs::read(path) {
        Ok(b) => String::from_utf8(b)
            .map(Some)
            .map_err(|_| Error::Refused(format!("{shown} is not UTF-8 text; not touching it"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Refused(format!("{shown}: {}; not touching it", fsutil::io_text(&e)))),
    }
}

/// A file install will not touch, and why, with the path shown as doctor
/// shows it (`~/.claude/settings.json`; newcomer 4, P14).
pub(crate) fn refuse(ctx: &Ctx, path: &Path, why: impl std::fmt::Display) -> Error {
    Error::Refused(format!(
        "{}: {why}; not touching it (fix or move the file, then run again)",
        util::tilde(&ctx.env, path)
    ))
}
