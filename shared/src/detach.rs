//! SessionEnd in server mode runs in a detached worker. Two reasons:
//!
//! * Some harnesses kill it: Claude Code cancels a SessionEnd hook about
//!   1.5 s in, Codex about 0.96 s in (whatever its `timeout`). The hook owes
//!   the server a `spool_dropped` ack for every deferred note still spooled,
//!   any acks an earlier hook could not send, and the `session-end` call that
//!   turns the session's pending notes `undeliverable`; on a loaded server
//!   those do not fit in a second (measured: 14-16 of 16 concurrent Claude
//!   Code SessionEnds gave up).
//! * The others (Cursor, Gemini CLI, Copilot CLI) wait for it, and pay for
//!   it: besides the round trip, ending a session frees the run state and
//!   rewrites the session file, and freeing a file's blocks costs 0.2-0.3 ms
//!   each on a disk with online discard (docs/performance.md). Nothing in
//!   the harness waits on the end's result.
//!
//! So in server mode the hook hands its stdin to a detached copy of itself
//! (`<hook name> --preloop-detached-worker`: the same executable under the same name, own process group, stdio on
//! `/dev/null` except the piped payload), prints the event's neutral answer
//! and exits at once; the worker runs the SessionEnd flow with the ordinary
//! call timeouts, and makes its session-end call again (up to
//! [`crate::flow::WORKER_END_ATTEMPTS`] in all) when a loaded server did not
//! answer it in time. Local mode (the inbox is the record, and the hook's
//! syncs are what make the end durable before the harness goes on), a
//! payload the hook cannot use, `PRELOOP_SESSION_END_DETACH=0`, or a worker
//! that cannot be started run the flow in-process within
//! `session_end_budget_ms` instead.
//!
//! A resumed session may start before the worker is done (Codex: `codex
//! exec resume` right after a run). The worker's `session-end` would then
//! land after the resume's `session-start` and end the resumed session, and
//! its local clean-up would remove the resumed run's state. So the hook
//! leaves a marker, `run/<session>.ending` holding the worker's pid, that
//! the worker removes when it is done; a SessionStart of that session waits
//! for it (at most [`crate::ending::ENDING_WAIT`]), and when it gives up it writes
//! that it was superseded, and the worker then leaves the local files alone.

use crate::config::{Config, Env};
use crate::ending::{clear_ending, mark_ending};
use crate::registry::{Does, HookDef};
use crate::runner::{Adapter, Parsed};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// The argument that makes a SessionEnd binary the detached worker.
pub const WORKER_ARG: &str = "--preloop-detached-worker";
/// `0`, `false`, `no` or `off`: never detach (run in-process within the budget).
pub const DETACH_ENV: &str = "PRELOOP_SESSION_END_DETACH";

/// Whether this process is a detached worker.
pub fn is_worker() -> bool {
    crate::args::arg_os(1).is_some_and(|a| a == WORKER_ARG)
}

/// The worker: the SessionEnd flow with the ordinary call timeouts.
/// Returns the worker's exit code (the executable's `main` returns it).
pub fn worker_main<A: Adapter>(event: A::Event, env: &Env) -> i32 {
    crate::ending::enter_worker();
    // The worker outlives the hook: it must not keep open what the harness
    // (or whatever started it) left open beyond 0-2, such as a pipe the
    // harness reads to its end.
    crate::fsutil::close_fds_above_stdio();
    let def = event.into().def();
    let stdin = crate::runner::read_stdin(std::time::Duration::from_secs(5));
    let config = Config::load_from(env, Some(def.harness()));
    let session =
        stdin.as_deref().ok().and_then(|b| crate::json::parse_payload(b).ok()).and_then(|json| {
            match A::parse(event, &json, env) {
                Ok(Parsed::Run(input)) => Some(input.session_id),
                _ => None,
            }
        });
    let code = crate::runner::run_with::<A>(event, env, &config, stdin, &mut std::io::sink());
    if let Some(s) = session {
        clear_ending(&config.home, &s);
    }
    code
}

/// Whether this SessionEnd should go to a detached worker.
pub fn wanted(def: &HookDef, config: &Config, env: &Env) -> bool {
    def.does == Does::SessionEnd
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
        mode: Some(crate::backend::HookMode::Server),
        session: Some(session),
        proxy: config.settings.proxy.as_ref().map(crate::http::ProxyUrl::shown),
        ..Default::default()
    };
    match spawn_worker(stdin) {
        Ok(pid) => {
            line.outcome = crate::runner::LogOutcome::Detached;
            line.warnings.push(format!("worker pid {pid}"));
            if let Err(e) = mark_ending(&config.home, line.session.as_deref().unwrap_or_default(), pid) {
                line.warnings.push(format!("no ending marker (a quick resume may race the end): {e}"));
            }
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
    // One executable serves every hook by the name it is started as: the
    // worker gets this hook's name as its argv[0] (`current_exe` is the
    // file itself, whatever link started us).
    let exe = std::env::current_exe()?;
    let name = crate::args::invoked_name().ok_or_else(|| std::io::Error::other("no argv[0]"))?;
    let mut child = Command::new(exe)
        .arg0(name)
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
