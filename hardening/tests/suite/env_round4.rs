//! Round four (red-team 4, P1, P3, P7, P8): nothing in the environment a
//! repository can set moves the gate, the log says when a gate failed, and
//! no field of a log line reaches a terminal raw (docs/guarantees.md, "A
//! repository cannot move the gate").

use crate::common::*;
use preloop_shared::Harness;
use preloop_testkit::proxy::Proxy;
use preloop_testkit::stub_server::{StubResponse, StubServer};
use preloop_testkit::support::{OTHER_UID, as_user, chown_tree};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(30);

/// Every spelling of the proxy variables ureq (and curl) read.
const PROXY_VARS: &[&str] = &["ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"];

use super::gate_env::config_under;

/// Every gate with `vars` (and `HOME`/`PRELOOP_HOME` of `home` unless
/// replaced), the user's own `~/.preloop`; each gate's output.
fn gates(home: &Home, vars: &[(&str, &str)]) -> Vec<(Hook, Option<serde_json::Value>)> {
    hooks()
        .into_iter()
        .filter(|h| matches!(h.kind, Kind::Tool { .. }))
        .map(|h| {
            let mut cmd = home.command(&bin(&h), vars);
            cmd.env_remove("PRELOOP_HOME");
            let r =
                run_cmd(cmd, serde_json::to_string(&h.payload(&unique_session("r4"))).unwrap().as_bytes(), DEADLINE);
            r.assert_ok(&h);
            let out = Checker::new(&h).check(&r.stdout).unwrap_or_else(|e| panic!("{}: {e}", h.name()));
            (h, out)
        })
        .collect()
}

fn user_log(home: &Home) -> String {
    std::fs::read_to_string(home.dir.join(".preloop/log/hooks.log")).unwrap_or_default()
}

/// The deny-all server by host name (`localhost`), so the calls take the
/// ureq path (an IP address goes through the plain client).
fn by_name(s: &StubServer) -> String {
    s.url().replace("127.0.0.1", "localhost")
}

#[test]
fn p1_no_gate_and_no_command_takes_a_proxy_from_the_environment() {
    let deny = StubServer::deny_all();
    let proxy = Proxy::hostile();
    let home = Home::new("p1-env");
    config_under(
        &home.dir,
        json!({"url": by_name(&deny), "token": "agt_user_own_secret", "user_token": "usr_operator_secret",
               "pre_tool_use_on_error": "deny", "permission_request_on_error": "deny"}),
    );
    let url = proxy.url();
    let mut failed = Vec::new();
    for var in PROXY_VARS {
        let vars = [(*var, url.as_str()), ("NO_PROXY", "127.0.0.1"), ("no_proxy", "")];
        let before = deny.count("permission-check");
        let outs = gates(&home, &vars);
        for (h, out) in &outs {
            if !is_deny(out) {
                failed.push(format!("{var}: {} did not deny: {out:?}", h.name()));
            }
        }
        if deny.count("permission-check") - before != outs.len() {
            failed.push(format!("{var}: the user's server was not asked by every gate"));
        }
        // The operator CLI and doctor's probes, with the user token.
        for args in [&["sessions", "list"][..], &["doctor", "--json", "--no-codex-query"][..]] {
            let mut cmd = home.command(&bins().join("preloop-hooks"), &vars);
            cmd.env_remove("PRELOOP_HOME").args(args);
            let _ = run_cmd(cmd, b"", DEADLINE);
        }
    }
    assert_eq!(proxy.seen(), Vec::<String>::new(), "the environment's proxy was contacted");
    assert!(failed.is_empty(), "{} failure(s):\n{}\nlog:\n{}", failed.len(), failed.join("\n"), user_log(&home));
}

