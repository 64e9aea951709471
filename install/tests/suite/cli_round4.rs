//! Round four (red-team 4, P1, P4): the operator side is pinned as the
//! hooks are, and no command takes a proxy from the environment; `doctor`
//! names the proxy `config.json` configures and warns about proxy
//! variables it ignores.

use crate::common::*;
use preloop_testkit::FakeServer;
use preloop_testkit::proxy::Proxy;
use preloop_testkit::stub_server::{StubResponse, StubServer};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// `~/.preloop/config.json` under `root/home`, private as `login` writes it.
fn user_config(root: &Path, config: Value) -> std::path::PathBuf {
    let d = root.join("home/.preloop");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(d.join("config.json"), config.to_string()).unwrap();
    std::fs::set_permissions(d.join("config.json"), std::fs::Permissions::from_mode(0o600)).unwrap();
    d
}

/// What a repository's server would see: every request, token included.
fn evil() -> StubServer {
    StubServer::start(|_| StubResponse::json(200, json!({"items": [], "total": 0, "has_more": false})))
}

#[test]
fn p4_preloop_url_from_the_environment_never_receives_the_user_token_from_config_json() {
    let s = FakeServer::start();
    let bad = evil();
    let t = TempDir::new("p4");
    let root = t.path();
    // As `login --user` writes it; and a file holding only the user token.
    for config in [json!({"url": s.url(), "user_token": s.user_token()}), json!({"user_token": s.user_token()})] {
        let home = user_config(root, config.clone());
        let mut c = operator_cmd(root, &home, &["sessions", "list"]);
        c.env_remove("PRELOOP_HOME").env("PRELOOP_URL", bad.url());
        let out = run_with_stdin(c, None);
        let err = stderr(&out);
        assert!(
            bad.requests().iter().all(|r| !r.headers.iter().any(|h| h.contains(&s.user_token()))),
            "{config}: the user token went to the environment's URL"
        );
        assert_eq!(bad.connections(), 0, "{config}: the environment's URL was contacted");
        assert!(err.contains("PRELOOP_URL in the environment ignored for operator commands"), "{config}: {err}");
        assert_eq!(err.lines().filter(|l| l.contains("PRELOOP_URL")).count(), 1, "one line: {err}");
    }
    // The user lets the environment choose: it does.
    let home = user_config(root, json!({"url": s.url(), "user_token": s.user_token(), "allow_env_override": true}));
    let mut c = operator_cmd(root, &home, &["sessions", "list"]);
    c.env_remove("PRELOOP_HOME").env("PRELOOP_URL", bad.url());
    let _ = run_with_stdin(c, None);
    assert!(bad.connections() > 0, "allow_env_override lets PRELOOP_URL choose");
}

#[test]
fn p1_no_command_takes_a_proxy_from_the_environment_and_doctor_names_the_configured_one() {
    let s = FakeServer::start();
    let hostile = Proxy::hostile();
    let tunnel = Proxy::tunnel();
    let t = TempDir::new("p1-cli");
    let root = t.path();
    let bin = fake_bin_dir(root);
    let home = user_config(
        root,
        json!({"url": s.url(), "token": s.runtime_token(), "user_token": s.user_token(),
               "proxy": tunnel.url().replace("http://", "http://pu:ProxyPw@")}),
    );
    let run = |args: &[&str]| {
        let mut c = operator_cmd(root, &home, args);
        c.env_remove("PRELOOP_HOME").env("HTTPS_PROXY", hostile.url()).env("all_proxy", hostile.url());
        run_with_stdin(c, None)
    };
    let out = run(&["doctor", "--json", "--no-codex-query", "--bin-dir", bin.to_str().unwrap()]);
    let text = stdout(&out);
    let r: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(r["server"]["runtime_token"], "accepted", "{r:#}");
    assert_eq!(r["server"]["user_token"], "accepted", "{r:#}");
    let shown = tunnel.url().replace("http://", "http://pu:***@");
    assert!(text.contains(&format!("through the proxy {shown}")), "doctor names the proxy: {r:#}");
    assert!(text.contains("HTTPS_PROXY is set in the environment and ignored"), "{r:#}");
    assert!(text.contains("all_proxy is set in the environment and ignored"), "{r:#}");
    assert!(!text.contains("ProxyPw"), "{text}");
    let out = run(&["sessions", "list"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(hostile.seen(), Vec::<String>::new(), "the environment's proxy was contacted");
    assert!(tunnel.seen().len() >= 4, "doctor's probes and the listing went through the configured proxy");
}
