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
//! The commands: an entry runs `<hook dir>/preloop-<harness>-<event>`, a
//! hard link to the one `preloop-hooks` executable in the hook dir
//! ([`crate::links`]), made (or remade over an earlier version's separate
//! binaries) by every install; uninstall removes them once no config we
//! wrote still has entries of ours. The hook dir is the directory of this
//! executable, except where that is not a place to run hooks from: a cargo
//! target dir (`cargo clean` deletes it) or an npm package (`npm update` and
//! `npm uninstall` replace it): then the executable is copied to
//! `$PRELOOP_HOME/bin` and the hooks run that copy, so a hook costs one
//! native process start and never goes away under the harness.

use crate::dialect::{self, FolderTrust, Layout};
use crate::edit::{self, Desired, Owner};
use crate::hook_rows::{self, HookDef};
use crate::util;
use preloop_shared::words::{count, count_of, noun_for};
use preloop_shared::{Error, Harness, Result, fsutil};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::context::{read_opt, refuse};

pub use crate::context::{Ctx, FileEdit, InstallMethod, Plan, Scope};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Install,
    Uninstall,
}

/// Where a harness's files are is its dialect's answer: these two ask it
/// here, above the dialects (`Ctx` itself lives below them, in
/// [`crate::context`]).
impl Ctx {
    /// The config files a harness's hooks live in (the first one holds
    /// them; the others change with it).
    pub fn files(&self, h: Harness, scope: Scope) -> Vec<PathBuf> {
        dialect::of(h).files(self, scope)
    }
    /// The config file a harness's hooks live in.
    pub fn hooks_file(&self, h: Harness, scope: Scope) -> PathBuf {
        dialect::of(h).hooks_file(self, scope)
    }
}

/// The entry we write for one hook, in its harness's dialect.
pub fn entry_for(ctx: &Ctx, d: &HookDef) -> Value {
    let command = edit::shell_quote(&ctx.binary(d).to_string_lossy());
    dialect::of(d.harness()).entry(d, command, hook_rows::timeout_value(d, &ctx.settings))
}

pub fn desired(ctx: &Ctx, h: Harness) -> Desired {
    hook_rows::hooks_for(h).map(|d| (d.on.to_string(), entry_for(ctx, d))).collect()
}

/// Whether the executable the hook commands link to is missing.
pub fn exe_missing(ctx: &Ctx) -> bool {
    !util::is_executable(&ctx.exe())
}

