//! Shared helpers for the preloop-hooks tests.

use preloop_hooks::install::Ctx;
use preloop_shared::config::{Env, Settings};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A fresh directory under the system temp dir (removed on drop).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("preloop-hooks-test-{tag}-{}", preloop_shared::fsutil::note_id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("PRELOOP_TEST_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A bin dir (with a space in its path) holding a stand-in executable for
/// every binary in the table.
pub fn fake_bin_dir(root: &Path) -> PathBuf {
    let dir = root.join("my bin");
    std::fs::create_dir_all(&dir).unwrap();
    for d in preloop_shared::registry::HOOKS {
        let p = dir.join(d.binary);
        std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

/// A context whose home, project and bin dir are all under `root`.
pub fn ctx(root: &Path) -> Ctx {
    let home = root.join("home");
    let cwd = root.join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    Ctx {
        env: Env(vec![("HOME".into(), home.display().to_string())]),
        home: home.clone(),
        cwd,
        bin_dir: fake_bin_dir(root),
        settings: Settings::default(),
        preloop_home: root.join("home/.preloop"),
    }
}

pub fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

/// The workspace's target dir holding this test binary's siblings.
pub fn cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_preloop-hooks"))
}
