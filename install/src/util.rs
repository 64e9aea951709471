//! Small helpers: home and program lookup, safe writes, output, redaction.

use preloop_shared::config::{Config, Env, Secret};
use preloop_shared::fsutil::io_text;
use preloop_shared::{Error, Result};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The user's home directory, resolved exactly as the hooks resolve it
/// (`$HOME` when set and absolute, else the passwd entry).
pub fn home_dir(env: &Env) -> Option<PathBuf> {
    preloop_shared::config::user_home(env)
}

/// `~/x` for paths under `home` (display only).
pub fn tilde_in(home: &Path, p: &Path) -> String {
    preloop_shared::config::tilde_in(home, p)
}

/// `~/x` for paths under the home directory of `env` (display only).
pub fn tilde(env: &Env, p: &Path) -> String {
    match home_dir(env) {
        Some(h) => tilde_in(&h, p),
        None => p.display().to_string(),
    }
}

pub fn is_executable(p: &Path) -> bool {
    fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// A program on `PATH`: the one the user's shell would run (shipped code
/// knows no other place; the tests put the harness they drive on `PATH`).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| is_executable(p))
}

/// Run a program with a deadline; its trimmed stdout when it exits 0.
pub fn output_with_timeout(cmd: &mut Command, timeout: Duration) -> Option<String> {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let out = reader.join().ok()?;
                return status.success().then(|| out.trim().to_string());
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// `20261202T101500Z`
pub fn stamp() -> String {
    preloop_shared::time::Timestamp::now()
        .to_iso_z()
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect::<String>()
        + "Z"
}

/// Every token the configuration knows (runtime and user), for [`redact`].
pub fn secrets(config: &Config) -> Vec<Secret> {
    let mut out: Vec<Secret> = Vec::new();
    if let Some(s) = &config.server {
        out.push(s.token.clone());
    }
    if let Some((t, _)) = &config.user_token {
        out.push(t.clone());
    }
    let env = Env::process();
    for k in ["PRELOOP_TOKEN", "PRELOOP_USER_TOKEN"] {
        if let Some(t) = env.get(k).filter(|t| !t.is_empty()) {
            out.push(Secret::new(t));
        }
    }
    out
}

/// `text` with every token in `secrets` replaced, plain or escaped (the
/// engine's one redaction function, `preloop_shared::redact`).
pub fn redact(text: &str, secrets: &[Secret]) -> String {
    let refs: Vec<&Secret> = secrets.iter().collect();
    preloop_shared::redact::redact(text, &refs)
}

/// Copy `src` to a new file `dst`, never through a symlink: the backup is
/// created with `O_CREAT|O_EXCL|O_NOFOLLOW` (a name planted in advance,
/// dangling link or not, makes it fail) and the bytes are copied.
fn copy_new(src: &Path, dst: &Path, mode: u32) -> std::io::Result<()> {
    let bytes = fs::read(src)?;
    let mut f =
        fs::OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(dst)?;
    f.write_all(&bytes)?;
    f.sync_all()?;
    f.set_permissions(fs::Permissions::from_mode(mode & 0o7777))
}

/// A backup of `target` next to it: `<name>.bak.preloop-<stamp>[-N]`,
/// created fresh (never written through a link planted at that name).
fn backup(target: &Path, mode: u32) -> Result<PathBuf> {
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target.file_name().and_then(|n| n.to_str()).unwrap_or("config").to_string();
    let base = format!("{name}.bak.preloop-{}", stamp());
    for n in 1..1000 {
        let b = if n == 1 { dir.join(&base) } else { dir.join(format!("{base}-{n}")) };
        match copy_new(target, &b, mode) {
            Ok(()) => return Ok(b),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            // ELOOP: a symlink sits at that name.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => continue,
            Err(e) => {
                return Err(Error::Io {
                    context: format!("back up {} to {}", target.display(), b.display()),
                    source: std::io::Error::new(e.kind(), io_text(&e)),
                });
            }
        }
    }
    Err(Error::Refused(format!("back up {}: too many backups with this time stamp", target.display())))
}

fn io_err(context: String, e: std::io::Error) -> Error {
    Error::Io { context, source: std::io::Error::new(e.kind(), io_text(&e)) }
}

/// Write `text` to `path` atomically (a temporary file in the same
/// directory, fsync'd, renamed over it), first copying the previous file to
/// `<name>.bak.preloop-<stamp>` when `keep_backup` and there is one. A
/// symlinked config is written through to its target, so the link stays.
/// The file keeps its mode (new files: 0644, they hold no secrets).
/// Returns the backup path.
pub fn write_file(path: &Path, text: &str, keep_backup: bool) -> Result<Option<PathBuf>> {
    let target = match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            fs::canonicalize(path).map_err(|e| io_err(format!("resolve {}", path.display()), e))?
        }
        _ => path.to_path_buf(),
    };
    let dir = target.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(|e| io_err(format!("create {}", dir.display()), e))?;
    let name = target.file_name().and_then(|n| n.to_str()).unwrap_or("config").to_string();
    let (mode, backup) = match fs::metadata(&target) {
        Ok(m) => {
            let mode = m.permissions().mode() & 0o7777;
            (mode, if keep_backup { Some(backup(&target, mode)?) } else { None })
        }
        Err(_) => (0o644, None),
    };
    let tmp = dir.join(format!(".{name}.preloop-{}-{}.tmp", std::process::id(), preloop_shared::fsutil::note_id()));
    let res = (|| -> std::io::Result<()> {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        fs::rename(&tmp, &target)
    })();
    if let Err(e) = res {
        let _ = fs::remove_file(&tmp);
        return Err(io_err(format!("write {}", target.display()), e));
    }
    Ok(backup)
}