/// Work out the change for one harness without writing anything.
pub fn plan(ctx: &Ctx, h: Harness, scope: Scope, action: Action) -> Result<Plan> {
    let want = match action {
        Action::Install => desired(ctx, h),
        Action::Uninstall => Vec::new(),
    };
    let d = dialect::of(h);
    let hook_dir = ctx.hook_dir();
    let owner = Owner::new(h, &hook_dir);
    let mut notes = Vec::new();
    let mut edits = Vec::new();
    let path = d.hooks_file(ctx, scope);
    let before = read_opt(ctx, &path)?;
    let before_text = before.as_deref().unwrap_or("");
    let before_doc = match (edit::parse_config(before_text, d.syntax()), d.layout()) {
        // A file that is ours alone: whatever it holds is replaced.
        (Err(_), Layout::OwnFile) => json!({}),
        (parsed, _) => parsed.map_err(|e| refuse(ctx, &path, e))?,
    };
    let extra = d.rejected_keys(&before_doc);
    if !extra.is_empty() {
        let allowed: Vec<String> = d.top_level_keys().unwrap_or_default().iter().map(|k| format!("{k:?}")).collect();
        return Err(refuse(
            ctx,
            &path,
            format!(
                "{} rejects a {} with the top-level {} {extra:?} (only {} are allowed), so no hook in it runs",
                d.short_name(),
                path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default(),
                noun_for(extra.len(), "key", "keys"),
                allowed.join(" and ")
            ),
        ));
    }
    let after = match d.layout() {
        Layout::Grouped => {
            edit::edit_grouped(before_text, &owner, &want, d.syntax()).map_err(|e| refuse(ctx, &path, e))?
        }
        Layout::Flat => edit::edit_flat(before_text, &owner, &want, d.syntax()).map_err(|e| refuse(ctx, &path, e))?,
        Layout::OwnFile => d.own_file(ctx, &want),
    };
    let after_doc = edit::parse_config(&after, d.syntax()).map_err(|e| refuse(ctx, &path, e))?;
    let companions = d.companion_edits(ctx, &path, &before_doc, &after_doc, &owner)?;
    let mut main = FileEdit::new(path.clone(), before.clone(), after);
    if matches!(d.layout(), Layout::Grouped | Layout::Flat)
        && let Some(before) = &before
    {
        match action {
            // What uninstall would make of this install's text: when that is
            // not the text before it (the first install's, across reinstalls),
            // the original is recorded and put back (red-team 4, P9).
            Action::Install if main.changed() => {
                let orig = ctx.restore_for(&path, before).unwrap_or_else(|| before.clone());
                let undo = match d.layout() {
                    Layout::Grouped => edit::edit_grouped(&main.after, &owner, &Vec::new(), d.syntax()),
                    // (`OwnFile` is not in this branch: its file is all ours.)
                    Layout::Flat | Layout::OwnFile => edit::edit_flat(&main.after, &owner, &Vec::new(), d.syntax()),
                };
                if undo.ok().as_deref() != Some(orig.as_str()) {
                    main.restore = Some(orig);
                }
            }
            Action::Uninstall => {
                if let Some(orig) = ctx.restore_for(&path, before) {
                    main.after = orig;
                }
            }
            Action::Install => {}
        }
    }
    match d.layout() {
        Layout::Grouped => main = main.delete_if_emptied(ctx),
        // Cursor's hooks.json stays (deleting it does not unload hooks).
        Layout::Flat => {}
        Layout::OwnFile => {
            main.backup = false;
            main.delete = action == Action::Uninstall && before.is_some();
        }
    }
    edits.push(main);
    edits.extend(companions);
    if action == Action::Install && scope == Scope::Project {
        let trust = d.folder_trust(ctx);
        if trust != FolderTrust::Trusted
            && let Some((note, _)) = d.untrusted_folder(ctx, &path, trust)
        {
            notes.push(note);
        }
    }
    // What is the user's though it looks like ours, and Preloop's own hooks.
    if d.has_lookalikes() {
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
        Some(e) => edit::parse_config(&e.after, d.syntax()).map(|v| edit::our_entries(&v, &owner).len()).unwrap_or(0),
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
        // The folders this write creates (`<project>/.codex/`): uninstall
        // removes them again once empty, and never one that was there.
        let mut new_dirs: Vec<PathBuf> = Vec::new();
        if !e.delete {
            let mut d = e.path.parent();
            while let Some(dir) = d
                && dir.symlink_metadata().is_err()
            {
                new_dirs.push(dir.to_path_buf());
                d = dir.parent();
            }
        }
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
        if !new_dirs.is_empty() {
            let mut dirs = ctx.created_dirs();
            dirs.extend(new_dirs.into_iter().filter(|d| !dirs.contains(d)).collect::<Vec<_>>());
            ctx.update_state("dirs", json!(dirs))?;
        }
        match (&e.restore, e.before.as_deref()) {
            (Some(orig), _) => ctx.set_restore(&e.path, Some((orig, &e.after)))?,
            // An install whose undo gives the text back, or an uninstall:
            // nothing (more) to put back.
            _ => ctx.set_restore(&e.path, None)?,
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
            util::tilde(&ctx.env, home)
        )));
    }
    if create {
        fsutil::private_dir(home).map_err(|e| {
            Error::Config(format!(
                "PRELOOP_HOME {} cannot be created: {} (point PRELOOP_HOME at a directory you can write); nothing was changed",
                util::tilde(&ctx.env, home),
                match &e {
                    Error::Io { source, .. } => fsutil::io_text(source),
                    other => other.to_string(),
                }
            ))
        })?;
    }
    Ok(())
}

