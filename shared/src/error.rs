//! The one error type of the engine and the CLI, with documented exit codes.
//!
//! Hook binaries never turn an error into a non-zero exit: they log it and
//! answer the event's neutral output (see `runner`). The CLI maps errors to
//! exit codes with [`Error::exit_code`]:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | any other failure (I/O, server error or refusal, not found, not configured) |
//! | 2 | usage error (bad arguments, unusable input) |
//! | 3 | the note ended undeliverable or expired (`--wait`) |
//! | 4 | waiting timed out (`--wait`) |

use std::fmt;

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
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => 2,
            Error::Undelivered(_) => 3,
            Error::WaitTimeout(_) => 4,
            Error::NotFound(_)
            | Error::Refused(_)
            | Error::Config(_)
            | Error::Unreachable { .. }
            | Error::Io { .. }
            | Error::Status { .. }
            | Error::Protocol { .. }
            | Error::Busy(_) => 1,
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
