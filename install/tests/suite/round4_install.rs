//! The hook commands beside a shared executable (red-team 4, P2 and P9):
//! `uninstall` run from any other HOME or account never takes them away
//! from the HOMEs whose harness configs still run them. Uninstall removes
//! only the commands in `$PRELOOP_HOME/bin`, or those this HOME's install
//! created in a directory of this HOME that this uid owns, and says in its
//! "left in place" line what it left and why. Plus closed-stdout runs of
//! install and uninstall (newcomer-ux-4, P2).
//!
//! Each test runs the real CLI copied into a "shared" bin dir, so the CLI's
//! own directory is the hook dir (the tarball / `--prefix` layout).

use crate::common::*;
use preloop_testkit::support::{OTHER_UID, as_user, chown_tree};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A copy of the built CLI in `dir` (0755, readable by every account).
fn shared_cli(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let exe = dir.join("preloop-hooks");
    std::fs::copy(cli(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    exe
}

/// `exe args` in `home` (its own `PRELOOP_HOME` under it), an empty
/// environment otherwise; `wrap` runs it as another uid.
fn run_as(exe: &Path, home: &Path, args: &[&str], uid: Option<u32>) -> Output {
    std::fs::create_dir_all(home).unwrap();
    let mut c = match uid {
        Some(u) => as_user(u, exe),
        None => Command::new(exe),
    };
    // Another account here has no /etc/passwd line and, started straight
    // from the test, no ancestor of its own uid to anchor its HOME on: a
    // HOME at or inside the working directory would then be refused
    // (docs/guarantees.md, "A repository cannot move the gate"), so it runs
    // from `/`, as from a login shell outside its home.
    c.args(args)
        .current_dir(if uid.is_some() { Path::new("/") } else { home })
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.output().unwrap()
}

fn run(exe: &Path, home: &Path, args: &[&str]) -> Output {
    run_as(exe, home, args, None)
}

fn ok(o: &Output, what: &str) -> String {
    assert_eq!(code(o), 0, "{what}: {}{}", stdout(o), stderr(o));
    stdout(o)
}

/// The hook commands present in `dir` (by name).
fn commands_in(dir: &Path) -> usize {
    preloop_hooks::links::names().into_iter().filter(|n| dir.join(n).exists()).count()
}

/// The PreToolUse command Claude Code's settings in `home` run.
fn claude_command(home: &Path) -> PathBuf {
    let v: serde_json::Value = serde_json::from_str(&read(&home.join(".claude/settings.json"))).unwrap();
    PathBuf::from(v["hooks"]["PreToolUse"][0]["hooks"][0]["command"].as_str().unwrap().trim_matches('\''))
}

/// The last stdout line, which names what uninstall left and why.
fn left_line(out: &str) -> String {
    out.lines().find(|l| l.starts_with("left in place:")).unwrap_or_default().to_string()
}

#[test]
fn a_fresh_homes_uninstall_removes_nothing_beside_a_shared_executable() {
    let t = TempDir::new("rt4-p2-fresh");
    let root = std::fs::canonicalize(t.path()).unwrap();
    let shared = root.join("shared bin");
    let exe = shared_cli(&shared);
    let user = root.join("user");
    ok(&run(&exe, &user, &["install", "--harness", "claude-code"]), "the user's install");
    let n = preloop_hooks::links::names().len();
    assert_eq!(commands_in(&shared), n);
    // A HOME where nothing was installed (sudo, a sandbox, another account's shell).
    let other = root.join("other");
    let out = ok(&run(&exe, &other, &["uninstall"]), "a fresh HOME's uninstall");
    assert_eq!(commands_in(&shared), n, "{out}");
    assert!(claude_command(&user).exists(), "the user's PreToolUse command is gone: {out}");
    assert!(!out.contains("removed the"), "{out}");
    let left = left_line(&out);
    assert!(
        left.contains(&format!("the {n} hook commands in {}", shared.display()))
            && left.contains("this HOME's install did not create them"),
        "{out}"
    );
}

#[test]
fn two_homes_share_a_bin_dir_and_neither_uninstall_takes_the_others_commands() {
    let t = TempDir::new("rt4-p2-two");
    let root = std::fs::canonicalize(t.path()).unwrap();
    let shared = root.join("opt/bin");
    let exe = shared_cli(&shared);
    let (a, b) = (root.join("a"), root.join("b"));
    ok(&run(&exe, &a, &["install", "--harness", "claude-code"]), "a installs (creates the commands)");
    ok(&run(&exe, &b, &["install", "--harness", "claude-code"]), "b installs (finds them)");
    let n = preloop_hooks::links::names().len();
    // The HOME that found the commands uninstalls: a's hooks still run.
    let out = ok(&run(&exe, &b, &["uninstall"]), "b uninstalls");
    assert_eq!(commands_in(&shared), n, "{out}");
    assert!(claude_command(&a).exists(), "{out}");
    // The HOME that created them uninstalls too: they sit outside its HOME,
    // where another HOME may run them, so they stay and it says so.
    ok(&run(&exe, &b, &["install", "--harness", "claude-code"]), "b installs again");
    let out = ok(&run(&exe, &a, &["uninstall"]), "a uninstalls");
    assert_eq!(commands_in(&shared), n, "{out}");
    assert!(claude_command(&b).exists(), "{out}");
    assert!(left_line(&out).contains("outside this HOME"), "{out}");
}

#[test]
fn commands_a_homes_install_created_in_its_own_bin_dir_go_with_its_uninstall() {
    let t = TempDir::new("rt4-p2-own");
    let root = std::fs::canonicalize(t.path()).unwrap();
    let home = root.join("home");
    let bin = home.join(".local/bin");
    let exe = shared_cli(&bin);
    let out = ok(&run(&exe, &home, &["install", "--harness", "claude-code"]), "install");
    let n = preloop_hooks::links::names().len();
    assert!(out.contains(&format!("linked {n} hook commands")), "{out}");
    let out = ok(&run(&exe, &home, &["uninstall"]), "uninstall");
    assert!(out.contains(&format!("removed {n} hook commands from ~/.local/bin")), "{out}");
    assert_eq!(commands_in(&bin), 0, "{out}");
    assert!(exe.exists());
}

/// A shared install in a root-owned directory, uninstalled by uid 1001:
/// its config comes back, the commands stay (they are root's and every
/// other account's), one line says why, exit 0 (before: the config was
/// rewritten, then `Permission denied (os error 13)`, exit 1).
#[test]
fn another_accounts_directory_is_left_with_a_clear_line_and_exit_0() {
    let t = TempDir::new("rt4-p9a");
    let root = std::fs::canonicalize(t.path()).unwrap();
    let shared = root.join("usr-local/bin");
    let exe = shared_cli(&shared);
    ok(&run(&exe, &root.join("root-home"), &["install", "--harness", "claude-code"]), "root installs");
    let home = root.join("u1001");
    std::fs::create_dir_all(&home).unwrap();
    let before = "{\"model\": \"opus\"}\n";
    write(&home.join(".claude/settings.json"), before);
    chown_tree(&home, OTHER_UID);
    ok(&run_as(&exe, &home, &["install", "--harness", "claude-code"], Some(OTHER_UID)), "uid 1001 installs");
    let out = run_as(&exe, &home, &["uninstall", "--harness", "claude-code"], Some(OTHER_UID));
    let text = ok(&out, "uid 1001 uninstalls");
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    assert_eq!(read(&home.join(".claude/settings.json")), before);
    let n = preloop_hooks::links::names().len();
    assert_eq!(commands_in(&shared), n, "{text}");
    assert!(claude_command(&root.join("root-home")).exists());
    let left = left_line(&text);
    assert!(left.contains("belongs to uid 0, another account"), "{text}");
    assert!(!text.contains("os error"), "{text}");
}

// ---------------------------------------------------------------- red-team 4, P9 (b)

/// Install then uninstall gives every harness config back byte for byte,
/// also where taking our entries out does not: an empty file, an empty
/// `"hooks": {}`, Cursor's `{"version": 1}`, Codex's empty `config.toml`.
#[test]
fn install_then_uninstall_gives_every_config_back_byte_for_byte() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "claude-code",
            ".claude/settings.json",
            &["{\"hooks\":{}}", "", "{\"hooks\": {}}\n", "{}", "{\"hooks\":{\"Stop\":[]}}"],
        ),
        ("codex", ".codex/hooks.json", &["{\"hooks\":{}}", "", "{}\n"]),
        ("codex", ".codex/config.toml", &["", "\n", "# mine\n"]),
        ("cursor", ".cursor/hooks.json", &["{\"version\":1,\"hooks\":{}}", "", "{\"version\": 1}\n", "{}"]),
        ("gemini", ".gemini/settings.json", &["{\"hooks\":{}}", "", "// comment\n{\"hooks\": {}}\n", "{}"]),
    ];
    for (harness, file, texts) in cases {
        for text in texts.iter() {
            let t = TempDir::new("rt4-p9b");
            let root = std::fs::canonicalize(t.path()).unwrap();
            let home = root.join("home");
            let bin = fake_bin_dir(&root);
            let path = home.join(file);
            write(&path, text);
            let o = run(&cli(), &home, &["install", "--harness", harness, "--bin-dir", bin.to_str().unwrap()]);
            ok(&o, &format!("install {harness} over {text:?}"));
            assert_ne!(read(&path), *text, "{harness} {file}: install changed nothing");
            let o = run(&cli(), &home, &["uninstall", "--harness", harness]);
            ok(&o, &format!("uninstall {harness}"));
            assert_eq!(read(&path), *text, "{harness} {file} {text:?}: {}", stdout(&o));
        }
    }
}