/// [`write_file`] with a backup.
pub fn write_with_backup(path: &Path, text: &str) -> Result<Option<PathBuf>> {
    write_file(path, text, true)
}

/// Remove a config file, after copying it to a backup when `keep_backup`
/// (see [`write_file`]). A symlinked config: the link goes, its target stays.
pub fn remove_file(path: &Path, keep_backup: bool) -> Result<Option<PathBuf>> {
    let meta = fs::symlink_metadata(path).map_err(|e| io_err(format!("remove {}", path.display()), e))?;
    let b = if keep_backup && meta.is_file() { Some(backup(path, meta.permissions().mode())?) } else { None };
    fs::remove_file(path).map_err(|e| io_err(format!("remove {}", path.display()), e))?;
    Ok(b)
}

/// Whether `dir` lies inside a cargo target directory (`cargo clean`
/// deletes it): an ancestor holds cargo's `CACHEDIR.TAG` or `.rustc_info.json`.
pub fn in_cargo_target_dir(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|a| {
            a.join(".rustc_info.json").is_file()
                || fs::read_to_string(a.join("CACHEDIR.TAG")).is_ok_and(|t| t.contains("created by cargo"))
        })
        .map(Path::to_path_buf)
}

/// Copy (hard link when possible) `names` from `from` into `to` (created
/// 0755), replacing each by rename so a running hook keeps its old file.
/// Returns the names that changed.
pub fn sync_binaries(from: &Path, to: &Path, names: &[&str]) -> Result<Vec<String>> {
    fs::create_dir_all(to).map_err(|e| io_err(format!("create {}", to.display()), e))?;
    let mut changed = Vec::new();
    for name in names {
        let src = from.join(name);
        let dst = to.join(name);
        if same_file_content(&src, &dst) {
            continue;
        }
        let tmp = to.join(format!(".{name}.preloop-{}.tmp", preloop_shared::fsutil::note_id()));
        let res = fs::hard_link(&src, &tmp).or_else(|_| {
            fs::copy(&src, &tmp)?;
            fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))
        });
        if let Err(e) = res.and_then(|_| fs::rename(&tmp, &dst)) {
            let _ = fs::remove_file(&tmp);
            return Err(io_err(format!("copy {} to {}", src.display(), dst.display()), e));
        }
        changed.push(name.to_string());
    }
    Ok(changed)
}

/// Whether two files hold the same bytes (both must exist).
pub fn same_file_content(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(ma), Ok(mb)) if ma.dev() == mb.dev() && ma.ino() == mb.ino() => true,
        (Ok(ma), Ok(mb)) if ma.len() == mb.len() => match (fs::read(a), fs::read(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        },
        _ => false,
    }
}

/// Print rows as an aligned table (the last column is not padded).
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    for l in table_lines(header, rows, None) {
        crate::outln!("{l}");
    }
}

