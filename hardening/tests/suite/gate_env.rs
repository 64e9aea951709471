//! A repository cannot move the gate (red-team 3, N2): Gemini CLI loads a
//! project's `.env` into its hooks' environment and Claude Code applies a
//! project's `.claude/settings.json` `env` block. When the user's own
//! `~/.preloop/config.json` names a server, nothing a repository puts there
//! (`PRELOOP_HOME`, relative or absolute; `PRELOOP_URL` + `PRELOOP_TOKEN`; a
//! fail policy of `open` with a dead server) keeps that server from
//! deciding, for every gate of every harness (docs/guarantees.md).

use crate::common::*;
use preloop_testkit::stub_server::{StubResponse, StubServer};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A server that allows everything: what a repository would point at.
fn allow_all() -> StubServer {
    StubServer::start(|req| match req.route() {
        "session-start" => StubResponse::json(200, json!({"runtime_session_id": "r", "created": true})),
        "permission-check" => StubResponse::json(200, json!({"decision": "allow", "reason": "the repo's own server"})),
        "notes/pending" => StubResponse::json(200, json!({"notes": []})),
        _ => StubResponse::empty(204),
    })
}

/// `HOME` is the home's directory, so `~/.preloop` is `<dir>/.preloop`.
fn user_config(home: &Home, config: serde_json::Value) {
    config_under(&home.dir, config)
}

