//! `preloop-hooks --version` names the commit it was built from:
//! `PRELOOP_COMMIT` when set (a packager's build), else `git rev-parse` in
//! the checkout, else `unknown` (a crate built from crates.io).

// A build script talks to cargo on stdout: `outln!` is for what users read.
#![allow(clippy::disallowed_macros)]

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PRELOOP_COMMIT");
    let commit = std::env::var("PRELOOP_COMMIT").ok().filter(|c| !c.is_empty()).or_else(git_commit);
    println!("cargo:rustc-env=PRELOOP_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
}

fn git_commit() -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let git_dir = Command::new("git").args(["rev-parse", "--absolute-git-dir"]).current_dir(&dir).output().ok()?;
    if !git_dir.status.success() {
        return None;
    }
    let git_dir = String::from_utf8(git_dir.stdout).ok()?.trim().to_string();
    // A new commit moves HEAD or the branch it names.
    for f in ["HEAD", "packed-refs"] {
        let p = Path::new(&git_dir).join(f);
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    if let Ok(head) = std::fs::read_to_string(Path::new(&git_dir).join("HEAD"))
        && let Some(r) = head.strip_prefix("ref: ")
    {
        let p = Path::new(&git_dir).join(r.trim());
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    let out = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).current_dir(&dir).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|c| !c.is_empty())
}
