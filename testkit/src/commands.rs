//! The hook commands the tests run, as a harness runs them: one
//! `preloop-hooks` executable of the workspace, started under each hook's
//! name through `<profile dir>/hook-commands/<name>` (symlinks to it, which a
//! rebuild never leaves stale; what ships uses hard links, and the bench and
//! the end-to-end suites run those).
//!
//! Cargo tells a test `CARGO_BIN_EXE_*` only for its own package's
//! binaries, and the executable is the `preloop-hooks` package's: so the
//! first test process that finds it missing or older than a source file it
//! is built from builds it (`cargo build -p preloop-hooks --bin
//! preloop-hooks`, under a lock, so concurrent test processes build it once);
//! a stale executable is never tested.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

/// The executable's name.
pub const EXE: &str = "preloop-hooks";

/// The directory that holds `preloop-hooks` and every hook command (a
/// symlink to it), for this test's profile, built and fresh.
pub fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let profile_dir = profile_dir();
        let exe = ensure_built(&profile_dir, None, &[]);
        link_dir(&exe, &profile_dir.join("hook-commands"))
    })
}

/// One hook command (`preloop-codex-stop`) of [`dir`].
pub fn hook(binary: &str) -> PathBuf {
    dir().join(binary)
}

/// The `preloop-hooks` executable of [`dir`].
pub fn exe() -> PathBuf {
    dir().join(EXE)
}

/// `target/<profile>` of the running test executable (`…/deps/<test>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    exe.parent().and_then(Path::parent).expect("a test executable in target/<profile>/deps").to_path_buf()
}

/// Build `preloop-hooks` for the profile of `profile_dir` (into another
/// target dir and with `features` when given) unless it is there and newer
/// than every source it is built from; returns its path.
pub fn ensure_built(profile_dir: &Path, target_dir: Option<&Path>, features: &[&str]) -> PathBuf {
    let profile_name = profile_dir.file_name().and_then(|n| n.to_str()).expect("a profile dir name").to_string();
    let out_dir = match target_dir {
        Some(t) => t.join(&profile_name),
        None => profile_dir.to_path_buf(),
    };
    let exe = out_dir.join(EXE);
    if is_fresh(&exe) {
        return exe;
    }
    fs::create_dir_all(&out_dir).expect("create the build dir");
    let lock = File::create(out_dir.join(".preloop-hooks-build.lock")).expect("the build lock");
    lock.lock().expect("take the build lock");
    // Another test process may have built it while this one waited.
    if is_fresh(&exe) {
        return exe;
    }
    let profile = if profile_name == "debug" { "dev".to_string() } else { profile_name };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(crate::support::repo_root()).args([
        "build",
        "--quiet",
        "-p",
        "preloop-hooks",
        "--bin",
        EXE,
        "--profile",
        &profile,
    ]);
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    if let Some(t) = target_dir {
        cmd.arg("--target-dir").arg(t);
    }
    let out = cmd.output().expect("run cargo build");
    assert!(out.status.success(), "building preloop-hooks failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(exe.exists(), "cargo built no {}", exe.display());
    // Cargo found it fresh (a changed file it does not build from): say so
    // for the next test process too.
    if !is_fresh(&exe) {
        let _ = File::options().write(true).open(&exe).and_then(|f| f.set_modified(SystemTime::now()));
    }
    exe
}

/// `dir` with a symlink to `exe` under its own name and every hook
/// command's; created once, left as it is when right.
pub fn link_dir(exe: &Path, dir: &Path) -> PathBuf {
    fs::create_dir_all(dir).expect("create the hook command dir");
    let names = preloop_shared::registry::binaries();
    for name in std::iter::once(EXE).chain(names) {
        let p = dir.join(name);
        if fs::read_link(&p).is_ok_and(|t| t == exe) {
            continue;
        }
        // Concurrent test processes: each makes its own and renames it in.
        let tmp = dir.join(format!(".{name}.{}", std::process::id()));
        let _ = fs::remove_file(&tmp);
        std::os::unix::fs::symlink(exe, &tmp).expect("symlink a hook command");
        fs::rename(&tmp, &p).expect("rename a hook command into place");
    }
    dir.to_path_buf()
}

/// Whether `exe` exists and is newer than every source file of the
/// crates it is built from (and the manifests and lock file).
fn is_fresh(exe: &Path) -> bool {
    let Some(built) = fs::metadata(exe).and_then(|m| m.modified()).ok() else { return false };
    newest_source().is_none_or(|s| s <= built)
}

fn newest_source() -> Option<SystemTime> {
    let root = crate::support::repo_root();
    let mut dirs: Vec<PathBuf> = vec![root.join("shared"), root.join("install")];
    dirs.extend(fs::read_dir(root.join("hooks")).into_iter().flatten().flatten().map(|e| e.path()));
    let mut newest: Option<SystemTime> = None;
    let mut see = |p: &Path| {
        if let Ok(t) = fs::metadata(p).and_then(|m| m.modified()) {
            newest = Some(newest.map_or(t, |n| n.max(t)));
        }
    };
    see(&root.join("Cargo.toml"));
    see(&root.join("Cargo.lock"));
    for d in dirs {
        see(&d.join("Cargo.toml"));
        see(&d.join("build.rs"));
        let mut stack = vec![d.join("src")];
        while let Some(dir) = stack.pop() {
            for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    see(&p);
                }
            }
        }
    }
    newest
}