/// Uninstall of a file the user changed since install takes only our
/// entries out (the recorded text is not put back over their change).
#[test]
fn a_config_changed_since_install_keeps_the_change() {
    let t = TempDir::new("rt4-p9b-changed");
    let root = std::fs::canonicalize(t.path()).unwrap();
    let home = root.join("home");
    let bin = fake_bin_dir(&root);
    let path = home.join(".claude/settings.json");
    write(&path, "{\"hooks\":{}}");
    ok(&run(&cli(), &home, &["install", "--harness", "claude-code", "--bin-dir", bin.to_str().unwrap()]), "install");
    let mut v: serde_json::Value = serde_json::from_str(&read(&path)).unwrap();
    v["model"] = "opus".into();
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    ok(&run(&cli(), &home, &["uninstall", "--harness", "claude-code"]), "uninstall");
    let after: serde_json::Value = serde_json::from_str(&read(&path)).unwrap();
    assert_eq!(after, serde_json::json!({"model": "opus"}));
}

// ---------------------------------------------------------------- newcomer-ux-4, P2

/// `cmd` with stdout a pipe whose reading end is already closed (`| head`
/// that has read its line): every write to it fails with EPIPE.
fn with_closed_stdout(mut cmd: Command) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    cmd.stdout(Stdio::from(writer)).stderr(Stdio::piped()).stdin(Stdio::null());
    cmd.output().unwrap()
}

