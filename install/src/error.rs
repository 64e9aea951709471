//! The CLI's error and its exit codes, in one table (nextest's model: each
//! error kind maps to one documented code, [`CliError::exit`]).
//!
//! The engine's [`Error`] is what a hook and the operator commands share
//! (I/O, configuration, the server, not found, refused, a request the caller
//! must fix); [`CliError`] adds what only the command line has: a `--wait`
//! that ends without a delivery. Hooks never exit non-zero (see
//! `preloop_shared::runner`), so they link neither. `install/README.md`'s
//! "Exit codes" table and `--help`'s "Exit codes:" line list [`Exit::ALL`];
//! `tests::the_exit_table_is_the_readmes_and_the_helps` holds them to it.

use preloop_shared::Error;
use std::fmt;

/// Every exit code of `preloop-hooks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Exit {
    /// Success (`doctor`: healthy, warnings allowed).
    Ok = 0,
    /// Any other failure: I/O, a server error or refusal, not found, not configured.
    Failure = 1,
    /// A usage error: bad arguments or unusable input.
    Usage = 2,
    /// `notes send --wait`: the note ended undeliverable, expired or
    /// cancelled, or its session ended.
    Undelivered = 3,
    /// `--wait`: waiting ran out or was interrupted (the note is still pending).
    WaitTimeout = 4,
    /// `doctor`: our hooks are installed in no harness.
    NotInstalled = 5,
    /// `doctor`: an installation or configuration problem.
    InstallProblem = 6,
    /// `doctor`: a server problem (unreachable, not a Preloop server, a token rejected).
    ServerProblem = 7,
}

impl Exit {
    pub const ALL: [Exit; 8] = [
        Exit::Ok,
        Exit::Failure,
        Exit::Usage,
        Exit::Undelivered,
        Exit::WaitTimeout,
        Exit::NotInstalled,
        Exit::InstallProblem,
        Exit::ServerProblem,
    ];

    pub fn code(self) -> u8 {
        self as u8
    }

    /// The stable name, for `--json` outputs and the docs.
    pub fn name(self) -> &'static str {
        match self {
            Exit::Ok => "ok",
            Exit::Failure => "failure",
            Exit::Usage => "usage",
            Exit::Undelivered => "undelivered",
            Exit::WaitTimeout => "wait_timeout",
            Exit::NotInstalled => "not_installed",
            Exit::InstallProblem => "install_problem",
            Exit::ServerProblem => "server_problem",
        }
    }

    /// The words `--help` and `install/README.md` give the code (each
    /// names it in these words, right after the code).
    pub fn words(self) -> &'static str {
        match self {
            Exit::Ok => "ok",
            Exit::Failure => "failure",
            Exit::Usage => "usage",
            Exit::Undelivered => "note not deliverable",
            Exit::WaitTimeout => "--wait ran out",
            Exit::NotInstalled => "not installed",
            Exit::InstallProblem => "installation problem",
            Exit::ServerProblem => "server problem",
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> std::process::ExitCode {
        std::process::ExitCode::from(e.code())
    }
}

/// An error of a command.
#[derive(Debug)]
pub enum CliError {
    /// The engine's: a usage error, or any other failure.
    Engine(Error),
    /// `--wait`: the note ended undeliverable, expired or cancelled, or its
    /// session ended first.
    Undelivered(String),
    /// `--wait`: the time ran out, or Ctrl-C, with the note still pending.
    WaitTimeout(String),
}

pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    /// The documented exit code: one arm per kind, the engine's included,
    /// so a new kind cannot go without one.
    pub fn exit(&self) -> Exit {
        match self {
            CliError::Engine(e) => exit_of(e),
            CliError::Undelivered(_) => Exit::Undelivered,
            CliError::WaitTimeout(_) => Exit::WaitTimeout,
        }
    }

    /// The engine's error, when it is one.
    pub fn engine(&self) -> Option<&Error> {
        match self {
            CliError::Engine(e) => Some(e),
            CliError::Undelivered(_) | CliError::WaitTimeout(_) => None,
        }
    }
}

/// The exit code of an engine error: usage 2, any other 1.
pub fn exit_of(e: &Error) -> Exit {
    match e {
        Error::Usage(_) => Exit::Usage,
        Error::Config(_)
        | Error::Io { .. }
        | Error::Unreachable { .. }
        | Error::Status { .. }
        | Error::Protocol { .. }
        | Error::NotFound(_)
        | Error::Refused(_)
        | Error::Busy(_) => Exit::Failure,
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> CliError {
        CliError::Engine(e)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Engine(e) => e.fmt(f),
            CliError::Undelivered(m) | CliError::WaitTimeout(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CliError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CliError::Engine(e) => Some(e),
            CliError::Undelivered(_) | CliError::WaitTimeout(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_named_once() {
        for (i, e) in Exit::ALL.into_iter().enumerate() {
            assert_eq!(e.code() as usize, i, "{}", e.name());
        }
        let all = |f: fn(Exit) -> &'static str| Exit::ALL.map(f).into_iter().collect::<std::collections::BTreeSet<_>>();
        assert_eq!(all(Exit::name).len(), Exit::ALL.len());
        assert_eq!(all(Exit::words).len(), Exit::ALL.len());
        assert_eq!(CliError::from(Error::Usage("x".into())).exit(), Exit::Usage);
        assert_eq!(CliError::from(Error::NotFound("x".into())).exit(), Exit::Failure);
        assert_eq!(CliError::from(Error::Refused("x".into())).exit(), Exit::Failure);
        assert_eq!(CliError::WaitTimeout("x".into()).exit(), Exit::WaitTimeout);
        assert_eq!(CliError::Undelivered("x".into()).exit(), Exit::Undelivered);
    }

    /// `install/README.md`'s "Exit codes" table has one row per code, in
    /// order, each starting with the code's words; `--help` (the CLI's
    /// after-help) names every code in its words after "Exit codes:", in
    /// order.
    #[test]
    fn the_exit_table_is_the_readmes_and_the_helps() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let table = readme.split("### Exit codes").nth(1).expect("install/README.md has ### Exit codes");
        let rows: Vec<(&str, &str)> = table
            .lines()
            .skip_while(|l| !l.starts_with("|---"))
            .skip(1)
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| l.trim_matches('|').split_once('|'))
            .map(|(c, m)| (c.trim(), m.trim()))
            .collect();
        let codes: Vec<String> = Exit::ALL.map(|e| e.code().to_string()).to_vec();
        assert_eq!(rows.iter().map(|(c, _)| c.to_string()).collect::<Vec<_>>(), codes, "install/README.md's rows");
        for ((_, meaning), e) in rows.iter().zip(Exit::ALL) {
            let words = format!("{}:", e.words());
            assert!(
                meaning.starts_with(&words),
                "install/README.md, code {}: {meaning:?} does not start {words:?}",
                e.code()
            );
        }
        let help = crate::cli::after_help().split_whitespace().collect::<Vec<_>>().join(" ");
        let at = help.find("Exit codes:").expect("--help names the exit codes");
        let mut rest = &help[at..];
        for e in Exit::ALL {
            let said = format!("{} {}", e.code(), e.words());
            let i = rest.find(&said).unwrap_or_else(|| panic!("--help does not say {said:?} (in order)"));
            rest = &rest[i + said.len()..];
        }
    }
}
