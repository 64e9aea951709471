//! The operator's side: sending notes, reading receipts, listing sessions.
//! One set of types for the local inbox and the server's human routes, so
//! the CLI prints both the same way, plus the typed requests and answers of
//! every operator route the CLI calls (docs/contracts/preloop-server.md §5): no untyped JSON bodies.

use crate::session::SessionFile;
use crate::time::Timestamp;
use crate::{AgentKind, Harness};
use serde::{Deserialize, Serialize};

/// The version of every `--json` output of the operator commands (the
/// `"schema"` field; `schemas/preloop-hooks/*.schema.json`).
pub const JSON_SCHEMA_VERSION: u32 = 1;

/// The most live children one `children` target reaches (docs/contracts/preloop-server.md §9).
pub const MAX_CHILDREN: usize = 20;

/// The notes one sender may send one target in a rolling hour, cancelled
/// ones included (docs/contracts/preloop-server.md §5.1, §9). The local
/// inbox keeps the same limit (docs/guarantees.md "The local inbox").
pub const NOTE_RATE_LIMIT_PER_HOUR: usize = 20;

/// The server's 429 reason for that limit, word for word; the local inbox
/// gives the same one.
pub const RATE_LIMIT_DETAIL: &str = "Rate limit reached: 20 notes per hour per agent or session. Steering this often usually means restarting with a better prompt.";

/// The one line `notes send` prints for the rate limit, in both modes:
/// the server's reason (`detail`, [`RATE_LIMIT_DETAIL`] locally) and what
/// to do about it.
pub fn rate_limited(detail: &str) -> String {
    format!(
        "refused (429): {} Send again once the oldest of your notes to it in the last hour is an hour old (cancelled ones count too).",
        detail.trim()
    )
}

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
    /// A session: its harness session id (Claude Code `session_id`, Codex
    /// session id, Cursor `conversation_id`) or its runtime session id.
    Session(String),
    /// A session's alias (`PRELOOP_SESSION_ALIAS` at its start).
    Alias(String),
    /// A runtime session id.
    RuntimeSession(String),
    /// The current or next session of a harness (local inbox).
    Harness(Harness),
    /// The live children of a session (by its runtime or harness id):
    /// `all` of them (at most [`MAX_CHILDREN`]) or the newest one.
    Children { parent: String, all: bool },
    /// The session a flow execution runs on.
    Execution(String),
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
/// harness session id and harness (filled in both modes when known).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    pub note_id: String,
    pub state: ReceiptState,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub managed_agent_id: Option<String>,
    #[serde(default)]
    pub runtime_session_id: Option<String>,
    #[serde(default)]
    pub external_session_id: Option<String>,
    #[serde(default)]
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
    /// Server mode, from this machine's session files: the server recorded
    /// the note `delivered` when a hook claimed it, but no output of its
    /// session carried it before the session ended (the one receipt that
    /// over-reports, docs/guarantees.md "Once, per path"). Never sent by a
    /// server; present in `--json` only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub never_carried: bool,
}

/// Every public note state (docs/contracts/preloop-server.md §8), as the
/// server spells them: [`ReceiptState::KNOWN`] as text.
pub const NOTE_STATES: &[&str] =
    &["pending", "claimed", "delivered", "acknowledged", "cancelled", "expired", "failed", "undeliverable"];

/// A note's state in its receipt (docs/contracts/preloop-server.md §8). It
/// travels as the server's word (`"pending"`, ...), so `--json` outputs and
/// `schemas/preloop-hooks/receipt.schema.json` keep those strings; a word a
/// newer server adds is kept as [`ReceiptState::Other`] and shown as it came.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum ReceiptState {
    Pending,
    Claimed,
    Delivered,
    Acknowledged,
    Cancelled,
    Expired,
    Failed,
    Undeliverable,
    /// A state this build does not know.
    Other(String),
}