/// Put the executable where the hooks run it from and make every hook
/// command there a link to it ([`crate::links`]): a copy in
/// `$PRELOOP_HOME/bin` when this one sits in a cargo target dir or an npm
/// package, else the links go beside it. Earlier versions' separate hook
/// binaries under those names are replaced by links.
fn place_commands(ctx: &Ctx, dry_run: bool) -> Result<()> {
    let hook_dir = ctx.hook_dir();
    let exe = ctx.hook_exe();
    let t = |p: &Path| util::tilde(&ctx.env, p);
    if let Some(why) = ctx.unstable_reason() {
        if dry_run {
            crate::outln!(
                "(this executable is in {why}: install would hard-link or copy it to {} and run the hooks from there)",
                t(&hook_dir)
            );
            return Ok(());
        }
        if !util::sync_binaries(&ctx.bin_dir, &hook_dir, &[crate::names::CLI_NAME])?.is_empty() {
            // A hard link where the file system allows (one file on disk; an
            // upgrade or uninstall of the package replaces its own name only).
            let how = if crate::links::is_link_to(&ctx.exe(), &exe) { "hard-linked" } else { "copied" };
            crate::outln!(
                "{how} {} to {} (it was in {why}; run install again after an upgrade)",
                crate::names::CLI_NAME,
                t(&hook_dir)
            );
        }
    }
    if dry_run {
        let pending =
            crate::links::names().into_iter().filter(|n| !crate::links::is_link_to(&hook_dir.join(n), &exe)).count();
        if pending > 0 {
            crate::outln!("(install would link {} in {} to {})", count(pending, "hook command"), t(&hook_dir), t(&exe));
        }
        return Ok(());
    }
    let linked = crate::links::link_all(&exe, &hook_dir)?;
    // Only what this install made is this HOME's to take out again: a name
    // that was there already belongs to whoever put it there.
    if !linked.created.is_empty() {
        ctx.record_commands(&hook_dir, &linked.created, true)?;
    }
    if !linked.replaced.is_empty() {
        let n = linked.replaced.len();
        // What they were: links to an older executable (an upgrade, a
        // rebuild) or an earlier version's binary per hook (newcomer 4, P11).
        let were = match linked.replaced_links {
            0 => "earlier versions installed a binary per hook",
            l if l == n => noun_for(n, "it linked to an older preloop-hooks", "they linked to an older preloop-hooks"),
            _ => "they linked to an older preloop-hooks, or were an earlier version's binaries",
        };
        crate::outln!(
            "replaced {} in {} by {}s to {} ({were})",
            count(n, "hook command"),
            t(&hook_dir),
            linked.how,
            crate::names::CLI_NAME
        );
    }
    if !linked.created.is_empty() {
        crate::outln!(
            "linked {} in {} to {} ({}s: one file on disk)",
            count(linked.created.len(), "hook command"),
            t(&hook_dir),
            crate::names::CLI_NAME,
            linked.how
        );
    }
    // The harness configs name the hook commands by absolute path; the
    // operator runs `preloop-hooks` by name (README's next step is `doctor`).
    if ctx.unstable_reason().is_none() && !on_path(ctx.env.get("PATH").as_deref(), &hook_dir) {
        crate::outln!(
            "note: {} is not on PATH; add it to run {} by name (e.g. export PATH=\"{}:$PATH\" in your shell profile)",
            t(&hook_dir),
            crate::names::CLI_NAME,
            hook_dir.display()
        );
    }
    Ok(())
}

/// Whether `dir` is one of the directories of `path` (a `PATH` value).
fn on_path(path: Option<&str>, dir: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let want = canon(dir);
    path.unwrap_or_default().split(':').filter(|d| !d.is_empty()).any(|d| canon(Path::new(d)) == want)
}

/// The directories the entries of ours in `text` (a harness config) run
/// their commands from; `None` when the file cannot be parsed.
fn entry_dirs(text: &str, h: Harness, hook_dir: &Path) -> Option<Vec<PathBuf>> {
    let doc = edit::parse_config(text, dialect::of(h).syntax()).ok()?;
    let mut dirs: Vec<PathBuf> = Vec::new();
    for e in edit::our_entries(&doc, &Owner::new(h, hook_dir)) {
        if let Some(d) = Path::new(&edit::program_of(&e.command)).parent()
            && !dirs.iter().any(|x| x == d)
        {
            dirs.push(d.to_path_buf());
        }
    }
    Some(dirs)
}

