//! The Preloop routes the fake serves, each mirroring the section of docs/contracts/preloop-server.md
//! cited on it (`docs/contracts/preloop-server.md`, preloop 0.17.1).
//!
//! Order of checks, as FastAPI runs them:
//! * hook routes (`/api/v1/agents/...`): body validation (422) first, then the
//!   bearer check inside the endpoint (401, §1 "validation runs before
//!   authentication");
//! * human routes: the `get_current_active_user` dependency (401/403) runs
//!   before body and query validation (422), then the permission check (403),
//!   then the handler.

use crate::http::{Request, Response};
use crate::shared_state::Shared;
use crate::state::{AUTO_APPROVED_REASON, NEVER_NOTE_SOURCES, SendTarget, State, UserContext, detail};
use crate::validate::{FieldError, Fields, Query, StrRule, json_object, parse_uuid_value, unprocessable};
use preloop_shared::time::Timestamp;
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::time::{Duration, Instant};

/// Every public note state (`state` filter of the list, §5.2).
const NOTE_STATES: &[&str] =
    &["pending", "claimed", "delivered", "acknowledged", "cancelled", "expired", "failed", "undeliverable"];

fn segments(path: &str) -> Vec<String> {
    path.split('/').filter(|s| !s.is_empty()).map(crate::http::percent_decode).collect()
}

/// §5.7-§5.9: runtime sessions, the activity timeline, the attach socket.
pub(crate) mod runtime_sessions;

type Handler = fn(&Shared, &Request, &[&str]) -> Response;

/// Dispatch one `/api/v1` request. Unknown paths are 404 `Not Found`, a
/// known path with another method is 405 `Method Not Allowed`.
pub(crate) fn api(shared: &Shared, req: &Request) -> Response {
    let segs = segments(&req.path);
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let m = req.method.as_str();
    let route: Option<(&[&str], Handler)> = match s.as_slice() {
        ["api", "v1", "health"] => Some((&["GET"], |_, _, _| health())),
        ["api", "v1", "agents", "permission-check"] => Some((&["POST"], |sh, r, _| permission_check(sh, r))),
        ["api", "v1", "agents", "session-start"] => Some((&["POST"], |sh, r, _| session_start(sh, r))),
        ["api", "v1", "agents", "session-event"] => Some((&["POST"], |sh, r, _| session_event(sh, r))),
        ["api", "v1", "agents", "session-end"] => Some((&["POST"], |sh, r, _| session_end(sh, r))),
        ["api", "v1", "agents", "notes", "pending"] => Some((&["POST"], |sh, r, _| notes_pending(sh, r))),
        ["api", "v1", "agents", "notes", "ack"] => Some((&["POST"], |sh, r, _| notes_ack(sh, r))),
        ["api", "v1", "agents"] => Some((&["GET", "POST"], |sh, r, _| {
            if r.method == "GET" { runtime_sessions::agents(sh, r) } else { create_agent(sh, r) }
        })),
        ["api", "v1", "agents", _, "credentials"] => Some((&["POST"], |sh, r, s| create_credential(sh, r, s[3]))),
        ["api", "v1", "agents", _, "credentials", _] => {
            Some((&["DELETE"], |sh, r, s| revoke_credential(sh, r, s[3], s[5])))
        }
        ["api", "v1", "agents", _, "governance"] => Some((&["PUT"], |sh, r, s| governance(sh, r, s[3]))),
        ["api", "v1", "operator-notes"] => {
            Some((
                &["GET", "POST"],
                |sh, r, _| if r.method == "POST" { send_note_http(sh, r) } else { list_notes(sh, r) },
            ))
        }
        ["api", "v1", "operator-notes", "session-targets"] => Some((&["GET"], |sh, r, _| session_targets(sh, r))),
        ["api", "v1", "operator-notes", _] => Some((&["GET"], |sh, r, s| get_note(sh, r, s[3]))),
        ["api", "v1", "operator-notes", _, "cancel"] => Some((&["POST"], |sh, r, s| cancel_note(sh, r, s[3]))),
        ["api", "v1", "runtime-sessions"] => Some((&["GET"], |sh, r, _| runtime_sessions::list(sh, r))),
        ["api", "v1", "runtime-sessions", _] => Some((&["GET"], |sh, r, s| runtime_sessions::get(sh, r, s[3]))),
        ["api", "v1", "runtime-sessions", _, "activity"] => {
            Some((&["GET"], |sh, r, s| runtime_sessions::activity(sh, r, s[3])))
        }
        ["api", "v1", "approval-requests"] => Some((&["GET"], |sh, r, _| list_approvals(sh, r))),
        ["api", "v1", "approval-requests", _] => Some((&["GET"], |sh, r, s| get_approval(sh, r, s[3]))),
        ["api", "v1", "approval-requests", _, "approve"] => {
            Some((&["POST"], |sh, r, s| decide_approval(sh, r, s[3], true)))
        }
        ["api", "v1", "approval-requests", _, "decline"] => {
            Some((&["POST"], |sh, r, s| decide_approval(sh, r, s[3], false)))
        }
        ["api", "v1", "approval-workflows"] => Some((&["POST"], |sh, r, _| create_workflow(sh, r))),
        ["api", "v1", "tool-configurations"] => Some((&["POST"], |sh, r, _| create_tool_configuration(sh, r))),
        _ => None,
    };
    match route {
        None => detail(404, "Not Found"),
        Some((methods, handler)) => {
            if methods.contains(&m) {
                handler(shared, req, &s)
            } else {
                detail(405, "Method Not Allowed").with_header("allow", &methods.join(", "))
            }
        }
    }
}

