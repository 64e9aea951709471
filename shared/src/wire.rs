//! Wire types of the Preloop server's hook routes (contract: `docs/contracts/preloop-server.md` §4, preloop 0.17.1,
//! `/api/v1/agents/*`). Requests serialize exactly the documented fields;
//! responses require the fields we act on and ignore the rest, so a newer
//! server that adds fields keeps working. The local inbox takes the same
//! request types, so both backends are driven identically.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /api/v1/agents/session-start`
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SessionStartRequest {
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook_event_name: Option<String>,
    /// Not a server field: the harness transcript, which only the local
    /// inbox's session file records.
    #[serde(skip)]
    pub transcript_path: Option<String>,
    /// Not a server field: the harness process the hooks serve, which only
    /// the session file records (lineage by process ancestry).
    #[serde(skip)]
    pub harness_process: Option<crate::process::HarnessProcess>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct SessionStartResponse {
    pub runtime_session_id: String,
    #[serde(default)]
    pub parent_session_id: Option<String>,
    #[serde(default)]
    pub started_at: Option<String>,
    #[serde(default)]
    pub created: Option<bool>,
    #[serde(default)]
    pub alias: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvaluationPhase {
    PermissionRequest,
    PreToolUse,
}

/// `POST /api/v1/agents/permission-check`
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PermissionCheckRequest {
    pub tool_name: String,
    /// Always a JSON object (the server answers 422 otherwise).
    pub tool_input: Value,
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook_event_name: Option<String>,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    pub evaluation_phase: EvaluationPhase,
    /// The flow execution the run belongs to (`PRELOOP_FLOW_EXECUTION_ID`): lets
    /// that flow's approval policy cover the call (≤ 64 characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_execution_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct PermissionCheckResponse {
    pub decision: Decision,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub request_id: Option<String>,
    #[serde(default)]
    pub operator_note: Option<String>,
    #[serde(default)]
    pub timed_out: bool,
}

/// The lifecycle point that pulled a note (recorded as `delivery_event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryEvent {
    SessionStart,
    Stop,
    PreToolUse,
}

impl DeliveryEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryEvent::SessionStart => "session_start",
            DeliveryEvent::Stop => "stop",
            DeliveryEvent::PreToolUse => "pre_tool_use",
        }
    }
}

/// `POST /api/v1/agents/notes/pending`
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PendingRequest {
    pub channel: &'static str,
    pub event: DeliveryEvent,
    pub defer_delivery: bool,
    pub session_id: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct PendingNote {
    pub note_id: String,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub envelope: Value,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct PendingResponse {
    pub notes: Vec<PendingNote>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub channel_event: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UndeliverableReason {
    SpoolDropped,
    SessionEnded,
}

impl UndeliverableReason {
    /// Its word on the wire and in a receipt.
    pub fn as_str(self) -> &'static str {
        match self {
            UndeliverableReason::SpoolDropped => "spool_dropped",
            UndeliverableReason::SessionEnded => "session_ended",
        }
    }
}

/// `POST /api/v1/agents/notes/ack`
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AckRequest {
    pub note_ids: Vec<String>,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undeliverable_reason: Option<UndeliverableReason>,
}

/// `POST /api/v1/agents/session-event` (204, fire and forget)
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SessionEventRequest {
    pub session_id: String,
    pub hook_event_name: String,
    pub source: String,
}

/// `POST /api/v1/agents/session-end`
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SessionEndRequest {
    pub external_session_id: String,
    pub reason: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct SessionEndResponse {
    #[serde(default)]
    pub runtime_session_id: Option<String>,
    #[serde(default)]
    pub marked: i64,
    /// The ids of the notes `marked` counts, where the answer names them:
    /// the local inbox does; a Preloop server (0.17.1) answers the count
    /// only (docs/contracts/preloop-server.md §4.6).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marked_note_ids: Vec<String>,
}
