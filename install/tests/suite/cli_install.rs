//! `install`, `uninstall`, `doctor`, `login`, `logout` through the real CLI,
//! one test per reported problem (docs: install/README.md; reports:
//! redteam-2 M1-M3, L8-L12, L14; newcomer-ux-2 1-4, 10-12, 15, 16, 20,
//! 29-35, 39-41): the exit code, the one stderr line, and nothing written
//! where nothing may be.
//!
//! Every run gets an empty environment (`PATH=/usr/bin:/bin`, its own
//! `HOME` and `PRELOOP_HOME`), so no harness program, no server setting and
//! no real home directory of the machine leaks in.

use crate::common::*;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

struct Env {
    _t: TempDir,
    root: PathBuf,
    home: PathBuf,
    preloop: PathBuf,
    bin: PathBuf,
    vars: Vec<(String, String)>,
}

impl Env {
    fn new(tag: &str) -> Env {
        let t = TempDir::new(tag);
        let root = std::fs::canonicalize(t.path()).unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(root.join("project")).unwrap();
        let bin = fake_bin_dir(&root);
        let preloop = home.join(".preloop");
        Env { _t: t, root, home, preloop, bin, vars: Vec::new() }
    }
    fn set(&mut self, k: &str, v: &str) {
        self.vars.push((k.to_string(), v.to_string()));
    }
    /// The fake server only in the environment (`PRELOOP_URL`, both tokens).
    fn server_in_env(&mut self, server: &preloop_testkit::FakeServer) {
        self.set("PRELOOP_URL", &server.url());
        self.set("PRELOOP_TOKEN", &server.runtime_token());
        self.set("PRELOOP_USER_TOKEN", &server.user_token());
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(cli());
        c.args(args)
            .current_dir(self.root.join("project"))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("PRELOOP_HOME", &self.preloop)
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.vars {
            c.env(k, v);
        }
        c
    }
    fn run_in(&self, args: &[&str], stdin: Option<&str>) -> Output {
        run_with_stdin(self.cmd(args), stdin)
    }
    fn run(&self, args: &[&str]) -> Output {
        self.run_in(args, None)
    }
    fn bin_arg(&self) -> String {
        self.bin.display().to_string()
    }
    fn install(&self, harness: &str) -> Output {
        let out = self.run(&["install", "--harness", harness, "--bin-dir", &self.bin_arg()]);
        assert_eq!(code(&out), 0, "install {harness}: {}{}", stdout(&out), stderr(&out));
        out
    }
    fn doctor(&self) -> (i32, Value) {
        let out = self.run(&["doctor", "--json", "--no-codex-query", "--bin-dir", &self.bin_arg()]);
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("doctor --json: {e}: {}{}", stdout(&out), stderr(&out)));
        check_schema("doctor.schema.json", &v);
        (code(&out), v)
    }
    fn claude(&self) -> PathBuf {
        self.home.join(".claude/settings.json")
    }
    /// Every file under the root except the bin dir, with its bytes.
    fn snapshot(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![self.root.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.starts_with(&self.bin) {
                    continue;
                }
                let m = std::fs::symlink_metadata(&p).unwrap();
                if m.is_dir() {
                    stack.push(p);
                } else {
                    out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
                }
            }
        }
        out.sort();
        out
    }
}

/// Errors are one line on stderr, prefixed, naming what to do.
fn one_error_line(o: &Output) -> String {
    let e = stderr(o);
    let lines: Vec<&str> = e.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {e:?}");
    assert!(lines[0].starts_with("preloop-hooks: "), "{e}");
    lines[0].to_string()
}

/// Exit 1 with one error line (returned).
fn refused(o: &Output) -> String {
    assert_eq!(code(o), 1, "refused: {}{}", stdout(o), stderr(o));
    one_error_line(o)
}

/// `install --harness claude-code` over Claude settings holding `text`:
/// refused with one error line (returned), the settings left as they were.
fn install_claude_over(e: &Env, text: &str) -> String {
    write(&e.claude(), text);
    let out = e.run(&["install", "--harness", "claude-code", "--bin-dir", &e.bin_arg()]);
    let line = refused(&out);
    assert_eq!(read(&e.claude()), text);
    line
}

fn problems(v: &Value) -> Vec<String> {
    v["problems"].as_array().unwrap().iter().map(|p| format!("{} (fix: {})", p["what"], p["fix"])).collect()
}
fn warnings(v: &Value) -> Vec<String> {
    v["warnings"].as_array().unwrap().iter().map(|p| format!("{} (fix: {})", p["what"], p["fix"])).collect()
}