impl ReceiptState {
    /// The states this build knows, in [`NOTE_STATES`] order.
    pub const KNOWN: [ReceiptState; 8] = [
        ReceiptState::Pending,
        ReceiptState::Claimed,
        ReceiptState::Delivered,
        ReceiptState::Acknowledged,
        ReceiptState::Cancelled,
        ReceiptState::Expired,
        ReceiptState::Failed,
        ReceiptState::Undeliverable,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            ReceiptState::Pending => "pending",
            ReceiptState::Claimed => "claimed",
            ReceiptState::Delivered => "delivered",
            ReceiptState::Acknowledged => "acknowledged",
            ReceiptState::Cancelled => "cancelled",
            ReceiptState::Expired => "expired",
            ReceiptState::Failed => "failed",
            ReceiptState::Undeliverable => "undeliverable",
            ReceiptState::Other(s) => s,
        }
    }

    /// Delivered (or acknowledged): the carrying output was written.
    pub fn is_delivered(&self) -> bool {
        matches!(self, ReceiptState::Delivered | ReceiptState::Acknowledged)
    }

    /// A terminal state other than delivered.
    pub fn is_lost(&self) -> bool {
        matches!(
            self,
            ReceiptState::Undeliverable | ReceiptState::Expired | ReceiptState::Cancelled | ReceiptState::Failed
        )
    }
}

impl From<&str> for ReceiptState {
    fn from(s: &str) -> ReceiptState {
        ReceiptState::KNOWN.into_iter().find(|k| k.as_str() == s).unwrap_or_else(|| ReceiptState::Other(s.to_string()))
    }
}

impl From<String> for ReceiptState {
    fn from(s: String) -> ReceiptState {
        match ReceiptState::from(s.as_str()) {
            ReceiptState::Other(_) => ReceiptState::Other(s),
            known => known,
        }
    }
}

impl From<ReceiptState> for String {
    fn from(s: ReceiptState) -> String {
        match s {
            ReceiptState::Other(s) => s,
            known => known.as_str().to_string(),
        }
    }
}

impl std::fmt::Display for ReceiptState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Receipt {
    /// A receipt that says only its id and state (the rest unknown).
    pub fn new(note_id: &str, state: ReceiptState) -> Receipt {
        Receipt {
            note_id: note_id.to_string(),
            state,
            text: String::new(),
            managed_agent_id: None,
            runtime_session_id: None,
            external_session_id: None,
            harness: None,
            next_session: false,
            author: Author::default(),
            created_at: None,
            expires_at: None,
            claimed_at: None,
            delivered_at: None,
            delivery_channel: None,
            delivery_event: None,
            undeliverable_at: None,
            undeliverable_reason: None,
            cancelled_at: None,
            expired_at: None,
            never_carried: false,
        }
    }

    /// Delivered (or acknowledged): the carrying output was written.
    pub fn is_delivered(&self) -> bool {
        self.state.is_delivered()
    }
    /// A terminal state other than delivered.
    pub fn is_lost(&self) -> bool {
        self.state.is_lost()
    }
    pub fn is_final(&self) -> bool {
        self.is_delivered() || self.is_lost()
    }
    /// A note its session never showed the model (a run's end names them,
    /// `notes list --undelivered`): `undeliverable` (its session ended
    /// first: `session_ended`; or its carrier was dropped: `spool_dropped`),
    /// or recorded `delivered` at a claim that no output carried
    /// ([`Receipt::never_carried`]).
    pub fn never_shown(&self) -> bool {
        self.state == ReceiptState::Undeliverable || self.never_carried
    }
    /// Why [`Receipt::never_shown`]: the undeliverable reason, or
    /// `never_carried`.
    pub fn never_shown_reason(&self) -> &str {
        if self.never_carried {
            "never_carried"
        } else {
            self.undeliverable_reason.as_deref().unwrap_or("undeliverable")
        }
    }
    /// The time of the latest transition.
    pub fn last_transition(&self) -> Option<Timestamp> {
        [self.delivered_at, self.undeliverable_at, self.cancelled_at, self.expired_at, self.claimed_at, self.created_at]
            .into_iter()
            .flatten()
            .next()
    }
}