/// `GET /api/v1/health` (§1), no auth.
fn health() -> Response {
    #[derive(Serialize)]
    struct Health {
        status: &'static str,
        timestamp: String,
        database: &'static str,
        mcp_server: &'static str,
        upstream_connections: u32,
    }
    Response::json(
        200,
        &Health {
            status: "healthy",
            timestamp: Timestamp::now().to_iso_offset(),
            database: "connected",
            mcp_server: "not_applicable",
            upstream_connections: 0,
        },
    )
}

fn auth_header(req: &Request) -> Option<&str> {
    req.header("authorization")
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(resp) => return resp,
        }
    };
}

fn body_or_422(req: &Request) -> Result<Map<String, Value>, Response> {
    json_object(req).map_err(unprocessable)
}

fn check_fields(errors: Vec<FieldError>) -> Result<(), Response> {
    if errors.is_empty() { Ok(()) } else { Err(unprocessable(errors)) }
}

// ===================================================================
// Hook routes (§4)
// ===================================================================

/// §4.1 `POST /api/v1/agents/session-start`.
fn session_start(shared: &Shared, req: &Request) -> Response {
    let body = tri!(body_or_422(req));
    let mut f = Fields::body(&body);
    let session_id = f.string("session_id", true, false, StrRule::range(1, 200));
    let source = f.string("source", false, true, StrRule::max(64));
    let cwd = f.string("cwd", false, true, StrRule::max(4096));
    let parent = f.string("parent_session_id", false, true, StrRule::max(64));
    let alias = f.string("alias", false, true, StrRule::max(4096));
    let first_prompt = f.string("first_prompt", false, true, StrRule::max(20_000));
    let hook_event_name = f.string("hook_event_name", false, true, StrRule::max(64));
    tri!(check_fields(f.errors));
    let session_id = session_id.unwrap_or_default();

    let mut st = shared.lock();
    let id = tri!(st.auth_permission_group(auth_header(req)));
    let result = tri!(st.session_start(
        &id,
        &session_id,
        source.as_deref(),
        cwd.as_deref(),
        parent.as_deref(),
        alias.as_deref(),
        first_prompt.as_deref(),
        hook_event_name.as_deref(),
    ));
    let Some((s, created)) = result else {
        // Same status as body validation, but a string detail (§1).
        return detail(
            422,
            "The session id is not usable, or this credential carries no runtime principal to key the session on.",
        );
    };
    let sess = &st.sessions[s];
    #[derive(Serialize)]
    struct Out<'a> {
        runtime_session_id: &'a str,
        parent_session_id: Option<&'a str>,
        started_at: String,
        created: bool,
        alias: Option<&'a str>,
    }
    Response::json(
        200,
        &Out {
            runtime_session_id: &sess.id,
            parent_session_id: sess.parent_session_id.as_deref(),
            started_at: crate::state::naive(sess.started_at),
            created,
            alias: sess.alias.as_deref(),
        },
    )
}

/// The validated `AgentPermissionCheckRequest` (§4.2).
struct PermissionRequest {
    tool_name: String,
    tool_input: Map<String, Value>,
    source: Option<String>,
    hook_event_name: Option<String>,
    session_id: Option<String>,
    model: Option<String>,
    cwd: Option<String>,
    repository: Option<Map<String, Value>>,
    agent_reasoning: Option<String>,
    client_decision: Option<String>,
    pre_tool_use: bool,
}

fn validate_repository(f: &mut Fields<'_>) -> Option<Map<String, Value>> {
    let v = f.obj.get("repository")?.clone();
    let obj = match v {
        Value::Null => return None,
        Value::Object(o) => o,
        other => {
            let loc = f.loc("repository");
            f.errors.push(FieldError::new(
                "model_attributes_type",
                loc,
                "Input should be a valid dictionary or object to extract fields from",
                other,
                None,
            ));
            return None;
        }
    };
    let mut r = Fields::nested(&obj, f.loc("repository"));
    let mut out = Map::new();
    for (name, nullable) in [("remote", false), ("toplevel", true), ("relative_path", true), ("source", true)] {
        if let Some(s) = r.string(name, false, nullable, StrRule::max(512)) {
            if s.len() > 512 {
                let loc = r.loc(name);
                r.errors.push(FieldError::new(
                    "value_error",
                    loc,
                    "Value error, must be at most 512 bytes",
                    Value::String(s),
                    Some(json!({"error": {}})),
                ));
            } else {
                out.insert(name.to_string(), Value::String(s));
            }
        }
    }
    if obj.contains_key("no_remote") {
        let b = r.boolean("no_remote", false);
        out.insert("no_remote".into(), Value::Bool(b));
    }
    r.forbid_extra(&["remote", "toplevel", "relative_path", "source", "no_remote"]);
    let ok = r.errors.is_empty();
    f.errors.extend(r.errors);
    if ok { Some(out) } else { None }
}

fn parse_permission_request(body: &Map<String, Value>) -> Result<PermissionRequest, Response> {
    let mut f = Fields::body(body);
    let tool_name = f.string("tool_name", true, false, StrRule::ANY);
    let tool_input = f.dict("tool_input");
    let source = f.string("source", false, true, StrRule::ANY);
    let hook_event_name = f.string("hook_event_name", false, true, StrRule::max(64));
    let session_id = f.string("session_id", false, true, StrRule::max(255));
    let model = f.string("model", false, true, StrRule::max(255));
    let cwd = f.string("cwd", false, true, StrRule::ANY);
    let _flow_execution_id = f.string("flow_execution_id", false, true, StrRule::max(64));
    let repository = validate_repository(&mut f);
    let agent_reasoning = f.string("agent_reasoning", false, true, StrRule::ANY);
    let client_decision = f.string("client_decision", false, true, StrRule::ANY);
    let phase = f.literal("evaluation_phase", false, false, &["permission_request", "pre_tool_use"]);
    check_fields(f.errors)?;
    Ok(PermissionRequest {
        tool_name: tool_name.unwrap_or_default(),
        tool_input,
        source,
        hook_event_name,
        session_id,
        model,
        cwd,
        repository,
        agent_reasoning,
        client_decision,
        pre_tool_use: phase.as_deref() == Some("pre_tool_use"),
    })
}

