//! What every hook binary's `main` calls. It keeps the harness contract
//! whatever happens: stdout is exactly one JSON document of the event's
//! shape or nothing, diagnostics go to the hook log, and the exit code is 0.
//!
//! When the hook cannot get an answer (stdin it cannot use, a configuration
//! it cannot read, a panic, an engine error), a gate answers by its fail
//! policy (`pre_tool_use_on_error`, `permission_request_on_error`) wherever a
//! server decides, never by a blanket allow; every other hook gives its
//! neutral answer. On the local inbox (no server configured) nothing decides
//! permissions, so the neutral answer is the answer.

use crate::config::{Config, Env, FailPolicy};
use crate::flow::{Engine, Input, Outcome};
/// The hook log's line lives with its writer and parser ([`crate::log`]).
pub use crate::log::{LogLine, LogOutcome};
use crate::registry::{Budget, Event, HookDef};
use crate::wire::Decision;
use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// Largest stdin we read; a hook payload past this is not one we can use
/// (a gate then follows its fail policy).
pub const MAX_STDIN: usize = 64 << 20;

/// What an adapter's parse step decided.
#[allow(
    clippy::large_enum_variant,
    reason = "one value per hook process, moved once: boxing the input would buy nothing"
)]
pub enum Parsed {
    /// Run the engine.
    Run(Input),
    /// Answer neutrally without touching anything (e.g. Cursor running the
    /// Claude Code hooks it imported); the string says why, for the log.
    StandDown(&'static str),
}

/// A harness's pure steps, implemented once per harness crate: stdin JSON →
/// input, outcome → the event's typed output.
pub trait Adapter: 'static {
    /// The harness's events (its registry enum).
    type Event: Copy + Into<Event> + std::fmt::Debug + 'static;
    /// What its hooks print (one serde type per event shape).
    type Output: Serialize;

    /// stdin JSON → input. `Err`: the payload is not one the event can use.
    fn parse(event: Self::Event, stdin: &Value, env: &Env) -> Result<Parsed, String>;
    /// outcome → output; `None` prints nothing.
    fn render(event: Self::Event, outcome: &Outcome) -> Option<Self::Output>;
    /// The answer with no opinion (printed when anything fails and no fail
    /// policy applies); `None` prints nothing.
    fn neutral(_event: Self::Event) -> Option<Self::Output> {
        None
    }
    /// After the engine, before the output (Claude Code's lineage export).
    fn side_effects(_event: Self::Event, _input: &Input, _outcome: &Outcome, _env: &Env) {}
}

/// The whole hook for tests: `stdin` is what the harness sent.
pub fn run<A: Adapter>(event: A::Event, env: &Env, stdin: &[u8], stdout: &mut dyn Write) -> i32 {
    let config = Config::load_from(env, Some(event.into().def().harness()));
    run_with::<A>(event, env, &config, Ok(stdin.to_vec()), stdout)
}

/// Signals a hook must not die of: `SIGXFSZ` (a write past `ulimit -f`
/// then fails with `EFBIG` and is handled) and `SIGPIPE` (Rust ignores it
/// already; a closed pipe is an `EPIPE` error).
pub fn prepare_process() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    // The default hook prints to stderr; the runner logs panics itself.
    panic::set_hook(Box::new(|_| {}));
}

/// How long a hook waits for its stdin to close: harnesses write it at
/// once and close it, so this only bounds a stdin that never ends.
pub fn stdin_deadline(def: &HookDef) -> Duration {
    match def.budget {
        Budget::SessionEnd => Duration::from_millis(500),
        Budget::Call | Budget::Permission | Budget::Watch => Duration::from_secs(5),
    }
}

/// Read all of stdin within `deadline` (at most [`MAX_STDIN`] bytes).
pub fn read_stdin(deadline: Duration) -> Result<Vec<u8>, String> {
    crate::fsutil::read_fd_with_deadline(0, MAX_STDIN, deadline)
}

pub fn run_with<A: Adapter>(
    event: A::Event,
    env: &Env,
    config: &Config,
    stdin: Result<Vec<u8>, String>,
    stdout: &mut dyn Write,
) -> i32 {
    let started = Instant::now();
    let def = event.into().def();
    let mut line = LogLine { harness: def.harness().slug(), event: def.on, ..LogLine::default() };
    line.worker = crate::ending::in_worker();
    line.proxy = config.server.as_ref().and(config.settings.proxy.as_ref()).map(crate::http::ProxyUrl::shown);
    line.warnings.extend(config.warnings.iter().cloned());
    line.warnings.extend(config.problems.iter().map(|p| p.to_string()));

    let result = panic::catch_unwind(AssertUnwindSafe(|| decide::<A>(event, def, env, config, stdin, &mut line)));
    let (output, engine_after) = match result {
        Ok(Ok(pair)) => pair,
        Ok(Err(msg)) => {
            line.error = Some(msg);
            (fallback::<A>(event, def, config, &mut line), None)
        }
        Err(p) => {
            line.error = Some(panic_message(&p));
            let out = fallback::<A>(event, def, config, &mut line);
            line.outcome = LogOutcome::Panic;
            (out, None)
        }
    };

    let written = write_output(stdout, output.as_ref());
    if written.is_ok() && output.is_some() {
        crate::flow::kill_point("after_stdout");
    }
    if let Err(e) = &written {
        line.warnings.push(format!("stdout write failed: {e}"));
    }
    if let Some((mut engine, after)) = engine_after {
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            engine.finish(after, written.is_ok());
            engine.warnings
        }));
        match r {
            Ok(w) => line.warnings.extend(w),
            Err(p) => line.warnings.push(format!("panic after output: {}", panic_message(&p))),
        }
    }
    line.millis = started.elapsed().as_millis();
    crate::log::append(&config.log_dir(), config.settings.log_max_bytes, &line.render());
    0
}

