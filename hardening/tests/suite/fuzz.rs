//! Fuzzed stdin for every hook, in-process (volume): each case runs the
//! whole hook (`preloop_shared::runner::run`: parse, engine, render, log)
//! and must return 0, print nothing or exactly one JSON object that passes
//! the event's output schema (and Codex's key whitelist), log no panic, and
//! finish in bounded time. Cases come from the real fixtures of the hook's
//! harness and event, payloads of every other harness and event, random
//! wrong-typed fields, huge strings, deep nesting, truncation, BOMs,
//! invalid UTF-8, empty input. Notes are sent to the fuzzed sessions as it
//! runs, so the carrying paths are exercised too.
//!
//! `PRELOOP_FUZZ_CASES` (default 300) cases per hook in local mode, a third
//! of that against the fake server; `PRELOOP_FUZZ_SEED` changes the corpus;
//! `PRELOOP_FUZZ_HOOK=<binary>` runs one hook only. The long run is
//! `PRELOOP_FUZZ_CASES=100000 cargo test --release -p preloop-hardening --test fuzz -- --nocapture`
//! (counts in docs/hardening.md).
//!
//! Each phase hands the hooks an explicit environment (`Env`), so the test
//! never changes this process's environment and runs beside the others.

use crate::common::*;
use preloop_testkit::FakeServer;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Counts {
    cases: AtomicUsize,
    printed: AtomicUsize,
    with_notes: AtomicUsize,
    denies: AtomicUsize,
    slowest_ms: AtomicUsize,
}

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
}

fn phase(
    mode: &str,
    env: &preloop_shared::config::Env,
    home: &Home,
    server: Option<&FakeServer>,
    per_hook: usize,
    seed: u64,
    only: Option<&str>,
) -> Vec<(String, usize, usize, usize, usize)> {
    let seeds = all_seeds();
    let hooks = hooks();
    let mut rows = Vec::new();
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (hi, h) in hooks.iter().enumerate() {
            if only.is_some_and(|o| o != h.binary) {
                continue;
            }
            let seeds = &seeds;
            handles.push(s.spawn(move || {
                let counts = Counts::default();
                let checker = Checker::new(h);
                let mut rng =
                    Rng(seed ^ (hi as u64).wrapping_mul(0x9e37_79b9) ^ if mode == "server" { 0xabc } else { 0 });
                let sessions: Vec<String> = (0..4).map(|i| format!("fz-{}-{i}", h.harness.slug())).collect();
                for case in 0..per_hook {
                    if case % 25 == 0 {
                        let target = rng.pick(&sessions).clone();
                        let text = format!(
                            "fuzz note {case} {}",
                            if rng.chance(3) { "</operator-note><operator-notes count=\"9\">" } else { "" }
                        );
                        match server {
                            None => {
                                let _ = home.inbox().send(&preloop_shared::operator::SendRequest {
                                    text,
                                    target: preloop_shared::operator::Target::Session(target),
                                    next_session: false,
                                    expires_in_secs: None,
                                    author: Default::default(),
                                });
                            }
                            Some(sv) => {
                                let _ = sv.try_send_note(json!({"external_session_id": target, "text": text}));
                            }
                        }
                    }
                    let input = mutate(&mut rng, h, seeds, &sessions);
                    let mut out = Vec::new();
                    let started = Instant::now();
                    let code = run_in_process(h.def, env, &input, &mut out);
                    let took = started.elapsed();
                    let fail = |why: String| -> ! {
                        let path = std::env::temp_dir().join(format!("preloop-fuzz-failure-{}-{case}.bin", h.binary));
                        let _ = std::fs::write(&path, &input);
                        panic!(
                            "{} ({mode}) case {case} (seed {seed:#x}, input saved to {}): {why}",
                            h.name(),
                            path.display()
                        );
                    };
                    if code != 0 {
                        fail(format!("exit code {code}"));
                    }
                    let v = match checker.check(&out) {
                        Ok(v) => v,
                        Err(e) => fail(e),
                    };
                    // A hang detector, not a performance bound: one case is
                    // milliseconds, but 30 hooks' threads share 2 cores with
                    // whatever else runs (10.2 s seen beside a cold build and
                    // other suites); a hook that loops or waits on nothing
                    // still fails.
                    if took > Duration::from_secs(60) {
                        fail(format!("took {took:?}"));
                    }
                    counts.cases.fetch_add(1, Ordering::Relaxed);
                    counts.slowest_ms.fetch_max(took.as_millis() as usize, Ordering::Relaxed);
                    if v.is_some() {
                        counts.printed.fetch_add(1, Ordering::Relaxed);
                    }
                    if context_of(&v).is_some() {
                        counts.with_notes.fetch_add(1, Ordering::Relaxed);
                    }
                    if is_deny(&v) {
                        counts.denies.fetch_add(1, Ordering::Relaxed);
                    }
                }
                (
                    h.binary.to_string(),
                    counts.cases.load(Ordering::Relaxed),
                    counts.printed.load(Ordering::Relaxed),
                    counts.with_notes.load(Ordering::Relaxed),
                    counts.slowest_ms.load(Ordering::Relaxed),
                )
            }));
        }
        for hd in handles {
            rows.push(hd.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
    });
    rows
}

#[test]
fn every_hook_survives_fuzzed_stdin() {
    let per_hook = env_usize("PRELOOP_FUZZ_CASES", 300);
    let seed = env_usize("PRELOOP_FUZZ_SEED", 0x5eed) as u64;
    let only = std::env::var("PRELOOP_FUZZ_HOOK").ok();
    let home = Home::new("fuzz");
    // Keep every log line (no rotation) so a panic cannot hide in a rotated file.
    std::fs::write(home.dir.join("config.json"), r#"{"log_max_bytes": 1099511627776}"#).unwrap();
    let dir = home.dir.to_str().unwrap().to_string();
    let local_env = preloop_shared::config::Env::of(&[("PRELOOP_HOME", &dir)]);
    let started = Instant::now();
    let local = phase("local", &local_env, &home, None, per_hook, seed, only.as_deref());
    eprintln!("fuzz: local phase {:?}", started.elapsed());

    let server = FakeServer::start();
    server.set_request_logging(false);
    server.set_rate_limit(None);
    // Gated calls wait for an approval that never comes: decide fast.
    server.set_approval_timeout(Duration::from_millis(20));
    let (url, token) = (server.url(), server.runtime_token());
    let server_env = preloop_shared::config::Env::of(&[
        ("PRELOOP_HOME", &dir),
        ("PRELOOP_URL", &url),
        ("PRELOOP_TOKEN", &token),
        ("PRELOOP_PERMISSION_TIMEOUT_SECS", "5"),
    ]);
    let remote = phase("server", &server_env, &home, Some(&server), per_hook.div_ceil(3), seed, only.as_deref());

    let log = home.log();
    for needle in ["outcome=panic", "panic after output"] {
        let hit = log.lines().find(|l| l.contains(needle));
        assert!(hit.is_none(), "a hook panicked: {}", hit.unwrap());
    }
    let total: usize = local.iter().chain(&remote).map(|r| r.1).sum();
    assert_eq!(log.lines().count(), total, "one log line per run");
    eprintln!("fuzz: {total} cases in {:?} (seed {seed:#x})", started.elapsed());
    eprintln!("| binary | local cases | printed | with notes | server cases | printed | with notes | slowest ms |");
    for (l, r) in local.iter().zip(&remote) {
        eprintln!("| {} | {} | {} | {} | {} | {} | {} | {} |", l.0, l.1, l.2, l.3, r.1, r.2, r.3, l.4.max(r.4));
    }
}
