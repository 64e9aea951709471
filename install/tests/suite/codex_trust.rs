//! The Codex trust derivation, proven on the real binary: after
//! `preloop-hooks install --harness codex`, `codex app-server`'s `hooks/list`
//! reports every hook of ours as trusted, and for every hook in the file
//! (ours and the user's) its key and currentHash equal ours.
//!
//! Codex is found through `PRELOOP_E2E_CODEX`, then `PATH`, then the e2e
//! suite's harness cache (`$PRELOOP_E2E_HARNESS_DIR`, `e2e/.harness`), then
//! `/tmp/harness`; without it the tests fail and say how to get it
//! (`scripts/test` installs it first). The search is this test's: the
//! shipped doctor looks on `PATH` only, so its run here gets Codex's folder
//! first on `PATH`.

use crate::common::*;
use preloop_hooks::codex_trust::{self, ListedHook};
use preloop_shared::Harness;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const USER_HOOKS: &str = r#"{
  "description": "mine",
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/local/bin/audit-shell", "timeout": 30, "statusMessage": "auditing", "additionalContextLimit": 4000}]}
    ],
    "SessionEnd": [
      {"hooks": [{"type": "command", "command": "/usr/local/bin/bye"}]}
    ]
  }
}
"#;

const USER_CONFIG: &str = "# my codex config\nmodel = \"o3\" # favourite\ncheck_for_update_on_startup = false\n\n[profiles.fast]\nmodel = \"o4-mini\"\n";

/// Codex for these tests: `PRELOOP_E2E_CODEX`, `PATH`, the e2e harness caches.
fn find_codex() -> Option<PathBuf> {
    let named = std::env::var_os("PRELOOP_E2E_CODEX").filter(|p| !p.is_empty()).map(PathBuf::from);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let cache = std::env::var_os("PRELOOP_E2E_HARNESS_DIR").map(|d| PathBuf::from(d).join("node_modules/.bin"));
    let dirs = std::env::split_paths(&path).chain(cache).chain([
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../e2e/.harness/node_modules/.bin")),
        PathBuf::from("/tmp/harness/node_modules/.bin"),
    ]);
    named.into_iter().chain(dirs.map(|d| d.join("codex"))).find(|p| preloop_hooks::util::is_executable(p))
}

fn codex() -> PathBuf {
    find_codex().unwrap_or_else(|| {
        panic!(
            "no codex binary, so the Codex trust proof cannot run: install it with `python3 -c 'import sys; sys.path.insert(0, \"e2e\"); import kit; kit.ensure_codex()'` (or set PRELOOP_E2E_CODEX, or put codex 0.169.0 on PATH)"
        )
    })
}

/// `PATH` with `program`'s folder first: where doctor finds the harness.
fn path_with(program: &Path) -> std::ffi::OsString {
    let dir = program.parent().map(Path::to_path_buf).unwrap_or_default();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&rest))).unwrap()
}

fn ours(bin: &Path, command: &str) -> bool {
    preloop_hooks::edit::Owner::new(Harness::Codex, bin).owns(command, false)
}

fn list(codex: &Path, home: &Path, codex_home: &Path, cwd: &Path) -> Vec<ListedHook> {
    let envs = vec![("HOME".to_string(), home.display().to_string())];
    let (hooks, problems) =
        codex_trust::list_hooks_via_app_server(codex, codex_home, cwd, &envs, Duration::from_secs(60))
            .expect("codex app-server hooks/list");
    assert!(problems.iter().all(|p| !p.starts_with("error")), "codex reported errors: {problems:?}");
    hooks
}