/// One row of `sessions list` (and the session `sessions attach` shows), the
/// same shape in both modes (`schemas/preloop-hooks/sessions.schema.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRow {
    /// What `notes send --session` and `sessions attach` take for this
    /// session: its harness session id when known, else its runtime id.
    pub id: String,
    pub runtime_session_id: String,
    pub external_session_id: Option<String>,
    /// The managed agent (server mode).
    pub agent_id: Option<String>,
    pub agent_name: Option<String>,
    /// The harness slug (`claude-code`, `codex`, `cursor`, …) when known.
    pub kind: Option<String>,
    /// What the hooks or the server call the kind (`claude_code`, `codex_cli`, …).
    pub agent_kind: Option<AgentKind>,
    pub alias: Option<String>,
    pub title: Option<String>,
    /// The title, or kind + working directory + start time when untitled.
    pub label: String,
    pub cwd: Option<String>,
    pub parent_session_id: Option<String>,
    pub execution_id: Option<String>,
    pub started_at: Option<Timestamp>,
    pub last_activity_at: Option<Timestamp>,
    pub ended_at: Option<Timestamp>,
    /// `live` (activity in the last 15 minutes), `idle` or `ended`.
    pub state: String,
    /// Tool calls seen (permission checks on the server; PreToolUse hooks
    /// on this machine), when known.
    pub tool_calls: Option<u64>,
    /// Model calls: through Preloop's gateway on the server, or counted in
    /// the harness transcript on this machine; `None` where not counted (a
    /// run seen only through hooks elsewhere, a transcript not read here).
    pub model_calls: Option<u64>,
    /// Approvals waiting on a human (server mode).
    pub pending_approvals: Option<u64>,
    /// Notes the session never showed its model ([`Receipt::never_shown`]),
    /// counted by `sessions list` for the rows it shows; `None` where they
    /// could not be read.
    #[serde(default)]
    pub undelivered_notes: Option<u64>,
    /// The harness transcript, when this machine has it.
    pub transcript_path: Option<String>,
}

/// A session with no activity for this long is idle.
pub const IDLE_AFTER_SECS: i64 = 15 * 60;

impl SessionRow {
    /// The `live`/`idle`/`ended` rule of both modes.
    pub fn state_of(ended: bool, last_activity: Option<Timestamp>, now: Timestamp) -> &'static str {
        if ended {
            "ended"
        } else if last_activity.is_some_and(|t| now.secs() - t.secs() <= IDLE_AFTER_SECS) {
            "live"
        } else {
            "idle"
        }
    }

    /// The order of `sessions list` in both modes: most recently active
    /// first, then most recently started, then by id.
    pub fn sort_most_recent_first(rows: &mut [SessionRow]) {
        rows.sort_by(|a, b| {
            b.last_activity_at.cmp(&a.last_activity_at).then(b.started_at.cmp(&a.started_at)).then(b.id.cmp(&a.id))
        });
    }

    /// The label of an untitled session: kind, working directory, start time
    /// (so two workers started in the same second still differ by cwd).
    pub fn label_of(title: Option<&str>, kind: Option<&str>, cwd: Option<&str>, started: Option<Timestamp>) -> String {
        if let Some(t) = title.filter(|t| !t.trim().is_empty()) {
            return t.to_string();
        }
        let mut parts = Vec::new();
        parts.push(kind.unwrap_or("session").to_string());
        if let Some(c) = cwd.filter(|c| !c.is_empty()) {
            parts.push(c.trim_end_matches('/').rsplit('/').next().filter(|b| !b.is_empty()).unwrap_or(c).to_string());
        }
        if let Some(s) = started {
            let iso = s.to_iso_z();
            parts.push(format!("{}Z", iso.chars().take(19).collect::<String>().replace('T', " ")));
        }
        parts.join(" ")
    }

    /// A row from a session file (local inbox, or this machine's view of a
    /// server-mode run).
    pub fn from_file(f: &SessionFile, last_activity: Option<Timestamp>, now: Timestamp) -> SessionRow {
        let kind = f.agent_kind.harness().map(|h| h.slug().to_string());
        let last = [Some(f.started_at), f.last_prompt_at, f.ended_at, last_activity].into_iter().flatten().max();
        // Masked again on the way out: a session file written before titles
        // were redacted still holds its first prompt as it was typed.
        let title = f.title.as_deref().map(crate::scrub::redact_text);
        SessionRow {
            id: f.external_session_id.clone(),
            runtime_session_id: f.runtime_session_id.clone(),
            external_session_id: Some(f.external_session_id.clone()),
            agent_id: None,
            agent_name: None,
            label: Self::label_of(
                title.as_deref(),
                kind.as_deref().or(Some(f.agent_kind.as_str())),
                f.cwd.as_deref(),
                Some(f.started_at),
            ),
            kind,
            agent_kind: Some(f.agent_kind.clone()),
            alias: f.alias.clone(),
            title,
            cwd: f.cwd.clone(),
            parent_session_id: f.parent_session_id.clone(),
            execution_id: None,
            started_at: Some(f.started_at),
            last_activity_at: last,
            ended_at: f.ended_at,
            state: Self::state_of(f.ended_at.is_some(), last, now).to_string(),
            tool_calls: None,
            model_calls: None,
            pending_approvals: None,
            undelivered_notes: None,
            transcript_path: f.transcript_path.clone(),
        }
    }
}

