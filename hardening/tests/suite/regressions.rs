//! Red-team 2's process classes against every hook of every harness (the
//! per-harness reproductions are in each hook crate's `suite/regressions.rs`):
//!
//! * H1: every gate makes the central check on a tool input `serde_json`
//!   alone refuses (lone surrogates, nesting past 128 levels, up to
//!   100,000) and the server's deny holds;
//! * L1: a FIFO at any file a hook opens never stalls it;
//! * L2: a stdin that never closes costs a bounded wait and one log line;
//! * L3: under `ulimit -f` a hook answers instead of dying of SIGXFSZ.

use crate::common::*;
use preloop_testkit::stub_server::StubServer;
use preloop_testkit::support::{mkfifo, run_with_open_stdin};
use std::time::Duration;

#[test]
fn every_gate_checks_a_tool_input_serde_json_refuses_and_the_deny_holds() {
    let deny = StubServer::deny_all();
    let gates: Vec<Hook> = hooks().into_iter().filter(|h| matches!(h.kind, Kind::Tool { .. })).collect();
    assert!(gates.len() >= 8, "every harness's gates: {}", gates.len());
    for h in &gates {
        let home = server_home("h1-all", &deny.url(), "agt_probe");
        for what in [
            Unparseable::LoneHigh,
            Unparseable::LoneLow,
            Unparseable::BrokenPair,
            Unparseable::Deep(130),
            Unparseable::Deep(100_000),
        ] {
            let before = deny.count("permission-check");
            let r = home.run(h, &gate_payload(h, &unique_session("h1"), what));
            r.assert_ok(h);
            let out = Checker::new(h).check(&r.stdout).unwrap_or_else(|e| panic!("{}: {what:?}: {e}", h.name()));
            assert_eq!(deny.count("permission-check"), before + 1, "{}: {what:?}: the check was made", h.name());
            assert!(is_deny(&out), "{}: {what:?}: the server's deny holds, got {out:?}", h.name());
        }
        let log = home.log();
        assert!(!log.contains("outcome=neutral") && !log.contains("stdin is not JSON"), "{}: {log}", h.name());
    }
}

#[test]
fn a_fifo_at_any_file_never_stalls_a_hook() {
    let rels = ["config.json", "log/hooks.log", "run/f1.json", "sessions/f1.json", "agents/a/permission_hook.json"];
    let hooks = hooks();
    std::thread::scope(|s| {
        for rel in rels {
            let hooks = &hooks;
            s.spawn(move || {
                let home = Home::new("fifo-all");
                mkfifo(&home.dir.join(rel));
                for h in hooks {
                    let r = run_cmd(
                        home.command(&bin(h), &[]),
                        serde_json::to_string(&h.payload("f1")).unwrap().as_bytes(),
                        Duration::from_secs(20),
                    );
                    r.assert_ok(h);
                    assert!(r.elapsed < Duration::from_secs(8), "{} with a FIFO at {rel}: {:?}", h.name(), r.elapsed);
                    Checker::new(h).check(&r.stdout).unwrap_or_else(|e| panic!("{} (FIFO at {rel}): {e}", h.name()));
                }
            });
        }
    });
}

#[test]
fn a_stdin_that_never_closes_is_bounded_for_every_hook() {
    let server = preloop_testkit::FakeServer::start();
    let hooks = hooks();
    std::thread::scope(|s| {
        for h in &hooks {
            for server_mode in [false, true] {
                let server = &server;
                s.spawn(move || {
                    let home = if server_mode {
                        Home::server("stdin-open", &server.url(), &server.runtime_token())
                    } else {
                        Home::new("stdin-open")
                    };
                    let r = run_with_open_stdin(home.command(&bin(h), &[]), Duration::from_secs(40));
                    r.assert_ok(h);
                    assert!(r.elapsed < Duration::from_secs(12), "{}: {:?}", h.name(), r.elapsed);
                    let out = Checker::new(h).check(&r.stdout).unwrap_or_else(|e| panic!("{}: {e}", h.name()));
                    if !server_mode || !matches!(h.kind, Kind::Tool { fail_closed: true, .. }) {
                        assert_eq!(out, neutral_of(h), "{}: the neutral answer", h.name());
                    }
                    // A SessionEnd that hands off logs its front end and its worker.
                    let log = wait_for_log(&home, 1);
                    assert!(log.contains("stdin"), "{}: the log says why: {log}", h.name());
                });
            }
        }
    });
}

fn wait_for_log(home: &Home, lines: usize) -> String {
    for _ in 0..100 {
        let log = home.log();
        if log.lines().count() >= lines {
            return log;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    home.log()
}

#[test]
fn a_file_size_limit_never_kills_a_hook() {
    let hooks = hooks();
    std::thread::scope(|s| {
        for h in &hooks {
            s.spawn(move || {
                let home = Home::new("fsize-all");
                let session = unique_session("fsize");
                home.send(&session, &"n".repeat(3000));
                let mut c = home.command(std::path::Path::new("/bin/sh"), &[]);
                c.arg("-c").arg("ulimit -f 1; exec \"$0\"").arg(bin(h));
                let r = run_cmd(
                    c,
                    serde_json::to_string(&h.payload(&session)).unwrap().as_bytes(),
                    Duration::from_secs(20),
                );
                r.assert_ok(h);
                Checker::new(h).check(&r.stdout).unwrap_or_else(|e| panic!("{} under ulimit -f 1: {e}", h.name()));
            });
        }
    });
}
