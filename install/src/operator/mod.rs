//! The one seam between the operator commands (`notes`, `sessions`) and
//! where notes and sessions live: the local inbox ([`local::Local`]) or the
//! Preloop server's human routes ([`server::Server`]), the way
//! `preloop_shared::backend::Backend` serves the hooks. The commands are
//! written once against [`Operator`]; whatever differs between the two
//! modes (which routes, which files, which words on stderr) lives inside the
//! two implementations. The unit tests drive the commands through an
//! in-memory implementation (`memory`), as the engine's tests use
//! `Engine::with_backend`.
//!
//! One vocabulary for both: a note is *sent* to a [`To`], read back as a
//! [`Receipt`] (`receipt`, `cancel`, `notes`), and a session is a
//! [`SessionRef`] (found by `find_session`) or a
//! [`preloop_shared::operator::SessionRow`] (listed by `sessions`).
//!
//! What the user types is resolved once, on top of the seam, for both modes:
//! [`ids`] takes a session or note id, or a unique start of one, as git and
//! docker do.

pub mod ids;
pub mod local;
#[cfg(test)]
pub mod memory;
pub mod server;

use preloop_shared::Harness;
use preloop_shared::Result;
use preloop_shared::config::Secret;
use preloop_shared::operator::{ActivityItem, Receipt, ReceiptState, SessionFilter, SessionRow};
use preloop_shared::session::{self, SessionFile};
use preloop_shared::time::Timestamp;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// Which side an operator talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The file-backed inbox under `$PRELOOP_HOME` (no server URL configured).
    Local,
    /// A Preloop server, with a user token.
    Server,
}

impl Side {
    /// `"local"` or `"server"`: the word in `--json` outputs and session files.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Local => "local",
            Side::Server => "server",
        }
    }

    /// The hooks' mode of the same name (a session file's `mode`).
    pub fn hooks(self) -> preloop_shared::backend::HookMode {
        match self {
            Side::Local => preloop_shared::backend::HookMode::Local,
            Side::Server => preloop_shared::backend::HookMode::Server,
        }
    }

    /// Where the sessions this mode knows are: said after "not known".
    pub fn where_known(self) -> &'static str {
        match self {
            Side::Local => "on this machine",
            Side::Server => "in this account",
        }
    }

    /// Why the CLI is in this mode.
    pub fn why(self) -> &'static str {
        match self {
            Side::Local => "no server URL configured",
            Side::Server => "a server URL and a user token are configured",
        }
    }

    /// The `source` of receipt events in `sessions attach`.
    pub fn receipts_source(self) -> &'static str {
        match self {
            Side::Local => "inbox",
            Side::Server => "receipts",
        }
    }
}

/// A session as both modes know it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRef {
    pub runtime_id: String,
    pub external_id: Option<String>,
    /// This machine's session file, when the hooks ran here.
    pub file: Option<SessionFile>,
    pub ended_at: Option<Timestamp>,
}

impl SessionRef {
    /// How to name it to a person: the harness id, else the runtime id.
    pub fn name(&self) -> &str {
        self.external_id.as_deref().unwrap_or(&self.runtime_id)
    }

    /// The session a session file describes.
    pub fn of_file(f: SessionFile) -> SessionRef {
        SessionRef {
            runtime_id: f.runtime_session_id.clone(),
            external_id: Some(f.external_session_id.clone()),
            ended_at: f.ended_at,
            file: Some(f),
        }
    }
}

/// Whom a note goes to (`notes send`, a line typed in `sessions attach`).
#[derive(Debug, Clone, PartialEq)]
pub enum To {
    /// One session: found, or named by an id nobody knows yet.
    Session { id: String, found: Option<SessionRef> },
    /// The live session with this alias.
    Alias(String),
    /// The live children of a session: all of them, or the newest.
    Children { parent: SessionRef, all: bool },
    /// The session a flow execution runs on.
    Execution(String),
    /// The next session of a harness that starts after the note.
    Next(Harness),
    /// `--harness H` without `--next-session`: its current or next session.
    HarnessCurrent(Harness),
    /// A managed agent's current session, or (`next_session`) its next one.
    Agent { agent_id: String, next_session: bool },
}

/// The note itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewNote {
    pub text: String,
    pub expires_in_secs: Option<u64>,
    /// Who it is from (`--from`; the local inbox only: a server names the
    /// author from the user token).
    pub from: Option<String>,
}

/// What a send answered: the receipts, and what it learned about the
/// target that the command did not know (for `notes send --json`'s `target`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sent {
    pub receipts: Vec<Receipt>,
    pub session: Option<String>,
    pub runtime_session_id: Option<String>,
    /// The managed agent a `--next HARNESS` note went to (server mode).
    pub agent_id: Option<String>,
}

