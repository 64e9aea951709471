//! One executable, every command: `preloop-hooks` is the operator CLI, and
//! started under a hook's name (`preloop-claude-code-pre-tool-use`, a hard
//! link `install` makes beside it, or a symlink or copy) it is that hook.
//! rustup's proxies and busybox work the same way.
//!
//! The hook path starts without std's runtime (`#![no_main]`,
//! [`preloop_shared::hook_main`]). Sharing the file with the CLI costs a hook
//! about 0.07 ms at start-up against its own binary (more pages faulted in
//! around the hook's code; docs/performance.md, "Shipping").
//!
//! A name that is neither the CLI's nor a hook's (a renamed or mistyped
//! link) is taken for a hook we do not know: it exits 0 with no output and
//! one line in the hook log, since a harness may be the one that ran it and
//! a hook never breaks its harness.
//!
//! A plugin shim (Pi's extension) needs no link: it runs `preloop-hooks
//! hook <command name>`, and the executable is that hook from then on, as
//! if started under the name (rustup's `RUSTUP_FORCE_ARG0`;
//! [`preloop_shared::args::force_arg0`]). An unknown name there also exits
//! 0, and tells its caller so on stdout ([`UNKNOWN_ANSWER`]), which the
//! shim logs and answers by its fail policy.

use crate::names::{CLI_NAME, HOOK_ARG};
use preloop_shared::config::{Config, Env};
use preloop_shared::registry::{self, Event, HookDef};
use std::ffi::OsStr;

/// What `preloop-hooks hook <name>` prints for a name that is no hook
/// command: a `kind` no shim applies (`{"kind":"unknown_command",...}`).
pub const UNKNOWN_ANSWER: &str = "unknown_command";

/// What the executable is, by the name it was started as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The operator CLI.
    Cli,
    /// One hook (the registry row of its command name).
    Hook(&'static HookDef),
    /// A name we do not know.
    Unknown,
}

impl Role {
    /// The role of the name `argv[0]` ends in.
    pub fn of(name: &OsStr) -> Role {
        let Some(name) = name.to_str() else { return Role::Unknown };
        if name.starts_with(CLI_NAME) {
            return Role::Cli;
        }
        match registry::by_binary(name) {
            Some(def) => Role::Hook(def),
            None => Role::Unknown,
        }
    }
}

/// The executable's `main` (after [`preloop_shared::hook_main`]'s start).
pub fn main() -> i32 {
    let name = preloop_shared::args::invoked_name().unwrap_or_default();
    let role = Role::of(&name);
    if role == Role::Cli && preloop_shared::args::arg_os(1).is_some_and(|a| a == HOOK_ARG) {
        return hook_by_name(preloop_shared::args::arg_os(2).unwrap_or_default());
    }
    match role {
        Role::Hook(def) => run_hook(def.event),
        Role::Cli => {
            // As std's own start-up does: a closed pipe is an EPIPE error
            // (`… | head` exits 0, output::is_broken_pipe), not a signal.
            // SAFETY: setting a signal's disposition has no preconditions.
            unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
            crate::cli::main_code()
        }
        Role::Unknown => unknown_name(&name),
    }
}

/// `preloop-hooks hook <name>`: the hook `name`, as if started under it.
fn hook_by_name(name: std::ffi::OsString) -> i32 {
    match Role::of(&name) {
        Role::Hook(def) => {
            preloop_shared::args::force_arg0(name, 3);
            run_hook(def.event)
        }
        Role::Cli | Role::Unknown => {
            let code = unknown_name(&name);
            let answer = serde_json::json!({"kind": UNKNOWN_ANSWER, "command": name.to_string_lossy()});
            // The caller is a plugin shim reading one line; nothing else reads it.
            let _ = std::io::Write::write_all(
                &mut preloop_shared::fsutil::StdoutFd::new(),
                format!("{answer}\n").as_bytes(),
            );
            code
        }
    }
}

/// `run_hook`: one arm per registry block, each calling its adapter crate's
/// `main` (`preloop_shared::for_each_harness!`).
macro_rules! run_hook {
    ($($h:ident $krate:ident $module:ident),+) => {
        /// Run one hook; returns its exit code.
        pub fn run_hook(event: Event) -> i32 {
            match event {
                $(Event::$h(e) => $krate::main(e),)+
            }
        }
    };
}
preloop_shared::for_each_harness!(run_hook);

/// A name we do not know: one log line, nothing on stdout, exit 0. A person
/// at a terminal (stdin and stderr both one) also gets one line on stderr;
/// a harness never runs a hook that way.
fn unknown_name(name: &OsStr) -> i32 {
    let shown = crate::output::clip(&name.to_string_lossy(), 80);
    let env = Env::process();
    let config = Config::load_from(&env, None);
    let line = preloop_shared::runner::LogLine {
        harness: "-",
        event: "-",
        outcome: preloop_shared::runner::LogOutcome::UnknownCommand,
        error: Some(format!(
            "started as {shown:?}, which is neither {CLI_NAME} nor a hook command (preloop-hooks install makes them)"
        )),
        ..Default::default()
    };
    line.append(&config);
    // SAFETY: isatty on descriptor numbers has no preconditions.
    if unsafe { libc::isatty(0) == 1 && libc::isatty(2) == 1 } {
        crate::errln!(
            "preloop-hooks: started as {shown:?}, which is neither {CLI_NAME} nor a hook command; run it as {CLI_NAME} (`{CLI_NAME} links --list` names the hook commands)"
        );
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hook_command_is_a_hook_and_the_cli_is_the_cli() {
        for name in registry::binaries() {
            assert!(matches!(Role::of(OsStr::new(name)), Role::Hook(d) if d.binary == name), "{name}");
        }
        assert_eq!(Role::of(OsStr::new("preloop-hooks")), Role::Cli);
        assert_eq!(Role::of(OsStr::new("preloop-hooks-0.1.0")), Role::Cli);
        for odd in ["preloop-claude-code-pre-tool-us", "preloop", "", "sh", "preloop-codex-stop.bak"] {
            assert_eq!(Role::of(OsStr::new(odd)), Role::Unknown, "{odd}");
        }
    }
}