#[test]
fn p1_the_proxy_config_json_names_carries_every_call_and_is_named() {
    let deny = StubServer::deny_all();
    let tunnel = Proxy::tunnel();
    let hostile = Proxy::hostile();
    let home = Home::new("p1-conf");
    let proxy = tunnel.url().replace("http://", "http://puser:ProxyPw@");
    // An IP address too goes through the configured proxy.
    config_under(
        &home.dir,
        json!({"url": deny.url(), "token": "agt_user_own", "proxy": proxy, "pre_tool_use_on_error": "deny"}),
    );
    let outs = gates(&home, &[("HTTPS_PROXY", &hostile.url())]);
    for (h, out) in &outs {
        assert!(is_deny(out), "{}: the user's server denies through the user's proxy, got {out:?}", h.name());
    }
    assert_eq!(deny.count("permission-check"), outs.len());
    let connects = tunnel.seen().iter().filter(|l| l.starts_with("CONNECT 127.0.0.1:")).count();
    assert!(connects >= outs.len(), "the configured proxy carried {connects} calls: {:?}", tunnel.seen());
    assert_eq!(hostile.seen(), Vec::<String>::new());
    let log = user_log(&home);
    let shown = tunnel.url().replace("http://", "http://puser:***@");
    assert_eq!(log.lines().filter(|l| l.contains(&format!(" proxy={shown}"))).count(), outs.len(), "{log}");
    assert!(!log.contains("ProxyPw"), "{log}");
}

/// glibc's resolver reads `HOSTALIASES`, `LOCALDOMAIN` and `RES_OPTIONS`
/// when a host name is looked up: a file that maps the server's dot-less
/// name to another, other search domains. None of them is read (strace
/// sees neither the aliases file opened nor the repository's domain asked).
#[test]
fn p1_the_resolver_variables_are_not_read() {
    let strace = Command::new("strace").arg("-V").output();
    assert!(strace.is_ok_and(|o| o.status.success()), "strace is required by this test (apt-get install strace)");
    let home = Home::new("p1-resolver");
    let aliases = home.dir.join("host-aliases");
    std::fs::write(&aliases, "preloopgatetest localhost\n").unwrap();
    config_under(
        &home.dir,
        json!({"url": "http://preloopgatetest:9", "token": "agt_user_own", "connect_timeout_ms": 3000}),
    );
    let trace = home.dir.join("strace.out");
    let h = hook(Harness::ClaudeCode, "PreToolUse");
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-s", "512", "-e", "trace=openat,open,sendto,sendmmsg,write", "-o"]).arg(&trace).arg(bin(&h));
    home.prepare(&mut cmd, &[("LOCALDOMAIN", "evil-search.example"), ("RES_OPTIONS", "ndots:0 timeout:1 attempts:1")]);
    cmd.env("HOSTALIASES", &aliases).env_remove("PRELOOP_HOME");
    let r = run_cmd(cmd, serde_json::to_string(&h.payload(&unique_session("res"))).unwrap().as_bytes(), DEADLINE);
    r.assert_ok(&h);
    let t = std::fs::read_to_string(&trace).unwrap();
    assert!(t.contains("/etc/hosts"), "the name was not looked up at all, so this test shows nothing:\n{t}");
    assert!(!t.contains(aliases.to_str().unwrap()), "HOSTALIASES was read:\n{t}");
    assert!(!t.contains("evil-search"), "LOCALDOMAIN was used:\n{t}");
}

/// P7: a gate whose check failed says so whichever way its policy answered.
#[test]
fn p7_a_gate_that_failed_logs_fail_open_or_fail_closed_never_ok() {
    for (policy, outcome) in [("open", "outcome=fail_open"), ("deny", "outcome=fail_closed")] {
        let home = Home::new("p7");
        config_under(
            &home.dir,
            json!({"url": dead_url(), "token": "agt_user_own",
                   "pre_tool_use_on_error": policy, "permission_request_on_error": policy}),
        );
        let n = gates(&home, &[]).len();
        let log = user_log(&home);
        assert_eq!(log.lines().filter(|l| l.contains(outcome)).count(), n, "{policy}: {log}");
        assert!(!log.contains("outcome=ok") && !log.contains("outcome=deny"), "{policy}: {log}");
    }
}