/// Whose notes `notes list` shows.
#[derive(Debug, Clone, PartialEq)]
pub enum NotesOf {
    /// One session.
    Session(SessionRef),
    /// A session that has not started, by its full harness id
    /// ([`ids::is_full_session_id`]): the notes waiting for it.
    NotStarted(String),
    /// The sessions with this alias.
    Alias(String),
    /// The runs a session started: the newest one, or all.
    Children {
        parent: SessionRef,
        latest: bool,
    },
    Execution(String),
    /// A managed agent's (server mode).
    Agent(String),
    /// Every note.
    All,
}

/// How often to look again, per mode (a local file read is cheap, a server
/// round trip is not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// Between two polls of a receipt or a session.
    pub poll: Duration,
    /// Between two checks whether a waited-for session has ended.
    pub end_check: Duration,
    /// After a session ended, before its last receipts are read (the
    /// hooks' SessionEnd may still be settling them).
    pub settle: Duration,
}

/// A session's state now (`sessions attach`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionNow {
    pub ended_at: Option<Timestamp>,
    /// Approvals waiting on a human (server mode).
    pub pending_approvals: Option<u64>,
}

/// The server's attach socket for one session.
#[derive(Clone)]
pub struct Socket {
    pub url: String,
    pub token: Secret,
    /// Every secret a text from the socket must not show.
    pub secrets: Vec<Secret>,
}

impl Socket {
    /// Remove every secret from a text the server sent.
    pub fn clean(&self, text: &str) -> String {
        let refs: Vec<&Secret> = self.secrets.iter().collect();
        preloop_shared::redact::redact(text, &refs)
    }
}

/// Where the operator commands send notes and find sessions.
pub trait Operator: Send + Sync {
    fn mode(&self) -> Side;

    /// A sentence naming the mode and why, when it could surprise.
    fn mode_note(&self) -> Option<String>;

    fn pace(&self) -> Pace;

    /// Whether `--from` names the author (else it is ignored, with a line).
    fn author_from_flag(&self) -> bool;

    /// Refuse a target this side cannot take, before the note is read (so a
    /// bad target never waits on stdin).
    fn check(&self, to: &To) -> Result<()>;

    /// What to say on stderr before a note goes to a session nobody knows.
    fn unknown_session_note(&self, id: &str) -> Option<String>;

    /// Send one note (one receipt per session the target names).
    fn send(&self, to: &To, note: &NewNote) -> Result<Sent>;

    /// One note's receipt.
    fn receipt(&self, note_id: &str) -> Result<Receipt>;

    /// Withdraw a pending note; a note in any other state comes back unchanged.
    fn cancel(&self, note_id: &str) -> Result<Receipt>;

    /// The notes of a target (`state`: a hint the side may apply itself).
    fn notes(&self, of: &NotesOf, state: Option<&ReceiptState>) -> Result<Vec<Receipt>>;

    /// The sessions `filter` selects, most recently active first.
    fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRow>>;

    /// Every session a typed start of an id is resolved against
    /// ([`ids::session`]): all this side can see, not a window of it
    /// (red-team 4, P6); an error when that cannot be read whole.
    fn id_candidates(&self) -> Result<Vec<SessionRow>> {
        self.sessions(&SessionFilter::default())
    }

    /// A managed agent's id, from its id or its display name (what
    /// `sessions list --agent` takes).
    fn agent_id(&self, id_or_name: &str) -> Result<String>;

    /// A session by its harness session id or its runtime id; `Ok(None)`
    /// when this side does not know it.
    fn find_session(&self, id: &str) -> Result<Option<SessionRef>>;

    /// When the session a note is addressed to ended, if it has.
    fn session_ended(&self, note: &Receipt) -> Option<Timestamp>;

    /// A session's state now.
    fn session_now(&self, s: &SessionRef) -> Result<SessionNow>;

    /// The session's activity timeline, newest first (empty where there is none).
    fn timeline(&self, s: &SessionRef, limit: u32) -> Result<Vec<ActivityItem>>;

    /// The attach socket, where there is one.
    fn socket(&self, s: &SessionRef) -> Option<Socket>;
}

/// This machine's session files by runtime id.
pub fn files_by_runtime(home: &Path) -> HashMap<String, SessionFile> {
    session::all_session_files(home).into_iter().map(|f| (f.runtime_session_id.clone(), f)).collect()
}

/// A session file on this machine by harness id or runtime id.
pub fn local_file(home: &Path, id: &str) -> Option<SessionFile> {
    if let Ok(Some(f)) = session::read_session_file(home, id) {
        return Some(f);
    }
    session::find_by_runtime_id(home, id)
}