/// §4.2 `POST /api/v1/agents/permission-check`: decision (steps 1-5), then
/// the note claim (never-note list, deferral table).
fn permission_check(shared: &Shared, req: &Request) -> Response {
    let body = tri!(body_or_422(req));
    let p = tri!(parse_permission_request(&body));
    let mut st = shared.lock();
    let id = tri!(st.auth_permission_group(auth_header(req)));

    // tool_args as stored on an approval (markers stripped, then set from
    // the validated fields only).
    let mut tool_input = p.tool_input.clone();
    for k in ["_preloop_repository", "_preloop_source", "_preloop_origin"] {
        tool_input.remove(k);
    }
    let truthy = |s: &Option<String>| s.as_deref().is_some_and(|v| !v.is_empty());
    let stripped = |s: &Option<String>| s.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
    if truthy(&p.session_id) || truthy(&p.model) {
        tool_input.insert(
            "_preloop_origin".into(),
            json!({"session_id": stripped(&p.session_id), "model": stripped(&p.model)}),
        );
    }
    // §3: the origin session is `<principal>:<session_id>` of this principal.
    // A durable credential has no current agent session in the fake, so an
    // unresolved origin means "no session".
    let origin = stripped(&p.session_id).and_then(|sid| st.own_session(&id, Some(&sid)));
    if let Some(o) = origin
        && let Some(Value::Object(orig)) = tool_input.get_mut("_preloop_origin")
    {
        orig.insert("runtime_session_id".into(), json!(st.sessions[o].id));
    }
    if let Some(cwd) = p.cwd.as_deref().filter(|c| !c.is_empty()) {
        tool_input.insert("cwd".into(), json!(cwd));
        if let Some(o) = origin {
            let v: String = cwd.trim().chars().take(1024).collect();
            if !v.is_empty() {
                st.sessions[o].cwd = Some(v);
            }
        }
    }
    if let Some(src) = stripped(&p.source) {
        tool_input.insert("_preloop_source".into(), json!(src));
    }
    if let Some(repo) = &p.repository {
        tool_input.insert("_preloop_repository".into(), Value::Object(repo.clone()));
    }

    // Decision, in the order of docs/contracts/preloop-server.md §4.2.
    let client = p.client_decision.as_deref().unwrap_or("").trim().to_lowercase();
    let (decision, reason, request_id, timed_out): (&str, String, Option<String>, bool) = if client == "deny" {
        ("deny", "Denied by client policy".into(), None, false)
    } else if st.tool_config(&id.account_id, &p.tool_name).is_some_and(|t| !t.is_enabled) {
        ("deny", "Tool blocked in Preloop".into(), None, false)
    } else if p.pre_tool_use {
        ("allow", "No central native rule requires approval".into(), None, false)
    } else if client == "allow" {
        ("allow", String::new(), None, false)
    } else {
        let approvals_off = st.agent_idx(&id.account_id, &id.agent_id).is_some_and(|a| st.agents[a].approvals_off);
        let (a, pinned_wait) = st.create_approval(
            &id,
            &p.tool_name,
            Value::Object(tool_input.clone()),
            p.agent_reasoning.clone(),
            approvals_off,
        );
        let approval_id = st.approvals[a].id.clone();
        if approvals_off {
            ("allow", AUTO_APPROVED_REASON.into(), Some(approval_id), false)
        } else {
            // Block until decided, the deadline, or the server stopping.
            let wait = pinned_wait.unwrap_or(st.approval_wait);
            let deadline =
                Instant::now().checked_add(wait).unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
            loop {
                let Some(a) = st.approvals.iter().position(|x| x.id == approval_id) else {
                    break ("deny", "Approval request not found".into(), Some(approval_id), false);
                };
                let (status, comment) = (st.approvals[a].status.clone(), st.approvals[a].approver_comment.clone());
                let comment = comment.filter(|c| !c.is_empty());
                match status.as_str() {
                    "approved" => break ("allow", comment.unwrap_or_default(), Some(approval_id), false),
                    "declined" => {
                        break ("deny", comment.unwrap_or("Approval declined".into()), Some(approval_id), false);
                    }
                    "cancelled" => {
                        break ("deny", comment.unwrap_or("Approval cancelled".into()), Some(approval_id), false);
                    }
                    "expired" => break ("deny", comment.unwrap_or("Approval expired".into()), Some(approval_id), true),
                    _ => {}
                }
                let now = Instant::now();
                if now >= deadline || shared.is_stopping() {
                    st.approvals[a].status = "expired".into();
                    break ("deny", "Approval request timed out".into(), Some(approval_id), true);
                }
                st = shared.wait_decision(st, deadline - now);
            }
        }
    };

    // The activity timeline's tool call (§4.2 side effects, §5.8): not for
    // codex_cli + permission_request, which would count twice.
    if let Some(o) = origin
        && (p.source.as_deref() != Some("codex_cli") || p.pre_tool_use)
    {
        let sizes: Map<String, Value> = p
            .tool_input
            .iter()
            .filter(|(k, _)| !k.starts_with("_preloop_"))
            .map(|(k, v)| (k.clone(), json!(v.to_string().chars().count())))
            .collect();
        let row = crate::state::ToolCallRow {
            id: crate::ids::uuid4(),
            session: o,
            at: Timestamp::now(),
            tool_name: p.tool_name.clone(),
            status: if decision == "allow" { "allowed".into() } else { "denied".into() },
            decision: decision.to_string(),
            reason: reason.clone(),
            source: p.source.clone(),
            phase: if p.pre_tool_use { "pre_tool_use".into() } else { "permission_request".into() },
            sizes,
        };
        st.tool_calls.push(row);
    }
    // The note claim happens after the decision, on allow and deny (§4.2).
    let source = p.source.as_deref();
    let defer = source == Some("copilot_cli")
        || (source == Some("codex_cli") && !p.pre_tool_use)
        || (source == Some("cursor") && p.hook_event_name.as_deref() != Some("preToolUse"));
    let mut operator_note = None;
    if !source.is_some_and(|s| NEVER_NOTE_SOURCES.contains(&s)) {
        let now = Timestamp::now();
        let claimed =
            st.claim_pending_notes(&id.account_id, Some(&id.agent_id), origin, "hook", "pre_tool_use", defer, now);
        operator_note = st.render_block(&claimed);
    }
    #[derive(Serialize)]
    struct Out {
        decision: &'static str,
        reason: String,
        request_id: Option<String>,
        operator_note: Option<String>,
        timed_out: bool,
    }
    let decision: &'static str = if decision == "allow" { "allow" } else { "deny" };
    Response::json(200, &Out { decision, reason, request_id, operator_note, timed_out })
}