/// Which sessions `sessions list` shows. Both modes apply the same filters
/// to the rows they show ([`SessionFilter::admits`]), so a filter and the
/// column it names always say the same thing (newcomer 4, P1): the server
/// gets the filters it applies the same way as query parameters, and the
/// rows it answers are checked again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFilter {
    /// A managed agent id or display name (server mode).
    pub agent: Option<String>,
    /// A harness slug (`claude-code`, …).
    pub kind: Option<Harness>,
    /// Only sessions with activity since this time.
    pub since: Option<Timestamp>,
    /// Only sessions that have not ended.
    pub active: bool,
    /// Only the children of this runtime session id.
    pub parent: Option<String>,
    /// Only the sessions of this flow execution.
    pub execution: Option<String>,
    pub alias: Option<String>,
}

/// The refusal of `--children` when a session has none live, the same in
/// both modes (a server answers the code `no_live_children`, newcomer 4 P8).
pub fn no_live_children(parent: &str) -> String {
    format!(
        "session {parent} has no live children (`preloop-hooks sessions list --parent {parent}` shows the runs it started)"
    )
}

impl SessionFilter {
    /// Whether `row` is one this filter selects, by what its columns show:
    /// `--kind` by KIND (the session's own harness, never its managed
    /// agent's kind), `--agent` by the agent's id or its name (AGENT),
    /// `--active` by an end (STATE `ended` or not), `--since` by LAST
    /// ACTIVITY or STARTED, `--parent`, `--execution` and `--alias` by the
    /// row's own fields.
    pub fn admits(&self, row: &SessionRow) -> bool {
        let eq = |want: &Option<String>, have: &Option<String>| want.as_ref().is_none_or(|w| have.as_ref() == Some(w));
        self.kind.is_none_or(|k| row.kind.as_deref() == Some(k.slug()))
            && self.agent.as_ref().is_none_or(|a| {
                row.agent_id.as_deref() == Some(a.as_str()) || row.agent_name.as_deref() == Some(a.as_str())
            })
            && (!self.active || row.ended_at.is_none())
            && self.since.is_none_or(|s| [row.last_activity_at, row.started_at].into_iter().flatten().any(|t| t >= s))
            && eq(&self.parent, &row.parent_session_id)
            && eq(&self.execution, &row.execution_id)
            && eq(&self.alias, &row.alias)
    }
}

// ----- the server's human routes, typed (docs/contracts/preloop-server.md §5) ----------------------

/// `POST /api/v1/operator-notes` (§5.1): exactly one target field is set.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SendNoteBody {
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_session_id: Option<String>,
    /// `latest` or `all`, with `parent_session_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub next_session: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_seconds: Option<i64>,
}

/// `GET /api/v1/operator-notes` (§5.2), and `children: "all"` sends (§5.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NoteList {
    pub notes: Vec<Receipt>,
    #[serde(default)]
    pub total: Option<u64>,
}

/// What a send answers: one receipt, or a list for `children: "all"`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum SendAnswer {
    Many(NoteList),
    One(Box<Receipt>),
}

impl SendAnswer {
    pub fn into_vec(self) -> Vec<Receipt> {
        match self {
            SendAnswer::Many(l) => l.notes,
            SendAnswer::One(r) => vec![*r],
        }
    }
}

