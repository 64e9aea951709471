//! SessionEnd under a harness that kills it: Claude Code cancels a
//! SessionEnd hook about 1.5 s in, Codex kills it about 0.96 s in (whatever
//! its `timeout`). In server mode the hook owes the server a `spool_dropped`
//! ack for every deferred note still spooled, any acks an earlier hook could
//! not send, and the `session-end` call that turns the session's pending
//! notes `undeliverable`; on a loaded server those do not fit in a second
//! (measured: 14-16 of 16 concurrent Claude Code SessionEnds gave up).
//!
//! So in server mode, for a harness whose registry row has a
//! `session_end_kill_ms`, the hook hands its stdin to a detached copy of
//! itself (`<binary> --preloop-detached-worker`, own process group, stdio
//! on `/dev/null` except the piped payload), prints nothing and exits at
//! once; the worker runs the SessionEnd flow with the ordinary call
//! timeouts. Local mode (file operations only), a payload the hook cannot
//! use, `PRELOOP_SESSION_END_DETACH=0`, or a worker that cannot be started
//! run the flow in-process within `session_end_budget_ms` instead.

use crate::config::{Config, Env};
use crate::registry::{Does, HookDef};
use crate::runner::{Adapter, Parsed};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// The argument that makes a SessionEnd binary the detached worker.
pub const WORKER_ARG: &str = "--preloop-detached-worker";
/// `0`, `false`, `no` or `off`: never detach (run in-process within the budget).
pub const DETACH_ENV: &str = "PRELOOP_SESSION_END_DETACH";

static IN_WORKER: AtomicBool = AtomicBool::new(false);

/// Whether this process is a detached worker.
pub fn is_worker() -> bool {
    std::env::args_os().nth(1).is_some_and(|a| a == WORKER_ARG)
}

/// Whether the running flow is a worker's (no in-process budget applies).
pub fn in_worker() -> bool {
    IN_WORKER.load(Ordering::Relaxed)
}

/// The worker: the SessionEnd flow with the ordinary call timeouts.
pub fn worker_main<A: Adapter>(event: A::Event, env: &Env) -> ! {
    IN_WORKER.store(true, Ordering::Relaxed);
    let def = event.into().def();
    let stdin = crate::runner::read_stdin(std::time::Duration::from_secs(5));
    let config = Config::load_from(env, Some(def.harness()));
    let code = crate::runner::run_with::<A>(event, env, &config, stdin, &mut std::io::sink());
    std::process::exit(code)
}

/// Whether this SessionEnd should go to a detached worker.
pub fn wanted(def: &HookDef, config: &Config, env: &Env) -> bool {
    def.does == Does::SessionEnd
        && def.harness().def().session_end_kill_ms.is_some()
        && config.server.is_some()
        && env.get(DETACH_ENV).is_none_or(|v| crate::config::parse_switch_str(&v) != Some(false))
}

/// Start the worker with `stdin` when the payload is one the hook can use;
/// `true` if it was handed off (the caller exits at once).
pub fn hand_off<A: Adapter>(event: A::Event, config: &Config, env: &Env, stdin: &[u8]) -> bool {
    let def = event.into().def();
    let Ok(json) = crate::json::parse_payload(stdin) else { return false };
    let session = match A::parse(event, &json, env) {
        Ok(Parsed::Run(input)) => input.session_id,
        _ => return false, // let the in-process run log why
    };
    let mut line = crate::runner::LogLine {
        harness: def.harness().slug(),
        event: def.on,
        mode: "server",
        session: Some(session),
        ..Default::default()
    };
    match spawn_worker(stdin) {
        Ok(pid) => {
            line.outcome = "detached";
            line.warnings.push(format!("worker pid {pid}"));
            line.append(config);
            true
        }
        Err(e) => {
            line.warnings.push(format!("no detached worker, running in-process: {e}"));
            line.append(config);
            false
        }
    }
}

/// Start the worker with `stdin` as its input; returns its pid.
fn spawn_worker(stdin: &[u8]) -> std::io::Result<u32> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg(WORKER_ARG)
        .stdin(Stdio::piped())
        // Never the harness's pipes: it must see EOF when this process exits.
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Out of the harness's (and `timeout`'s) process group: a group kill
        // at the harness's exit does not reach the worker.
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
