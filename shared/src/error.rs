//! The engine's error, shared by the hooks and the operator commands.
//!
//! Hook binaries never turn an error into a non-zero exit: they log it and
//! answer the event's neutral output (see `runner`). The CLI wraps it in its
//! own error, which adds what only a command has (a `--wait` that ends
//! undelivered) and maps every kind to one exit code (`install/src/error.rs`).

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
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { context: context.into(), source }
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
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m) | Error::Config(m) | Error::NotFound(m) | Error::Refused(m) | Error::Busy(m) => {
                f.write_str(m)
            }
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
