//! SessionEnd under Codex's kill: Codex 0.169.0 kills a SessionEnd hook
//! about 0.96 s after it starts (at most 3 s, whatever its `timeout`), and
//! the process is killed, not left running. In server mode the hook owes the
//! server a `spool_dropped` ack for every deferred note still spooled, any
//! acks an earlier hook could not send, and the `session-end` receipt; on a
//! slow server those do not fit in a second.
//!
//! So in server mode the hook hands its stdin to a detached copy of itself
//! (`<binary> --preloop-detached-worker`, own process group, stdio on
//! `/dev/null`), prints nothing and exits at once; the worker runs the
//! engine's SessionEnd flow with the ordinary call timeouts. Local mode (file
//! operations only), bad stdin, `PRELOOP_SESSION_END_DETACH=0`, or a worker
//! that cannot be started run the flow in-process within
//! `session_end_budget_ms` instead.

use crate::Event;
use preloop_shared::Harness;
use preloop_shared::config::Config;
use preloop_shared::runner::{self, HookSpec, Parsed};
use preloop_shared::time::Timestamp;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Instant;

/// The argument that makes the SessionEnd binary the detached worker.
pub const WORKER_ARG: &str = "--preloop-detached-worker";
/// `0`, `false`, `no` or `off`: never detach (run in-process within the budget).
pub const DETACH_ENV: &str = "PRELOOP_SESSION_END_DETACH";
/// The SessionEnd payload is a few hundred bytes; past this it is not one.
const MAX_STDIN: u64 = 1 << 20;

/// The worker's spec: SessionEnd without the in-process budget (Codex no
/// longer waits for it), logged as `SessionEnd:detached`.
pub fn worker_spec() -> HookSpec {
    HookSpec { event: "SessionEnd:detached", budget: None, ..Event::SessionEnd.spec() }
}

pub fn main() -> ! {
    if std::env::args_os().nth(1).is_some_and(|a| a == WORKER_ARG) {
        runner::main(worker_spec());
    }
    std::panic::set_hook(Box::new(|_| {}));
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = std::io::stdin().lock().take(MAX_STDIN).read_to_end(&mut buf);
    let config = Config::load(Some(Harness::Codex));
    if let Some(session) = detachable(&buf, &config, &crate::env_get) {
        match spawn_worker(&buf) {
            Ok(pid) => {
                let line = format!(
                    "{} codex SessionEnd mode=server session={} outcome=detached notes=- ms={} worker={pid}",
                    Timestamp::now().to_iso_z(),
                    session.chars().take(80).collect::<String>(),
                    started.elapsed().as_millis()
                );
                preloop_shared::log::append(&config.log_dir(), config.settings.log_max_bytes, &line);
                std::process::exit(0);
            }
            Err(e) => {
                let line = format!(
                    "{} codex SessionEnd mode=server session=- outcome=ok notes=- ms=0 warn={:?}",
                    Timestamp::now().to_iso_z(),
                    format!("no detached worker, running in-process: {e}")
                );
                preloop_shared::log::append(&config.log_dir(), config.settings.log_max_bytes, &line);
            }
        }
    }
    let code = runner::run(&Event::SessionEnd.spec(), &mut &buf[..], &mut std::io::stdout().lock());
    std::process::exit(code)
}

/// Whether this SessionEnd should go to a detached worker: server mode, a
/// payload the hook can use, and detaching not switched off. Returns the
/// session id.
pub fn detachable(stdin: &[u8], config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if env(DETACH_ENV).is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "false" | "no" | "off")) {
        return None;
    }
    if config.is_local() {
        return None; // the local inbox is a few file operations: in-process is fast
    }
    let json = runner::parse_stdin(stdin).ok()?;
    match crate::parse(Event::SessionEnd, &json) {
        Ok(Parsed::Run(input)) => Some(input.session_id),
        _ => None, // let the in-process run log why
    }
}

/// Start the worker with `stdin` as its input; returns its pid.
fn spawn_worker(stdin: &[u8]) -> std::io::Result<u32> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg(WORKER_ARG)
        .stdin(Stdio::piped())
        // Never Codex's pipes: Codex must see EOF when this process exits.
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Out of Codex's (and `timeout`'s) process group: a group kill at
        // Codex's exit does not reach the worker.
        .process_group(0)
        .spawn()?;
    let pid = child.id();
    let written = match child.stdin.take() {
        Some(mut pipe) => pipe.write_all(stdin).and_then(|_| pipe.flush()),
        None => Err(std::io::Error::other("no stdin pipe")),
    };
    if let Err(e) = written {
        // It has no usable input: stop it and run in-process instead.
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    Ok(pid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use preloop_shared::config::Env;

    fn config(pairs: &[(&str, &str)]) -> Config {
        let mut env = vec![(
            "PRELOOP_HOME".to_string(),
            std::env::temp_dir().join("preloop-codex-detach-unit").display().to_string(),
        )];
        env.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Config::load_from(&Env(env), Some(Harness::Codex))
    }

    #[test]
    fn detaches_only_a_usable_server_mode_payload() {
        let server = config(&[("PRELOOP_URL", "http://127.0.0.1:9"), ("PRELOOP_TOKEN", "agt_x")]);
        let local = config(&[]);
        let payload = br#"{"session_id":"01a2-s","hook_event_name":"SessionEnd","reason":"other","cwd":"/p","transcript_path":null}"#;
        let no_env = |_: &str| None;
        assert_eq!(detachable(payload, &server, &no_env).as_deref(), Some("01a2-s"));
        assert_eq!(detachable(payload, &local, &no_env), None, "local mode runs in-process");
        for off in ["0", "false", "OFF", " no "] {
            let env = |k: &str| (k == DETACH_ENV).then(|| off.to_string());
            assert_eq!(detachable(payload, &server, &env), None, "{off}");
        }
        let env = |k: &str| (k == DETACH_ENV).then(|| "1".to_string());
        assert!(detachable(payload, &server, &env).is_some());
        for bad in [&b""[..], b"{", b"[]", br#"{"session_id":"s","hook_event_name":"Stop"}"#, br#"{"reason":"other"}"#]
        {
            assert_eq!(detachable(bad, &server, &no_env), None);
        }
    }

    #[test]
    fn the_worker_has_no_in_process_budget() {
        let w = worker_spec();
        assert!(w.budget.is_none());
        assert_eq!(w.event, "SessionEnd:detached");
        assert!(Event::SessionEnd.spec().budget.is_some());
    }
}