/// A loopback HTTP server answering every request with `answer(path, authorization)`.
fn serve(answer: fn(&str, &str) -> (u16, &'static str, String)) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let head = String::from_utf8_lossy(&buf).to_string();
            let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
            let auth = head
                .lines()
                .find_map(|l| l.strip_prefix("Authorization: ").or_else(|| l.strip_prefix("authorization: ")))
                .unwrap_or("")
                .trim()
                .to_string();
            let len: usize = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let have = buf.len() - head.find("\r\n\r\n").map(|i| i + 4).unwrap_or(buf.len());
            let mut rest = vec![0u8; len.saturating_sub(have)];
            let _ = s.read_exact(&mut rest);
            let (status, ctype, body) = answer(&path, &auth);
            let _ = write!(
                s,
                "HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://127.0.0.1:{port}")
}

fn html_server(_: &str, _: &str) -> (u16, &'static str, String) {
    (
        404,
        "text/html; charset=utf-8",
        "<!DOCTYPE HTML>\n<html lang=\"en\"><body><h1>Not Found</h1></body></html>".into(),
    )
}

/// Healthy, and every other route answers 401 with the bearer token echoed
/// plainly and JSON-escaped.
fn echo_server(path: &str, auth: &str) -> (u16, &'static str, String) {
    if path.ends_with("/health") {
        return (200, "application/json", "{\"status\": \"healthy\"}".into());
    }
    let esc: String = auth.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
    (401, "application/json", format!("{{\"detail\": \"bad {auth} / {esc}\"}}"))
}

// ---------------------------------------------------------------- newcomer 1

#[test]
fn uninstall_without_a_codex_hooks_json_succeeds() {
    let e = Env::new("un-nocodex");
    e.install("claude-code");
    let before_codex = e.home.join(".codex").exists();
    for args in [vec!["uninstall", "--dry-run"], vec!["uninstall", "--harness", "codex"], vec!["uninstall"]] {
        let out = e.run(&args);
        assert_eq!(code(&out), 0, "{args:?}: {}{}", stdout(&out), stderr(&out));
        assert!(stderr(&out).is_empty(), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).contains("codex        nothing of ours to remove"), "{}", stdout(&out));
    }
    assert!(!before_codex && !e.home.join(".codex").exists(), "uninstall creates no Codex files");
    // A CODEX_HOME that does not exist: the same.
    let mut e2 = Env::new("un-nocodexhome");
    let missing = e2.root.join("nowhere/codex");
    e2.set("CODEX_HOME", missing.to_str().unwrap());
    let out = e2.run(&["uninstall", "--harness", "codex"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!missing.exists());
}

// -------------------------------------------------------- M1, newcomer 2 and 4

#[test]
fn an_unusable_config_json_is_a_problem_and_operator_commands_refuse() {
    let e = Env::new("cfg-bad");
    e.install("claude-code");
    let cfg = e.preloop.join("config.json");
    for bad in [
        "{\"url\": \"http://127.0.0.1:9\", \"token\": \"agt_x\",}",
        "{\"url\": \"http://127.0.0.1:9\", \"tok",
        "[1, 2]",
    ] {
        write(&cfg, bad);
        std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (rc, v) = e.doctor();
        assert_eq!(rc, 6, "{bad}: {v:#}");
        assert_eq!(v["healthy"], false);
        assert!(problems(&v).iter().any(|p| p.contains("config.json")), "{bad}: {:?}", problems(&v));
        // install, login, logout refuse with one line, and change nothing.
        let snap = e.snapshot();
        let out = e.run(&["install", "--harness", "cursor", "--bin-dir", &e.bin_arg()]);
        assert_eq!(code(&out), 1, "{}", stdout(&out));
        assert!(one_error_line(&out).contains("config.json"), "{}", stderr(&out));
        let out = e.run_in(&["login", "--url", "http://127.0.0.1:9", "--no-verify"], Some("agt_abc"));
        assert!(refused(&out).contains("config.json"));
        let out = e.run(&["logout"]);
        assert!(refused(&out).contains("config.json"));
        assert_eq!(e.snapshot(), snap, "{bad}: nothing was written");
    }
    // The spellings the README documents are accepted; a symlinked config
    // (dotfile managers) is followed.
    let real = e.root.join("dotfiles/preloop-config.json");
    write(&real, "{\"watch\": \"off\", \"stop_rescue_cap\": 2}");
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_file(&cfg).unwrap();
    std::os::unix::fs::symlink(&real, &cfg).unwrap();
    let (rc, v) = e.doctor();
    assert_eq!(rc, 0, "{:?}", problems(&v));
    assert_eq!(v["mode"], "local");
}

/// newcomer-ux-3 N10: a bad setting is one fact with its fix, in `~` paths,
/// and the refusal under it agrees with it (no "using the default" above
/// "refuse to run") and counts in words.
#[test]
fn a_bad_setting_reads_as_one_refusal_with_tilde_paths() {
    let e = Env::new("cfg-n10");
    std::fs::create_dir_all(&e.preloop).unwrap();
    std::fs::set_permissions(&e.preloop, std::fs::Permissions::from_mode(0o700)).unwrap();
    let cfg = e.preloop.join("config.json");
    write(&cfg, r#"{"watch":"maybe"}"#);
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = e.run(&["notes", "send", "--session", "abc", "x"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines,
        [
            r#"preloop-hooks: ~/.preloop/config.json: watch is "maybe", expected true/false or "on"/"off" (edit watch in ~/.preloop/config.json)"#,
            "preloop-hooks: the configuration has a problem, listed above; notes and sessions refuse to run until it is fixed (check with `preloop-hooks doctor`)",
        ],
        "{err}"
    );
}

#[test]
fn a_preloop_home_that_is_not_a_directory_is_refused_before_anything_is_written() {
    let mut e = Env::new("home-file");
    let file = e.root.join("not-a-dir");
    write(&file, "x");
    e.set("PRELOOP_HOME", file.to_str().unwrap());
    let out = e.run(&["install", "--harness", "claude-code", "--bin-dir", &e.bin_arg()]);
    let line = refused(&out);
    assert!(line.contains("PRELOOP_HOME") && line.contains("not a directory"), "{line}");
    assert!(!e.claude().exists(), "no harness config touched");
    let out = e.run(&["doctor", "--json", "--no-codex-query", "--bin-dir", &e.bin_arg()]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(code(&out), 0);
    assert!(problems(&v).iter().any(|p| p.contains("PRELOOP_HOME") && p.contains("not a directory")), "{v:#}");
}

// ------------------------------------------------------------------------ M2

#[test]
fn files_other_users_can_write_are_refused() {
    let e = Env::new("m2");
    e.install("claude-code");
    // A PRELOOP_HOME others can write.
    std::fs::set_permissions(&e.preloop, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (rc, v) = e.doctor();
    assert_eq!(rc, 6);
    assert!(problems(&v).iter().any(|p| p.contains("writable by other users") && p.contains("chmod 700")), "{v:#}");
    let out = e.run_in(&["login", "--url", "http://127.0.0.1:9", "--no-verify"], Some("agt_abc"));
    assert!(refused(&out).contains("writable by other users"));
    assert!(!e.preloop.join("config.json").exists());
    std::fs::set_permissions(&e.preloop, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A config.json others can write: refused; one others can only read: a warning.
    let cfg = e.preloop.join("config.json");
    write(&cfg, "{\"url\": \"http://127.0.0.1:9\", \"token\": \"agt_planted\"}");
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (rc, v) = e.doctor();
    assert_eq!(rc, 6);
    assert_eq!(v["mode"], "unknown", "an untrusted file may name a server: the mode is unknown");
    assert!(problems(&v).iter().any(|p| p.contains("config.json") && p.contains("writable by other users")));
    let out = e.run(&["install", "--harness", "cursor", "--bin-dir", &e.bin_arg()]);
    assert_eq!(code(&out), 1);
    assert!(!e.home.join(".cursor").exists());
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (_, v) = e.doctor();
    assert!(warnings(&v).iter().any(|w| w.contains("other users can read it") && w.contains("chmod 600")), "{v:#}");
}

// ------------------------------------------------------------------------ M3

#[test]
fn tokens_a_server_echoes_are_never_printed() {
    let url = serve(echo_server);
    let mut e = Env::new("m3");
    e.install("claude-code");
    let rt = "agt_RuntimeSecret_0123456789";
    let ut = "usrSecretKey0123456789012345678901234567";
    e.set("PRELOOP_URL", &url);
    e.set("PRELOOP_TOKEN", rt);
    e.set("PRELOOP_USER_TOKEN", ut);
    for args in [vec!["doctor", "--no-codex-query", "--verbose"], vec!["doctor", "--json", "--no-codex-query"]] {
        let mut a = args.clone();
        let bin = e.bin_arg();
        a.extend(["--bin-dir", &bin]);
        let out = e.run(&a);
        assert_eq!(code(&out), 7, "{}", stdout(&out));
        let all = stdout(&out) + &stderr(&out);
        for t in [rt, ut] {
            assert!(!all.contains(t) && !all.contains(&t[4..]), "{args:?} printed a token:\n{all}");
        }
        assert!(all.contains("[redacted]"), "{all}");
    }
    // login's check: rejected, not saved, not printed.
    let mut e2 = Env::new("m3-login");
    e2.vars.clear();
    let out = e2.run_in(&["login", "--url", &url], Some(rt));
    let line = refused(&out);
    assert!(line.contains("rejected") && !line.contains("RuntimeSecret"), "{line}");
    assert!(!e2.preloop.join("config.json").exists());
}

// ------------------------------------------------------------ newcomer 3, 11

#[test]
fn login_user_with_a_url_is_enough_for_the_operator_and_doctor_says_so() {
    let server = preloop_testkit::FakeServer::start();
    let e = Env::new("login-user");
    e.install("claude-code");
    let out = e.run_in(&["login", "--user", "--url", &server.url()], Some(&server.user_token()));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("and the URL"), "{}", stdout(&out));
    let cfg: Value = serde_json::from_str(&read(&e.preloop.join("config.json"))).unwrap();
    assert_eq!(cfg["url"], server.url().as_str());
    assert!(cfg.get("token").is_none());
    let (rc, v) = e.doctor();
    assert_eq!(rc, 0, "{:?}", problems(&v));
    assert_eq!(v["modes"]["hooks"], "local");
    assert!(v["modes"]["hooks_why"].as_str().unwrap().contains("no runtime token"), "{v:#}");
    assert_eq!(v["modes"]["operator"], "server");
    assert!(v["modes"]["operator_why"].as_str().unwrap().contains("user token from"), "{v:#}");
    assert_eq!(v["server"]["user_token"], "accepted");
    assert!(warnings(&v).iter().any(|w| w.contains("no runtime token")), "{:?}", warnings(&v));
    // The human report names both modes.
    let out = e.run(&["doctor", "--no-codex-query", "--bin-dir", &e.bin_arg()]);
    assert!(
        stdout(&out).contains("hooks      local") && stdout(&out).contains("notes      server"),
        "{}",
        stdout(&out)
    );
}

// ---------------------------------------------------------------- newcomer 12

#[test]
fn a_rejected_user_token_gets_a_fix_for_where_it_comes_from() {
    let server = preloop_testkit::FakeServer::start();
    let mut e = Env::new("bad-user-token");
    e.install("claude-code");
    e.set("PRELOOP_URL", &server.url());
    e.set("PRELOOP_TOKEN", &server.runtime_token());
    e.set("PRELOOP_USER_TOKEN", "bad");
    let (rc, v) = e.doctor();
    assert_eq!(rc, 7);
    let p = problems(&v).into_iter().find(|p| p.contains("user token")).unwrap();
    assert!(p.contains("environment") && p.contains("unset PRELOOP_USER_TOKEN"), "{p}");
    assert!(!p.contains("login --user\""), "{p}");
    // login --user with a bad key: not saved, and the hint is not "run login --user".
    let e2 = Env::new("bad-user-login");
    let out = e2.run_in(&["login", "--user", "--url", &server.url()], Some(&"x".repeat(40)));
    let line = refused(&out);
    assert!(line.contains("not saved") && line.contains("valid personal API key"), "{line}");
    assert!(!e2.preloop.join("config.json").exists());
}

// ---------------------------------------------------------------- newcomer 10

#[test]
fn an_untrusted_codex_project_is_one_problem_with_a_fix_that_works() {
    let e = Env::new("codex-project");
    let out = e.run(&["install", "--harness", "codex", "--scope", "project", "--bin-dir", &e.bin_arg()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("only in a trusted project"), "{}", stdout(&out));
    let (rc, v) = e.doctor();
    assert_eq!(rc, 6);
    let ps = problems(&v);
    assert_eq!(ps.len(), 1, "one problem, not one per hook: {ps:?}");
    assert!(ps[0].contains("not a trusted project") && ps[0].contains("trust_level"), "{ps:?}");
    // Once the user scope holds our hooks too, doctor says both do.
    e.install("codex");
    let (_, v) = e.doctor();
    assert!(warnings(&v).iter().any(|w| w.contains("both") && w.contains("--scope project")), "{:?}", warnings(&v));
    let cx = v["harnesses"].as_array().unwrap().iter().find(|h| h["harness"] == "codex").unwrap();
    assert_eq!(cx["scopes"].as_array().unwrap().len(), 2, "{cx:#}");
}

// ---------------------------------------------------------------- newcomer 15

#[test]
fn a_moved_bin_dir_is_one_line_with_its_fix() {
    let e = Env::new("moved");
    e.install("claude-code");
    e.install("cursor");
    let moved = e.root.join("moved bin");
    std::fs::rename(&e.bin, &moved).unwrap();
    let out = e.run(&["doctor", "--json", "--no-codex-query", "--bin-dir", moved.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(code(&out), 6);
    let ps = problems(&v);
    assert_eq!(ps.len(), 1, "{ps:?}");
    assert!(ps[0].contains("claude-code, cursor") && ps[0].contains("no longer holds the binaries"), "{ps:?}");
    assert!(ps[0].contains("moved bin") && ps[0].contains("(fix: \"preloop-hooks install\")"), "{ps:?}");
    let out = e.run(&["doctor", "--no-codex-query", "--bin-dir", moved.to_str().unwrap()]);
    assert!(stdout(&out).contains("7/7, 7 broken"), "the table says so too:\n{}", stdout(&out));
    // The fix works as written.
    let out = e.run(&["install", "--bin-dir", moved.to_str().unwrap()]);
    assert_eq!(code(&out), 0);
    let out = e.run(&["doctor", "--json", "--no-codex-query", "--bin-dir", moved.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

// ---------------------------------------------------------- newcomer 16, 32

#[test]
fn a_url_that_is_not_a_preloop_server_says_so_without_its_body() {
    let url = serve(html_server);
    let mut e = Env::new("not-preloop");
    e.install("claude-code");
    e.set("PRELOOP_URL", &url);
    e.set("PRELOOP_TOKEN", "agt_abcdefgh");
    e.set("PRELOOP_USER_TOKEN", "user.jwt.x");
    let out = e.run(&["doctor", "--no-codex-query", "--bin-dir", &e.bin_arg()]);
    assert_eq!(code(&out), 7);
    let text = stdout(&out);
    assert!(text.contains("answers but is not a Preloop server (GET /api/v1/health → 404, text/html)"), "{text}");
    assert!(text.contains("NOT a Preloop server") && !text.contains("UNREACHABLE"), "{text}");
    assert!(!text.contains("DOCTYPE") && !text.contains("<html"), "{text}");
    let e2 = Env::new("not-preloop-login");
    let out = e2.run_in(&["login", "--url", &url], Some("agt_abcdefgh"));
    let line = refused(&out);
    assert!(line.contains("is not a Preloop server") && !line.contains("DOCTYPE"), "{line}");
    // Nothing listens: a sentence, no raw OS error.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let mut e3 = Env::new("unreachable");
    e3.install("claude-code");
    e3.set("PRELOOP_URL", &dead);
    e3.set("PRELOOP_TOKEN", "agt_abcdefgh");
    let (rc, v) = e3.doctor();
    assert_eq!(rc, 7);
    let p = problems(&v).join("\n");
    assert!(p.contains("connection refused: is the server running at") && !p.contains("os error"), "{p}");
}

// ---------------------------------------------------------------- newcomer 20

#[test]
fn an_executable_in_a_cargo_target_dir_is_copied_to_a_stable_place() {
    let e = Env::new("target");
    let target = e.root.join("checkout/target");
    let release = target.join("release");
    std::fs::create_dir_all(&release).unwrap();
    write(
        &target.join("CACHEDIR.TAG"),
        "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by cargo.\n",
    );
    std::fs::copy(e.bin.join("preloop-hooks"), release.join("preloop-hooks")).unwrap();
    let out = e.run(&["install", "--harness", "claude-code", "--bin-dir", release.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("preloop-hooks to ~/.preloop/bin") && stdout(&out).contains("cargo clean"),
        "{}",
        stdout(&out)
    );
    let v: Value = serde_json::from_str(&read(&e.claude())).unwrap();
    let cmd = v["hooks"]["Stop"][0]["hooks"][0]["command"].as_str().unwrap();
    assert_eq!(cmd, e.preloop.join("bin/preloop-claude-code-stop").to_str().unwrap());
    // A rebuild: doctor says the copy is older, and install copies again.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let exe = release.join("preloop-hooks");
    std::fs::remove_file(&exe).unwrap();
    write(&exe, "#!/bin/sh\n# rebuilt\nexit 0\n");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = e.run(&["doctor", "--json", "--no-codex-query", "--bin-dir", release.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(warnings(&v).iter().any(|w| w.contains("differs from its copy")), "{:?}", warnings(&v));
    let out = e.run(&["install", "--harness", "claude-code", "--bin-dir", release.to_str().unwrap()]);
    assert!(stdout(&out).contains("preloop-hooks to ~/.preloop/bin"), "{}", stdout(&out));
    // Every hook command links to the new copy: one file on disk.
    let stable = e.preloop.join("bin");
    for name in preloop_hooks::links::names() {
        assert!(preloop_hooks::links::is_link_to(&stable.join(name), &stable.join("preloop-hooks")), "{name}");
    }
    assert!(read(&stable.join("preloop-claude-code-stop")).contains("rebuilt"));
    // `cargo clean`: the hooks still run.
    std::fs::remove_dir_all(&target).unwrap();
    assert!(Command::new("/bin/sh").arg("-c").arg(cmd).status().unwrap().success());
    // doctor from the stable copy (where `$PRELOOP_HOME/bin/preloop-hooks` would run).
    let out = e.run(&["doctor", "--json", "--no-codex-query", "--bin-dir", stable.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(code(&out), 0, "{:?}", problems(&v));
}

// -------------------------------------------------------- newcomer 29, usage

#[test]
fn usage_errors_exit_2_and_name_the_valid_values() {
    let e = Env::new("usage");
    let out = e.run_in(&["login", "--url", "127.0.0.1:8765", "--no-verify"], Some("agt_x1234"));
    assert_eq!(code(&out), 2);
    let line = one_error_line(&out);
    assert!(line.contains("\"127.0.0.1:8765\"") && line.contains("did you mean --url http://127.0.0.1:8765"), "{line}");
    let out = e.run_in(&["login", "--url", "http://", "--no-verify"], Some("agt_x1234"));
    assert_eq!(code(&out), 2);
    assert!(one_error_line(&out).contains("\"http://\""));
    let out = e.run(&["install", "--harness", "claude"]);
    assert_eq!(code(&out), 2);
    // Every harness of the registry, so a new one is checked without a line here.
    for v in preloop_shared::Harness::ALL.iter().map(|h| h.slug()).chain(["all"]) {
        assert!(stderr(&out).contains(v), "{v} listed: {}", stderr(&out));
    }
    let out = e.run(&["install", "--scope", "global"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("user") && stderr(&out).contains("project"));
    assert!(e.snapshot().iter().all(|(p, _)| !p.starts_with(&e.home)), "nothing written");
}

// ---------------------------------------------------------- newcomer 30, 39

#[test]
fn doctor_is_short_by_default_and_has_a_check_alias() {
    let e = Env::new("short");
    e.install("codex");
    std::fs::remove_file(e.home.join(".codex/config.toml")).unwrap();
    let out = e.run(&["check", "--no-codex-query", "--bin-dir", &e.bin_arg()]);
    assert_eq!(code(&out), 6);
    let text = stdout(&out);
    assert!(!text.contains("known limits"), "{text}");
    let mut seen = std::collections::HashSet::new();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        assert!(seen.insert(l), "a line repeats: {l}\n{text}");
    }
    assert_eq!(text.lines().filter(|l| l.contains("not trusted")).count(), 1, "{text}");
    let out = e.run(&["doctor", "--verbose", "--no-codex-query", "--bin-dir", &e.bin_arg()]);
    assert!(stdout(&out).contains("known limits") && stdout(&out).contains("PermissionRequest"), "{}", stdout(&out));
    let out = e.run(&["status", "--no-codex-query", "--bin-dir", &e.bin_arg()]);
    assert_eq!(code(&out), 6, "the old name still works");
    let help = stdout(&e.run(&["--help"]));
    assert!(help.contains("[alias: check]") && !help.contains("status"), "{help}");
}

// ---------------------------------------------------------------- newcomer 31

#[test]
fn a_file_that_does_not_parse_names_its_position_once() {
    let e = Env::new("parse");
    let bad = "{\n  \"model\": \"opus\",\n  \"hooks\": {,}\n}\n";
    let line = install_claude_over(&e, bad);
    assert!(line.contains("line 3, column 13") && !line.contains("at line 3 column 13"), "{line}");
    let (_, v) = e.doctor();
    let p = problems(&v).join("\n");
    assert!(p.contains("line 3, column 13") && !p.contains("at line 3"), "{p}");
}

// ------------------------------------------------------------ newcomer 33, 34

#[test]
fn install_says_once_when_a_harness_is_not_on_path_and_diffs_show_real_paths() {
    let e = Env::new("path");
    let out = e.run(&["install", "--harness", "cursor", "--dry-run", "--bin-dir", &e.bin_arg()]);
    assert_eq!(code(&out), 0);
    let text = stdout(&out);
    assert!(text.contains("--- ~/.cursor/hooks.json (new)\n+++ ~/.cursor/hooks.json (new)"), "{text}");
    assert!(!text.contains("+++ b/"), "{text}");
    assert!(!e.home.join(".cursor").exists() && !e.preloop.exists(), "a dry run writes nothing");
    let out = e.install("all");
    let text = stdout(&out);
    for p in preloop_shared::Harness::ALL.iter().map(|h| h.def().program) {
        assert_eq!(text.matches(&format!("note: {p} not found on PATH; installed anyway")).count(), 1, "{p}:\n{text}");
    }
    assert_eq!(text.matches("headless `cursor-agent -p`").count(), 1, "{text}");
    let again = stdout(&e.install("all"));
    assert!(!again.contains("headless"), "not on an unchanged install:\n{again}");
    assert!(again.contains("already installed"), "{again}");
}

// ------------------------------------------------------------ newcomer 35, 40

#[test]
fn uninstall_says_what_is_left_and_needs_no_bin_dir() {
    let e = Env::new("leftovers");
    write(&e.claude(), "{\"model\": \"opus\"}\n");
    e.install("claude-code");
    let out = e.run(&["uninstall", "--harness", "claude-code"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(read(&e.claude()), "{\"model\": \"opus\"}\n");
    let last = stdout(&out).lines().last().unwrap().to_string();
    assert!(last.starts_with("left in place: "), "{last}");
    assert!(last.contains("; ~/.preloop (notes, sessions, log"), "{last}");
    // The commands beside an executable outside this HOME stay (red-team 4, P2).
    assert!(last.contains("hook commands in") && last.contains("outside this HOME"), "{last}");
    assert!(
        last.contains(
            "2 backup files: ~/.claude/settings.json.bak.preloop-* (`rm ~/.claude/settings.json.bak.preloop-*` removes them)"
        ),
        "{last}"
    );
    let help = stdout(&e.run(&["uninstall", "--help"]));
    assert!(!help.contains("--bin-dir"), "{help}");
}

// ---------------------------------------------------------------- newcomer 41, newcomer-ux-3 N6

#[test]
fn doctor_says_when_it_asks_codex_and_how_not_to_without_a_warning() {
    let e = Env::new("codex-query");
    e.install("codex");
    let fake = e.root.join("fakebin");
    write(&fake.join("codex"), "#!/bin/sh\n[ \"$1\" = --version ] && echo 'codex-cli 0.169.0'\nexit 1\n");
    std::fs::set_permissions(fake.join("codex"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = e.bin_arg();
    let doctor = |args: &[&str]| {
        let mut a = vec!["doctor", "--bin-dir", &bin];
        a.extend_from_slice(args);
        let mut c = e.cmd(&a);
        c.env("PATH", format!("{}:/usr/bin:/bin", fake.display()));
        c.output().unwrap()
    };
    // A healthy run has no warning for it (one on every run teaches people to skip warnings) ...
    let out = doctor(&["--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(code(&out), 0, "{v:#}");
    assert!(warnings(&v).is_empty(), "{v:#}");
    assert!(!stdout(&doctor(&[])).contains("codex app-server"));
    // ... and --verbose says what it did, as information, with the way around it.
    let text = stdout(&doctor(&["--verbose"]));
    let note = text.lines().skip_while(|l| *l != "notes (informational)").nth(1).unwrap_or_default().to_string();
    assert!(note.contains("codex app-server") && note.contains("--no-codex-query"), "{text}");
}

// ------------------------------------------------------------------------ L8

#[test]
fn backups_are_never_written_through_a_planted_link() {
    let e = Env::new("l8");
    write(&e.claude(), "{\"model\": \"opus\"}\n");
    let outside = e.root.join("outside");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    for i in 0..6 {
        let ts = preloop_shared::time::Timestamp::from_secs(now + i).to_iso_z();
        let stamp: String = ts.chars().take(19).filter(|c| c.is_ascii_digit() || *c == 'T').collect::<String>() + "Z";
        std::os::unix::fs::symlink(
            outside.join(format!("t{i}")),
            e.home.join(format!(".claude/settings.json.bak.preloop-{stamp}")),
        )
        .unwrap();
    }
    std::fs::create_dir_all(&outside).unwrap();
    e.install("claude-code");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "nothing created through a link");
}

// ------------------------------------------------------------------------ L9

#[test]
fn a_duplicate_hooks_key_is_refused() {
    let e = Env::new("l9");
    let text = "{\"hooks\": {\"Stop\": []},\n \"hooks\": {\"PreToolUse\": [{\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"/usr/local/bin/my-guard\"}]}]}}\n";
    let line = install_claude_over(&e, text);
    assert!(line.contains("line 2") && line.contains("\"hooks\" appears twice"), "{line}");
}

// ----------------------------------------------------------------------- L10

#[test]
fn a_users_same_named_entries_survive_install_and_uninstall() {
    let e = Env::new("l10");
    let text = r#"{"hooks": {
  "Stop": [{"hooks": [{"type": "command", "command": "/opt/team-tools/preloop-claude-code-stop --audit-only"}]}],
  "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/opt/team-tools/preloop-claude-code-pre-tool-use --policy strict"},
                                              {"type": "command", "command": "/usr/local/bin/my-guard"}]}]}}
"#;
    write(&e.claude(), text);
    let out = e.install("claude-code");
    assert!(
        stdout(&out).contains("left alone: Stop `/opt/team-tools/preloop-claude-code-stop --audit-only`"),
        "{}",
        stdout(&out)
    );
    let out = e.run(&["uninstall", "--harness", "claude-code"]);
    assert_eq!(code(&out), 0);
    assert_eq!(read(&e.claude()), text, "the user's entries are back byte for byte");
}

// ----------------------------------------------------------------------- L11

#[test]
fn concurrent_installs_do_not_lose_state() {
    for round in 0..4 {
        let e = Env::new("l11");
        let children: Vec<_> = ["claude-code", "codex", "cursor", "gemini", "copilot"]
            .iter()
            .map(|h| e.cmd(&["install", "--harness", h, "--bin-dir", &e.bin_arg()]).spawn().unwrap())
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert_eq!(code(&out), 0, "round {round}: {}", stderr(&out));
        }
        let state: Value = serde_json::from_str(&read(&e.preloop.join("install-state.json"))).unwrap();
        assert_eq!(state["created"].as_array().unwrap().len(), 5, "round {round}: {state}");
        let out = e.run(&["uninstall"]);
        assert_eq!(code(&out), 0);
        assert!(!e.claude().exists() && !e.home.join(".codex/hooks.json").exists(), "round {round}");
        assert!(!e.home.join(".gemini/settings.json").exists() && !e.home.join(".copilot/hooks/preloop.json").exists());
        assert!(!e.home.join(".codex/config.toml").exists(), "a config.toml install created is removed again");
    }
}

// ----------------------------------------------------------------------- L12

#[test]
fn a_missing_home_is_resolved_as_the_hooks_resolve_it() {
    let e = Env::new("l12");
    let mut c = e.cmd(&["install", "--harness", "claude-code", "--dry-run", "--bin-dir", &e.bin_arg()]);
    c.env_remove("HOME");
    let out = c.output().unwrap();
    let expected = preloop_shared::config::user_home(&preloop_shared::config::Env::default());
    match expected {
        Some(h) => {
            assert_eq!(code(&out), 0, "{}", stderr(&out));
            let want = h.join(".claude/settings.json");
            assert!(
                stdout(&out).contains(&want.display().to_string()) || stdout(&out).contains("~/.claude/settings.json"),
                "{}",
                stdout(&out)
            );
            assert!(!stdout(&out).contains(" /.claude/"), "{}", stdout(&out));
        }
        None => {
            assert!(refused(&out).contains("set HOME"));
        }
    }
}

// ----------------------------------------------------------------------- L14

#[test]
fn odd_input_never_panics_the_cli() {
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new("l14");
    let weird = std::ffi::OsStr::from_bytes(b"/tmp/\xff\xfe");
    let out = e.cmd(&["install", "--harness", "cursor"]).arg("--bin-dir").arg(weird).output().unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    for text in
        ["", "\u{feff}{}", "{\"hooks\": {\"Stop\": [null, 1, \"x\", {\"hooks\": 3}]}}", "{\"hooks\": null}", "\0"]
    {
        write(&e.claude(), text);
        let out = e.run(&["install", "--harness", "claude-code", "--bin-dir", &e.bin_arg()]);
        assert!(matches!(code(&out), 0 | 1), "{text:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{text:?}: {}", stderr(&out));
        let out = e.run(&["doctor", "--no-codex-query", "--bin-dir", &e.bin_arg()]);
        assert!(!stderr(&out).contains("panicked"), "{text:?}: {}", stderr(&out));
    }
}

// ---------------------------------------------------- Gemini CLI, Copilot CLI

#[test]
fn gemini_settings_with_comments_get_our_hooks_in_milliseconds() {
    let mut e = Env::new("gemini");
    let gh = e.root.join("gemini home");
    e.set("GEMINI_CLI_HOME", gh.to_str().unwrap());
    let settings = gh.join(".gemini/settings.json");
    let text = "{\n  // mine\n  \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}},\n  \"hooks\": {\n    \"BeforeTool\": [{\"matcher\": \"run_shell_command\", \"hooks\": [{\"type\": \"command\", \"command\": \"/usr/local/bin/guard\"}]}]\n  }\n}\n";
    write(&settings, text);
    e.install("gemini");
    let after = read(&settings);
    assert!(after.contains("// mine"), "{after}");
    let v =
        preloop_hooks::edit::parse_config(&after, preloop_hooks::dialect::of(preloop_shared::Harness::Gemini).syntax())
            .unwrap();
    let ours = &v["hooks"]["BeforeTool"][1]["hooks"][0];
    assert_eq!(ours["timeout"], 340_000, "milliseconds: {ours}");
    assert_eq!(ours["name"], "preloop-gemini-before-tool");
    // Gemini awaits SessionEnd: the lifecycle budget (20 s), in milliseconds.
    assert_eq!(v["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"], 20_000);
    let (rc, d) = e.doctor();
    assert_eq!(rc, 0, "{:?}", problems(&d));
    let out = e.run(&["uninstall", "--harness", "gemini"]);
    assert_eq!(code(&out), 0);
    assert_eq!(read(&settings), text);
    // Project scope: Gemini loads it only in a trusted folder.
    let out = e.run(&["install", "--harness", "gemini", "--scope", "project", "--bin-dir", &e.bin_arg()]);
    assert!(
        stdout(&out).contains("only in a trusted folder") && stdout(&out).contains("GEMINI_CLI_TRUST_WORKSPACE=true")
    );
    let (rc, d) = e.doctor();
    assert_eq!(rc, 6);
    assert!(problems(&d).iter().any(|p| p.contains("not a trusted folder")), "{:?}", problems(&d));
    write(
        &gh.join(".gemini/trustedFolders.json"),
        &json!({e.root.join("project").to_str().unwrap(): "TRUST_FOLDER"}).to_string(),
    );
    let (rc, d) = e.doctor();
    assert_eq!(rc, 0, "{:?}", problems(&d));
}

#[test]
fn gemini_with_the_server_only_in_the_environment_is_warned_about() {
    let server = preloop_testkit::FakeServer::start();
    let mut e = Env::new("gemini-env");
    e.install("gemini");
    e.server_in_env(&server);
    let (rc, v) = e.doctor();
    assert_eq!(rc, 0, "{:?}", problems(&v));
    assert!(
        warnings(&v).iter().any(|w| w.contains("GITHUB_SHA") && w.contains("preloop-hooks login --url URL")),
        "{:?}",
        warnings(&v)
    );
}

#[test]
fn copilot_gets_a_file_of_its_own() {
    let mut e = Env::new("copilot");
    let ch = e.root.join("copilot home");
    e.set("COPILOT_HOME", ch.to_str().unwrap());
    let other = ch.join("hooks/mine.json");
    write(&other, "{\"version\": 1, \"hooks\": {}}");
    e.install("copilot");
    let file = ch.join("hooks/preloop.json");
    let v: Value = serde_json::from_str(&read(&file)).unwrap();
    assert_eq!(v["version"], 1);
    let pre = &v["hooks"]["preToolUse"][0];
    assert_eq!(pre["type"], "command");
    assert_eq!(pre["timeoutSec"], 340);
    assert!(pre["bash"].as_str().unwrap().ends_with("preloop-copilot-pre-tool-use'"), "{pre}");
    assert_eq!(v["hooks"].as_object().unwrap().len(), 6);
    let (rc, d) = e.doctor();
    assert_eq!(rc, 0, "{:?}", problems(&d));
    assert!(stdout(&e.install("copilot")).contains("already installed (6 hooks)"));
    let out = e.run(&["uninstall", "--harness", "copilot"]);
    assert_eq!(code(&out), 0);
    assert!(!file.exists() && other.exists(), "ours goes, the user's stays");
    assert!(std::fs::read_dir(ch.join("hooks")).unwrap().count() == 1, "no backup of our own file");
    let out = e.run(&["install", "--harness", "copilot", "--scope", "project", "--bin-dir", &e.bin_arg()]);
    assert!(e.root.join("project/.github/hooks/preloop.json").exists());
    assert!(stdout(&out).contains("--trust-folder"), "{}", stdout(&out));
}

/// Pi: our extension and its manifest, both ours alone, in one scope only;
/// the user's own extensions stay byte for byte, and doctor tells whether
/// the extension is this build's.
#[test]
fn pi_gets_an_extension_and_its_manifest() {
    let mut e = Env::new("pi");
    let agent = e.root.join("pi agent");
    e.set("PI_CODING_AGENT_DIR", agent.to_str().unwrap());
    let theirs = agent.join("extensions/theirs.ts");
    write(&theirs, "export default function (pi) {}\n");
    let before = e.snapshot();
    e.install("pi");
    let shim = agent.join("extensions/preloop.js");
    let manifest = agent.join("extensions/preloop.json");
    assert_eq!(read(&shim), preloop_pi::SHIM.text(), "this build's extension, byte for byte");
    let v: Value = serde_json::from_str(&read(&manifest)).unwrap();
    assert_eq!(v["hooks"].as_object().unwrap().len(), 7, "six events and the idle watcher");
    let idle = &v["hooks"]["idle"][0];
    assert_eq!(idle["argv"][2], "preloop-pi-watch");
    assert!(idle["timeout"].as_u64().unwrap() > 3600 * 1000, "the watcher outlives watch_max_secs: {idle}");
    let tc = &v["hooks"]["tool_call"][0];
    let argv: Vec<&str> = tc["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(argv[0].ends_with("/preloop-hooks") && argv[1..] == ["hook", "preloop-pi-tool-call"], "{argv:?}");
    assert_eq!(v["on_error"]["tool_call"], "allow", "pre_tool_use_on_error's default");
    let (rc, d) = e.doctor();
    assert_eq!(rc, 0, "{:?}", problems(&d));
    assert!(stdout(&e.install("pi")).contains("already installed (7 hooks)"));
    // A second scope would be loaded too: refused.
    let out = e.run(&["install", "--harness", "pi", "--scope", "project", "--bin-dir", &e.bin_arg()]);
    assert_ne!(code(&out), 0);
    assert!(stderr(&out).contains("Pi would load both"), "{}", stderr(&out));
    assert!(!e.root.join("project/.pi/extensions/preloop.js").exists());
    // An extension that is not this build's is a problem doctor names.
    write(&shim, &read(&shim).replace("0.1.0", "0.0.9"));
    let (rc, d) = e.doctor();
    assert_ne!(rc, 0);
    assert!(problems(&d).iter().any(|p| p.contains("is not this build's extension")), "{:?}", problems(&d));
    std::fs::remove_file(&shim).unwrap();
    let (_, d) = e.doctor();
    assert!(problems(&d).iter().any(|p| p.contains("preloop.js is missing")), "{:?}", problems(&d));
    e.install("pi");
    assert_eq!(read(&shim), preloop_pi::SHIM.text(), "install puts it back");
    let out = e.run(&["uninstall", "--harness", "pi"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!shim.exists() && !manifest.exists());
    assert_eq!(read(&theirs), "export default function (pi) {}\n");
    let after: Vec<_> = e.snapshot().into_iter().filter(|(p, _)| !p.starts_with(&e.preloop)).collect();
    let before: Vec<_> = before.into_iter().filter(|(p, _)| !p.starts_with(&e.preloop)).collect();
    assert_eq!(after, before, "every file outside PRELOOP_HOME as it was");
    // A file of that name that is not ours is left alone.
    write(&shim, "// mine\n");
    let out = e.run(&["install", "--harness", "pi", "--bin-dir", &e.bin_arg()]);
    assert_ne!(code(&out), 0);
    assert_eq!(read(&shim), "// mine\n");
}

/// OpenCode: our plugin and its manifest in one plugins folder, one scope
/// only; the config folder gets what stops OpenCode's `npm install` at start
/// (a lock file listing its plugin package, `node_modules/`) only where it
/// lacks them, and uninstall returns every file and folder byte for byte.
#[test]
fn opencode_gets_a_plugin_its_manifest_and_no_npm_install_at_start() {
    let mut e = Env::new("opencode");
    let xdg = e.root.join("xdg config");
    e.set("XDG_CONFIG_HOME", xdg.to_str().unwrap());
    let config = xdg.join("opencode");
    let theirs = config.join("plugins/theirs.ts");
    write(&theirs, "export const Mine = async () => ({})\n");
    let user_json = config.join("opencode.json");
    write(&user_json, "{\"model\": \"x/y\"}\n");
    let before = e.snapshot();
    e.install("opencode");
    let shim = config.join("plugins/preloop.js");
    let manifest = config.join("plugins/preloop.json");
    assert_eq!(read(&shim), preloop_opencode::SHIM.text(), "this build's plugin, byte for byte");
    let v: Value = serde_json::from_str(&read(&manifest)).unwrap();
    assert_eq!(v["hooks"].as_object().unwrap().len(), 7, "six hooks and the idle watcher");
    let idle = &v["hooks"]["idle"][0];
    assert_eq!(idle["argv"][2], "preloop-opencode-watch");
    assert!(idle["timeout"].as_u64().unwrap() > 3600 * 1000, "the watcher outlives watch_max_secs: {idle}");
    let tc = &v["hooks"]["tool.execute.before"][0];
    let argv: Vec<&str> = tc["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(argv[0].ends_with("/preloop-hooks") && argv[1..] == ["hook", "preloop-opencode-tool-execute-before"]);
    assert_eq!(v["on_error"]["tool.execute.before"], "allow", "pre_tool_use_on_error's default");
    assert_eq!(v["stop_rescue_cap"], 3);
    // What OpenCode checks before its npm install: node_modules/ and the lock's root.
    let lock: Value = serde_json::from_str(&read(&config.join("package-lock.json"))).unwrap();
    assert_eq!(lock["packages"][""]["dependencies"]["@opencode-ai/plugin"], "1.18.33");
    assert!(config.join("node_modules").is_dir());
    assert!(!config.join("package.json").exists(), "OpenCode does not need one");
    let (rc, d) = e.doctor();
    assert_eq!(rc, 0, "{:?}", problems(&d));
    assert!(stdout(&e.install("opencode")).contains("already installed (7 hooks)"));
    // A second scope would be loaded too: refused.
    let out = e.run(&["install", "--harness", "opencode", "--scope", "project", "--bin-dir", &e.bin_arg()]);
    assert_ne!(code(&out), 0);
    assert!(stderr(&out).contains("OpenCode would load both"), "{}", stderr(&out));
    assert!(!e.root.join("project/.opencode/plugins/preloop.js").exists());
    // A plugin that is not this build's is a problem doctor names.
    write(&shim, &read(&shim).replace("0.1.0", "0.0.9"));
    let (rc, d) = e.doctor();
    assert_ne!(rc, 0);
    assert!(problems(&d).iter().any(|p| p.contains("is not this build's plugin")), "{:?}", problems(&d));
    e.install("opencode");
    let out = e.run(&["uninstall", "--harness", "opencode"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!shim.exists() && !manifest.exists());
    assert!(!config.join("node_modules").exists() && !config.join("package-lock.json").exists());
    assert_eq!(read(&theirs), "export const Mine = async () => ({})\n");
    let after: Vec<_> = e.snapshot().into_iter().filter(|(p, _)| !p.starts_with(&e.preloop)).collect();
    let before: Vec<_> = before.into_iter().filter(|(p, _)| !p.starts_with(&e.preloop)).collect();
    assert_eq!(after, before, "every file outside PRELOOP_HOME as it was");

    // A project whose .opencode/ already has the user's lock and node_modules: both stay as they are.
    let proj = e.root.join("project/.opencode");
    let their_lock =
        "{\"lockfileVersion\": 3, \"packages\": {\"\": {\"dependencies\": {\"@opencode-ai/plugin\": \"1.18.30\"}}}}\n";
    write(&proj.join("package-lock.json"), their_lock);
    write(&proj.join("node_modules/x/index.js"), "//\n");
    let out = e.run(&["install", "--harness", "opencode", "--scope", "project", "--bin-dir", &e.bin_arg()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(proj.join("plugins/preloop.js").exists());
    assert!(!proj.join("node_modules/.preloop-hooks").exists());
    let out = e.run(&["uninstall", "--harness", "opencode", "--scope", "project"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(read(&proj.join("package-lock.json")), their_lock);
    assert!(proj.join("node_modules/x/index.js").exists() && !proj.join("plugins").exists());
}

// --------------------------------------------------- Preloop's own hooks, Cursor

#[test]
fn preloop_s_own_hooks_are_found_and_named() {
    let e = Env::new("own");
    write(
        &e.claude(),
        r#"{"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "/usr/local/bin/preloop agents permission-hook --source claude_code", "timeout": 86430}]}]}}"#,
    );
    let out = e.install("claude-code");
    assert!(stdout(&out).contains("Preloop's own hooks") && stdout(&out).contains("checked twice"), "{}", stdout(&out));
    let (rc, v) = e.doctor();
    assert_eq!(rc, 6);
    let p = problems(&v).join("\n");
    assert!(p.contains("Preloop's own hooks") && p.contains("remove the entries that run"), "{p}");
}

#[test]
fn doctor_checks_cursors_loop_limit() {
    let e = Env::new("looplimit");
    e.install("cursor");
    let path = e.home.join(".cursor/hooks.json");
    let text = read(&path)
        .replace(&format!("\"loop_limit\": {}", preloop_shared::registry::CURSOR_LOOP_LIMIT), "\"loop_limit\": 50");
    write(&path, &text);
    let (rc, v) = e.doctor();
    assert_eq!(rc, 6);
    assert!(problems(&v).iter().any(|p| p.contains("loop_limit 50, expected 5")), "{:?}", problems(&v));
}

/// Every harness of the registry, in each scope it takes: `install` wires
/// all its hooks (doctor counts them present and has no problem with them),
/// a second install changes nothing, and `uninstall` leaves the home and the
/// project as they were, our state directory aside. A new harness is held to
/// this by its registry block alone; its own cases go in its dialect's unit
/// tests or beside the others here.
#[test]
fn every_harness_installs_checks_and_uninstalls() {
    for h in preloop_shared::Harness::ALL {
        for scope in ["user", "project"] {
            let e = Env::new(&format!("every-{}", h.slug()));
            let ours = |p: &PathBuf| p.starts_with(&e.preloop);
            let before: Vec<_> = e.snapshot().into_iter().filter(|(p, _)| !ours(p)).collect();
            let args = ["install", "--harness", h.slug(), "--scope", scope, "--bin-dir", &e.bin_arg()];
            let out = e.run(&args);
            assert_eq!(code(&out), 0, "{} {scope}: {}{}", h.slug(), stdout(&out), stderr(&out));
            let (_, v) = e.doctor();
            let report = v["harnesses"].as_array().unwrap().iter().find(|r| r["harness"] == h.slug()).unwrap();
            assert_eq!(
                report["hooks_present"],
                report["hooks_expected"],
                "{} {scope}: doctor finds every hook: {report}",
                h.slug()
            );
            // A project the harness does not trust yet is the machine's state,
            // not the install's (doctor says how to trust it).
            let mine: Vec<String> = problems(&v)
                .into_iter()
                .filter(|p| p.contains(h.def().name) || p.contains(h.slug()))
                .filter(|p| !(scope == "project" && p.contains("trust")))
                .collect();
            assert!(mine.is_empty(), "{} {scope}: {mine:?}", h.slug());
            let installed = e.snapshot();
            assert_eq!(code(&e.run(&args)), 0);
            assert!(installed == e.snapshot(), "{} {scope}: a second install changed files", h.slug());
            let out = e.run(&["uninstall", "--harness", h.slug(), "--scope", scope]);
            assert_eq!(code(&out), 0, "{} {scope}: {}", h.slug(), stderr(&out));
            // What was there before is as it was; what is new is a backup
            // uninstall names, or a config file of the harness's with no entry
            // of ours left in it.
            let said = stdout(&out);
            for (p, bytes) in e.snapshot().into_iter().filter(|(p, _)| !ours(p)) {
                if let Some((_, was)) = before.iter().find(|(q, _)| q == &p) {
                    assert!(was == &bytes, "{} {scope}: uninstall changed {}", h.slug(), p.display());
                    continue;
                }
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                if let Some((stem, _)) = name.split_once(".bak.preloop-") {
                    assert!(said.contains(&format!("{stem}.bak.preloop-*")), "{} {scope}: {said}", h.slug());
                    continue;
                }
                let text = String::from_utf8_lossy(&bytes);
                assert!(!text.contains("preloop"), "{} {scope}: uninstall left {}: {text}", h.slug(), p.display());
            }
        }
    }
}

#[test]
fn doctor_json_has_one_shape_in_both_modes() {
    let e = Env::new("shape-local");
    e.install("claude-code");
    let (_, local) = e.doctor();
    let server = preloop_testkit::FakeServer::start();
    let mut e2 = Env::new("shape-server");
    e2.install("claude-code");
    e2.server_in_env(&server);
    let (rc, remote) = e2.doctor();
    assert_eq!(rc, 0, "{:?}", problems(&remote));
    fn keys(v: &Value) -> Vec<String> {
        v.as_object().unwrap().keys().cloned().collect()
    }
    assert_eq!(keys(&local), keys(&remote));
    assert_eq!(keys(&local["server"]), keys(&remote["server"]));
    assert_eq!(local["schema"], 1);
    assert_eq!(local["server"]["configured"], false);
    assert_eq!(remote["server"]["health"], "preloop");
}

#[test]
fn doctor_notices_hooks_switched_off_by_the_harness() {
    let mut e = Env::new("switched-off");
    let ch = e.root.join("copilot home");
    e.set("COPILOT_HOME", ch.to_str().unwrap());
    write(&e.claude(), "{\"disableAllHooks\": true}\n");
    write(
        &e.home.join(".gemini/settings.json"),
        "{\"hooksConfig\": {\"enabled\": false, \"disabled\": [\"preloop-gemini-before-tool\"]}}\n",
    );
    write(&ch.join("settings.json"), "{\"disableAllHooks\": true}");
    e.install("claude-code");
    e.install("gemini");
    e.install("copilot");
    let (rc, v) = e.doctor();
    assert_eq!(rc, 6);
    let p = problems(&v).join("\n");
    assert!(p.contains("claude-code: ~/.claude/settings.json sets \\\"disableAllHooks\\\": true"), "{p}");
    assert!(
        p.contains("hooksConfig.enabled to false") && p.contains("hooksConfig.disabled (preloop-gemini-before-tool)"),
        "{p}"
    );
    assert!(p.contains("copilot:") && p.contains("settings.json sets"), "{p}");
}

// ------------------------------------------------- one executable (issue 22)

/// An install over the old layout (a binary per hook beside preloop-hooks):
/// every hook command becomes a link to the one executable, no old copy is
/// left, the entries an earlier version wrote keep working; uninstall
/// removes the links once no config has entries of ours.
#[test]
fn install_over_the_old_layout_leaves_one_file_and_uninstall_names_the_links() {
    let e = Env::new("old-layout");
    for name in preloop_hooks::links::names() {
        let p = e.bin.join(name);
        write(&p, "#!/bin/sh\n# an earlier version's own binary\nexit 0\n");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = e.run(&["install", "--bin-dir", e.bin.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let n = preloop_hooks::links::names().len();
    assert!(stdout(&out).contains(&format!("replaced {n} hook commands in")), "{}", stdout(&out));
    let exe = e.bin.join("preloop-hooks");
    for name in preloop_hooks::links::names() {
        assert!(preloop_hooks::links::is_link_to(&e.bin.join(name), &exe), "{name} is a link");
    }
    // One file on disk: every name is the executable's inode; nothing else was left.
    let files: Vec<String> =
        std::fs::read_dir(&e.bin).unwrap().map(|f| f.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(files.len(), n + 1, "{files:?}");
    // Idempotent, and doctor finds nothing stale.
    let out = e.run(&["install", "--bin-dir", e.bin.to_str().unwrap()]);
    assert!(!stdout(&out).contains("linked") && !stdout(&out).contains("replaced"), "{}", stdout(&out));
    let out = e.run(&["doctor", "--json", "--no-codex-query", "--bin-dir", e.bin.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!warnings(&v).iter().any(|w| w.contains("not links")), "{:?}", warnings(&v));
    // A stale command (an older binary put back by hand) is named by doctor.
    let stop = e.bin.join("preloop-claude-code-stop");
    std::fs::remove_file(&stop).unwrap();
    write(&stop, "#!/bin/sh\nexit 0\n");
    let out = e.run(&["doctor", "--json", "--no-codex-query", "--bin-dir", e.bin.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        warnings(&v).iter().any(|w| w.contains("1 hook command in") && w.contains("is not a link to")),
        "{:?}",
        warnings(&v)
    );
    e.run(&["install", "--bin-dir", e.bin.to_str().unwrap()]);
    // Uninstall of one harness keeps the commands (others still use them)...
    let out = e.run(&["uninstall", "--harness", "codex"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("the hook commands in") && stdout(&out).contains("still used by"),
        "{}",
        stdout(&out)
    );
    assert!(e.bin.join("preloop-codex-stop").exists());
    // ...uninstall of all keeps them too: they were there before this
    // HOME's install (an earlier version's binaries, whoever put them
    // there), so it names them and how to remove them (red-team 4, P2).
    let out = e.run(&["uninstall"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!stdout(&out).contains("removed the"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains(&format!("the {n} hook commands in"))
            && stdout(&out).contains("links --list | xargs rm -f"),
        "{}",
        stdout(&out)
    );
    assert_eq!(preloop_hooks::links::ours_in(&exe, &e.bin).len(), n);
}

/// An executable inside an npm package (`npm update` replaces the package):
/// the hooks run a copy in `$PRELOOP_HOME/bin`, never a path into node_modules.
#[test]
fn an_executable_in_an_npm_package_is_copied_and_the_hooks_never_point_into_node_modules() {
    let e = Env::new("npm");
    let pkg_bin = e.root.join("prefix/lib/node_modules/preloop-hooks-linux-x64/bin");
    std::fs::create_dir_all(&pkg_bin).unwrap();
    std::fs::copy(e.bin.join("preloop-hooks"), pkg_bin.join("preloop-hooks")).unwrap();
    let out = e.run(&["install", "--bin-dir", pkg_bin.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("preloop-hooks to ~/.preloop/bin") && stdout(&out).contains("npm"),
        "{}",
        stdout(&out)
    );
    let text = read(&e.claude());
    assert!(
        !text.contains("node_modules")
            && text.contains(e.preloop.join("bin/preloop-claude-code-stop").to_str().unwrap()),
        "{text}"
    );
    assert_eq!(std::fs::read_dir(&pkg_bin).unwrap().count(), 1, "nothing was added to the npm package");
    // Uninstall removes the links and the copy; the package stays.
    let out = e.run(&["uninstall", "--bin-dir", pkg_bin.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!e.preloop.join("bin/preloop-hooks").exists() && !e.preloop.join("bin/preloop-codex-stop").exists());
    assert!(pkg_bin.join("preloop-hooks").exists());
}

/// N2 (docs/guarantees.md, "A repository cannot move the gate"): with the
/// server in ~/.preloop/config.json, doctor names every environment override
/// the hooks ignore, and how to allow it; the mode stays the user's server.
#[test]
fn doctor_says_an_environment_override_was_ignored() {
    let server = preloop_testkit::FakeServer::start();
    let mut e = Env::new("doctor-n2");
    e.install("claude-code");
    std::fs::create_dir_all(&e.preloop).unwrap();
    let cfg = e.preloop.join("config.json");
    std::fs::write(&cfg, serde_json::json!({"url": server.url(), "token": server.runtime_token()}).to_string())
        .unwrap();
    std::fs::set_permissions(&cfg, PermissionsExt::from_mode(0o600)).unwrap();
    e.set("PRELOOP_URL", "http://127.0.0.1:9");
    e.set("PRELOOP_TOKEN", "agt_repository");
    let (_, v) = e.doctor();
    let w = warnings(&v);
    assert!(
        w.iter().any(|w| w.contains("PRELOOP_URL in the environment ignored") && w.contains("allow_env_override")),
        "{w:?}"
    );
    assert!(w.iter().any(|w| w.contains("PRELOOP_TOKEN in the environment ignored")), "{w:?}");
    assert!(v.to_string().contains(&server.url()), "the hooks still use the user's server: {v:#}");
}

// ------------------------------------------------------------ newcomer-ux-3

/// Make `name` an executable script in `dir`.
fn script(dir: &std::path::Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    write(&p, &format!("#!/bin/sh\n{body}"));
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// N3: a hook command gone from the bin dir gets the fix that puts it back,
/// which works as written; with the executable itself gone, the fix is the
/// way it was installed.
#[test]
fn a_missing_hook_command_gets_a_fix_that_works() {
    let e = Env::new("n3");
    e.install("codex");
    std::fs::remove_file(e.bin.join("preloop-codex-stop")).unwrap();
    let (rc, v) = e.doctor();
    assert_eq!(rc, 6);
    let p = &v["problems"][0];
    assert!(p["what"].as_str().unwrap().ends_with("preloop-codex-stop missing or not executable"), "{v:#}");
    assert_eq!(p["fix"], "preloop-hooks install --harness codex (it links the hook commands again)");
    e.install("codex");
    assert_eq!(e.doctor().0, 0);
    // The executable gone as well: nothing to link to; the bin dir is a
    // prefix's (scripts/install, the tarball).
    std::fs::remove_file(e.bin.join("preloop-codex-stop")).unwrap();
    std::fs::remove_file(e.bin.join("preloop-hooks")).unwrap();
    let (rc, v) = e.doctor();
    assert_eq!(rc, 6);
    let fix = v["problems"][0]["fix"].as_str().unwrap().to_string();
    assert!(fix.starts_with("re-run scripts/install --prefix ") && fix.contains("release tarball"), "{fix}");
}

/// N7: doctor finds Gemini's version without running it in the user's home
/// (Gemini CLI leaves a projects.json.<uuid>.tmp in ~/.gemini per run).
#[test]
fn doctor_leaves_nothing_in_geminis_home() {
    let e = Env::new("n7");
    let leak = "mkdir -p \"$HOME/.gemini\" && touch \"$HOME/.gemini/projects.json.$$.tmp\"; echo 0.61.0\n";
    // As npm installs it: a link into the package, which has its package.json.
    let pkg = e.root.join("lib/node_modules/@google/gemini-cli");
    write(&pkg.join("package.json"), "{\"name\": \"@google/gemini-cli\", \"version\": \"0.61.0\"}");
    let ran = e.root.join("ran");
    script(&pkg.join("bundle"), "gemini.js", &format!("touch {}\n{leak}", ran.display()));
    let npm_bin = e.root.join("npmbin");
    std::fs::create_dir_all(&npm_bin).unwrap();
    std::os::unix::fs::symlink(pkg.join("bundle/gemini.js"), npm_bin.join("gemini")).unwrap();
    // Anywhere else: run, but in a scratch home.
    let other = e.root.join("otherbin");
    script(&other, "gemini", leak);
    for dir in [&npm_bin, &other] {
        let mut c = e.cmd(&["doctor", "--json", "--no-codex-query", "--bin-dir", &e.bin_arg()]);
        c.env("PATH", format!("{}:/usr/bin:/bin", dir.display()));
        let v: Value = serde_json::from_slice(&c.output().unwrap().stdout).unwrap();
        assert_eq!(v["harnesses"][3]["version"], "0.61.0", "{v:#}");
        assert!(!e.home.join(".gemini").exists(), "doctor wrote into ~/.gemini");
        assert!(!ran.exists(), "the npm package's gemini was run");
    }
}

/// N8: a file others can write gets the permission fix, which keeps its
/// tokens; a harness config others can write (it names the commands the
/// harness runs) is a problem.
#[test]
fn writable_files_get_the_permission_fix() {
    let e = Env::new("n8");
    e.install("claude-code");
    let cfg = e.preloop.join("config.json");
    write(&cfg, "{\"url\": \"http://127.0.0.1:9\", \"token\": \"agt_mine\"}");
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (rc, v) = e.doctor();
    assert_eq!(rc, 6);
    let p =
        v["problems"].as_array().unwrap().iter().find(|p| p["what"].as_str().unwrap().contains("config.json")).unwrap();
    assert_eq!(p["fix"].as_str().unwrap(), "chmod 600 ~/.preloop/config.json", "{v:#}");
    std::fs::remove_file(&cfg).unwrap();
    assert_eq!(e.doctor().0, 0);
    std::fs::set_permissions(e.claude(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let (rc, v) = e.doctor();
    assert_eq!(rc, 6, "{v:#}");
    assert_eq!(
        v["problems"][0],
        json!({
            "what": "claude-code: other users can write ~/.claude/settings.json, and so make Claude Code run any command",
            "fix": "chmod go-w ~/.claude/settings.json"
        })
    );
}

/// N9: a config that does not parse is one problem, listed first; no
/// warning beside it says to run the install it refuses.
#[test]
fn an_unparsable_config_is_not_also_not_hooked_up() {
    let e = Env::new("n9");
    e.install("claude-code");
    std::fs::OpenOptions::new().append(true).open(e.claude()).unwrap().write_all(b"{\"hooks\": {").unwrap();
    let fake = e.root.join("fakebin");
    script(&fake, "claude", "echo '9.9.9 (Claude Code)'\n");
    let mut c = e.cmd(&["doctor", "--no-codex-query", "--bin-dir", &e.bin_arg()]);
    c.env("PATH", format!("{}:/usr/bin:/bin", fake.display()));
    let out = c.output().unwrap();
    assert_eq!(code(&out), 6);
    let text = stdout(&out);
    assert!(!text.contains("not hooked up"), "{text}");
    assert!(text.contains("settings.json does not parse"), "{text}");
    let (problems, warnings) = (text.find("\nproblems\n").unwrap(), text.find("\nwarnings\n").unwrap());
    assert!(problems < warnings, "problems first:\n{text}");
}

/// N11: on an 80-column terminal every line of doctor's prose fits.
#[test]
fn doctor_wraps_to_the_terminal() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut e = Env::new("n11");
    e.install("all");
    // Lines that run past 80 columns unwrapped (the server's, the modes').
    e.set("PRELOOP_URL", "http://127.0.0.1:9/preloop");
    for cols in [80u16, 0] {
        let (mut master, mut slave) = (0, 0);
        let ws = libc::winsize { ws_row: 40, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: openpty fills two fds we then own.
        let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &ws) };
        assert_eq!(rc, 0, "openpty");
        // SAFETY: both fds were just opened and are owned here.
        let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let mut c = e.cmd(&["doctor", "--verbose", "--no-codex-query", "--bin-dir", &e.bin_arg()]);
        c.stdout(slave.try_clone().unwrap()).stdin(Stdio::null()).stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        drop(c);
        drop(slave);
        let mut text = Vec::new();
        let _ = std::fs::File::from(master).read_to_end(&mut text);
        child.wait().unwrap();
        let text = String::from_utf8_lossy(&text).replace('\r', "");
        assert!(text.contains("known limits") && text.contains("\nserver     "), "{text}");
        // The harness table keeps its rows (its columns are as wide as its paths).
        let long: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.chars().count() > 80
                    && !l.contains("(user)")
                    && !l.contains("(project)")
                    && !l.starts_with("  ")
                    && !l.starts_with("HARNESS ")
            })
            .collect();
        assert!(long.is_empty(), "{cols} columns: {long:#?}\n{text}");
        assert!(text.lines().filter(|l| l.starts_with("  - ")).all(|l| l.chars().count() <= 80), "{text}");
    }
}

/// N16: uninstall leaves no backup of a file that held only our entries (a
/// project's would be committed), creates no $PRELOOP_HOME it then reports
/// as left behind, and gives the command for the backups it keeps.
#[test]
fn uninstall_leaves_only_what_it_says_with_the_commands_to_remove_it() {
    let e = Env::new("n16");
    let out = e.run(&["uninstall"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!e.preloop.exists(), "an uninstall on a clean machine created {}", e.preloop.display());
    assert!(!stdout(&out).contains("~/.preloop"), "{}", stdout(&out));
    let project = e.root.join("project");
    for h in ["codex", "gemini", "claude-code"] {
        let out = e.run(&["install", "--scope", "project", "--harness", h, "--bin-dir", &e.bin_arg()]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let out = e.run(&["uninstall", "--scope", "project", "--harness", h]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    let mut left = Vec::new();
    let mut stack = vec![project.clone()];
    while let Some(d) = stack.pop() {
        for x in std::fs::read_dir(&d).unwrap().flatten() {
            if x.path().is_dir() { stack.push(x.path()) } else { left.push(x.path()) }
        }
    }
    assert!(left.is_empty(), "left in the project: {left:?}");
}