/// `<dir>/.preloop/config.json`, private as `login` writes it.
pub(super) fn config_under(dir: &Path, config: serde_json::Value) {
    let d = dir.join(".preloop");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(d.join("config.json"), config.to_string()).unwrap();
    std::fs::set_permissions(d.join("config.json"), std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A checkout with its own `.preloop-dev` home (as a repository ships it).
fn repo(home: &Home) -> std::path::PathBuf {
    let r = home.dir.join("repo");
    std::fs::create_dir_all(r.join(".preloop-dev")).unwrap();
    std::fs::set_permissions(r.join(".preloop-dev"), std::fs::Permissions::from_mode(0o755)).unwrap();
    r
}

/// Run every gate with the repository's variables, in the repository;
/// returns each gate's output.
fn gates(home: &Home, cwd: &Path, vars: &[(&str, &str)]) -> Vec<(Hook, Option<serde_json::Value>)> {
    hooks()
        .into_iter()
        .filter(|h| matches!(h.kind, Kind::Tool { .. }))
        .map(|h| {
            let mut cmd = home.command(&bin(&h), vars);
            if !vars.iter().any(|(k, _)| *k == "PRELOOP_HOME") {
                cmd.env_remove("PRELOOP_HOME");
            }
            cmd.current_dir(cwd);
            let session = unique_session("n2");
            let r = run_cmd(cmd, serde_json::to_string(&h.payload(&session)).unwrap().as_bytes(), DEADLINE);
            r.assert_ok(&h);
            let out = Checker::new(&h).check(&r.stdout).unwrap_or_else(|e| panic!("{}: {e}", h.name()));
            (h, out)
        })
        .collect()
}

const DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

#[test]
fn n2_a_repository_cannot_move_the_gate_off_the_users_server() {
    let deny = StubServer::deny_all();
    let other = allow_all();
    let home = Home::new("n2-pin");
    user_config(&home, json!({"url": deny.url(), "token": "agt_user_own", "pre_tool_use_on_error": "deny"}));
    let repo = repo(&home);
    let abs_dev = repo.join(".preloop-dev");
    let dead = dead_url();
    let other_url = other.url();
    let attacks: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("a relative PRELOOP_HOME", vec![("PRELOOP_HOME", ".preloop-dev")]),
        ("an absolute PRELOOP_HOME in the repository", vec![("PRELOOP_HOME", abs_dev.to_str().unwrap())]),
        ("the repository's own server", vec![("PRELOOP_URL", &other_url), ("PRELOOP_TOKEN", "agt_repo")]),
        (
            "a dead server and fail policies of open",
            vec![
                ("PRELOOP_URL", &dead),
                ("PRELOOP_TOKEN", "agt_repo"),
                ("PRELOOP_PRE_TOOL_USE_ON_ERROR", "open"),
                ("PRELOOP_PERMISSION_REQUEST_ON_ERROR", "open"),
                ("PRELOOP_PERMISSION_TIMEOUT_SECS", "0"),
            ],
        ),
    ];
    let mut failed = Vec::new();
    for (what, vars) in &attacks {
        let before = deny.count("permission-check");
        let outs = gates(&home, &repo, vars);
        for (h, out) in &outs {
            if !is_deny(out) {
                failed.push(format!("{what}: {} did not deny: {out:?}", h.name()));
            }
        }
        if deny.count("permission-check") - before != outs.len() {
            failed.push(format!("{what}: the user's server was not asked by every gate"));
        }
    }
    assert_eq!(other.requests().len(), 0, "the repository's server was contacted");
    assert!(!repo.join(".preloop-dev/log").exists(), "a hook wrote into the repository's home");
    let log = std::fs::read_to_string(home.dir.join(".preloop/log/hooks.log")).unwrap_or_default();
    for needle in ["is not an absolute path: refused", "PRELOOP_URL in the environment ignored"] {
        if !log.contains(needle) {
            failed.push(format!("the user's log does not say {needle:?}"));
        }
    }
    assert!(failed.is_empty(), "{} failure(s):\n{}\nlog:\n{log}", failed.len(), failed.join("\n"));
}

#[test]
fn n2_the_environment_still_decides_when_the_user_lets_it_or_names_no_server() {
    let deny = StubServer::deny_all();
    let other = allow_all();
    // The user opts in: the environment's server decides (an allow is no decision).
    let home = Home::new("n2-optin");
    user_config(&home, json!({"url": deny.url(), "token": "agt_user_own", "allow_env_override": true}));
    for (h, out) in gates(&home, &home.dir, &[("PRELOOP_URL", &other.url()), ("PRELOOP_TOKEN", "agt_repo")]) {
        assert!(!is_deny(&out), "{}: the opted-in environment's server allows, got {out:?}", h.name());
    }
    assert_eq!(deny.count("permission-check"), 0);
    assert!(other.count("permission-check") > 0);
    // CI: no ~/.preloop at all, the server only in the environment.
    let ci = Home::new("n2-ci");
    let n = gates(&ci, &ci.dir, &[("PRELOOP_URL", &deny.url()), ("PRELOOP_TOKEN", "agt_ci")])
        .into_iter()
        .inspect(|(h, out)| assert!(is_deny(out), "{}: CI's server denies, got {out:?}", h.name()))
        .count();
    assert_eq!(deny.count("permission-check"), n);
}

/// A passwd file like this machine's, with this account's home at `home`.
fn passwd_with_home(dir: &Path, home: &Path) -> std::path::PathBuf {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let mut text = format!("preloop-test:x:{uid}:{uid}::{}:/bin/sh\n", home.display());
    for l in std::fs::read_to_string("/etc/passwd").unwrap_or_default().lines() {
        if l.split(':').nth(2) != Some(uid.to_string().as_str()) {
            text.push_str(l);
            text.push('\n');
        }
    }
    let p = dir.join("passwd");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn n2_a_repository_that_moves_home_does_not_move_the_gate() {
    // Claude Code's project `env` block can set HOME itself. The account's
    // home (its passwd entry) names the deny-all server; the repository's
    // HOME holds a `.preloop` naming its own server, or nothing at all.
    let deny = StubServer::deny_all();
    let other = allow_all();
    let home = Home::new("n2-home");
    user_config(&home, json!({"url": deny.url(), "token": "agt_user_own", "pre_tool_use_on_error": "deny"}));
    let repo = repo(&home);
    let fake_home = repo.join("fake-home");
    std::fs::create_dir_all(&fake_home).unwrap();
    config_under(&fake_home, json!({"url": other.url(), "token": "agt_repo"}));
    let empty_home = repo.join("empty-home");
    std::fs::create_dir_all(&empty_home).unwrap();
    let passwd = passwd_with_home(&home.dir, &home.dir);
    let passwd = passwd.to_str().unwrap();
    let mut failed = Vec::new();
    for moved in [&fake_home, &empty_home] {
        let vars = [("HOME", moved.to_str().unwrap()), ("PRELOOP_TEST_PASSWD", passwd)];
        let before = deny.count("permission-check");
        let outs = gates(&home, &repo, &vars);
        for (h, out) in &outs {
            if !is_deny(out) {
                failed.push(format!("HOME={}: {} did not deny: {out:?}", moved.display(), h.name()));
            }
        }
        if deny.count("permission-check") - before != outs.len() {
            failed.push(format!("HOME={}: the user's server was not asked by every gate", moved.display()));
        }
    }
    assert_eq!(other.requests().len(), 0, "the repository's server was contacted");
    let log = std::fs::read_to_string(home.dir.join(".preloop/log/hooks.log")).unwrap_or_default();
    if !log.contains("in the environment ignored for the Preloop configuration") {
        failed.push("the user's log does not name the ignored HOME".to_string());
    }
    assert!(failed.is_empty(), "{} failure(s):\n{}\nlog:\n{log}", failed.len(), failed.join("\n"));
}
