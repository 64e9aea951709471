//! The hook commands on disk: every `preloop-<harness>-<event>` name of the
//! registry is a hard link to the one `preloop-hooks` executable beside it
//! (a symlink where the file system refuses hard links, a copy where it
//! refuses both), so harness configs name a command per event while the disk
//! holds one file ([`crate::multicall`] dispatches on the name).
//!
//! Every name is replaced by a rename, so a hook starting meanwhile runs
//! either the old file or the new one, never a half-written one; an earlier
//! version's separate binaries under those names are replaced the same way.

use crate::util;
use preloop_shared::fsutil::{io_text, note_id};
use preloop_shared::{Error, Result, registry};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Every hook command name, in registry order.
pub fn names() -> Vec<&'static str> {
    registry::binaries()
}

/// What [`link_all`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Linked {
    /// Names that were missing and now link to the executable.
    pub created: Vec<&'static str>,
    /// Names that held another file (an earlier version's own binary, or a
    /// link to an older executable) and now link to this one.
    pub replaced: Vec<&'static str>,
    /// How many of `replaced` were links to another executable (an older
    /// copy, as after an upgrade), not an earlier version's own binaries.
    pub replaced_links: usize,
    /// How the names link: `hard link`, `symlink` or `copy`.
    pub how: &'static str,
}

impl Linked {
    pub fn changed(&self) -> usize {
        self.created.len() + self.replaced.len()
    }
}

/// Whether `path` is the same file as `exe` (a hard link to it, or a
/// symlink that resolves to it).
pub fn is_link_to(path: &Path, exe: &Path) -> bool {
    match (fs::metadata(path), fs::metadata(exe)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Make every hook command in `dir` a link to `exe` (created 0755 when
/// missing). A name already linked to `exe` is left as it is.
pub fn link_all(exe: &Path, dir: &Path) -> Result<Linked> {
    fs::create_dir_all(dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    let mut out = Linked { how: "hard link", ..Linked::default() };
    // Read before anything is replaced: a symlink, or a file with other
    // names, is a link to some executable (an earlier version's own
    // binaries had one name each).
    let before: Vec<Option<fs::Metadata>> = names().iter().map(|n| dir.join(n).symlink_metadata().ok()).collect();
    for (name, before) in names().into_iter().zip(before) {
        let dst = dir.join(name);
        if is_link_to(&dst, exe) {
            continue;
        }
        let was_link = before.as_ref().is_some_and(|m| m.file_type().is_symlink() || m.nlink() > 1);
        out.how = replace_with_link(exe, &dst)?;
        if before.is_some() {
            out.replaced.push(name);
            out.replaced_links += usize::from(was_link);
        } else {
            out.created.push(name);
        }
    }
    Ok(out)
}

/// Make `dst` a link to `exe` unless it is one already.
pub fn link_one(exe: &Path, dst: &Path) -> Result<()> {
    if !is_link_to(dst, exe) {
        if let Some(d) = dst.parent() {
            fs::create_dir_all(d).map_err(|e| Error::io(format!("create {}", d.display()), e))?;
        }
        replace_with_link(exe, dst)?;
    }
    Ok(())
}

/// The hook commands in `dir` that are ours: links to `exe`, or copies of
/// it. A file of another name, or one that is not ours, is not.
pub fn ours_in(exe: &Path, dir: &Path) -> Vec<&'static str> {
    names().into_iter().filter(|n| is_link_to(&dir.join(n), exe) || copy_of(&dir.join(n), exe)).collect()
}

/// Remove `names` from `dir`, stopping at the first that cannot be
/// removed: the names removed, and that one with the reason (no OS error
/// number). A name already gone counts as removed.
pub fn unlink(dir: &Path, names: &[&'static str]) -> (Vec<&'static str>, Option<(&'static str, String)>) {
    let mut removed = Vec::new();
    for &name in names {
        match fs::remove_file(dir.join(name)) {
            Ok(()) => removed.push(name),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => removed.push(name),
            Err(e) => return (removed, Some((name, io_text(&e)))),
        }
    }
    (removed, None)
}

/// A copy [`link_all`] made where the file system took no link.
fn copy_of(p: &Path, exe: &Path) -> bool {
    p.symlink_metadata().is_ok_and(|m| m.file_type().is_file()) && util::same_file_content(p, exe)
}

/// Put a link to `exe` at `dst` through a temporary name and a rename.
fn replace_with_link(exe: &Path, dst: &Path) -> Result<&'static str> {
    let dir = dst.parent().unwrap_or(Path::new("."));
    let tmp =
        dir.join(format!(".{}.preloop-{}.tmp", dst.file_name().and_then(|n| n.to_str()).unwrap_or("x"), note_id()));
    let how = if fs::hard_link(exe, &tmp).is_ok() {
        "hard link"
    } else if std::os::unix::fs::symlink(symlink_target(exe, dir), &tmp).is_ok() {
        "symlink"
    } else {
        fs::copy(exe, &tmp).and_then(|_| fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))).map_err(
            |e| {
                let _ = fs::remove_file(&tmp);
                Error::io(format!("link or copy {} to {}", exe.display(), dst.display()), e)
            },
        )?;
        "copy"
    };
    fs::rename(&tmp, dst).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        Error::Refused(format!("cannot replace {}: {}", dst.display(), io_text(&e)))
    })?;
    Ok(how)
}

/// A symlink beside the executable names it by file name alone (the pair
/// can move together); elsewhere by its absolute path.
fn symlink_target(exe: &Path, dir: &Path) -> PathBuf {
    match (exe.parent(), exe.file_name()) {
        (Some(p), Some(n)) if p == dir => PathBuf::from(n),
        _ => exe.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("preloop-links-{tag}-{}", note_id()));
        fs::create_dir_all(&p).unwrap();
        p
    }

    #[test]
    fn links_every_name_once_replaces_old_copies_and_unlinks_only_ours() {
        let dir = temp("a");
        let exe = dir.join("preloop-hooks");
        fs::write(&exe, b"new executable").unwrap();
        // An earlier version's own binary under one name, and a stranger.
        fs::write(dir.join("preloop-codex-stop"), b"old binary").unwrap();
        fs::write(dir.join("preloop-other"), b"not ours").unwrap();
        let first = link_all(&exe, &dir).unwrap();
        assert_eq!(first.how, "hard link");
        assert_eq!(first.replaced, vec!["preloop-codex-stop"]);
        assert_eq!(first.changed(), names().len());
        for n in names() {
            assert!(is_link_to(&dir.join(n), &exe), "{n}");
        }
        // Idempotent.
        assert_eq!(link_all(&exe, &dir).unwrap().changed(), 0);
        // A new executable (an upgrade) replaces every link.
        let tmp = dir.join("new");
        fs::write(&tmp, b"newer executable").unwrap();
        fs::rename(&tmp, &exe).unwrap();
        assert_eq!(link_all(&exe, &dir).unwrap().replaced.len(), names().len());
        let ours = ours_in(&exe, &dir);
        assert_eq!(ours.len(), names().len());
        let (removed, failed) = unlink(&dir, &ours);
        assert_eq!((removed.len(), failed), (names().len(), None));
        assert!(exe.exists() && dir.join("preloop-other").exists());
        // No temporary file is left behind.
        let left: Vec<String> = fsnames(&dir);
        assert_eq!(left, vec!["preloop-hooks".to_string(), "preloop-other".to_string()]);
        let _ = fs::remove_dir_all(&dir);
    }

    fn fsnames(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }
}