/// P8: every field of a log line is escaped, the harness's session id and
/// what a server says included: one line per run, no control character.
#[test]
fn p8_no_field_reaches_the_log_raw() {
    let nasty = StubServer::start(|_| {
        StubResponse::json(500, json!({"detail": "bad \u{1b}]0;owned\u{7} \u{9b}2J\nnext \u{202e}rtl"}))
    });
    let session = "ab\u{1b}]0;X\u{7}c\u{9b}2J\r\nd \u{85}e\u{202e}f";
    for url in [None, Some(nasty.url())] {
        let home = match &url {
            Some(u) => server_home("p8", u, "agt_p8"),
            None => Home::new("p8-local"),
        }
        .with_env("PRELOOP_WATCH", "off");
        let hs = hooks();
        for h in &hs {
            let mut payload = h.payload("placeholder");
            set_session(h.harness, &mut payload, session);
            let r = home.run_bin(&bin(h), serde_json::to_string(&payload).unwrap().as_bytes(), &[]);
            r.assert_ok(h);
        }
        let raw = std::fs::read(home.dir.join("log/hooks.log")).unwrap();
        let text = String::from_utf8(raw).unwrap();
        let bad: Vec<char> =
            text.chars().filter(|c| (c.is_control() && *c != '\n') || ('\u{2028}'..='\u{202e}').contains(c)).collect();
        assert!(bad.is_empty(), "{url:?}: raw control characters {bad:?} in the log:\n{text}");
        assert_eq!(text.lines().count(), hs.len(), "{url:?}: one line per run:\n{text}");
        assert!(text.contains(r"ab\u{1b}]0;X\u{7}c\u{9b}2J"), "{url:?}: the id is shown escaped:\n{text}");
    }
}

/// P3: an account with no `/etc/passwd` line whose `HOME` a repository
/// moved into the checkout (Claude Code's project `env` block can).
/// Anchored on the session's own `HOME` (the harness's exec-time
/// environment) the user's server decides; with nothing to anchor on, the
/// checkout's configuration is refused and never asked.
#[test]
fn p3_a_moved_home_does_not_move_the_gate_of_an_account_without_a_passwd_line() {
    let deny = StubServer::deny_all();
    let allow = StubServer::start(|req| match req.route() {
        "permission-check" => StubResponse::json(200, json!({"decision": "allow"})),
        "session-start" => StubResponse::json(200, json!({"runtime_session_id": "r", "created": true})),
        _ => StubResponse::empty(204),
    });
    let root = temp_path("p3");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let user = root.join("u1");
    let repo = root.join("repo");
    let fake = repo.join(".fakehome");
    config_under(&user, json!({"url": deny.url(), "token": "agt_user_own", "pre_tool_use_on_error": "deny"}));
    config_under(&fake, json!({"url": allow.url(), "token": "agt_repo"}));
    // This machine's passwd without the test uid (the account is sssd's).
    let passwd = root.join("passwd");
    let lines: Vec<String> = std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split(':').nth(2) != Some(OTHER_UID.to_string().as_str()))
        .map(str::to_string)
        .collect();
    std::fs::write(&passwd, lines.join("\n") + "\n").unwrap();
    chown_tree(&user, OTHER_UID);
    chown_tree(&repo, OTHER_UID);
    let h = hook(Harness::ClaudeCode, "PreToolUse");
    let payload = serde_json::to_string(&h.payload(&unique_session("p3"))).unwrap();
    let run = |mut cmd: Command, home: &Path| {
        cmd.env_clear()
            .env("HOME", home)
            .env("PATH", "/usr/bin:/bin")
            .env("PRELOOP_TEST_PASSWD", &passwd)
            .env("HOOK", bin(&h))
            .env("FAKE", &fake)
            .current_dir(&repo);
        run_cmd(cmd, payload.as_bytes(), DEADLINE)
    };
    // A harness (here a shell) started with the user's HOME runs the hook
    // with the repository's.
    let mut harness = as_user(OTHER_UID, Path::new("/bin/sh"));
    harness.args(["-c", "HOME=\"$FAKE\" \"$HOOK\"; true"]);
    let r = run(harness, &user);
    let out = Checker::new(&h).check(&r.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert!(is_deny(&out), "the user's server must decide, got {out:?} ({})", String::from_utf8_lossy(&r.stderr));
    assert_eq!(deny.count("permission-check"), 1);
    // Nothing to anchor on: the hook is started straight under the moved
    // HOME, by another uid.
    let direct = as_user(OTHER_UID, &bin(&h));
    let r = run(direct, &fake);
    let _ = Checker::new(&h).check(&r.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(allow.connections(), 0, "the repository's server was asked");
    let log = std::fs::read_to_string(fake.join(".preloop/log/hooks.log")).unwrap_or_default();
    assert!(log.contains("no /etc/passwd line") && log.contains("refused"), "{log}");
    let _ = std::fs::remove_dir_all(&root);
}
