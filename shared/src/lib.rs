//! The preloop-hooks engine.
//!
//! Harness adapters (in `hooks/<harness>`) turn a hook's stdin into an
//! [`flow::Input`] and an [`flow::Outcome`] back into the JSON that event
//! accepts; everything in between lives here, once: configuration, the two
//! backends behind [`backend::Backend`] (the Preloop server and the local
//! inbox), the spool and session state, the note renderer, the hook log, and
//! the [`runner`] that makes every binary answer the harness no matter what.

pub mod backend;
pub mod config;
pub mod error;
pub mod flow;
pub mod fsutil;
pub mod local;
pub mod log;
pub mod operator;
pub mod render;
pub mod runner;
pub mod server;
pub mod session;
pub mod time;
pub mod wire;

pub use error::{Error, Result};

/// The harnesses we ship hooks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Harness {
    ClaudeCode,
    Codex,
    Cursor,
}

impl Harness {
    pub const ALL: [Harness; 3] = [Harness::ClaudeCode, Harness::Codex, Harness::Cursor];

    /// The `source` the server knows the harness by.
    pub fn source(self) -> &'static str {
        match self {
            Harness::ClaudeCode => "claude_code",
            Harness::Codex => "codex_cli",
            Harness::Cursor => "cursor",
        }
    }

    /// The name in our binaries and on the command line.
    pub fn slug(self) -> &'static str {
        match self {
            Harness::ClaudeCode => "claude-code",
            Harness::Codex => "codex",
            Harness::Cursor => "cursor",
        }
    }

    pub fn from_slug(s: &str) -> Option<Harness> {
        Harness::ALL.into_iter().find(|h| h.slug() == s || h.source() == s)
    }

    pub fn from_source(s: &str) -> Option<Harness> {
        Harness::from_slug(s).or(match s {
            "codex" => Some(Harness::Codex),
            _ => None,
        })
    }

    /// Whether an onboarding file's `source` is meant for this harness.
    pub fn accepts_source(self, src: &str) -> bool {
        Harness::from_source(src) == Some(self)
    }
}