/// §4.3 `POST /api/v1/agents/notes/pending`.
fn notes_pending(shared: &Shared, req: &Request) -> Response {
    let body = tri!(body_or_422(req));
    let mut f = Fields::body(&body);
    let channel = f.literal("channel", false, false, &["hook", "claude_channel", "claude_message"]);
    let defer = f.boolean("defer_delivery", false);
    let event = f.literal("event", false, false, &["session_start", "stop", "pre_tool_use"]);
    let session_id = f.string("session_id", false, true, StrRule::ANY);
    tri!(check_fields(f.errors));
    let channel = channel.unwrap_or_else(|| "hook".into());
    let event = event.unwrap_or_else(|| "pre_tool_use".into());

    let mut st = shared.lock();
    let (id, identity_session) = tri!(st.auth_runtime(auth_header(req)));
    // §3: the run session when it resolves, else the identity session.
    let session = st.own_session(&id, session_id.as_deref()).unwrap_or(identity_session);
    let now = Timestamp::now();
    let claimed =
        st.claim_pending_notes(&id.account_id, Some(&id.agent_id), Some(session), &channel, &event, defer, now);
    Response::json(200, &pending_body(&st, &claimed))
}

#[derive(Serialize)]
struct PendingNote {
    note_id: String,
    envelope: Value,
    text: String,
}

#[derive(Serialize)]
struct PendingBody {
    notes: Vec<PendingNote>,
    text: Option<String>,
    channel_event: Option<Value>,
}

/// The notes/pending answer (§4.3, §6.4): per-note elements, the framed
/// block, and the same block as a Claude channel notification.
fn pending_body(st: &State, claimed: &[usize]) -> PendingBody {
    if claimed.is_empty() {
        return PendingBody { notes: Vec::new(), text: None, channel_event: None };
    }
    let notes = claimed
        .iter()
        .map(|&i| PendingNote {
            note_id: st.notes[i].note_id.clone(),
            envelope: st.notes[i].envelope.clone(),
            text: st.note_element(i).element,
        })
        .collect();
    let block = st.render_block(claimed);
    let channel_event = block.as_ref().map(|b| {
        json!({
            "method": "notifications/claude/channel",
            "params": {"source": "preloop-operator-notes", "severity": "important", "text": b},
        })
    });
    PendingBody { notes, text: block, channel_event }
}

/// §4.4 `POST /api/v1/agents/notes/ack`: always `{"ok": true}`.
fn notes_ack(shared: &Shared, req: &Request) -> Response {
    let body = tri!(body_or_422(req));
    let mut f = Fields::body(&body);
    let note_ids = f.string_list("note_ids", 100);
    let session_id = f.string("session_id", false, true, StrRule::max(255));
    let reason = f.literal("undeliverable_reason", false, true, &["spool_dropped"]);
    tri!(check_fields(f.errors));

    let mut st = shared.lock();
    let (id, identity_session) = tri!(st.auth_runtime(auth_header(req)));
    let session = st.own_session(&id, session_id.as_deref()).unwrap_or(identity_session);
    st.acknowledge(&id, session, &note_ids, reason.is_some(), Timestamp::now());
    Response::json(200, &json!({"ok": true}))
}

/// §4.5 `POST /api/v1/agents/session-event`: 204, empty body, always.
fn session_event(shared: &Shared, req: &Request) -> Response {
    let body = tri!(body_or_422(req));
    let mut f = Fields::body(&body);
    let session_id = f.string("session_id", true, false, StrRule::range(1, 200));
    let event =
        f.literal("hook_event_name", true, false, &["Stop", "SubagentStop", "SessionEnd", "stop", "sessionEnd"]);
    let _source = f.string("source", false, true, StrRule::max(64));
    tri!(check_fields(f.errors));

    let mut st = shared.lock();
    let id = tri!(st.auth_permission_group(auth_header(req)));
    if let Some(s) = st.own_session(&id, session_id.as_deref()) {
        let now = Timestamp::now();
        match event.as_deref() {
            // Ends the session but leaves its notes pending (trap 4).
            Some("SessionEnd" | "sessionEnd") => st.end_session(s, now),
            _ => st.sessions[s].last_turn_end_at = Some(now),
        }
    }
    Response::empty(204)
}

