//! A hook process from its start: the detached SessionEnd worker (the
//! detach module), a hand-off to one, a plugin shim's call (the plugin
//! module: the payload is one line, the answer counts once confirmed), or
//! the plain hook; each ends in [`runner::run_with`]. The adapters' `main`
//! is [`main`] (or [`plugin_main`]); nothing in the engine depends on this
//! module, which sits above runner, detach and plugin.

use crate::config::{Config, Env};
use crate::runner::{self, Adapter};
use crate::{detach, plugin};
use std::time::Duration;

/// Run the hook for `event`; returns the process's exit code (0), which
/// the executable's `main` returns ([`crate::hook_main`]): nothing below
/// `main` ends the process.
pub fn main<A: Adapter>(event: A::Event) -> i32 {
    main_with::<A>(event, None)
}

/// Run the hook for `event` under a plugin shim ([`crate::plugin`]);
/// returns the exit code (0): the payload is stdin's first line, and an
/// answer counts as written only once the shim confirms it applied it.
pub fn plugin_main<A: Adapter>(event: A::Event) -> i32 {
    main_with::<A>(event, Some(plugin::CONFIRM_WAIT))
}

fn main_with<A: Adapter>(event: A::Event, shim: Option<Duration>) -> i32 {
    runner::prepare_process();
    let env = Env::process();
    let def = event.into().def();
    if detach::is_worker() {
        return detach::worker_main::<A>(event, &env);
    }
    let stdin = match shim {
        Some(_) => plugin::read_payload(runner::stdin_deadline(def)),
        None => runner::read_stdin(runner::stdin_deadline(def)),
    };
    let config = Config::load_from(&env, Some(def.harness()));
    if let Ok(buf) = &stdin
        && detach::wanted(def, &config, &env)
        && detach::hand_off::<A>(event, &config, &env, buf)
    {
        // The worker ends the session; the harness gets the event's
        // neutral answer (Cursor's `{}`; nothing elsewhere).
        let _ = runner::write_output(&mut crate::fsutil::StdoutFd::new(), A::neutral(event).as_ref());
        return 0;
    }
    match shim {
        Some(wait) => runner::run_with::<A>(event, &env, &config, stdin, &mut plugin::Confirmed::stdout(wait)),
        None => runner::run_with::<A>(event, &env, &config, stdin, &mut crate::fsutil::StdoutFd::new()),
    }
}
