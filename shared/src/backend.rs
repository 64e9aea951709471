//! The one seam between the engine and where notes live: the Preloop server
//! ([`crate::server::ServerBackend`]) or the local inbox
//! ([`crate::local::LocalInbox`]). Both take the server's wire requests and
//! answer with the same harness-neutral types.

use crate::error::Result;
use crate::registry::ServerClaim;
use crate::render::NoteElement;
use crate::wire::*;

/// Whether a calling hook's output can show these notes (oldest first)
/// beside what it already holds ([`Backend::pull_fitting`]).
pub type Fits<'a> = &'a dyn Fn(&[NoteElement]) -> bool;

/// Notes claimed in one call, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    pub notes: Vec<NoteElement>,
    /// True when the backend left them `claimed`: they must be acked after
    /// the carrying output is flushed (or acked `spool_dropped`).
    pub deferred: bool,
}

/// A backend's permission answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionAnswer {
    /// `None`: no opinion (local mode); leave the harness's own flow alone.
    pub decision: Option<Decision>,
    pub reason: String,
    pub timed_out: bool,
    pub note: Option<Claimed>,
}

/// The hooks' mode: where their notes and checks go (also a session
/// file's `mode`, where a word this build does not know reads as `Unknown`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookMode {
    /// The local inbox under `$PRELOOP_HOME`.
    Local,
    /// A Preloop server.
    Server,
    /// The configuration cannot be used: no server is known and the local
    /// inbox is not assumed (gates answer by their fail policy).
    #[serde(other)]
    Unknown,
}

impl HookMode {
    /// The word in the hook log and in session files.
    pub fn as_str(self) -> &'static str {
        match self {
            HookMode::Local => "local",
            HookMode::Server => "server",
            HookMode::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for HookMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

pub trait Backend {
    /// Local or server, for the log and the session files.
    fn mode(&self) -> HookMode;

    /// Register (idempotently) or reopen the harness session.
    fn session_start(&self, req: &SessionStartRequest) -> Result<SessionStartResponse>;

    /// Ask for a decision. `claim` is what the server does with pending
    /// notes on this check for this hook (the registry's
    /// [`crate::registry::Gate::server_claim`]); `can_carry` says whether
    /// the calling hook can put a note into model-visible output. The local
    /// inbox claims (deferred) only when it can; the server decides on its own.
    fn permission_check(
        &self,
        req: &PermissionCheckRequest,
        claim: ServerClaim,
        can_carry: bool,
    ) -> Result<PermissionAnswer>;

    /// Claim up to 5 pending notes for the session.
    fn pull(&self, req: &PendingRequest) -> Result<Option<Claimed>>;

    /// Claim like [`Backend::pull`], but only the oldest notes for which
    /// `fits` holds (the engine: each one fits the calling hook's carrier),
    /// so no hook claims a note it cannot carry at all and the receipt's
    /// `delivery_event` names the hook that carried it. The
    /// server cannot be asked for less (`notes/pending` claims up to 5,
    /// docs/contracts/preloop-server.md §4.3), so by default `fits` is not
    /// consulted; the local inbox claims exactly what fits.
    fn pull_fitting(&self, req: &PendingRequest, fits: Fits<'_>) -> Result<Option<Claimed>> {
        let _ = fits;
        self.pull(req)
    }

    /// Ack deferred claims: delivered, or undeliverable (`spool_dropped`).
    fn ack(&self, req: &AckRequest) -> Result<()>;

    /// Report a lifecycle point (turn end). The server answers 204 whatever
    /// it records, so a backend may only send it here and read the answer
    /// in [`Backend::settle`]: the report then overlaps the hook's other call
    /// instead of adding a round trip.
    fn session_event(&self, req: &SessionEventRequest) -> Result<()>;

    /// Wait for the answers [`Backend::session_event`] left in flight (after
    /// the output is flushed); what failed, for the log.
    fn settle(&self) -> Vec<crate::Error> {
        Vec::new()
    }

    /// End the session: its pending and claimed notes become undeliverable.
    fn session_end(&self, req: &SessionEndRequest) -> Result<SessionEndResponse>;
}