/// §4.6 `POST /api/v1/agents/session-end`: sweep, then end.
fn session_end(shared: &Shared, req: &Request) -> Response {
    let body = tri!(body_or_422(req));
    let mut f = Fields::body(&body);
    let external = f.string("external_session_id", false, true, StrRule::max(255));
    let reason = f.string("reason", false, true, StrRule::max(255));
    tri!(check_fields(f.errors));

    let mut st = shared.lock();
    let (id, identity_session) = tri!(st.auth_runtime(auth_header(req)));
    let named = external.as_deref().map(str::trim).filter(|e| !e.is_empty());
    let session = match st.own_session(&id, named) {
        Some(s) => s,
        // An id that is not one of this principal's sessions: no-op.
        None if named.is_some() => return Response::json(200, &SessionEndOut { runtime_session_id: None, marked: 0 }),
        // Absent/empty: the identity session (durable credentials).
        None => identity_session,
    };
    let reason = reason.as_deref().map(str::trim).filter(|r| !r.is_empty()).unwrap_or("session_end").to_string();
    let now = Timestamp::now();
    let marked = st.undeliver_session_notes(&id.account_id, session, &reason, now);
    st.end_session(session, now);
    Response::json(200, &SessionEndOut { runtime_session_id: Some(&st.sessions[session].id), marked })
}

#[derive(Serialize)]
struct SessionEndOut<'a> {
    runtime_session_id: Option<&'a str>,
    marked: usize,
}

// ===================================================================
// Human routes (§5)
// ===================================================================

fn require_primary(user: &UserContext, permission: &str) -> Result<(), Response> {
    if user.primary { Ok(()) } else { Err(detail(403, &format!("Insufficient permissions. Required: {permission}"))) }
}

const CONTROL: &str = "control_managed_agent";

/// The author's auth method, derived from the header like the server's
/// `classify_author_auth_method`: no token → `session`, a stored API key →
/// `api_key`, anything else → `jwt`.
fn classify_author(st: &State, authorization: Option<&str>) -> String {
    let header = authorization.unwrap_or("");
    let token = header.split_once(' ').map(|(_, t)| t.trim()).unwrap_or("");
    if token.is_empty() {
        "session".into()
    } else if st.users.iter().any(|u| u.api_key == token) || st.credentials.iter().any(|c| c.token == token) {
        "api_key".into()
    } else {
        "jwt".into()
    }
}

/// `POST /api/v1/operator-notes` over HTTP.
fn send_note_http(shared: &Shared, req: &Request) -> Response {
    let mut st = shared.lock();
    let mut user = tri!(st.auth_user(auth_header(req)));
    user.auth_method = classify_author(&st, auth_header(req));
    let body = tri!(body_or_422(req));
    send_note(&mut st, &user, &body)
}

/// §5.1 send: validation, permission, target, rate limit, create (201).
/// Shared by the HTTP route and [`crate::FakeServer::send_note`].
pub(crate) fn send_note(st: &mut State, user: &UserContext, body: &Map<String, Value>) -> Response {
    let mut f = Fields::body(body);
    let _source = f.literal("source", false, false, &["api", "chat"]);
    let _correlation_id = f.uuid("correlation_id");
    let text = f.string("text", true, false, StrRule::range(1, 4096));
    let agent_id = f.uuid("agent_id");
    let next_session = f.boolean("next_session", false);
    let runtime_session_id = f.uuid("runtime_session_id");
    let execution_id = f.uuid("execution_id");
    let alias = f.string(
        "alias",
        false,
        true,
        StrRule {
            min: Some(1),
            max: Some(64),
            pattern: Some(("^[A-Za-z0-9._-]+$", |s| {
                s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            })),
        },
    );
    let external = f.string("external_session_id", false, true, StrRule::range(1, 200));
    let children = f.literal("children", false, true, &["latest", "all"]);
    let parent = f.uuid("parent_session_id");
    let ttl = f.int("expires_in_seconds", Some(60), Some(7 * 24 * 60 * 60));
    tri!(check_fields(f.errors));
    // The model validator (only once every field is valid).
    let present = |k: &str| body.get(k).is_some_and(|v| !v.is_null());
    let targets = ["agent_id", "runtime_session_id", "execution_id", "alias", "external_session_id", "children"];
    let model_error = if targets.iter().filter(|k| present(k)).count() != 1 {
        Some("Name exactly one of agent_id, runtime_session_id, execution_id, alias, external_session_id, children")
    } else if children.is_some() && parent.is_none() {
        Some("children requires parent_session_id")
    } else if parent.is_some() && children.is_none() {
        Some("parent_session_id is only valid with children")
    } else if next_session && agent_id.is_none() {
        Some("next_session requires agent_id")
    } else {
        None
    };
    if let Some(msg) = model_error {
        return unprocessable(vec![FieldError::value_error(Value::Object(body.clone()), msg)]);
    }
    tri!(require_primary(user, CONTROL));
    let text = text.unwrap_or_default();
    let ttl = ttl.unwrap_or(crate::state::DEFAULT_NOTE_TTL_SECONDS);

    if let Some(mode) = children {
        let parent = parent.unwrap_or_default();
        let Some(p) = st.session_idx(&user.account_id, &parent) else {
            return detail(404, "Parent session not found in this account");
        };
        let parent_id = st.sessions[p].id.clone();
        let mut kids = st.live_children(&user.account_id, &parent_id);
        if kids.is_empty() {
            return detail(404, "no_live_children");
        }
        if mode == "latest" {
            kids.truncate(1);
        }
        let mut views = Vec::new();
        for kid in kids {
            let (agent, session) = tri!(st.resolve_target(&user.account_id, &SendTarget::Session(kid)));
            let i = tri!(st.create_note(user, agent, session, &text, false, ttl));
            views.push(st.note_view(i));
        }
        if mode == "all" {
            let total = views.len();
            return Response::json(201, &NoteList { notes: views, total });
        }
        return Response::json(201, &views.remove(0));
    }

    let target = if let Some(a) = agent_id {
        SendTarget::Agent(a)
    } else if let Some(s) = runtime_session_id {
        SendTarget::Session(s)
    } else if execution_id.is_some() {
        SendTarget::Execution
    } else if let Some(a) = alias {
        SendTarget::Alias(a)
    } else {
        SendTarget::External(external.unwrap_or_default())
    };
    let (agent, session) = tri!(st.resolve_target(&user.account_id, &target));
    let session = if next_session { None } else { session };
    let i = tri!(st.create_note(user, agent, session, &text, next_session, ttl));
    Response::json(201, &st.note_view(i))
}

