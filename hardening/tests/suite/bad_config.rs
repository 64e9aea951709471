//! Bad and untrusted configuration, for every hook of every harness
//! (red-team 2, M1 and M2; issue 12): a config.json that does not parse, is
//! not a file, has wrong types, or that another user owns or can write; an
//! onboarding file likewise; a home others can write or another user owns.
//!
//! Every run exits 0 in bounded time with a valid output, and the hooks
//! never fall back to the local inbox: a value that is merely wrong costs
//! that key (the configured server still decides: a deny-all stub), a
//! source that cannot be used or trusted makes the mode unknown (gates
//! answer by their fail policy: the fail-closed ones deny, the others are
//! neutral), and an untrusted source's server never hears from the hooks.

use crate::common::*;
use preloop_testkit::stub_server::StubServer;
use preloop_testkit::support::{INTRUDER_UID, chown, chown_tree, mkfifo};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

/// What the hooks must make of a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// The configured server decides (a bad value cost only its key).
    Server,
    /// Unusable: no server known, no local fallback, fail policies apply.
    Unknown,
    /// Untrusted: as Unknown, and the planted server gets nothing.
    Refused,
}

type Plant = fn(&Path, &str);

fn file(p: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn config(url: &str) -> String {
    json!({"url": url, "token": "agt_configured"}).to_string()
}

fn with(url: &str, key: &str, v: serde_json::Value) -> String {
    let mut c: serde_json::Value = serde_json::from_str(&config(url)).unwrap();
    c[key] = v;
    c.to_string()
}

fn cases() -> Vec<(&'static str, Expect, Plant)> {
    vec![
        ("stop_rescue_cap as a string", Expect::Server, |h, u| {
            file(&h.join("config.json"), &with(u, "stop_rescue_cap", json!("3")), 0o600)
        }),
        ("watch as a word", Expect::Server, |h, u| {
            file(&h.join("config.json"), &with(u, "watch", json!("off")), 0o600)
        }),
        ("a wrong type and an unknown key", Expect::Server, |h, u| {
            let mut c: serde_json::Value = serde_json::from_str(&with(u, "call_timeout_ms", json!({"a": 1}))).unwrap();
            c["no_such_key"] = json!(true);
            file(&h.join("config.json"), &c.to_string(), 0o600)
        }),
        ("a 4 MB value", Expect::Server, |h, u| {
            file(&h.join("config.json"), &with(u, "padding", json!("x".repeat(4 << 20))), 0o600)
        }),
        ("a symlink to our own file", Expect::Server, |h, u| {
            let target =
                h.parent().unwrap().join(format!("{}-real-config.json", h.file_name().unwrap().to_str().unwrap()));
            file(&target, &config(u), 0o600);
            std::os::unix::fs::symlink(&target, h.join("config.json")).unwrap();
        }),
        ("a trailing comma", Expect::Unknown, |h, u| {
            file(&h.join("config.json"), &format!(r#"{{"url":"{u}","token":"agt_configured",}}"#), 0o600)
        }),
        ("binary garbage", Expect::Unknown, |h, _| {
            std::fs::write(h.join("config.json"), b"\x00\xff\xfe{{{").unwrap();
        }),
        ("an empty file", Expect::Unknown, |h, _| file(&h.join("config.json"), "", 0o600)),
        ("JSON that is not an object", Expect::Unknown, |h, u| {
            file(&h.join("config.json"), &json!([u, "agt_configured"]).to_string(), 0o600)
        }),
        ("a directory", Expect::Unknown, |h, _| std::fs::create_dir_all(h.join("config.json")).unwrap()),
        ("a FIFO", Expect::Unknown, |h, _| mkfifo(&h.join("config.json"))),
        ("a dangling symlink", Expect::Unknown, |h, _| {
            std::os::unix::fs::symlink(h.join("no-such-target.json"), h.join("config.json")).unwrap()
        }),
        ("a symlink to /dev/zero", Expect::Unknown, |h, _| {
            std::os::unix::fs::symlink("/dev/zero", h.join("config.json")).unwrap()
        }),
        ("an onboarding file that does not parse", Expect::Unknown, |h, u| {
            file(&h.join("agents/a/permission_hook.json"), &format!(r#"{{"base_url":"{u}","#), 0o600)
        }),
        ("config.json owned by another user", Expect::Refused, |h, u| {
            file(&h.join("config.json"), &config(u), 0o644);
            chown(&h.join("config.json"), INTRUDER_UID);
        }),
        ("config.json writable by the group", Expect::Refused, |h, u| file(&h.join("config.json"), &config(u), 0o660)),
        ("config.json writable by everyone", Expect::Refused, |h, u| file(&h.join("config.json"), &config(u), 0o606)),
        ("a symlink to a file another user owns", Expect::Refused, |h, u| {
            let target = h.parent().unwrap().join(format!("{}-planted.json", h.file_name().unwrap().to_str().unwrap()));
            file(&target, &config(u), 0o644);
            chown(&target, INTRUDER_UID);
            std::os::unix::fs::symlink(&target, h.join("config.json")).unwrap();
        }),
        ("an onboarding file another user owns", Expect::Refused, |h, u| {
            let p = h.join("agents/a/permission_hook.json");
            file(&p, &json!({"base_url": u, "token": "agt_planted", "source": "claude_code"}).to_string(), 0o644);
            chown(&p, INTRUDER_UID);
        }),
        ("an onboarding file writable by everyone", Expect::Refused, |h, u| {
            let p = h.join("agents/a/permission_hook.json");
            file(&p, &json!({"base_url": u, "token": "agt_planted", "source": "codex_cli"}).to_string(), 0o666);
        }),
        ("a home writable by everyone", Expect::Refused, |h, u| {
            file(&h.join("config.json"), &config(u), 0o600);
            std::fs::set_permissions(h, std::fs::Permissions::from_mode(0o777)).unwrap();
        }),
        ("a home another user owns", Expect::Refused, |h, u| {
            file(&h.join("config.json"), &config(u), 0o600);
            chown_tree(h, INTRUDER_UID);
        }),
    ]
}

#[test]
fn bad_and_untrusted_configuration_never_means_local_mode() {
    let hooks = hooks();
    let failed: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = cases()
            .into_iter()
            .map(|(what, expect, plant)| {
                let hooks = &hooks;
                (
                    what,
                    s.spawn(move || {
                        let server = StubServer::deny_all();
                        let home = Home::new("badcfg");
                        plant(&home.dir, &server.url());
                        let mut sessions = Vec::new();
                        for h in hooks {
                            let session = unique_session("cfg");
                            sessions.push(session.clone());
                            let r = home.run(h, serde_json::to_string(&h.payload(&session)).unwrap().as_bytes());
                            r.assert_ok(h);
                            assert!(r.elapsed < Duration::from_secs(10), "{what}: {} took {:?}", h.name(), r.elapsed);
                            let out = Checker::new(h)
                                .check(&r.stdout)
                                .unwrap_or_else(|e| panic!("{what}: {}: {e}", h.name()));
                            let gate_denies = match (expect, h.kind) {
                                (Expect::Server, Kind::Tool { .. }) => true,
                                (_, Kind::Tool { fail_closed, .. }) => fail_closed,
                                _ => false,
                            };
                            if gate_denies {
                                assert!(is_deny(&out), "{what}: {} must deny, printed {out:?}", h.name());
                            } else if expect != Expect::Server {
                                assert_eq!(out, neutral_of(h), "{what}: {} answers neutrally", h.name());
                            }
                        }
                        if expect == Expect::Server {
                            assert!(server.count("permission-check") > 0, "{what}: the configured server decided");
                        } else {
                            // Only a request this case's hooks made counts: one that carries a
                            // token planted here or names one of its sessions. Under load a
                            // detached SessionEnd worker of another test, still retrying its
                            // own server's port after that server is gone, can reach a stub
                            // that later took the port; it is neither.
                            let ours: Vec<String> = server
                                .requests()
                                .iter()
                                .filter(|r| {
                                    let auth = r.header("authorization").unwrap_or_default();
                                    let body = String::from_utf8_lossy(&r.body);
                                    auth.contains("agt_configured")
                                        || auth.contains("agt_planted")
                                        || sessions
                                            .iter()
                                            .any(|s| body.contains(s.as_str()) || r.path.contains(s.as_str()))
                                })
                                .map(|r| format!("{} {}", r.method, r.path))
                                .collect();
                            assert!(ours.is_empty(), "{what}: a server was contacted: {ours:?}");
                        }
                        // The hooks write their log even into a home they refuse.
                        let log = std::fs::read_to_string(home.dir.join("log/hooks.log")).unwrap_or_default();
                        chown_tree(&home.dir, 0);
                        assert!(!log.contains("mode=local"), "{what}: never local mode: {log}");
                    }),
                )
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|(what, h)| {
                h.join().err().map(|e| {
                    let msg =
                        e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
                    msg.unwrap_or_else(|| what.to_string())
                })
            })
            .collect()
    });
    assert!(failed.is_empty(), "{} configuration(s) mishandled:\n{}", failed.len(), failed.join("\n"));
}