/// The lines of a table: columns two spaces apart, each as wide as its
/// widest cell. With a `width`, a line longer than it has its last cell
/// continued on the next lines under that column, broken after its commas
/// (`6/6, 6 trusted, folder not trusted`; a piece still longer than the
/// room, after its spaces), so the table fits the terminal
/// (or 80 columns) wherever the other columns leave room.
pub fn table_lines(header: &[&str], rows: &[Vec<String>], width: Option<usize>) -> Vec<String> {
    let n = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let last_at: usize = widths.iter().take(n.saturating_sub(1)).map(|w| w + 2).sum();
    let mut out = Vec::new();
    let mut line = |cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            s.push_str(c);
            if i + 1 < cells.len() {
                let w = widths.get(i).copied().unwrap_or(0);
                s.push_str(&" ".repeat(w.saturating_sub(c.chars().count()) + 2));
            }
        }
        let s = s.trim_end().to_string();
        match width {
            Some(w) if s.chars().count() > w && cells.len() == n && last_at + 8 <= w => {
                // The last cell, broken after its commas, under its column.
                let room = w - last_at;
                let head: String = s.chars().take(last_at).collect();
                let mut parts: Vec<String> = Vec::new();
                // After commas; a piece still too long, after its spaces.
                let pieces = cells[n - 1].split_inclusive(", ").flat_map(|p| {
                    if p.trim_end().chars().count() > room { p.split_inclusive(' ').collect() } else { vec![p] }
                });
                for piece in pieces {
                    match parts.last_mut() {
                        Some(p) if p.chars().count() + piece.trim_end().chars().count() <= room => p.push_str(piece),
                        _ => parts.push(piece.to_string()),
                    }
                }
                for (i, p) in parts.iter().enumerate() {
                    let lead = if i == 0 { head.clone() } else { " ".repeat(last_at) };
                    out.push(format!("{lead}{}", p.trim_end()));
                }
            }
            _ => out.push(s),
        }
    };
    line(&header.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    for r in rows {
        line(r);
    }
    out
}

/// Pretty JSON on stdout (`doctor`, `install`), as serde escapes it, with
/// the credentials of any URL in its strings hidden (red-team 3, N8).
pub fn print_json<T: serde::Serialize>(v: &T) {
    let mut v = serde_json::to_value(v).unwrap_or_default();
    preloop_shared::redact::redact_url_value(&mut v);
    crate::output::out_json(&v);
}

/// Read all of stdin, dropping one trailing newline.
pub fn read_stdin(what: &str) -> Result<String> {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).map_err(|e| Error::io(format!("read {what} from stdin"), e))?;
    Ok(s.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t).to_string()).unwrap_or(s))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_table_line_past_the_width_continues_its_last_cell_under_it() {
        let rows = vec![
            vec!["codex".to_string(), "0.169.0".into(), "6/6, 3 trusted, folder not trusted".into()],
            vec!["pi".to_string(), "0.73.1".into(), "0/6".into()],
        ];
        let lines = table_lines(&["HARNESS", "INSTALLED", "OUR HOOKS"], &rows, Some(40));
        assert_eq!(
            lines,
            [
                "HARNESS  INSTALLED  OUR HOOKS",
                "codex    0.169.0    6/6, 3 trusted,",
                "                    folder not trusted",
                "pi       0.73.1     0/6",
            ]
        );
        assert!(table_lines(&["A"], &[vec!["x".repeat(90)]], None)[1].len() == 90);
    }

    use super::*;

    #[test]
    fn backups_never_follow_a_planted_link() {
        let dir = std::env::temp_dir().join(format!("preloop-util-{}", preloop_shared::fsutil::note_id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("settings.json");
        fs::write(&file, "{}\n").unwrap();
        let outside = dir.join("outside");
        // A link at every name the backup could take in the next few seconds.
        let now = stamp();
        std::os::unix::fs::symlink(&outside, dir.join(format!("settings.json.bak.preloop-{now}"))).unwrap();
        let b = write_with_backup(&file, "{\"a\": 1}\n").unwrap().unwrap();
        assert!(!outside.exists(), "nothing written through the link");
        assert!(!fs::symlink_metadata(&b).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(&b).unwrap(), "{}\n");
        assert_eq!(fs::read_to_string(&file).unwrap(), "{\"a\": 1}\n");
        let b2 = remove_file(&file, true).unwrap().unwrap();
        assert_eq!(fs::read_to_string(&b2).unwrap(), "{\"a\": 1}\n");
        assert!(!outside.exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tilde_shortens_only_under_home() {
        assert_eq!(tilde_in(Path::new("/h"), Path::new("/h/.claude/x")), "~/.claude/x");
        assert_eq!(tilde_in(Path::new("/h"), Path::new("/hx/y")), "/hx/y");
        assert_eq!(tilde_in(Path::new("/"), Path::new("/a")), "/a");
    }
}