/// One item of `GET /api/v1/runtime-sessions` (§5.7), the fields we use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RuntimeSessionItem {
    pub id: String,
    pub session_source_type: Option<String>,
    pub session_source_id: Option<String>,
    pub runtime_principal_type: Option<String>,
    pub runtime_principal_id: Option<String>,
    pub runtime_principal_name: Option<String>,
    pub alias: Option<String>,
    pub parent_session_id: Option<String>,
    pub title: Option<String>,
    pub started_at: Option<Timestamp>,
    pub last_activity_at: Option<Timestamp>,
    pub ended_at: Option<Timestamp>,
    pub agent_id: Option<String>,
    pub agent_name: Option<String>,
    pub managed_agent_id: Option<String>,
    pub managed_agent_name: Option<String>,
    /// The managed agent's kind (§5.7): a harness's word, or any other.
    pub agent_kind: Option<AgentKind>,
    pub cwd: Option<String>,
    pub flow_execution_id: Option<String>,
    pub is_active_now: Option<bool>,
    pub activity_status: Option<String>,
    pub total_requests: Option<u64>,
    pub tool_call_count: Option<u64>,
    pub pending_approval_count: Option<u64>,
    pub note_count: Option<u64>,
}

impl RuntimeSessionItem {
    /// The agent's identity session (docs/contracts/preloop-server.md §3, traps 23-24): keyed on the
    /// bare agent principal, never ends, never picks up a note. Runs
    /// registered by hooks are keyed `<principal>:<harness session id>`.
    pub fn is_identity(&self) -> bool {
        let src = self.session_source_id.as_deref().unwrap_or("");
        (self.agent_id.is_some() || self.managed_agent_id.is_some())
            && !src.is_empty()
            && !src.contains(':')
            && self.runtime_principal_id.as_deref().is_none_or(|p| p == src)
            && self.parent_session_id.is_none()
    }

    /// The harness session id of a hook-registered run (after the principal).
    pub fn external_session_id(&self) -> Option<String> {
        self.session_source_id.as_deref().and_then(|s| s.split_once(':')).map(|(_, e)| e.to_string())
    }
}

/// `GET /api/v1/runtime-sessions` (§5.7).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RuntimeSessionPage {
    pub items: Vec<RuntimeSessionItem>,
    pub total: Option<u64>,
    pub has_more: bool,
}

/// `GET /api/v1/runtime-sessions/{id}` (§5.7).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RuntimeSessionDetail {
    pub session: RuntimeSessionItem,
}

/// One item of the activity timeline, newest first (§5.8).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ActivityItem {
    pub activity_id: Option<String>,
    pub activity_type: String,
    pub timestamp: Option<Timestamp>,
    pub title: Option<String>,
    pub summary: Option<String>,
    pub status: Option<String>,
    pub tool_name: Option<String>,
    pub server_name: Option<String>,
    pub total_tokens: Option<u64>,
    pub metadata: Option<serde_json::Value>,
}

/// `GET /api/v1/runtime-sessions/{id}/activity` (§5.8).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ActivityPage {
    pub items: Vec<ActivityItem>,
}

/// One managed agent of `GET /api/v1/agents` (the fields we use).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentItem {
    pub id: String,
    pub display_name: Option<String>,
    pub agent_kind: Option<AgentKind>,
}

/// `GET /api/v1/agents`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentPage {
    pub items: Vec<AgentItem>,
    pub total: Option<u64>,
}

/// A message of the attach socket (§5.9): `attached`, `error`, `pong`,
/// `heartbeat`, or whatever the server's event bus relays.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AttachMessage {
    #[serde(rename = "type")]
    pub kind: String,
    pub runtime_session_id: Option<String>,
    pub ended_at: Option<String>,
    pub error: Option<String>,
    pub detail: Option<String>,
}