/// `OperatorNoteList`.
#[derive(Serialize)]
struct NoteList {
    notes: Vec<crate::state::NoteView>,
    total: usize,
}

/// §5.2 `GET /api/v1/operator-notes`: newest first, filters combine.
fn list_notes(shared: &Shared, req: &Request) -> Response {
    let mut st = shared.lock();
    let user = tri!(st.auth_user(auth_header(req)));
    let mut q = Query::new(req);
    let agent_id = q.uuid("agent_id", false);
    let session_id = q.uuid("runtime_session_id", false);
    let execution_id = q.uuid("execution_id", false);
    let limit = q.int("limit", 50, Some(1), Some(200));
    let offset = q.int("offset", 0, Some(0), None);
    let state = q.literal("state", NOTE_STATES);
    tri!(check_fields(q.errors));
    tri!(require_primary(&user, CONTROL));
    st.expire_notes(&user.account_id, Timestamp::now());
    if execution_id.is_some() {
        // No flow executions in the fake: an execution has no session yet.
        return Response::json(200, &json!({"notes": [], "total": 0}));
    }
    if agent_id.is_none() && session_id.is_none() {
        return detail(400, "Name an agent_id, runtime_session_id or execution_id");
    }
    let mut idxs: Vec<usize> = st
        .notes
        .iter()
        .enumerate()
        .filter(|(_, n)| {
            n.account_id == user.account_id
                && agent_id.as_ref().is_none_or(|a| n.agent_id.as_ref() == Some(a))
                && session_id.as_ref().is_none_or(|s| n.session_id.as_ref() == Some(s))
                && state.as_deref().is_none_or(|s| n.status.as_str() == s)
        })
        .map(|(i, _)| i)
        .collect();
    idxs.sort_by_key(|i| std::cmp::Reverse((st.notes[*i].created_at, st.notes[*i].row)));
    let total = idxs.len();
    let notes: Vec<_> = idxs.into_iter().skip(offset as usize).take(limit as usize).map(|i| st.note_view(i)).collect();
    Response::json(200, &NoteList { notes, total })
}

/// §5.3 `GET /api/v1/operator-notes/session-targets?agent_id=`.
fn session_targets(shared: &Shared, req: &Request) -> Response {
    let st = shared.lock();
    let user = tri!(st.auth_user(auth_header(req)));
    let mut q = Query::new(req);
    let agent_id = q.uuid("agent_id", true);
    let limit = q.int("limit", 100, Some(1), Some(100));
    let offset = q.int("offset", 0, Some(0), None);
    tri!(check_fields(q.errors));
    tri!(require_primary(&user, CONTROL));
    let Some(a) = st.agent_idx(&user.account_id, &agent_id.unwrap_or_default()) else {
        return detail(404, "Managed agent not found");
    };
    let agent = &st.agents[a];
    let prefix = format!("{}:", agent.principal_id);
    let mut live: Vec<&crate::state::Session> = st
        .sessions
        .iter()
        .filter(|s| {
            s.account_id == user.account_id
                && s.ended_at.is_none()
                && s.source_type == agent.principal_type
                && (s.source_id == agent.principal_id || s.source_id.starts_with(&prefix))
        })
        .collect();
    live.sort_by(|x, y| y.started_at.cmp(&x.started_at).then(y.id.cmp(&x.id)));
    let total = live.len();
    let sessions: Vec<Value> = live
        .into_iter()
        .skip(offset as usize)
        .take(limit as usize)
        .map(|s| {
            json!({
                "id": s.id,
                "alias": s.alias,
                "session_source_type": s.source_type,
                "started_at": s.started_at.to_iso_z(),
                "session_reference": null,
            })
        })
        .collect();
    Response::json(200, &json!({"sessions": sessions, "total": total}))
}

/// §5.4 `GET /api/v1/operator-notes/{note_id}`: expires stale notes first.
fn get_note(shared: &Shared, req: &Request, note_id: &str) -> Response {
    let mut st = shared.lock();
    let user = tri!(st.auth_user(auth_header(req)));
    tri!(require_primary(&user, CONTROL));
    receipt(&mut st, &user.account_id, note_id)
}

/// The receipt read (lazy expiry first, §8), shared with the Rust API.
pub(crate) fn receipt(st: &mut State, account_id: &str, note_id: &str) -> Response {
    st.expire_notes(account_id, Timestamp::now());
    match st.note_idx(account_id, note_id) {
        Some(i) => Response::json(200, &st.note_view(i)),
        None => detail(404, "Note not found"),
    }
}