/// Why the hook commands in `dir` (outside `$PRELOOP_HOME/bin`) are not
/// this HOME's to remove, if they are not (red-team 4, P2): another
/// account's directory, a name this HOME's install did not create, or a
/// directory outside this HOME, which other HOMEs and accounts may install
/// from too. Decided before anything is removed, so an uninstall never
/// fails half-way on a directory it may not write (P9).
fn not_ours_to_remove(ctx: &Ctx, dir: &Path, recorded: &[String], present: &[&str]) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(dir).map(|m| m.uid()).ok();
    if let Some(uid) = owner
        && uid != fsutil::euid()
    {
        return Some(format!("the directory belongs to uid {uid}, another account whose hooks may run them"));
    }
    if !present.iter().any(|n| recorded.iter().any(|r| r == n)) {
        return Some("this HOME's install did not create them; another HOME's hooks may run them".into());
    }
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if !canon(dir).starts_with(canon(&ctx.home)) {
        return Some("they are outside this HOME, where other HOMEs' and accounts' hooks may run them".into());
    }
    None
}

/// After an uninstall: remove the hook commands from each directory our
/// entries ran them from (`dirs`, and the hook dir), and the copy of the
/// executable in `$PRELOOP_HOME/bin`, once no config install wrote into,
/// nor the user or this project's config of any harness, still has entries
/// that run commands there. Outside `$PRELOOP_HOME/bin` only the commands
/// this HOME's install created, in a directory of this HOME that this uid
/// owns ([`not_ours_to_remove`]). Returns what is kept and why; a command
/// that cannot be removed is kept and said, never an error after the
/// configs changed.
fn remove_commands(ctx: &Ctx, dirs: &[PathBuf]) -> Result<Vec<String>> {
    let hook_dir = ctx.hook_dir();
    let own_bin = ctx.preloop_home.join("bin");
    let mut files: Vec<(PathBuf, Harness)> = ctx.recorded_configs();
    for d in dialect::all() {
        for scope in [Scope::User, Scope::Project] {
            let p = d.hooks_file(ctx, scope);
            if !files.iter().any(|(f, _)| *f == p) {
                files.push((p, d.harness()));
            }
        }
    }
    // Which directory each remaining entry of ours runs from, and where.
    let mut used: Vec<(PathBuf, String)> = Vec::new();
    let mut unreadable: Vec<String> = Vec::new();
    for (p, h) in &files {
        match std::fs::read_to_string(p) {
            Ok(t) => match entry_dirs(&t, *h, &hook_dir) {
                Some(ds) => used.extend(ds.into_iter().map(|d| (d, util::tilde(&ctx.env, p)))),
                None => unreadable.push(util::tilde(&ctx.env, p)),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            // A file we cannot read may still hold entries.
            Err(_) => unreadable.push(util::tilde(&ctx.env, p)),
        }
    }
    let mut candidates: Vec<PathBuf> = vec![hook_dir.clone()];
    for d in dirs {
        if !candidates.contains(d) {
            candidates.push(d.clone());
        }
    }
    let created = ctx.created_commands();
    let mut kept = Vec::new();
    for dir in candidates {
        let shown = util::tilde(&ctx.env, &dir);
        let users: Vec<String> = if unreadable.is_empty() {
            used.iter().filter(|(d, _)| *d == dir).map(|(_, f)| f.clone()).collect()
        } else {
            unreadable.clone()
        };
        if !users.is_empty() {
            let mut users = users;
            users.dedup();
            kept.push(format!("the hook commands in {shown} (still used by {})", users.join(", ")));
            continue;
        }
        let exe = dir.join(crate::names::CLI_NAME);
        let present = crate::links::ours_in(&exe, &dir);
        let recorded: Vec<String> = created.iter().find(|(d, _)| *d == dir).map(|(_, n)| n.clone()).unwrap_or_default();
        let mut remove: Vec<&'static str> = present.clone();
        if dir != own_bin {
            if let Some(why) =
                (!present.is_empty()).then(|| not_ours_to_remove(ctx, &dir, &recorded, &present)).flatten()
            {
                kept.push(left_commands(ctx, present.len(), &dir, &why));
                continue;
            }
            remove.retain(|n| recorded.iter().any(|r| r == n));
        }
        let (removed, failed) = crate::links::unlink(&dir, &remove);
        if !removed.is_empty() {
            crate::outln!("removed {} from {shown}", count(removed.len(), "hook command"));
            if dir != own_bin {
                ctx.record_commands(&dir, &removed, false)?;
            }
        }
        if let Some((name, e)) = failed {
            kept.push(left_commands(ctx, remove.len() - removed.len(), &dir, &format!("removing {name}: {e}")));
        } else if removed.len() < present.len() {
            kept.push(left_commands(
                ctx,
                present.len() - removed.len(),
                &dir,
                "this HOME's install did not create them; another HOME's hooks may run them",
            ));
        }
        // The copy install made of an executable in a cargo target dir or an npm package.
        if dir == hook_dir && dir == own_bin && ctx.unstable_reason().is_some() && exe.exists() {
            match std::fs::remove_file(&exe) {
                Ok(()) => crate::outln!("removed the copy {}", util::tilde(&ctx.env, &exe)),
                Err(e) => kept.push(format!(
                    "the copy {} (removing it: {})",
                    util::tilde(&ctx.env, &exe),
                    fsutil::io_text(&e)
                )),
            }
        }
    }
    Ok(kept)
}

/// "the N hook commands in DIR (why: how to remove them)".
fn left_commands(ctx: &Ctx, n: usize, dir: &Path, why: &str) -> String {
    format!(
        "the {} in {} ({why}; once none does, `cd {} && preloop-hooks links --list | xargs rm -f` removes {})",
        count(n, "hook command"),
        util::tilde(&ctx.env, dir),
        edit::shell_quote(&dir.to_string_lossy()),
        noun_for(n, "it", "them")
    )
}

pub fn run(ctx: &Ctx, req: &Request) -> Result<()> {
    let verb = if req.action == Action::Install { "install" } else { "uninstall" };
    // An uninstall on a machine without $PRELOOP_HOME leaves none behind.
    let home_existed = ctx.preloop_home.exists();
    check_preloop_home(ctx, !req.dry_run)?;
    // One install at a time: the harness files and install-state.json are
    // read, changed and written back.
    let _lock = if req.dry_run {
        None
    } else {
        Some(fsutil::lock(&ctx.preloop_home.join("install.lock"), Duration::from_secs(60))?)
    };
    if req.action == Action::Install && exe_missing(ctx) {
        return Err(Error::Refused(format!(
            "no {} executable in {}: nothing was changed (point --bin-dir at the directory that holds it)",
            crate::names::CLI_NAME,
            ctx.bin_dir.display()
        )));
    }
    // The commands are placed once a harness's plan is known to go ahead,
    // so an install refused for every harness leaves nothing behind.
    let mut placed = false;
    let mut failures: Vec<String> = Vec::new();
    let mut touched_dirs: Vec<PathBuf> = Vec::new();
    // Where the entries of ours ran their commands from before the change.
    let mut command_dirs: Vec<PathBuf> = Vec::new();
    for &h in &req.harnesses {
        let plan = match plan(ctx, h, req.scope, req.action) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{}: {e}", h.slug()));
                continue;
            }
        };
        if req.action == Action::Install && !placed {
            place_commands(ctx, req.dry_run)?;
            placed = true;
        }
        if !req.dry_run {
            // Which configs hold entries of ours: uninstall removes the hook
            // commands only once none does.
            ctx.set_config(&plan.edits[0].path, h, plan.entries > 0)?;
        }
        if let Some(before) = &plan.edits[0].before {
            for d in entry_dirs(before, h, &ctx.hook_dir()).unwrap_or_default() {
                if !command_dirs.contains(&d) {
                    command_dirs.push(d);
                }
            }
        }
        let changed: Vec<&FileEdit> = plan.edits.iter().filter(|e| e.changed()).collect();
        let main_file = util::tilde(&ctx.env, &plan.edits[0].path);
        if changed.is_empty() {
            let state = if req.action == Action::Install {
                format!("already installed ({})", count(plan.entries, "hook"))
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
                crate::output::out_text(&diff(ctx, e));
            }
        } else {
            let written = apply(ctx, &plan)?;
            let what = if req.action == Action::Install {
                format!("installed {} in", count(plan.entries, "hook"))
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
            if util::find_program(program).is_none() {
                let how = if req.dry_run { "it would be installed anyway" } else { "installed anyway" };
                notes.insert(0, format!("{program} not found on PATH; {how}"));
            }
            if let Some(n) = dialect::of(h).install_note().filter(|_| !changed.is_empty()) {
                notes.push(n.into());
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
        let kept = remove_commands(ctx, &command_dirs)?;
        for d in ctx.remove_empty_created_dirs()? {
            crate::outln!("{:<12}   removed {} (install created it; it is empty)", "", util::tilde(&ctx.env, &d));
        }
        if !home_existed {
            drop(_lock);
            forget_home(ctx);
        }
        leftovers(ctx, &touched_dirs, kept);
    }
    if !failures.is_empty() {
        for f in &failures[..failures.len() - 1] {
            crate::errln!("preloop-hooks: {f}");
        }
        let last = failures.last().cloned().unwrap_or_default();
        return Err(Error::Refused(if failures.len() == 1 {
            format!("{verb} refused: {last}")
        } else {
            format!("{last} ({verb} refused for {})", count_of(failures.len(), "harness", "harnesses"))
        }));
    }
    Ok(())
}

/// After an uninstall that had to create `$PRELOOP_HOME` (for its lock and
/// state): remove what it wrote there, and the directory once empty.
fn forget_home(ctx: &Ctx) {
    for name in ["install.lock", "install-state.json"] {
        let _ = std::fs::remove_file(ctx.preloop_home.join(name));
    }
    let _ = std::fs::remove_dir(&ctx.preloop_home);
}

/// After an uninstall: what is left on purpose, and how to remove it.
fn leftovers(ctx: &Ctx, dirs: &[PathBuf], kept: Vec<String>) {
    let mut backups: Vec<PathBuf> = Vec::new();
    for d in dirs {
        for n in fsutil::list_names(d).into_iter().filter(|n| n.contains(".bak.preloop-")) {
            backups.push(d.join(n));
        }
    }
    let mut parts: Vec<String> = kept;
    let exe = ctx.exe();
    if exe.exists()
        && let Some(how) = ctx.install_method().remove(&ctx.env, &exe)
    {
        parts.push(format!("this executable, {} (`{how}` removes it)", util::tilde(&ctx.env, &exe)));
    }
    if ctx.preloop_home.exists() {
        parts.push(format!(
            "{} (notes, sessions, log{}: `rm -r {}` when you no longer need them)",
            util::tilde(&ctx.env, &ctx.preloop_home),
            if ctx.hook_exe().exists() && ctx.unstable_reason().is_some() { ", the copied executable" } else { "" },
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
        parts.push(format!(
            "{}: {} (`rm {}` removes {})",
            count(backups.len(), "backup file"),
            globs.join(" "),
            globs.join(" "),
            noun_for(backups.len(), "it", "them")
        ));
    }
    if !parts.is_empty() {
        crate::outln!("left in place: {}", parts.join("; "));
    }
}

#[cfg(test)]
mod tests {
    use super::on_path;
    use std::path::Path;

    #[test]
    fn a_directory_is_on_path_when_a_path_entry_names_it() {
        let d = std::env::temp_dir();
        let d = d.as_path();
        assert!(on_path(Some(&format!("/usr/bin:{}:/bin", d.display())), d));
        assert!(on_path(Some(&format!("{}/", d.display())), d), "a trailing slash names the same directory");
        assert!(!on_path(Some("/usr/bin:/bin"), d));
        assert!(!on_path(Some(""), d));
        assert!(!on_path(None, d));
        assert!(!on_path(Some("::"), Path::new("/nonexistent/bin")));
    }
}
