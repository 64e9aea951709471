//! Small helpers: home and program lookup, safe writes, output.

use preloop_shared::config::Env;
use preloop_shared::{Error, Result};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn home_dir(env: &Env) -> PathBuf {
    env.get("HOME").filter(|h| !h.is_empty()).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/"))
}

/// `~/x` for paths under the home directory (display only).
pub fn tilde(env: &Env, p: &Path) -> String {
    let home = home_dir(env);
    match p.strip_prefix(&home) {
        Ok(rest) if home != Path::new("/") => format!("~/{}", rest.display()),
        _ => p.display().to_string(),
    }
}

pub fn is_executable(p: &Path) -> bool {
    fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// A program: the first env override that names an executable, then `PATH`,
/// then the extra directories.
pub fn find_program(name: &str, env_keys: &[&str], extra_dirs: &[&str]) -> Option<PathBuf> {
    for k in env_keys {
        if let Some(p) = std::env::var_os(k).filter(|p| !p.is_empty()) {
            let p = PathBuf::from(p);
            if is_executable(&p) {
                return Some(p);
            }
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra_dirs.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
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

/// Write `text` to `path` atomically (a temporary file in the same
/// directory, fsync'd, renamed over it), first copying the previous file to
/// `<name>.bak.preloop-<stamp>` when there is one. A symlinked config is
/// written through to its target, so the link stays. The file keeps its
/// mode (new files: 0644, they hold no secrets). Returns the backup path.
pub fn write_with_backup(path: &Path, text: &str) -> Result<Option<PathBuf>> {
    let target = match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            fs::canonicalize(path).map_err(|e| Error::io(format!("resolve {}", path.display()), e))?
        }
        _ => path.to_path_buf(),
    };
    let dir = target.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    let name = target.file_name().and_then(|n| n.to_str()).unwrap_or("config").to_string();
    let (mode, backup) = match fs::metadata(&target) {
        Ok(m) => {
            let mut b = dir.join(format!("{name}.bak.preloop-{}", stamp()));
            let mut n = 1;
            while b.exists() {
                n += 1;
                b = dir.join(format!("{name}.bak.preloop-{}-{n}", stamp()));
            }
            fs::copy(&target, &b)
                .map_err(|e| Error::io(format!("back up {} to {}", target.display(), b.display()), e))?;
            (m.permissions().mode() & 0o7777, Some(b))
        }
        Err(_) => (0o644, None),
    };
    let tmp = dir.join(format!(".{name}.preloop-{}.tmp", std::process::id()));
    let res = (|| -> std::io::Result<()> {
        let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        fs::rename(&tmp, &target)
    })();
    if let Err(e) = res {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(format!("write {}", target.display()), e));
    }
    Ok(backup)
}

/// Remove a config file after copying it to a backup (see [`write_with_backup`]).
pub fn remove_with_backup(path: &Path) -> Result<Option<PathBuf>> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("config");
    let b = dir.join(format!("{name}.bak.preloop-{}", stamp()));
    fs::copy(path, &b).map_err(|e| Error::io(format!("back up {}", path.display()), e))?;
    fs::remove_file(path).map_err(|e| Error::io(format!("remove {}", path.display()), e))?;
    Ok(Some(b))
}

/// Print rows as an aligned table (the last column is not padded).
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let n = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&" ".repeat(widths[i] - c.chars().count() + 2));
            }
        }
        println!("{}", s.trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        line(r.clone());
    }
}

pub fn print_json<T: serde::Serialize>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// Read all of stdin, dropping one trailing newline.
pub fn read_stdin(what: &str) -> Result<String> {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).map_err(|e| Error::io(format!("read {what} from stdin"), e))?;
    Ok(s.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t).to_string()).unwrap_or(s))
}