type Decided<O> = (Option<O>, Option<(Engine, crate::flow::AfterFlush)>);

fn decide<A: Adapter>(
    event: A::Event,
    def: &'static HookDef,
    env: &Env,
    config: &Config,
    stdin: Result<Vec<u8>, String>,
    line: &mut LogLine,
) -> Result<Decided<A::Output>, String> {
    let buf = stdin.map_err(|e| format!("stdin: {e}"))?;
    let json = crate::json::parse_payload(&buf)?;
    let input = match A::parse(event, &json, env).map_err(|e| format!("bad input: {e}"))? {
        Parsed::Run(i) => i,
        Parsed::StandDown(why) => {
            line.outcome = LogOutcome::StandDown;
            line.error = Some(why.to_string());
            return Ok((A::neutral(event), None));
        }
    };
    line.session = Some(input.session_id.clone());
    if config.mode_unknown {
        line.mode = Some(crate::backend::HookMode::Unknown);
        return Err("configuration unusable: no server is known and the local inbox is not assumed".into());
    }
    let mut input = input;
    if crate::flow::needs_stdout(def) && !crate::fsutil::stdout_is_open() {
        // Nothing we print would arrive: register and check as usual, but
        // claim nothing and carry nothing (what the server hands a gate is
        // spooled for a later hook whose output is read).
        line.warnings.push("stdout is closed: nothing is claimed or carried".into());
        input.kind = input.kind.without_output();
    }
    let mut config = config.clone();
    if def.budget == Budget::SessionEnd
        && def.harness().def().session_end_kill_ms.is_some()
        && !crate::ending::in_worker()
    {
        // Everything must fit before the harness kills the hook.
        let ms = config.settings.session_end_budget_ms.max(2);
        config.settings.call_timeout_ms = config.settings.call_timeout_ms.min(ms / 2).max(1);
        config.settings.connect_timeout_ms = config.settings.connect_timeout_ms.min(ms / 2).max(1);
    }
    let mut engine = Engine::new(def, config, &input.session_id);
    line.mode = Some(engine.mode());
    match engine.handle(&input) {
        Ok((outcome, after)) => {
            A::side_effects(event, &input, &outcome, env);
            line.notes = outcome.note_ids.clone();
            line.outcome = match (outcome.gate_failed, &outcome.decision, outcome.context.is_some()) {
                // A failed check says so whatever else the output carries
                // (red-team 4, P7: a fail-open gate logged `ok`).
                (Some(FailPolicy::Open), _, _) => LogOutcome::FailOpen,
                (Some(FailPolicy::Deny), _, _) => LogOutcome::FailClosed,
                (None, Some(Decision::Deny), _) => LogOutcome::Deny,
                (None, _, true) => LogOutcome::Notes,
                (None, _, false) => LogOutcome::Ok,
            };
            let out = A::render(event, &outcome);
            line.warnings.append(&mut engine.warnings);
            line.never_read = engine.never_read.take();
            Ok((out, Some((engine, after))))
        }
        Err(e) => {
            line.warnings.append(&mut engine.warnings);
            Err(format!("{}: {e}", e.kind()))
        }
    }
}

/// The answer when the hook could not get one: a gate's fail policy where a
/// server decides (or may: an unusable configuration), else the neutral answer.
fn fallback<A: Adapter>(event: A::Event, def: &HookDef, config: &Config, line: &mut LogLine) -> Option<A::Output> {
    if let Some(gate) = def.gate
        && (config.server.is_some() || config.mode_unknown)
    {
        if config.settings.fail_policy(gate.fail) == FailPolicy::Deny {
            line.outcome = LogOutcome::FailClosed;
            let why = if config.mode_unknown { "configuration unusable" } else { "input or engine failure" };
            let outcome = Outcome::deny(crate::flow::fail_closed_reason(why));
            let rendered = panic::catch_unwind(AssertUnwindSafe(|| A::render(event, &outcome)));
            if let Ok(Some(out)) = rendered {
                return Some(out);
            }
        } else {
            line.outcome = LogOutcome::FailOpen;
            return A::neutral(event);
        }
    }
    line.outcome = LogOutcome::Neutral;
    A::neutral(event)
}

pub(crate) fn write_output<O: Serialize>(stdout: &mut dyn Write, output: Option<&O>) -> std::io::Result<()> {
    let Some(v) = output else { return Ok(()) };
    let mut text = serde_json::to_vec(v).map_err(std::io::Error::other)?;
    text.push(b'\n');
    stdout.write_all(&text)?;
    stdout.flush()
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into());
    msg.chars().take(200).collect()
}
