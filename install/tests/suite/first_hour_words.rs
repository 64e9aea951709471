//! The operator's first hour, round four's rest (issue 30; newcomer 4,
//! P11-P14, P17, N7, N11): count sentences agree with their count, a file
//! is named as doctor names it, `version` is a command, help and README say
//! the same, and doctor on a clean HOME writes nothing and fits 80 columns.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A copy of the built CLI in `home/.local/bin` (the tarball layout).
fn local_cli(home: &Path) -> PathBuf {
    let dir = home.join(".local/bin");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("preloop-hooks");
    std::fs::copy(cli(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    exe
}

/// `exe args` with `HOME=home`, `PATH` as given and nothing else of the
/// test runner's environment.
fn run_in(exe: &Path, home: &Path, path: &str, args: &[&str], extra: &[(&str, &str)]) -> Output {
    std::fs::create_dir_all(home).unwrap();
    let mut c = Command::new(exe);
    c.args(args)
        .current_dir(home)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .envs(extra.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.output().unwrap()
}

fn ok(o: &Output, what: &str) -> String {
    assert_eq!(code(o), 0, "{what}: {}{}", stdout(o), stderr(o));
    stdout(o)
}

/// No line of `text` counts one thing in the plural ("1 hook commands")
/// or with "(s)".
fn no_bad_plural(text: &str) {
    const NOUNS: [&str; 11] = [
        "hook commands",
        "hooks",
        "notes",
        "sessions",
        "live sessions",
        "agents",
        "entries",
        "files",
        "keys",
        "harnesses",
        "approvals",
    ];
    for l in text.lines() {
        let padded = format!(" {}", l.replace('(', " "));
        for n in NOUNS {
            assert!(!padded.contains(&format!(" 1 {n}")), "a count of 1 in the plural: {l}");
        }
        assert!(!l.contains("(s)"), "a count with (s): {l}");
    }
}

// ----- pluralisation (P14) ------------------------------------------------------

#[test]
fn p14_one_hook_command_is_singular_in_install_links_and_doctor() {
    let t = TempDir::new("fh-words");
    let home = std::fs::canonicalize(t.path()).unwrap().join("home");
    let exe = local_cli(&home);
    let path = format!("{}:/usr/bin:/bin", exe.parent().unwrap().display());
    ok(&run_in(&exe, &home, &path, &["install", "--harness", "claude-code"], &[]), "install");
    // One command gone: install links one back, and says so in the singular.
    let one = exe.parent().unwrap().join("preloop-claude-code-stop");
    std::fs::remove_file(&one).unwrap();
    let out = ok(&run_in(&exe, &home, &path, &["install", "--harness", "claude-code"], &[]), "install again");
    assert!(out.contains("linked 1 hook command in ~/.local/bin to preloop-hooks"), "{out}");
    no_bad_plural(&out);
    std::fs::remove_file(&one).unwrap();
    let out = ok(&run_in(&exe, &home, &path, &["links"], &[]), "links");
    assert!(out.contains("1 hook command in ") && out.contains(" now links to "), "{out}");
    no_bad_plural(&out);
    // One command that is not a link: doctor's warning is singular too.
    std::fs::remove_file(&one).unwrap();
    write(&one, "#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(&one, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run_in(&exe, &home, &path, &["doctor", "--no-codex-query"], &[]);
    let text = stdout(&out);
    assert!(text.contains("1 hook command in ~/.local/bin is not a link to its preloop-hooks"), "{text}");
    no_bad_plural(&text);
    let out = ok(&run_in(&exe, &home, &path, &["install", "--harness", "claude-code"], &[]), "install a third time");
    assert!(out.contains("replaced 1 hook command in ~/.local/bin"), "{out}");
    assert!(out.contains("(earlier versions installed a binary per hook)"), "{out}");
    no_bad_plural(&out);
}

/// The class: no message in the sources counts with "(s)"; every count
/// sentence goes through `preloop_shared::words` (a source scan, as a lint).
#[test]
fn p14_no_message_pluralises_with_parenthesised_s() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut bad = Vec::new();
    let mut stack: Vec<PathBuf> = ["install/src", "shared/src", "hooks"].iter().map(|d| root.join(d)).collect();
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if p.extension().is_some_and(|e| e == "rs") {
            for (i, l) in std::fs::read_to_string(&p).unwrap().lines().enumerate() {
                let code = l.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                // A string literal holding "word(s)" (not "http(s)", a scheme).
                let in_string = code.match_indices("(s)").any(|(i, _)| {
                    code[..i].ends_with(char::is_alphabetic)
                        && !code[..i].ends_with("http")
                        && code[..i].matches('"').count() % 2 == 1
                });
                if in_string {
                    bad.push(format!("{}:{}: {}", p.display(), i + 1, code));
                }
            }
        }
    }
    assert!(bad.is_empty(), "count sentences with (s): use preloop_shared::words::count:\n{}", bad.join("\n"));
}

// ----- a refusal names the file as doctor does (P14) ----------------------------

#[test]
fn p14_install_refusal_names_the_file_with_a_tilde() {
    let t = TempDir::new("fh-tilde");
    let home = std::fs::canonicalize(t.path()).unwrap().join("home");
    let exe = local_cli(&home);
    write(&home.join(".claude/settings.json"), "{\n  \"hooks\": {\n");
    let path = format!("{}:/usr/bin:/bin", exe.parent().unwrap().display());
    let out = run_in(&exe, &home, &path, &["install", "--harness", "claude-code"], &[]);
    let err = stderr(&out);
    assert_ne!(code(&out), 0, "{err}");
    assert!(err.contains("install refused: claude-code: ~/.claude/settings.json: "), "{err}");
    assert!(!err.contains(&home.display().to_string()), "an absolute path where doctor prints ~: {err}");
    let doc = stdout(&run_in(&exe, &home, &path, &["doctor", "--no-codex-query"], &[]));
    assert!(doc.contains("~/.claude/settings.json"), "{doc}");
}

// ----- `version` (P14) --------------------------------------------------------

#[test]
fn p14_version_is_a_command_and_says_what_dash_dash_version_says() {
    let w = World::local("fh-version");
    let flag = w.run(&["--version"]);
    let cmd = w.run(&["version"]);
    assert_eq!(code(&cmd), 0, "{}", stderr(&cmd));
    assert_eq!(stdout(&cmd), stdout(&flag));
    assert!(stdout(&cmd).starts_with("preloop-hooks ") && stdout(&cmd).contains("(commit "), "{}", stdout(&cmd));
}

// ----- how the npm copy is described (P11) --------------------------------------

/// A copy of the built CLI where `npm install -g` puts the native package.
fn npm_cli(home: &Path) -> PathBuf {
    let dir = home.join(".npm-global/lib/node_modules/preloop-hooks-linux-x64/bin");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("preloop-hooks");
    std::fs::copy(cli(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    exe
}

#[test]
fn p11_doctor_and_install_describe_the_npm_copy_as_it_is() {
    let t = TempDir::new("fh-npm");
    let home = std::fs::canonicalize(t.path()).unwrap().join("home");
    let exe = npm_cli(&home);
    let path = format!("{}:/usr/bin:/bin", exe.parent().unwrap().display());
    let binaries = |out: &str| out.lines().find(|l| l.starts_with("binaries")).unwrap_or_default().to_string();
    // Before any install: nothing about cargo; where it goes and why.
    let out = stdout(&run_in(&exe, &home, &path, &["doctor", "--no-codex-query"], &[("COLUMNS", "200")]));
    let line = binaries(&out);
    assert!(!line.contains("cargo"), "{line}");
    assert!(line.contains("the npm package ~/.npm-global/lib/node_modules/preloop-hooks-linux-x64"), "{line}");
    assert!(line.contains("install hard-links it, or copies it, to ~/.preloop/bin"), "{line}");
    let out = ok(&run_in(&exe, &home, &path, &["install", "--harness", "claude-code"], &[]), "install");
    assert!(out.contains("hard-linked preloop-hooks to ~/.preloop/bin"), "{out}");
    // After it: a hard link, named so (not "copied from").
    let out = stdout(&run_in(&exe, &home, &path, &["doctor", "--no-codex-query"], &[("COLUMNS", "200")]));
    let line = binaries(&out);
    assert!(
        line.starts_with("binaries   ~/.preloop/bin (a hard link to the preloop-hooks in the npm package ~/.npm-global/lib/node_modules/preloop-hooks-linux-x64, which"),
        "{line}"
    );
    assert!(!line.contains("copied"), "{line}");
    // An npm upgrade: a new file under the package's name. Install replaces
    // the links to the older one, and says that is what they were.
    let mut bytes = std::fs::read(&exe).unwrap();
    bytes.push(0);
    std::fs::remove_file(&exe).unwrap();
    std::fs::write(&exe, bytes).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out =
        ok(&run_in(&exe, &home, &path, &["install", "--harness", "claude-code"], &[]), "install after an upgrade");
    let n = preloop_hooks::links::names().len();
    assert!(
        out.contains(&format!("replaced {n} hook commands in ~/.preloop/bin by hard links to preloop-hooks (they linked to an older preloop-hooks)")),
        "{out}"
    );
    assert!(!out.contains("earlier versions"), "{out}");
}

// ----- doctor on a clean HOME writes nothing (N7) -------------------------------

/// Every path under `dir`, sorted (directories too).
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&p) {
            for e in rd {
                let e = e.unwrap().path();
                out.push(e.strip_prefix(dir).unwrap().display().to_string());
                if e.is_dir() && !e.is_symlink() {
                    stack.push(e);
                }
            }
        }
    }
    out.sort();
    out
}

/// A stand-in harness program that, when run, writes into the home it is
/// given, as `copilot --version` unpacks itself into `~/.cache/copilot`.
/// In `pkg` (an npm package dir with its `package.json`) when given, else
/// alone in `dir`; linked into `bin` by `name`. It also leaves `ran` behind
/// it, outside any home, so a test sees whether it ran.
fn writing_harness(bin: &Path, name: &str, pkg: Option<(&Path, &str, &str)>, ran: &Path) {
    let script = format!(
        "#!/bin/sh\nmkdir -p \"$HOME/.cache/{name}\" \"${{XDG_CACHE_HOME:-$HOME/.cache}}/{name}-xdg\"\n: > \"$HOME/.{name}-state\"\necho {name} >> {}\necho '{name} 9.9.9'\n",
        ran.display()
    );
    let program = match pkg {
        Some((dir, package, version)) => {
            write(&dir.join("package.json"), &format!("{{\"name\": \"{package}\", \"version\": \"{version}\"}}"));
            dir.join("bin").join(name)
        }
        None => bin.parent().unwrap().join("alone").join(name),
    };
    write(&program, &script);
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(bin).unwrap();
    std::os::unix::fs::symlink(&program, bin.join(name)).unwrap();
}

#[test]
fn n7_doctor_on_a_clean_home_creates_nothing_and_reads_versions_from_package_json() {
    let t = TempDir::new("fh-clean");
    let root = std::fs::canonicalize(t.path()).unwrap();
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    // The CLI outside HOME (an install prefix), the harnesses in an npm
    // prefix outside HOME, Cursor's program alone (no npm package).
    let opt = root.join("opt/bin");
    std::fs::create_dir_all(&opt).unwrap();
    let exe = opt.join("preloop-hooks");
    std::fs::copy(cli(), &exe).unwrap();
    let bin = root.join("npm/bin");
    let ran = root.join("ran.txt");
    for h in preloop_shared::Harness::all() {
        let d = h.def();
        let pkg_dir = root.join("npm/lib/node_modules").join(d.npm_package.unwrap_or("none"));
        writing_harness(&bin, d.program, d.npm_package.map(|p| (pkg_dir.as_path(), p, "1.2.3")), &ran);
    }
    let path = format!("{}:{}:/usr/bin:/bin", opt.display(), bin.display());
    assert!(tree(&home).is_empty());
    for args in [&["doctor"][..], &["doctor", "--json"], &["doctor", "--verbose"]] {
        let out = run_in(&exe, &home, &path, args, &[]);
        assert_eq!(code(&out), 5, "{args:?}: nothing is installed: {}{}", stdout(&out), stderr(&out));
        assert_eq!(tree(&home), Vec::<String>::new(), "{args:?} wrote into a clean HOME");
        if args == ["doctor", "--json"] {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            for h in v["harnesses"].as_array().unwrap() {
                let want = if h["harness"] == "cursor" { "9.9.9" } else { "1.2.3" };
                assert_eq!(h["version"], want, "{h}");
            }
        }
    }
    // Only the program with no package.json ran, and never in this HOME.
    let ran = std::fs::read_to_string(&ran).unwrap_or_default();
    assert_eq!(ran.lines().collect::<std::collections::BTreeSet<_>>(), ["cursor-agent"].into(), "{ran}");
}

// ----- doctor's table fits 80 columns (N11) -------------------------------------

#[test]
fn n11_doctor_table_fits_80_columns_without_a_terminal() {
    let t = TempDir::new("fh-80");
    let root = std::fs::canonicalize(t.path()).unwrap();
    let home = root.join("home");
    let exe = local_cli(&home);
    let bin = root.join("npm/bin");
    let ran = root.join("ran.txt");
    for h in preloop_shared::Harness::all() {
        let d = h.def();
        let pkg_dir = root.join("npm/lib/node_modules").join(d.npm_package.unwrap_or("none"));
        // The longest version a registry harness prints (Cursor's date form).
        writing_harness(&bin, d.program, d.npm_package.map(|p| (pkg_dir.as_path(), p, "2026.07.23")), &ran);
    }
    let path = format!("{}:{}:/usr/bin:/bin", exe.parent().unwrap().display(), bin.display());
    ok(&run_in(&exe, &home, &path, &["install"], &[]), "install");
    // A project with a long path, hooked up too (Codex: its trust and folder columns).
    let project = home.join("src/a-rather-long-project-directory-name/with/nested/parts");
    std::fs::create_dir_all(&project).unwrap();
    let mut c = Command::new(&exe);
    c.args(["install", "--scope", "project", "--harness", "codex"])
        .current_dir(&project)
        .env_clear()
        .env("PATH", &path)
        .env("HOME", &home)
        .stdin(Stdio::null());
    assert_eq!(c.output().unwrap().status.code(), Some(0));
    for columns in [None, Some("80")] {
        let mut c = Command::new(&exe);
        c.args(["doctor", "--no-codex-query"]).current_dir(&project).env_clear().env("PATH", &path).env("HOME", &home);
        if let Some(v) = columns {
            c.env("COLUMNS", v);
        }
        let out = c.stdin(Stdio::null()).output().unwrap();
        let text = stdout(&out);
        let table: Vec<&str> =
            text.lines().skip_while(|l| !l.starts_with("HARNESS")).take_while(|l| !l.is_empty()).collect();
        assert!(table.len() > 6, "{text}");
        for l in &table {
            assert!(l.chars().count() <= 80, "{} columns: {l}\n{text}", l.chars().count());
        }
        assert!(table.iter().any(|l| l.contains("6/6 trusted")), "{text}");
        assert!(table.iter().any(|l| l.contains("./.codex/hooks.json (project)")), "{text}");
    }
}

// ----- help that drifted (P12) --------------------------------------------------

#[test]
fn p12_help_says_what_the_readme_says() {
    let w = World::local("fh-help");
    let help = |args: &[&str]| {
        let out = w.run(args);
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        stdout(&out)
    };
    let demo = help(&["demo", "--help"]);
    assert!(demo.contains("\n  preloop-hooks demo\n") && !demo.contains("cargo build"), "{demo}");
    let send = help(&["notes", "send", "--help"]);
    assert!(!send.contains("Claude Code or") && send.contains("any harness"), "{send}");
    let list = help(&["notes", "list", "--help"]);
    assert!(!list.contains("one note each") && list.contains("any harness"), "{list}");
    assert!(!list.contains("\"Release worker\" (server"), "{list}");
    let install = help(&["install", "--help"]);
    // Every harness of the registry, with its files.
    for h in preloop_shared::Harness::all() {
        assert!(
            [format!("; {} ", h.name()), format!("Files: {} ", h.name()), format!("\n{} ", h.name())]
                .iter()
                .any(|x| install.contains(x.as_str())),
            "{}: {install}",
            h.name()
        );
    }
    assert!(!install.contains("hook binaries are here"), "{install}");
    assert!(!install.contains("is first copied"), "{install}");
}

// ----- an ignored PRELOOP_HOME (P13) --------------------------------------------

#[test]
fn p13_an_ignored_preloop_home_is_named_by_every_command_and_doctor_adds_no_moot_gemini_warning() {
    let t = TempDir::new("fh-p13");
    let root = std::fs::canonicalize(t.path()).unwrap();
    let home = root.join("home");
    let exe = local_cli(&home);
    let bin = root.join("npm/bin");
    let d = preloop_shared::Harness::Gemini.def();
    let pkg = root.join("npm/lib/node_modules").join(d.npm_package.unwrap());
    writing_harness(&bin, d.program, Some((pkg.as_path(), d.npm_package.unwrap(), "0.61.0")), &root.join("ran"));
    let path = format!("{}:{}:/usr/bin:/bin", exe.parent().unwrap().display(), bin.display());
    let elsewhere = root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
    let env = [("PRELOOP_HOME", elsewhere.to_str().unwrap())];
    let gemini_moot = |w: &str| w.starts_with("gemini: PRELOOP_HOME is set only in the environment");
    // No server in ~/.preloop: PRELOOP_HOME is taken, and Gemini's warning holds.
    let v: serde_json::Value =
        serde_json::from_slice(&run_in(&exe, &home, &path, &["doctor", "--json", "--no-codex-query"], &env).stdout)
            .unwrap();
    let warnings: Vec<String> =
        v["warnings"].as_array().unwrap().iter().map(|w| w["what"].as_str().unwrap().to_string()).collect();
    assert!(warnings.iter().any(|w| gemini_moot(w)), "{warnings:?}");
    // ~/.preloop names a server: PRELOOP_HOME is ignored, every command says so once.
    let cfg = home.join(".preloop");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o700)).unwrap();
    write(&cfg.join("config.json"), r#"{"url": "http://127.0.0.1:9", "token": "agt_0123456789abcdef0123"}"#);
    std::fs::set_permissions(cfg.join("config.json"), std::fs::Permissions::from_mode(0o600)).unwrap();
    for args in
        [&["notes", "send", "--session", "daa2b8c4", "x"][..], &["sessions", "list"], &["notes", "list", "--all"]]
    {
        let err = stderr(&run_in(&exe, &home, &path, args, &env));
        let named = err.lines().filter(|l| l.contains("PRELOOP_HOME=") && l.contains("ignored")).count();
        assert_eq!(named, 1, "{args:?}: {err}");
    }
    let v: serde_json::Value =
        serde_json::from_slice(&run_in(&exe, &home, &path, &["doctor", "--json", "--no-codex-query"], &env).stdout)
            .unwrap();
    let warnings: Vec<String> =
        v["warnings"].as_array().unwrap().iter().map(|w| w["what"].as_str().unwrap().to_string()).collect();
    assert!(warnings.iter().any(|w| w.starts_with("PRELOOP_HOME=") && w.contains("ignored")), "{warnings:?}");
    assert!(!warnings.iter().any(|w| gemini_moot(w)), "a moot Gemini warning: {warnings:?}");
}