/// A server error body (`{"detail": "…" | {...} | [...]}`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ErrorBody {
    pub detail: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_sessions_are_told_apart_from_runs() {
        let run = RuntimeSessionItem {
            session_source_id: Some("custom_abc:ext-1".into()),
            runtime_principal_id: Some("custom_abc:ext-1".into()),
            agent_id: Some("a".into()),
            ..Default::default()
        };
        assert!(!run.is_identity());
        assert_eq!(run.external_session_id().as_deref(), Some("ext-1"));
        let identity = RuntimeSessionItem {
            session_source_id: Some("custom_abc".into()),
            runtime_principal_id: Some("custom_abc".into()),
            agent_id: Some("a".into()),
            ..Default::default()
        };
        assert!(identity.is_identity());
    }

    #[test]
    fn a_filter_selects_by_what_the_columns_show() {
        let now = Timestamp::now();
        let row = SessionRow {
            id: "cx".into(),
            runtime_session_id: "r".into(),
            external_session_id: Some("cx".into()),
            agent_id: Some("a-1".into()),
            agent_name: Some("Hook Test Agent".into()),
            // A Codex run of a claude_code agent (newcomer 4, P1).
            kind: Some("codex".into()),
            agent_kind: Some("codex_cli".into()),
            alias: Some("w".into()),
            title: None,
            label: String::new(),
            cwd: None,
            parent_session_id: Some("p".into()),
            execution_id: None,
            started_at: Some(now.add_secs(-3 * 3600)),
            last_activity_at: Some(now.add_secs(-60)),
            ended_at: None,
            state: "live".into(),
            tool_calls: None,
            model_calls: None,
            pending_approvals: None,
            undelivered_notes: None,
            transcript_path: None,
        };
        let f = SessionFilter::default;
        assert!(f().admits(&row));
        assert!(SessionFilter { kind: Harness::from_slug("codex"), ..f() }.admits(&row));
        assert!(!SessionFilter { kind: Harness::from_slug("claude-code"), ..f() }.admits(&row), "not the agent's kind");
        assert!(SessionFilter { agent: Some("Hook Test Agent".into()), ..f() }.admits(&row));
        assert!(SessionFilter { agent: Some("a-1".into()), ..f() }.admits(&row));
        assert!(!SessionFilter { agent: Some("Other".into()), ..f() }.admits(&row));
        assert!(SessionFilter { since: Some(now.add_secs(-3600)), ..f() }.admits(&row), "active an hour ago");
        assert!(!SessionFilter { since: Some(now.add_secs(-10)), ..f() }.admits(&row));
        assert!(SessionFilter { active: true, ..f() }.admits(&row));
        let ended = SessionRow { ended_at: Some(now), state: "ended".into(), ..row.clone() };
        assert!(!SessionFilter { active: true, ..f() }.admits(&ended));
        assert!(SessionFilter { parent: Some("p".into()), ..f() }.admits(&row));
        assert!(!SessionFilter { parent: Some("q".into()), ..f() }.admits(&row));
        assert!(!SessionFilter { alias: Some("x".into()), ..f() }.admits(&row));
        assert!(!SessionFilter { execution: Some("e".into()), ..f() }.admits(&row));
    }

    #[test]
    fn a_send_answer_is_one_receipt_or_a_list() {
        let one: SendAnswer = serde_json::from_str(r#"{"note_id":"0123456789abcdef","state":"pending"}"#).unwrap();
        assert_eq!(one.into_vec().len(), 1);
        let many: SendAnswer = serde_json::from_str(
            r#"{"notes":[{"note_id":"0123456789abcdef","state":"pending"},{"note_id":"1123456789abcdef","state":"pending"}],"total":2}"#,
        )
        .unwrap();
        assert_eq!(many.into_vec().len(), 2);
    }

    #[test]
    fn receipt_states_travel_as_the_servers_words() {
        for (k, word) in ReceiptState::KNOWN.iter().zip(NOTE_STATES) {
            assert_eq!(k.as_str(), *word);
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(word));
            assert_eq!(serde_json::from_value::<ReceiptState>(serde_json::json!(word)).unwrap(), *k);
        }
        let newer: ReceiptState = serde_json::from_str(r#""superseded""#).unwrap();
        assert_eq!(newer, ReceiptState::Other("superseded".into()));
        assert_eq!(serde_json::to_string(&newer).unwrap(), r#""superseded""#);
        assert!(!newer.is_delivered() && !newer.is_lost());
    }

    #[test]
    fn untitled_sessions_are_labelled_by_kind_cwd_and_start() {
        let t = Timestamp::parse("2026-10-02T11:50:07Z");
        assert_eq!(
            SessionRow::label_of(None, Some("claude-code"), Some("/w/alpha"), t),
            "claude-code alpha 2026-10-02 11:50:07Z"
        );
        assert_eq!(SessionRow::label_of(Some("Fix it"), None, None, t), "Fix it");
    }
}