/// §5.5 `POST /api/v1/operator-notes/{note_id}/cancel`: only `pending`
/// changes; anything else comes back unchanged with 200.
fn cancel_note(shared: &Shared, req: &Request, note_id: &str) -> Response {
    let mut st = shared.lock();
    let user = tri!(st.auth_user(auth_header(req)));
    tri!(require_primary(&user, CONTROL));
    let Some(i) = st.note_idx(&user.account_id, note_id) else {
        return detail(404, "Note not found");
    };
    if st.notes[i].status == crate::state::NoteStatus::Pending {
        st.notes[i].status = crate::state::NoteStatus::Cancelled;
        st.notes[i].cancelled_at = Some(Timestamp::now());
    }
    Response::json(200, &st.note_view(i))
}

// ----- approvals (§5.6) ------------------------------------------------

fn list_approvals(shared: &Shared, req: &Request) -> Response {
    let mut st = shared.lock();
    let user = tri!(st.auth_user(auth_header(req)));
    let mut q = Query::new(req);
    let status = q.string("status");
    let tool_name = q.string("tool_name");
    let limit = q.int("limit", 50, Some(1), Some(100));
    let skip = q.int("skip", 0, Some(0), None);
    tri!(check_fields(q.errors));
    tri!(require_primary(&user, "view_approvals"));
    st.expire_stale_approvals(&user.account_id);
    let mut idxs: Vec<usize> = st
        .approvals
        .iter()
        .enumerate()
        .filter(|(_, a)| {
            a.account_id == user.account_id
                && status.as_deref().is_none_or(|s| a.status == s)
                && tool_name.as_deref().is_none_or(|t| a.tool_name == t)
        })
        .map(|(i, _)| i)
        .collect();
    idxs.sort_by_key(|i| std::cmp::Reverse((st.approvals[*i].requested_at, *i)));
    let total = idxs.len();
    let items: Vec<Value> =
        idxs.into_iter().skip(skip as usize).take(limit as usize).map(|i| st.approval_view(i)).collect();
    Response::json(200, &items).with_header("x-total-count", &total.to_string())
}

fn path_uuid(name: &str, raw: &str) -> Result<String, Response> {
    parse_uuid_value(&Value::String(raw.to_string()), vec![json!("path"), json!(name)])
        .map_err(|e| unprocessable(vec![*e]))
}

fn get_approval(shared: &Shared, req: &Request, raw_id: &str) -> Response {
    let mut st = shared.lock();
    let user = tri!(st.auth_user(auth_header(req)));
    let id = tri!(path_uuid("request_id", raw_id));
    tri!(require_primary(&user, "view_approvals"));
    st.expire_stale_approvals(&user.account_id);
    match st.approvals.iter().position(|a| a.id == id && a.account_id == user.account_id) {
        Some(i) => Response::json(200, &st.approval_view(i)),
        None => detail(404, "Approval request not found"),
    }
}

fn decide_approval(shared: &Shared, req: &Request, raw_id: &str, approve: bool) -> Response {
    let mut st = shared.lock();
    let user = tri!(st.auth_user(auth_header(req)));
    let id = tri!(path_uuid("request_id", raw_id));
    // The decision body is optional: {"comment"} (or the deprecated "reason").
    let mut comment = None;
    let null_body = serde_json::from_slice::<Value>(&req.body).is_ok_and(|v| v.is_null());
    if !req.body.is_empty() && !null_body {
        let body = tri!(body_or_422(req));
        let mut f = Fields::body(&body);
        let _approved = body.get("approved").filter(|v| !v.is_null()).map(|_| f.boolean("approved", approve));
        let c = f.string("comment", false, true, StrRule::ANY);
        let r = f.string("reason", false, true, StrRule::ANY);
        tri!(check_fields(f.errors));
        comment = c.or(r);
    }
    tri!(require_primary(&user, "decide_approvals"));
    let i = tri!(st.decide(&user.account_id, &id, approve, comment));
    let view = st.approval_view(i);
    drop(st);
    shared.notify_decision();
    Response::json(200, &view)
}

// ----- agents, governance, workflows, tool configurations (§2.2, §5.6) ---

const MANAGE: &str = "manage_agents";

pub(crate) fn agent_view(st: &State, a: usize) -> Value {
    let ag = &st.agents[a];
    json!({
        "id": ag.id,
        "account_id": ag.account_id,
        "display_name": ag.display_name,
        "agent_kind": ag.agent_kind,
        "session_source_type": ag.principal_type,
        "session_source_id": ag.principal_id,
        "lifecycle_state": ag.lifecycle_state,
        "native_tool_approvals": if ag.approvals_off { "off" } else { "enforce" },
        "approval_workflow_id": ag.approval_workflow_id,
        "created_at": ag.created_at.to_iso_z(),
    })
}

pub(crate) fn credential_view(st: &State, c: usize) -> Value {
    let cr = &st.credentials[c];
    json!({
        "id": cr.id,
        "name": cr.name,
        "managed_agent_id": cr.agent_id,
        "key_prefix": cr.token.chars().take(12).collect::<String>(),
        "is_active": cr.active,
        "expires_at": cr.expires_at.map(Timestamp::to_iso_z),
        "created_at": cr.created_at.to_iso_z(),
    })
}