fn cmd_in(home: &Path, args: &[&str]) -> Command {
    std::fs::create_dir_all(home).unwrap();
    let mut c = Command::new(cli());
    c.args(args).current_dir(home).env_clear().env("PATH", "/usr/bin:/bin").env("HOME", home).env("LANG", "C.UTF-8");
    c
}

/// Every harness's hooks file in `home`.
fn hooked(home: &Path) -> Vec<(&'static str, bool)> {
    [
        ("claude-code", ".claude/settings.json"),
        ("codex", ".codex/hooks.json"),
        ("cursor", ".cursor/hooks.json"),
        ("gemini", ".gemini/settings.json"),
        ("copilot", ".copilot/hooks/preloop.json"),
    ]
    .into_iter()
    .map(|(h, f)| (h, std::fs::read_to_string(home.join(f)).is_ok_and(|t| t.contains("preloop-"))))
    .collect()
}

#[test]
fn a_closed_stdout_never_stops_install_or_uninstall_half_way() {
    let t = TempDir::new("nc4-p2");
    let root = std::fs::canonicalize(t.path()).unwrap();
    let home = root.join("home");
    let bin = fake_bin_dir(&root);
    let out = with_closed_stdout(cmd_in(&home, &["install", "--bin-dir", bin.to_str().unwrap()]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(hooked(&home).iter().all(|(_, on)| *on), "install stopped half-way: {:?}", hooked(&home));
    let err = stderr(&out);
    assert!(
        err.lines().count() == 1 && err.contains("stdout closed before install finished its report; install completed"),
        "{err}"
    );
    let out = with_closed_stdout(cmd_in(&home, &["uninstall"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(hooked(&home).iter().all(|(_, on)| !*on), "uninstall stopped half-way: {:?}", hooked(&home));
    assert!(stderr(&out).contains("uninstall completed"), "{}", stderr(&out));
    // A report read through `| head` still ends with exit 0 and no complaint.
    let out = with_closed_stdout(cmd_in(&home, &["doctor", "--no-codex-query", "--bin-dir", bin.to_str().unwrap()]));
    assert_eq!((code(&out), stderr(&out)), (0, String::new()));
}

/// No shipped crate ends the process below `main` (the executable's `main`
/// returns every exit code): `process::exit` inside a command's output path
/// is what stopped install half-way.
#[test]
fn no_shipped_code_calls_process_exit_below_main() {
    let root = preloop_testkit::support::repo_root();
    let mut found = Vec::new();
    for dir in ["shared/src", "install/src", "hooks"] {
        for p in preloop_testkit::support::walk(&root.join(dir)) {
            if p.extension().is_none_or(|e| e != "rs") || p.components().any(|c| c.as_os_str() == "tests") {
                continue;
            }
            for (i, l) in read(&p).lines().enumerate() {
                let code = l.trim_start();
                if !code.starts_with("//") && (code.contains("process::exit(") || code.contains("libc::exit(")) {
                    found.push(format!("{}:{}: {code}", p.display(), i + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "process::exit below main:\n{}", found.join("\n"));
}

// ---------------------------------------------------------------- newcomer-ux-4, P16

/// A project-scope install + uninstall leaves no folder it created, and
/// never removes one that was there before (empty or not).
#[test]
fn project_scope_uninstall_removes_the_empty_folders_install_created_only() {
    let t = TempDir::new("nc4-p16");
    let root = std::fs::canonicalize(t.path()).unwrap();
    let home = root.join("home");
    let project = root.join("project");
    let bin = fake_bin_dir(&root);
    std::fs::create_dir_all(project.join(".gemini")).unwrap(); // the user's own, empty
    for h in ["codex", "gemini", "claude-code", "cursor", "copilot"] {
        let mut c =
            cmd_in(&home, &["install", "--scope", "project", "--harness", h, "--bin-dir", bin.to_str().unwrap()]);
        c.current_dir(&project);
        ok(&c.output().unwrap(), &format!("install {h}"));
        let mut c = cmd_in(&home, &["uninstall", "--scope", "project", "--harness", h]);
        c.current_dir(&project);
        let o = c.output().unwrap();
        ok(&o, &format!("uninstall {h}"));
    }
    let mut left: Vec<String> =
        std::fs::read_dir(&project).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    // Cursor's hooks.json stays by design ({"version":1,"hooks":{}}), so its folder does too.
    assert_eq!(left, vec![".cursor".to_string(), ".gemini".to_string()], "left in the project");
    assert_eq!(std::fs::read_dir(project.join(".gemini")).unwrap().count(), 0);
}
