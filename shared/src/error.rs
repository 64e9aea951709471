//! The one error type of the engine and the CLI, and the CLI's exit codes,
//! named once ([`Exit`], nextest's pattern).
//!
//! Hook binaries never turn an error into a non-zero exit: they log it and
//! answer the event's neutral output (see `runner`). The CLI maps errors to
//! exit codes with [`Error::exit`]; `doctor` reports through [`Exit`] too.

use std::fmt;

/// Every exit code of `preloop-hooks`. The README and `--help` list the
/// same table; a test holds them to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Exit {
    /// Success (`doctor`: healthy, warnings allowed).
    Ok = 0,
    /// Any other failure: I/O, a server error or refusal, not found, not configured.
    Failure = 1,
    /// A usage error: bad arguments or unusable input.
    Usage = 2,
    /// `notes send --wait` / `notes status --wait`: the note ended
    /// undeliverable, expired or cancelled.
    Undelivered = 3,
    /// `--wait`: waiting timed out (the note is still pending).
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

    pub fn from_code(code: u8) -> Option<Exit> {
        Exit::ALL.into_iter().find(|e| e.code() == code)
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> std::process::ExitCode {
        std::process::ExitCode::from(e.code())
    }
}

#[derive(Debug)]
pub enum Error {
    /// Bad arguments or input the caller can fix.
    Usage(String),
    /// Configuration missing or unusable.
    Config(String),
    /// A file operation failed.
    Io { context: String, source: std::io::Error },
    /// Could not reach the server (refused, DNS, TLS, timeout).
    Unreachable { route: &'static str, detail: String },
    /// The server answered with an unexpected status.
    Status { route: &'static str, status: u16, detail: String },
    /// The server answered 2xx with a body of the wrong shape.
    Protocol { route: &'static str, detail: String },
    /// A note, session or target does not exist.
    NotFound(String),
    /// The request was refused (conflict, rate limit, wrong state).
    Refused(String),
    /// A lock could not be taken in time.
    Busy(String),
    /// Waiting for a receipt ran out of time.
    WaitTimeout(String),
    /// The note ended undeliverable or expired.
    Undelivered(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }

    /// The documented CLI exit code for this error.
    pub fn exit(&self) -> Exit {
        match self {
            Error::Usage(_) => Exit::Usage,
            Error::Undelivered(_) => Exit::Undelivered,
            Error::WaitTimeout(_) => Exit::WaitTimeout,
            Error::NotFound(_)
            | Error::Refused(_)
            | Error::Config(_)
            | Error::Unreachable { .. }
            | Error::Io { .. }
            | Error::Status { .. }
            | Error::Protocol { .. }
            | Error::Busy(_) => Exit::Failure,
        }
    }

    /// A failure the same call may not meet again: the server could not be
    /// reached or did not answer in time, or answered that it is overloaded
    /// or briefly unavailable (408, 429, 5xx).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Unreachable { .. } => true,
            Error::Status { status, .. } => matches!(status, 408 | 429 | 500..=599),
            _ => false,
        }
    }

    /// A short, token-free label for the hook log.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Usage(_) => "usage",
            Error::Config(_) => "config",
            Error::Io { .. } => "io",
            Error::Unreachable { .. } => "unreachable",
            Error::Status { .. } => "status",
            Error::Protocol { .. } => "protocol",
            Error::NotFound(_) => "not_found",
            Error::Refused(_) => "refused",
            Error::Busy(_) => "busy",
            Error::WaitTimeout(_) => "wait_timeout",
            Error::Undelivered(_) => "undelivered",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m)
            | Error::Config(m)
            | Error::NotFound(m)
            | Error::Refused(m)
            | Error::Busy(m)
            | Error::WaitTimeout(m)
            | Error::Undelivered(m) => f.write_str(m),
            Error::Io { context, source } => write!(f, "{context}: {source}"),
            Error::Unreachable { route, detail } => write!(f, "{route}: server unreachable: {detail}"),
            Error::Status { route, status, detail } => write!(f, "{route}: HTTP {status}: {detail}"),
            Error::Protocol { route, detail } => write!(f, "{route}: unexpected response: {detail}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_named_once() {
        for (i, e) in Exit::ALL.into_iter().enumerate() {
            assert_eq!(e.code() as usize, i);
            assert_eq!(Exit::from_code(e.code()), Some(e));
        }
        assert_eq!(Error::Usage("x".into()).exit(), Exit::Usage);
        assert_eq!(Error::WaitTimeout("x".into()).exit(), Exit::WaitTimeout);
        assert_eq!(Error::Undelivered("x".into()).exit(), Exit::Undelivered);
        assert_eq!(Error::NotFound("x".into()).exit(), Exit::Failure);
    }
}
