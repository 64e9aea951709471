//! Fuzzed stdin through the built binaries themselves (their `main`: the
//! panic hook, the real stdin, Codex SessionEnd's detaching front end): a
//! small corpus per binary in local and server mode. Every run exits 0 in
//! bounded time, prints nothing on stderr, and prints nothing or one valid
//! object; the log holds no panic. Volume is in `fuzz.rs` (in-process).

use crate::common::*;
use preloop_testkit::FakeServer;
use std::time::Duration;

#[test]
fn every_binary_survives_fuzzed_stdin() {
    let per = std::env::var("PRELOOP_FUZZ_PROCESS_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(8usize);
    let server = FakeServer::start();
    server.set_approval_timeout(Duration::from_millis(20));
    let seeds = all_seeds();
    let local = Home::new("pfuzz-local");
    let remote = Home::new("pfuzz-server")
        .with_env("PRELOOP_URL", &server.url())
        .with_env("PRELOOP_TOKEN", &server.runtime_token());
    let hooks = hooks();
    std::thread::scope(|s| {
        for (i, h) in hooks.iter().enumerate() {
            let (seeds, local, remote) = (&seeds, &local, &remote);
            s.spawn(move || {
                let checker = Checker::new(h);
                let mut rng = Rng(0xf00d ^ i as u64);
                let sessions: Vec<String> = (0..3).map(|k| format!("pf-{}-{k}", h.harness.slug())).collect();
                for case in 0..2 * per {
                    let home = if case % 2 == 0 { local } else { remote };
                    let input = mutate(&mut rng, h, seeds, &sessions);
                    let r = home.run(h, &input);
                    let what = format!(
                        "{} case {case} ({} bytes: {:?})",
                        h.name(),
                        input.len(),
                        String::from_utf8_lossy(&input[..input.len().min(120)])
                    );
                    assert!(!r.timed_out && r.elapsed < Duration::from_secs(10), "{what}: took {:?}", r.elapsed);
                    assert_eq!(r.status.code(), Some(0), "{what}: {:?}", r.status);
                    assert!(r.stderr.is_empty(), "{what}: stderr {:?}", String::from_utf8_lossy(&r.stderr));
                    checker.check(&r.stdout).unwrap_or_else(|e| panic!("{what}: {e}"));
                }
            });
        }
    });
    // Codex SessionEnd workers may still be finishing in server mode.
    std::thread::sleep(Duration::from_millis(300));
    for home in [&local, &remote] {
        let log = home.log();
        assert!(!log.contains("outcome=panic") && !log.contains("panic after output"), "{log}");
    }
}