fn create_agent(shared: &Shared, req: &Request) -> Response {
    let mut st = shared.lock();
    let user = tri!(st.auth_user(auth_header(req)));
    let body = tri!(body_or_422(req));
    let mut f = Fields::body(&body);
    let name = f.string("display_name", true, false, StrRule::range(1, 255));
    let kind = f.string("agent_kind", false, true, StrRule::max(64));
    tri!(check_fields(f.errors));
    tri!(require_primary(&user, MANAGE));
    let a = st.add_agent(&user.account_id, &name.unwrap_or_default(), kind.as_deref().unwrap_or("claude_code"));
    Response::json(201, &agent_view(&st, a))
}

fn create_credential(shared: &Shared, req: &Request, agent_id: &str) -> Response {
    let mut st = shared.lock();
    let user = tri!(st.auth_user(auth_header(req)));
    let body = tri!(body_or_422(req));
    let mut f = Fields::body(&body);
    let name = f.string("name", false, true, StrRule::max(255));
    let days = f.int("expires_in_days", Some(1), Some(3650));
    tri!(check_fields(f.errors));
    tri!(require_primary(&user, MANAGE));
    let Some(a) = st.agent_idx(&user.account_id, agent_id) else {
        return detail(404, "Managed agent not found");
    };
    let c = st.add_credential(a, &user.user_id, name.as_deref().unwrap_or("hooks"), days.unwrap_or(365));
    let token = st.credentials[c].token.clone();
    Response::json(201, &json!({"credential": credential_view(&st, c), "token": token}))
}

fn revoke_credential(shared: &Shared, req: &Request, agent_id: &str, credential_id: &str) -> Response {
    let mut st = shared.lock();
    let user = tri!(st.auth_user(auth_header(req)));
    tri!(require_primary(&user, MANAGE));
    let Some(c) = st
        .credentials
        .iter()
        .position(|c| c.account_id == user.account_id && c.agent_id == agent_id && c.id == credential_id)
    else {
        return detail(404, "Credential not found");
    };
    st.credentials[c].active = false;
    Response::json(200, &credential_view(&st, c))
}

fn governance(shared: &Shared, req: &Request, agent_id: &str) -> Response {
    let mut st = shared.lock();
    let user = tri!(st.auth_user(auth_header(req)));
    let body = tri!(body_or_422(req));
    let mut f = Fields::body(&body);
    let mode = f.literal("native_tool_approvals", false, true, &["off", "enforce"]);
    let workflow = f.uuid("approval_workflow_id");
    tri!(check_fields(f.errors));
    tri!(require_primary(&user, MANAGE));
    let Some(a) = st.agent_idx(&user.account_id, agent_id) else {
        return detail(404, "Managed agent not found");
    };
    if let Some(w) = &workflow
        && !st.workflows.iter().any(|x| x.account_id == user.account_id && &x.id == w)
    {
        return detail(404, "Approval workflow not found");
    }
    if let Some(m) = mode {
        st.agents[a].approvals_off = m == "off";
    }
    if body.contains_key("approval_workflow_id") {
        st.agents[a].approval_workflow_id = workflow;
    }
    let ag = &st.agents[a];
    Response::json(
        200,
        &json!({
            "managed_agent_id": ag.id,
            "native_tool_approvals": if ag.approvals_off { "off" } else { "enforce" },
            "approval_workflow_id": ag.approval_workflow_id,
        }),
    )
}

fn create_workflow(shared: &Shared, req: &Request) -> Response {
    let mut st = shared.lock();
    let user = tri!(st.auth_user(auth_header(req)));
    let body = tri!(body_or_422(req));
    let mut f = Fields::body(&body);
    let name = f.string("name", true, false, StrRule::range(1, 255));
    let kind = f.string("approval_type", false, true, StrRule::max(64));
    let timeout = f.int("timeout_seconds", Some(1), None);
    tri!(check_fields(f.errors));
    tri!(require_primary(&user, MANAGE));
    let wf = crate::state::Workflow {
        id: crate::ids::uuid4(),
        account_id: user.account_id.clone(),
        name: name.unwrap_or_default(),
        approval_type: kind.unwrap_or_else(|| "standard".into()),
        timeout_seconds: timeout.unwrap_or(300),
    };
    let out = json!({
        "id": wf.id, "account_id": wf.account_id, "name": wf.name,
        "approval_type": wf.approval_type, "timeout_seconds": wf.timeout_seconds,
    });
    st.workflows.push(wf);
    Response::json(201, &out)
}

fn create_tool_configuration(shared: &Shared, req: &Request) -> Response {
    let mut st = shared.lock();
    let user = tri!(st.auth_user(auth_header(req)));
    let body = tri!(body_or_422(req));
    let mut f = Fields::body(&body);
    let tool_name = f.string("tool_name", true, false, StrRule::range(1, 255));
    let tool_source = f.string("tool_source", false, true, StrRule::max(64));
    let enabled = f.boolean("is_enabled", true);
    tri!(check_fields(f.errors));
    tri!(require_primary(&user, MANAGE));
    let (name, source) = (tool_name.unwrap_or_default(), tool_source.unwrap_or_else(|| "agent".into()));
    let i = match st
        .tool_configs
        .iter()
        .position(|t| t.account_id == user.account_id && t.tool_name == name && t.tool_source == source)
    {
        Some(i) => {
            st.tool_configs[i].is_enabled = enabled;
            i
        }
        None => {
            st.tool_configs.push(crate::state::ToolConfig {
                id: crate::ids::uuid4(),
                account_id: user.account_id.clone(),
                tool_name: name,
                tool_source: source,
                is_enabled: enabled,
            });
            st.tool_configs.len() - 1
        }
    };
    let t = &st.tool_configs[i];
    Response::json(
        201,
        &json!({"id": t.id, "account_id": t.account_id, "tool_name": t.tool_name, "tool_source": t.tool_source, "is_enabled": t.is_enabled}),
    )
}