// ----- the demo types the ID it printed (P17) -----------------------------------

#[test]
fn p17_the_demo_sends_to_the_id_sessions_list_printed() {
    let w = World::local("fh-demo");
    let out = w.run(&["demo"]);
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{text}{}", stderr(&out));
    let listed = text
        .lines()
        .skip_while(|l| !l.contains("$ preloop-hooks sessions list"))
        .nth(2)
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no sessions list row: {text}"))
        .to_string();
    assert!(listed.starts_with("demo-") && listed.len() < "demo-12345678".len(), "{listed}: {text}");
    assert!(text.contains(&format!("$ preloop-hooks notes send --session {listed} ")), "{text}");
    assert!(text.contains(&format!("(you typed {listed})")), "{text}");
    assert!(text.contains(&format!("$ preloop-hooks notes list --session {listed}\n")), "{text}");
}

#[test]
fn p17_attach_shows_no_empty_model_rows() {
    let w = World::local("fh-attach");
    let transcript = w.root.join("t.jsonl");
    std::fs::write(
        &transcript,
        concat!(
            r#"{"type":"user","message":{"role":"user","content":"Fix the flaky test"},"timestamp":"2026-12-02T10:00:00Z"}"#,
            "\n",
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","name":"Bash","input":{"command":"cargo test"}}]},"timestamp":"2026-12-02T10:00:01Z"}"#,
            "\n",
            r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"All green."}]},"timestamp":"2026-12-02T10:00:02Z"}"#,
            "\n"
        ),
    )
    .unwrap();
    let hook = |event: &str, body: serde_json::Value| {
        let out = w.run_env(&["hook", &format!("preloop-claude-code-{event}")], &[], Some(&body.to_string()));
        assert_eq!(code(&out), 0, "{event}: {}", stderr(&out));
    };
    let base = serde_json::json!({"session_id": "attach-empty-model", "transcript_path": transcript, "cwd": w.root});
    let mut start = base.clone();
    start["hook_event_name"] = "SessionStart".into();
    start["source"] = "startup".into();
    hook("session-start", start);
    let mut end = base;
    end["hook_event_name"] = "SessionEnd".into();
    end["reason"] = "exit".into();
    hook("session-end", end);
    let out = w.run(&["sessions", "attach", "attach-empty-model", "--no-input"]);
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{text}{}", stderr(&out));
    assert!(text.contains("tool        Bash  cargo test"), "{text}");
    assert!(text.contains("model       \"All green.\""), "{text}");
    assert_eq!(text.lines().filter(|l| l.contains("  model  ")).count(), 1, "{text}");
    assert!(!text.contains("(no text)"), "{text}");
    // --json keeps every event, the empty reply too.
    let out = w.run(&["sessions", "attach", "attach-empty-model", "--no-input", "--json"]);
    assert_eq!(stdout(&out).lines().filter(|l| l.contains("\"model_call\"")).count(), 2, "{}", stdout(&out));
}
