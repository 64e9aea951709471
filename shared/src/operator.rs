//! The operator's side: sending notes, reading receipts, listing sessions.
//! One set of types for the local inbox and the server's human routes, so
//! the CLI prints both the same way.

use crate::Harness;
use crate::session::SessionFile;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Author {
    #[serde(default)]
    pub display: Option<String>,
    #[serde(default)]
    pub auth_method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// Whom to send a note to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A harness session id (Claude Code `session_id`, Codex session id,
    /// Cursor `conversation_id`).
    Session(String),
    /// A session's alias (`PRELOOP_SESSION_ALIAS` at its start).
    Alias(String),
    /// A runtime session id.
    RuntimeSession(String),
    /// The current or next session of a harness (local inbox).
    Harness(Harness),
}

#[derive(Debug, Clone)]
pub struct SendRequest {
    pub text: String,
    pub target: Target,
    pub next_session: bool,
    pub expires_in_secs: Option<i64>,
    pub author: Author,
}

/// A note's receipt: the server's `OperatorNoteResponse` fields, plus the
/// harness session id and harness for local notes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    pub note_id: String,
    pub state: String,
    #[serde(default)]
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_agent_id: Option<String>,
    #[serde(default)]
    pub runtime_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<String>,
    #[serde(default)]
    pub next_session: bool,
    #[serde(default)]
    pub author: Author,
    #[serde(default)]
    pub created_at: Option<Timestamp>,
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
    #[serde(default)]
    pub claimed_at: Option<Timestamp>,
    #[serde(default)]
    pub delivered_at: Option<Timestamp>,
    #[serde(default)]
    pub delivery_channel: Option<String>,
    #[serde(default)]
    pub delivery_event: Option<String>,
    #[serde(default)]
    pub undeliverable_at: Option<Timestamp>,
    #[serde(default)]
    pub undeliverable_reason: Option<String>,
    #[serde(default)]
    pub cancelled_at: Option<Timestamp>,
    #[serde(default)]
    pub expired_at: Option<Timestamp>,
}

impl Receipt {
    /// Delivered (or acknowledged): the carrying output was written.
    pub fn is_delivered(&self) -> bool {
        matches!(self.state.as_str(), "delivered" | "acknowledged")
    }
    /// A terminal state other than delivered.
    pub fn is_lost(&self) -> bool {
        matches!(self.state.as_str(), "undeliverable" | "expired" | "cancelled" | "failed")
    }
    /// The time of the latest transition.
    pub fn last_transition(&self) -> Option<Timestamp> {
        [self.delivered_at, self.undeliverable_at, self.cancelled_at, self.expired_at, self.claimed_at, self.created_at]
            .into_iter()
            .flatten()
            .next()
    }
}

/// One row of `sessions list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    pub runtime_session_id: String,
    #[serde(default)]
    pub external_session_id: Option<String>,
    #[serde(default)]
    pub alias: Option<String>,
    #[serde(default)]
    pub agent_kind: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub parent_session_id: Option<String>,
    #[serde(default)]
    pub started_at: Option<Timestamp>,
    #[serde(default)]
    pub ended_at: Option<Timestamp>,
    /// `live` or `ended`.
    pub state: String,
}

impl SessionSummary {
    pub fn from_file(s: &SessionFile) -> SessionSummary {
        SessionSummary {
            runtime_session_id: s.runtime_session_id.clone(),
            external_session_id: Some(s.external_session_id.clone()),
            alias: s.alias.clone(),
            agent_kind: Some(s.agent_kind.clone()),
            cwd: s.cwd.clone(),
            title: s.title.clone(),
            parent_session_id: s.parent_session_id.clone(),
            started_at: Some(s.started_at),
            ended_at: s.ended_at,
            state: if s.ended_at.is_some() { "ended".into() } else { "live".into() },
        }
    }
}