fn cli(home: &Path, codex_home: &Path, cwd: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new(crate::common::cli())
        .args(args)
        .current_dir(cwd)
        .env("HOME", home)
        .env("CODEX_HOME", codex_home)
        .env("PRELOOP_HOME", home.join(".preloop"))
        .env_remove("PRELOOP_URL")
        .env_remove("PRELOOP_TOKEN")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "preloop-hooks {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Our derivation for every hook of a hooks.json, against hooks/list.
fn assert_derivation_matches(listed: &[ListedHook], hooks_json: &Path) {
    let doc: Value = serde_json::from_str(&read(hooks_json)).unwrap();
    let key_path = codex_trust::canonical_dir(hooks_json.parent().unwrap()).join("hooks.json");
    let ours =
        codex_trust::hook_keys(&key_path, &doc, &preloop_hooks::edit::Owner::new(Harness::Codex, Path::new("/")));
    assert!(!ours.is_empty());
    for k in &ours {
        let l = listed.iter().find(|l| l.key == k.key).unwrap_or_else(|| {
            panic!(
                "codex does not list our key {}; it lists {:?}",
                k.key,
                listed.iter().map(|l| &l.key).collect::<Vec<_>>()
            )
        });
        assert_eq!(l.current_hash, k.hash, "hash of {} ({})", k.key, k.command);
    }
}

#[test]
fn codex_reports_our_hooks_trusted() {
    let codex = codex();
    let t = TempDir::new("codex-real");
    let root = t.path();
    let home = root.join("home");
    // CODEX_HOME reached through a symlink: Codex keys trust on the resolved path.
    let real_codex_home = root.join("real codex home");
    std::fs::create_dir_all(&real_codex_home).unwrap();
    std::os::unix::fs::symlink(&real_codex_home, root.join("codex-link")).unwrap();
    let codex_home = root.join("codex-link");
    let project = root.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let bin = fake_bin_dir(root);
    let hooks_json = codex_home.join("hooks.json");
    let config = codex_home.join("config.toml");
    write(&hooks_json, USER_HOOKS);
    write(&config, USER_CONFIG);

    let before = list(&codex, &home, &codex_home, &project);
    assert_eq!(before.len(), 2, "{before:?}");
    assert_derivation_matches(&before, &hooks_json);
    let user_status: Vec<(String, String)> = before.iter().map(|h| (h.key.clone(), h.trust_status.clone())).collect();

    cli(&home, &codex_home, &project, &["install", "--harness", "codex", "--bin-dir", bin.to_str().unwrap()]);
    let after = list(&codex, &home, &codex_home, &project);
    assert_eq!(after.len(), 8, "{after:?}");
    for h in &after {
        let ours = ours(&bin, &h.command);
        if ours {
            assert_eq!(h.trust_status, "trusted", "codex does not trust our hook {} ({})", h.key, h.command);
        } else {
            let was = user_status.iter().find(|(k, _)| *k == h.key).map(|(_, s)| s.clone());
            assert_eq!(Some(h.trust_status.clone()), was, "the user's hook {} keeps its trust state", h.key);
        }
    }
    assert_eq!(after.iter().filter(|h| ours(&bin, &h.command)).count(), 6);
    assert_derivation_matches(&after, &hooks_json);
    assert!(read(&config).starts_with(USER_CONFIG), "config.toml keeps the user's lines:\n{}", read(&config));

    // doctor agrees, asking the same app-server.
    let out = Command::new(crate::common::cli())
        .args(["doctor", "--json", "--bin-dir", bin.to_str().unwrap()])
        .current_dir(&project)
        .env("HOME", &home)
        .env("CODEX_HOME", &codex_home)
        .env("PRELOOP_HOME", home.join(".preloop"))
        .env("PATH", path_with(&codex))
        .env_remove("PRELOOP_URL")
        .env_remove("PRELOOP_TOKEN")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cx = report["harnesses"].as_array().unwrap().iter().find(|h| h["harness"] == "codex").unwrap().clone();
    let user = &cx["scopes"][0];
    assert_eq!(user["trust_source"], "codex app-server hooks/list", "{cx}");
    assert!(user["entries"].as_array().unwrap().iter().all(|e| e["trust"] == "trusted"), "{cx}");

    cli(&home, &codex_home, &project, &["uninstall", "--harness", "codex"]);
    assert_eq!(read(&hooks_json), USER_HOOKS);
    assert_eq!(read(&config), USER_CONFIG);
    let gone = list(&codex, &home, &codex_home, &project);
    assert_eq!(gone.iter().map(|h| (h.key.clone(), h.trust_status.clone())).collect::<Vec<_>>(), user_status);
}

#[test]
fn codex_trusts_project_hooks_in_a_trusted_project() {
    let codex = codex();
    let t = TempDir::new("codex-project");
    let root = t.path();
    let home = root.join("home");
    let codex_home = home.join(".codex");
    let project = root.join("proj with space");
    std::fs::create_dir_all(&project).unwrap();
    let project = std::fs::canonicalize(&project).unwrap();
    let bin = fake_bin_dir(root);
    write(
        &codex_home.join("config.toml"),
        &format!("[projects.\"{}\"]\ntrust_level = \"trusted\"\n", project.display()),
    );
    cli(
        &home,
        &codex_home,
        &project,
        &["install", "--harness", "codex", "--scope", "project", "--bin-dir", bin.to_str().unwrap()],
    );
    let listed = list(&codex, &home, &codex_home, &project);
    let ours: Vec<&ListedHook> = listed.iter().filter(|h| ours(&bin, &h.command)).collect();
    assert_eq!(ours.len(), 6, "{listed:?}");
    assert!(
        ours.iter().all(|h| h.trust_status == "trusted" && h.key.starts_with(&project.display().to_string())),
        "{ours:?}"
    );
    assert_derivation_matches(&listed, &project.join(".codex/hooks.json"));
}
