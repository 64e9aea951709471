//! The fake's data and the contract's algorithms over it (docs/contracts/preloop-server.md §11's
//! "minimal state"): accounts, users, managed agents, credentials, runtime
//! sessions, notes, tool configurations, approval workflows and approval
//! requests. Everything is account-scoped like the server: an id from another
//! account resolves to nothing.

use crate::http::Response;
use crate::ids;
use preloop_shared::render::{NoteElement, frame, render_element};
use preloop_shared::time::Timestamp;
use serde::Serialize;
use serde_json::{Value, json};
use std::time::Duration;

/// §9: notes per claim / per rendered block.
pub(crate) const MAX_NOTES_PER_DELIVERY: usize = 5;
/// §9: default note lifetime.
pub(crate) const DEFAULT_NOTE_TTL_SECONDS: i64 = 86_400;
/// §9: send rate limit per rolling hour.
pub(crate) const NOTE_RATE_LIMIT_PER_HOUR: u32 = 20;
/// §9: harness session id length.
pub(crate) const SESSION_ID_MAX_LEN: usize = 200;
/// §5.1 `children`: at most this many live children.
const MAX_CHILDREN_FANOUT: usize = 20;
/// §4.2: sources that never get an `operator_note` on permission-check.
pub(crate) const NEVER_NOTE_SOURCES: &[&str] =
    &["opencode", "pi", "deepseek", "hermes", "openclaw", "nanobot", "devin_cli", "copilot_cli"];
/// §4.2 step 5: the reason of an auto-approved escalation.
pub(crate) const AUTO_APPROVED_REASON: &str = "Auto-approved without review: native tool approvals are switched off for this agent in Preloop's governance settings";
/// §2.1: the 403 body an MCP-only (runtime) key gets on a human route.
pub(crate) const SCOPE_DENIED_MESSAGE: &str =
    "This API key is limited to MCP scopes and cannot call this endpoint. Use a personal API key or a console session.";
/// Default escalation wait: workflow `timeout_seconds` (300) + the 2 s poll.
pub(crate) const DEFAULT_APPROVAL_WAIT: Duration = Duration::from_secs(302);

pub(crate) struct User {
    pub id: String,
    pub account_id: String,
    pub username: String,
    pub full_name: Option<String>,
    pub email: String,
    /// The account's registrant: the only user allowed to send notes (§2.2).
    pub primary: bool,
    pub api_key: String,
    pub jwt: String,
}

impl User {
    /// §5.1: `author.display` = full name, else username, else email.
    pub fn display(&self) -> String {
        self.full_name
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| if self.username.is_empty() { self.email.clone() } else { self.username.clone() })
    }
}

pub(crate) struct Agent {
    pub id: String,
    pub account_id: String,
    pub display_name: String,
    pub agent_kind: String,
    /// `session_source_type` / `session_source_id`: the runtime principal
    /// (`custom`, `custom_<22>`) of its durable credentials (§2.1).
    pub principal_type: String,
    pub principal_id: String,
    /// `active`, `suspended`, `decommissioned`.
    pub lifecycle_state: String,
    /// §4.2 step 5: `native_tool_approvals: "off"`.
    pub approvals_off: bool,
    pub approval_workflow_id: Option<String>,
    pub created_at: Timestamp,
}

pub(crate) struct Credential {
    pub id: String,
    pub account_id: String,
    pub agent_id: String,
    pub user_id: String,
    pub name: String,
    pub token: String,
    pub active: bool,
    pub expires_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

pub(crate) struct Session {
    pub id: String,
    pub account_id: String,
    pub agent_id: Option<String>,
    /// The row's key: (`session_source_type`, `session_source_id`).
    pub source_type: String,
    pub source_id: String,
    pub principal_type: String,
    pub principal_id: String,
    pub started_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    pub alias: Option<String>,
    pub cwd: Option<String>,
    pub parent_session_id: Option<String>,
    pub principal_name: Option<String>,
    pub title: Option<String>,
    pub last_turn_end_at: Option<Timestamp>,
    pub last_prompt_at: Option<Timestamp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoteStatus {
    Pending,
    Claimed,
    Delivered,
    Cancelled,
    Expired,
    Undeliverable,
}

impl NoteStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NoteStatus::Pending => "pending",
            NoteStatus::Claimed => "claimed",
            NoteStatus::Delivered => "delivered",
            NoteStatus::Cancelled => "cancelled",
            NoteStatus::Expired => "expired",
            NoteStatus::Undeliverable => "undeliverable",
        }
    }
}

pub(crate) struct Note {
    /// Insertion order: the row id that breaks `created_at` ties.
    pub row: u64,
    pub note_id: String,
    pub account_id: String,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub next_session: bool,
    pub body: String,
    pub author_user_id: String,
    pub author_display: String,
    pub auth_method: String,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub status: NoteStatus,
    pub claimed_at: Option<Timestamp>,
    pub delivered_at: Option<Timestamp>,
    pub delivery_channel: Option<String>,
    pub delivery_event: Option<String>,
    pub undeliverable_reason: Option<String>,
    pub undeliverable_at: Option<Timestamp>,
    pub cancelled_at: Option<Timestamp>,
    pub expired_at: Option<Timestamp>,
    pub last_error: Option<String>,
    pub envelope: Value,
}

pub(crate) struct ToolConfig {
    pub id: String,
    pub account_id: String,
    pub tool_name: String,
    pub tool_source: String,
    pub is_enabled: bool,
}

pub(crate) struct Workflow {
    pub id: String,
    pub account_id: String,
    pub name: String,
    pub approval_type: String,
    pub timeout_seconds: i64,
}

pub(crate) struct Approval {
    pub id: String,
    pub account_id: String,
    pub tool_configuration_id: String,
    pub approval_workflow_id: String,
    pub tool_name: String,
    pub tool_args: Value,
    pub agent_reasoning: Option<String>,
    pub status: String,
    pub requested_at: Timestamp,
    pub resolved_at: Option<Timestamp>,
    pub expires_at: Option<Timestamp>,
    pub approver_comment: Option<String>,
    pub managed_agent_id: Option<String>,
    pub managed_agent_name: Option<String>,
    pub api_key_id: Option<String>,
    pub auto_approved_reason: Option<String>,
}

/// One permission check on a session's activity timeline (§5.8): only the
/// sizes of the tool arguments are kept, never their values.
pub(crate) struct ToolCallRow {
    pub id: String,
    pub session: usize,
    pub at: Timestamp,
    pub tool_name: String,
    pub status: String,
    pub decision: String,
    pub reason: String,
    pub source: Option<String>,
    pub phase: String,
    pub sizes: serde_json::Map<String, Value>,
}

/// Everything the fake knows.
pub(crate) struct State {
    /// The activity timeline's tool calls (§5.8).
    pub tool_calls: Vec<ToolCallRow>,
    pub users: Vec<User>,
    pub agents: Vec<Agent>,
    pub credentials: Vec<Credential>,
    pub sessions: Vec<Session>,
    pub notes: Vec<Note>,
    pub tool_configs: Vec<ToolConfig>,
    pub workflows: Vec<Workflow>,
    pub approvals: Vec<Approval>,
    next_row: u64,
    /// How long an escalation without a pinned workflow blocks.
    pub approval_wait: Duration,
    /// Send rate limit per rolling hour; `None` disables it (a fake-only knob).
    pub rate_limit: Option<u32>,
}

/// 401 with `WWW-Authenticate: Bearer` and a string detail (§2.3).
pub(crate) fn unauthorized(detail: &str) -> Response {
    Response::json(401, &json!({ "detail": detail })).with_header("www-authenticate", "Bearer")
}

pub(crate) fn detail(status: u16, detail: &str) -> Response {
    Response::json(status, &json!({ "detail": detail }))
}

/// A credential presented on a hook route, after authentication.
#[derive(Clone)]
pub(crate) struct HookIdentity {
    pub account_id: String,
    pub credential_id: String,
    pub agent_id: String,
    pub agent_name: String,
    pub principal_type: String,
    pub principal_id: String,
}

/// A user presented on a human route, after authentication.
#[derive(Clone)]
pub(crate) struct UserContext {
    pub user_idx: usize,
    pub account_id: String,
    pub user_id: String,
    pub primary: bool,
    /// How the author authenticated (§5.1): `api_key`, `jwt` or `session`.
    pub auth_method: String,
}

enum KeyRef {
    User(usize),
    Credential(usize),
}

/// `_SESSION_ID_RE` + length: 1-200 chars of `[A-Za-z0-9_.:-]` after trim (§3).
pub(crate) fn normalize_session_id(raw: &str) -> Option<String> {
    let c = raw.trim();
    if c.is_empty()
        || c.chars().count() > SESSION_ID_MAX_LEN
        || !c.chars().all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | ':' | '-'))
    {
        return None;
    }
    Some(c.to_string())
}

/// §4.1: every char outside `[A-Za-z0-9._-]` becomes `-`, cut to 64.
pub(crate) fn sanitize_alias(raw: &str) -> Option<String> {
    let s: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .take(64)
        .collect();
    if s.is_empty() { None } else { Some(s) }
}

/// Naive ISO form (no offset), Python `isoformat()` of a naive datetime.
pub(crate) fn naive(t: Timestamp) -> String {
    let mut s = t.to_iso_z();
    s.pop();
    s
}

/// Python's `str.split()` + `" ".join(...)`-free label helper: basename of a path.
fn basename(path: &str) -> &str {
    path.trim_end_matches('/').rsplit('/').next().unwrap_or("")
}

impl State {
    pub fn new() -> State {
        State {
            tool_calls: Vec::new(),
            users: Vec::new(),
            agents: Vec::new(),
            credentials: Vec::new(),
            sessions: Vec::new(),
            notes: Vec::new(),
            tool_configs: Vec::new(),
            workflows: Vec::new(),
            approvals: Vec::new(),
            next_row: 1,
            approval_wait: DEFAULT_APPROVAL_WAIT,
            rate_limit: Some(NOTE_RATE_LIMIT_PER_HOUR),
        }
    }

    // ----- provisioning -------------------------------------------------

    /// A new account with its registrant (primary user). Returns the user index.
    pub fn add_account(&mut self, username: &str, full_name: &str) -> usize {
        let account_id = ids::uuid4();
        self.add_user(&account_id, username, full_name, true)
    }

    pub fn add_user(&mut self, account_id: &str, username: &str, full_name: &str, primary: bool) -> usize {
        let id = ids::uuid4();
        let exp = Timestamp::now().add_secs(86_400).secs();
        self.users.push(User {
            jwt: ids::user_jwt(&id, exp),
            id,
            account_id: account_id.to_string(),
            username: username.to_string(),
            full_name: if full_name.is_empty() { None } else { Some(full_name.to_string()) },
            email: format!("{username}@example.com"),
            primary,
            api_key: ids::personal_api_key(),
        });
        self.users.len() - 1
    }

    /// `POST /api/v1/agents`: a managed agent whose principal is `custom_<22>`.
    pub fn add_agent(&mut self, account_id: &str, display_name: &str, agent_kind: &str) -> usize {
        self.agents.push(Agent {
            id: ids::uuid4(),
            account_id: account_id.to_string(),
            display_name: display_name.to_string(),
            agent_kind: agent_kind.to_string(),
            principal_type: "custom".into(),
            principal_id: ids::custom_principal_id(),
            lifecycle_state: "active".into(),
            approvals_off: false,
            approval_workflow_id: None,
            created_at: Timestamp::now(),
        });
        self.agents.len() - 1
    }

    /// `POST /api/v1/agents/{id}/credentials`: a durable `agt_` credential.
    pub fn add_credential(&mut self, agent_idx: usize, user_id: &str, name: &str, expires_in_days: i64) -> usize {
        let now = Timestamp::now();
        let agent = &self.agents[agent_idx];
        self.credentials.push(Credential {
            id: ids::uuid4(),
            account_id: agent.account_id.clone(),
            agent_id: agent.id.clone(),
            user_id: user_id.to_string(),
            name: name.to_string(),
            token: ids::runtime_token(),
            active: true,
            expires_at: Some(now.add_secs(expires_in_days * 86_400)),
            created_at: now,
        });
        self.credentials.len() - 1
    }

    pub fn primary_user_of(&self, account_id: &str) -> Option<usize> {
        self.users.iter().position(|u| u.account_id == account_id && u.primary)
    }

    pub fn agent_idx(&self, account_id: &str, agent_id: &str) -> Option<usize> {
        self.agents.iter().position(|a| a.account_id == account_id && a.id == agent_id)
    }

    pub fn agent_by_id(&self, agent_id: &str) -> Option<usize> {
        self.agents.iter().position(|a| a.id == agent_id)
    }

    pub fn session_idx(&self, account_id: &str, session_id: &str) -> Option<usize> {
        self.sessions.iter().position(|s| s.account_id == account_id && s.id == session_id)
    }

    pub fn note_idx(&self, account_id: &str, note_id: &str) -> Option<usize> {
        self.notes.iter().position(|n| n.account_id == account_id && n.note_id == note_id)
    }

    // ----- authentication (§2.3) ------------------------------------------

    fn key(&self, token: &str) -> Option<KeyRef> {
        if token.is_empty() {
            return None;
        }
        if let Some(i) = self.credentials.iter().position(|c| c.token == token) {
            return Some(KeyRef::Credential(i));
        }
        self.users.iter().position(|u| u.api_key == token).map(KeyRef::User)
    }

    /// `_authenticate_with_api_key`: the checks every key goes through.
    fn authenticate_key(&self, key: Option<&KeyRef>) -> Result<usize, Response> {
        match key {
            None => Err(unauthorized("Invalid API key")),
            Some(KeyRef::User(u)) => Ok(*u),
            Some(KeyRef::Credential(c)) => {
                let cred = &self.credentials[*c];
                if !cred.active {
                    return Err(unauthorized("API key is inactive"));
                }
                if cred.expires_at.is_some_and(|e| e <= Timestamp::now()) {
                    return Err(unauthorized("API key has expired"));
                }
                let agent = match self.agent_idx(&cred.account_id, &cred.agent_id) {
                    Some(a) => &self.agents[a],
                    None => return Err(unauthorized("Managed agent credential is invalid")),
                };
                if agent.lifecycle_state != "active" {
                    return Err(unauthorized("Managed agent is not active"));
                }
                self.users
                    .iter()
                    .position(|u| u.id == cred.user_id)
                    .ok_or_else(|| unauthorized("User associated with API key not found"))
            }
        }
    }

    fn identity_for(&self, c: usize) -> HookIdentity {
        let cred = &self.credentials[c];
        let agent =
            &self.agents[self.agent_idx(&cred.account_id, &cred.agent_id).expect("checked by authenticate_key")];
        HookIdentity {
            account_id: cred.account_id.clone(),
            credential_id: cred.id.clone(),
            agent_id: agent.id.clone(),
            agent_name: agent.display_name.clone(),
            principal_type: agent.principal_type.clone(),
            principal_id: agent.principal_id.clone(),
        }
    }

    /// The `Bearer` check shared by all six hook routes: the token, or 401
    /// `Runtime bearer token required`.
    pub fn bearer(authorization: Option<&str>) -> Result<String, Response> {
        match authorization {
            Some(h) if h.to_lowercase().starts_with("bearer ") => {
                Ok(h.split_once(' ').map(|(_, t)| t).unwrap_or("").trim().to_string())
            }
            _ => Err(unauthorized("Runtime bearer token required")),
        }
    }

    /// permission-check, session-start, session-event
    /// (`_resolve_permission_identity`).
    pub fn auth_permission_group(&self, authorization: Option<&str>) -> Result<HookIdentity, Response> {
        let token = State::bearer(authorization)?;
        let key = self.key(&token);
        self.authenticate_key(key.as_ref())?;
        match key {
            Some(KeyRef::Credential(c)) => Ok(self.identity_for(c)),
            _ => Err(unauthorized("Token is not bound to a managed agent or active flow execution")),
        }
    }

    /// notes/pending, notes/ack, session-end
    /// (`authenticate_runtime_bearer_token`): also upserts, and reopens if
    /// ended, the agent's identity session (§3). Returns it with the identity.
    pub fn auth_runtime(&mut self, authorization: Option<&str>) -> Result<(HookIdentity, usize), Response> {
        let token = State::bearer(authorization)?;
        if token.is_empty() || token.contains('.') {
            return Err(unauthorized("Runtime bearer token required"));
        }
        let key = self.key(&token);
        self.authenticate_key(key.as_ref())?;
        let identity = match key {
            Some(KeyRef::Credential(c)) => self.identity_for(c),
            _ => return Err(unauthorized("Runtime bearer token is not bound to a managed agent")),
        };
        let session = self.upsert_identity_session(&identity);
        Ok((identity, session))
    }

    /// Human routes (`get_current_user` behind `OAuth2PasswordBearer`).
    pub fn auth_user(&self, authorization: Option<&str>) -> Result<UserContext, Response> {
        let not_authenticated = || unauthorized("Not authenticated");
        let header = authorization.ok_or_else(not_authenticated)?;
        let (scheme, param) = header.split_once(' ').unwrap_or((header, ""));
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(not_authenticated());
        }
        let token = param;
        let ctx = |u: usize, method: &str| {
            let user = &self.users[u];
            UserContext {
                user_idx: u,
                account_id: user.account_id.clone(),
                user_id: user.id.clone(),
                primary: user.primary,
                auth_method: method.to_string(),
            }
        };
        if !token.is_empty() && !token.contains('.') {
            if let Some(key) = self.key(token) {
                let u = self.authenticate_key(Some(&key))?;
                if let KeyRef::Credential(_) = key {
                    // Runtime credentials carry MCP-only scopes (§2.1).
                    return Err(Response::json(
                        403,
                        &json!({"detail": {"code": "api_key_scope_denied", "message": SCOPE_DENIED_MESSAGE}}),
                    ));
                }
                return Ok(ctx(u, "api_key"));
            }
            return Err(unauthorized("Invalid authentication token"));
        }
        if let Some(u) = self.users.iter().position(|u| !token.is_empty() && u.jwt == token) {
            return Ok(ctx(u, "jwt"));
        }
        if token.contains('.') {
            return Err(unauthorized("Invalid API key"));
        }
        Err(unauthorized("Invalid authentication token"))
    }

    // ----- sessions (§3) --------------------------------------------------

    /// `<principal>:<external id>` owned by this principal, if registered.
    pub fn own_session(&self, id: &HookIdentity, external: Option<&str>) -> Option<usize> {
        let ext = normalize_session_id(external?)?;
        let qualified = format!("{}:{}", id.principal_id, ext);
        self.sessions.iter().position(|s| {
            s.account_id == id.account_id
                && s.source_type == id.principal_type
                && s.source_id == qualified
                && s.principal_type == id.principal_type
                && (s.principal_id == id.principal_id || s.principal_id == qualified)
        })
    }

    /// The agent's identity session, keyed on the bare principal; created,
    /// or reopened (`started_at` reset) when ended.
    pub fn upsert_identity_session(&mut self, id: &HookIdentity) -> usize {
        let now = Timestamp::now();
        if let Some(i) = self.sessions.iter().position(|s| {
            s.account_id == id.account_id && s.source_type == id.principal_type && s.source_id == id.principal_id
        }) {
            let s = &mut self.sessions[i];
            if s.ended_at.is_some() {
                s.ended_at = None;
                s.started_at = now;
            }
            return i;
        }
        self.sessions.push(Session {
            id: ids::uuid4(),
            account_id: id.account_id.clone(),
            agent_id: Some(id.agent_id.clone()),
            source_type: id.principal_type.clone(),
            source_id: id.principal_id.clone(),
            principal_type: id.principal_type.clone(),
            principal_id: id.principal_id.clone(),
            started_at: now,
            ended_at: None,
            alias: None,
            cwd: None,
            parent_session_id: None,
            principal_name: Some(id.agent_name.clone()),
            title: None,
            last_turn_end_at: None,
            last_prompt_at: None,
        });
        self.sessions.len() - 1
    }

    /// Aliases held by other live sessions in `s`'s namespace (same parent,
    /// or same principal when there is no parent).
    fn taken_aliases(&self, s: usize, principal_type: &str, principal_id: &str) -> Vec<String> {
        let me = &self.sessions[s];
        let prefix = format!("{principal_id}:");
        self.sessions
            .iter()
            .enumerate()
            .filter(|(i, o)| {
                *i != s
                    && o.account_id == me.account_id
                    && o.ended_at.is_none()
                    && o.alias.is_some()
                    && match &me.parent_session_id {
                        Some(p) => o.parent_session_id.as_deref() == Some(p.as_str()),
                        None => {
                            o.parent_session_id.is_none()
                                && o.source_type == principal_type
                                && o.source_id.starts_with(&prefix)
                        }
                    }
            })
            .filter_map(|(_, o)| o.alias.clone())
            .collect()
    }

    /// `assign_spawn_alias`: write-once, `-2`, `-3`... on a clash; a resumed
    /// session whose alias is now held by another live session is a 409.
    fn assign_alias(
        &mut self,
        s: usize,
        alias: Option<&str>,
        principal_type: &str,
        principal_id: &str,
    ) -> Result<(), Response> {
        if self.sessions[s].alias.is_none() && alias.is_none() {
            return Ok(());
        }
        let taken = self.taken_aliases(s, principal_type, principal_id);
        if let Some(existing) = &self.sessions[s].alias {
            if taken.contains(existing) {
                return Err(detail(
                    409,
                    "This session alias is already active in its namespace; end the other run before resuming.",
                ));
            }
            return Ok(());
        }
        let alias = alias.unwrap_or_default().to_string();
        let mut candidate = alias.clone();
        let mut number = 2;
        while taken.contains(&candidate) {
            let suffix = format!("-{number}");
            let keep = 64usize.saturating_sub(suffix.len());
            candidate = format!("{}{}", alias.chars().take(keep).collect::<String>(), suffix);
            number += 1;
        }
        self.sessions[s].alias = Some(candidate);
        Ok(())
    }

    /// §4.1 `register_session_start`. `Ok(None)` = unusable id (422).
    #[allow(clippy::too_many_arguments)]
    pub fn session_start(
        &mut self,
        id: &HookIdentity,
        external: &str,
        source: Option<&str>,
        cwd: Option<&str>,
        parent: Option<&str>,
        alias: Option<&str>,
        first_prompt: Option<&str>,
        hook_event_name: Option<&str>,
    ) -> Result<Option<(usize, bool)>, Response> {
        let Some(ext) = normalize_session_id(external) else { return Ok(None) };
        let alias = alias.and_then(sanitize_alias);
        let qualified = format!("{}:{}", id.principal_id, ext);
        let mut parent_id = parent
            .and_then(|p| crate::validate::parse_uuid(p.trim()).ok())
            .and_then(|p| self.session_idx(&id.account_id, &p))
            .map(|i| self.sessions[i].id.clone());
        let existing = self.sessions.iter().position(|s| {
            s.account_id == id.account_id && s.source_type == id.principal_type && s.source_id == qualified
        });
        if let Some(e) = existing {
            if parent_id.as_deref() == Some(self.sessions[e].id.as_str()) {
                parent_id = None;
            }
            if self.sessions[e].alias.is_some() {
                if parent_id.is_some() && self.sessions[e].parent_session_id.is_none() {
                    self.sessions[e].parent_session_id = parent_id.clone();
                }
                self.assign_alias(e, alias.as_deref(), &id.principal_type, &id.principal_id)?;
            }
        }
        let now = Timestamp::now();
        let s = match existing {
            Some(e) => {
                let sess = &mut self.sessions[e];
                if parent_id.is_some() && sess.parent_session_id.is_none() {
                    sess.parent_session_id = parent_id.clone();
                }
                if sess.ended_at.is_some() {
                    // Reopen: same id, ended_at cleared, started_at reset.
                    sess.ended_at = None;
                    sess.started_at = now;
                }
                e
            }
            None => {
                self.sessions.push(Session {
                    id: ids::uuid4(),
                    account_id: id.account_id.clone(),
                    agent_id: Some(id.agent_id.clone()),
                    source_type: id.principal_type.clone(),
                    source_id: qualified.clone(),
                    principal_type: id.principal_type.clone(),
                    principal_id: qualified.clone(),
                    started_at: now,
                    ended_at: None,
                    alias: None,
                    cwd: None,
                    parent_session_id: parent_id.clone(),
                    principal_name: None,
                    title: None,
                    last_turn_end_at: None,
                    last_prompt_at: None,
                });
                self.sessions.len() - 1
            }
        };
        {
            let sess = &mut self.sessions[s];
            let cwd = cwd.map(str::trim).filter(|c| !c.is_empty());
            if let Some(c) = cwd
                && sess.cwd.is_none()
            {
                sess.cwd = Some(c.chars().take(1024).collect());
            }
            if sess.principal_name.is_none() {
                let kind = source.map(str::trim).filter(|k| !k.is_empty()).unwrap_or(&id.principal_type);
                let label = match sess.cwd.as_deref().map(basename).filter(|b| !b.is_empty()) {
                    Some(b) => format!("{kind} in {b}"),
                    None => id.agent_name.clone(),
                };
                sess.principal_name = Some(label);
            }
        }
        self.assign_alias(s, alias.as_deref(), &id.principal_type, &id.principal_id)?;
        let sess = &mut self.sessions[s];
        if sess.title.is_none() {
            // Only a short one-line title is kept, never the prompt.
            let title = sess.alias.clone().or_else(|| {
                first_prompt
                    .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
                    .filter(|p| !p.is_empty())
                    .map(|p| p.chars().take(120).collect())
            });
            sess.title = title;
        }
        if matches!(hook_event_name.map(str::trim), Some("UserPromptSubmit" | "beforeSubmitPrompt")) {
            sess.last_prompt_at = Some(now);
        }
        Ok(Some((s, existing.is_none())))
    }

    // ----- notes (§4.3, §4.4, §4.6, §8) -----------------------------------

    /// `expire_notes`: pending/claimed past `expires_at` → expired (§8,
    /// lazy: run by receipt reads, the list and acks).
    pub fn expire_notes(&mut self, account_id: &str, now: Timestamp) -> usize {
        let mut n = 0;
        for note in self.notes.iter_mut().filter(|n| n.account_id == account_id) {
            if matches!(note.status, NoteStatus::Pending | NoteStatus::Claimed) && note.expires_at <= now {
                note.status = NoteStatus::Expired;
                note.expired_at = Some(now);
                n += 1;
            }
        }
        n
    }

    /// §4.3 claim query + guarded claim, atomically (the caller holds the
    /// lock, so two concurrent pulls never both get a note). Returns note
    /// indices, oldest first.
    #[allow(clippy::too_many_arguments)]
    pub fn claim_pending_notes(
        &mut self,
        account_id: &str,
        agent_id: Option<&str>,
        session: Option<usize>,
        channel: &str,
        event: &str,
        defer: bool,
        now: Timestamp,
    ) -> Vec<usize> {
        if agent_id.is_none() && session.is_none() {
            return Vec::new();
        }
        let session_id = session.map(|s| self.sessions[s].id.clone());
        let session_started = session.map(|s| self.sessions[s].started_at);
        let mut candidates: Vec<usize> = self
            .notes
            .iter()
            .enumerate()
            .filter(|(_, n)| {
                n.account_id == account_id
                    && n.status == NoteStatus::Pending
                    && n.expires_at > now
                    && ((session_id.is_some() && n.session_id == session_id)
                        || (agent_id.is_some() && n.agent_id.as_deref() == agent_id && n.session_id.is_none()))
                    // next_session: only a session started after the note.
                    && (!n.next_session || session_started.is_some_and(|st| st > n.created_at))
            })
            .map(|(i, _)| i)
            .collect();
        candidates.sort_by_key(|i| (self.notes[*i].created_at, self.notes[*i].row));
        candidates.truncate(MAX_NOTES_PER_DELIVERY);
        // An ended session claims nothing, not even agent-addressed notes.
        if !candidates.is_empty()
            && let Some(s) = session
            && self.sessions[s].ended_at.is_some()
        {
            return Vec::new();
        }
        for &i in &candidates {
            let note = &mut self.notes[i];
            note.status = if defer { NoteStatus::Claimed } else { NoteStatus::Delivered };
            note.claimed_at = Some(now);
            note.delivered_at = if defer { None } else { Some(now) };
            note.delivery_channel = Some(channel.to_string());
            note.delivery_event = Some(event.to_string());
            if let Some(sid) = &session_id {
                // Claiming binds an agent-addressed note to the session.
                note.session_id = Some(sid.clone());
            }
        }
        candidates
    }

    pub fn note_element(&self, i: usize) -> NoteElement {
        let n = &self.notes[i];
        render_element(&n.note_id, &n.author_display, &n.auth_method, n.created_at, &n.body)
    }

    /// The framed block for claimed notes (§6), `None` when empty.
    pub fn render_block(&self, idxs: &[usize]) -> Option<String> {
        let elements: Vec<NoteElement> = idxs.iter().map(|i| self.note_element(*i)).collect();
        frame(&elements)
    }

    /// §4.4 `finish_claimed_note` for each unique id.
    pub fn acknowledge(
        &mut self,
        id: &HookIdentity,
        session: usize,
        note_ids: &[String],
        spool_dropped: bool,
        now: Timestamp,
    ) {
        self.expire_notes(&id.account_id, now);
        let session_id = self.sessions[session].id.clone();
        let mut seen: Vec<&String> = Vec::new();
        for nid in note_ids {
            if seen.contains(&nid) {
                continue;
            }
            seen.push(nid);
            if let Some(note) = self.notes.iter_mut().find(|n| {
                n.account_id == id.account_id
                    && n.note_id == *nid
                    && n.status == NoteStatus::Claimed
                    && n.agent_id.as_deref() == Some(id.agent_id.as_str())
                    && n.session_id.as_deref() == Some(session_id.as_str())
            }) {
                if spool_dropped {
                    note.status = NoteStatus::Undeliverable;
                    note.undeliverable_at = Some(now);
                    note.undeliverable_reason = Some("spool_dropped".into());
                } else {
                    note.status = NoteStatus::Delivered;
                    note.delivered_at = Some(now);
                }
            }
        }
    }

    /// §4.6 sweep: pending or claimed notes of exactly this session →
    /// undeliverable / session_ended. Returns how many.
    pub fn undeliver_session_notes(&mut self, account_id: &str, session: usize, reason: &str, now: Timestamp) -> usize {
        let sid = self.sessions[session].id.clone();
        let mut n = 0;
        for note in self.notes.iter_mut() {
            if note.account_id == account_id
                && note.session_id.as_deref() == Some(sid.as_str())
                && matches!(note.status, NoteStatus::Pending | NoteStatus::Claimed)
            {
                note.status = NoteStatus::Undeliverable;
                note.undeliverable_at = Some(now);
                note.undeliverable_reason = Some("session_ended".into());
                note.last_error = Some(format!("session ended ({reason})"));
                n += 1;
            }
        }
        n
    }

    /// Set `ended_at` once.
    pub fn end_session(&mut self, session: usize, now: Timestamp) {
        let s = &mut self.sessions[session];
        if s.ended_at.is_none() {
            s.ended_at = Some(now);
        }
    }

    // ----- sending (§5.1) -------------------------------------------------

    /// Resolve a send's target to (agent, session), or the 404/409.
    pub fn resolve_target(
        &self,
        account_id: &str,
        t: &SendTarget,
    ) -> Result<(Option<String>, Option<String>), Response> {
        let agent_of = |s: &Session| s.agent_id.clone().filter(|a| self.agent_idx(account_id, a).is_some());
        match t {
            SendTarget::Session(sid) => match self.session_idx(account_id, sid) {
                Some(i) => Ok((agent_of(&self.sessions[i]), Some(self.sessions[i].id.clone()))),
                None => Err(detail(404, "Runtime session not found")),
            },
            SendTarget::Execution => Err(detail(
                404,
                "This execution has no runtime session yet. A note can only be delivered once the run has made a governed call.",
            )),
            SendTarget::Alias(a) => {
                let mut matches: Vec<&Session> = self
                    .sessions
                    .iter()
                    .filter(|s| s.account_id == account_id && s.ended_at.is_none() && s.alias.as_deref() == Some(a))
                    .collect();
                matches.sort_by_key(|s| std::cmp::Reverse(s.started_at));
                matches.truncate(5);
                self.single_match(account_id, matches)
            }
            SendTarget::External(e) => {
                let Some(ext) = normalize_session_id(e) else {
                    return Err(detail(404, "No matching session in this account."));
                };
                let suffix = format!(":{ext}");
                let mut matches: Vec<&Session> = self
                    .sessions
                    .iter()
                    .filter(|s| s.account_id == account_id && (s.source_id == ext || s.source_id.ends_with(&suffix)))
                    .collect();
                matches.sort_by_key(|s| std::cmp::Reverse(s.started_at));
                matches.truncate(5);
                self.single_match(account_id, matches)
            }
            SendTarget::Agent(aid) => match self.agent_idx(account_id, aid) {
                // API-created agents have no current live session: unbound.
                Some(i) => Ok((Some(self.agents[i].id.clone()), None)),
                None => Err(detail(404, "Managed agent not found")),
            },
        }
    }

    fn single_match(
        &self,
        account_id: &str,
        matches: Vec<&Session>,
    ) -> Result<(Option<String>, Option<String>), Response> {
        match matches.len() {
            0 => Err(detail(404, "No matching session in this account.")),
            1 => {
                let s = matches[0];
                let agent = s.agent_id.clone().filter(|a| self.agent_idx(account_id, a).is_some());
                Ok((agent, Some(s.id.clone())))
            }
            _ => Err(detail(409, "target_ambiguous: name a runtime_session_id")),
        }
    }

    /// Live children of a session, newest first, at most 20 (§5.1 `children`).
    pub fn live_children(&self, account_id: &str, parent_id: &str) -> Vec<String> {
        let mut kids: Vec<&Session> = self
            .sessions
            .iter()
            .filter(|s| {
                s.account_id == account_id && s.ended_at.is_none() && s.parent_session_id.as_deref() == Some(parent_id)
            })
            .collect();
        kids.sort_by_key(|s| std::cmp::Reverse(s.started_at));
        kids.into_iter().take(MAX_CHILDREN_FANOUT).map(|s| s.id.clone()).collect()
    }

    /// Create one note after target resolution: the rate limit (429), the
    /// envelope (§7), `pending`. Returns the note index.
    #[allow(clippy::too_many_arguments)]
    pub fn create_note(
        &mut self,
        user: &UserContext,
        agent_id: Option<String>,
        session_id: Option<String>,
        text: &str,
        next_session: bool,
        ttl: i64,
    ) -> Result<usize, Response> {
        let now = Timestamp::now();
        if let Some(limit) = self.rate_limit {
            let since = now.add_secs(-3600);
            let recent = self
                .notes
                .iter()
                .filter(|n| {
                    n.account_id == user.account_id && n.author_user_id == user.user_id && n.created_at >= since
                })
                .filter(|n| match &agent_id {
                    Some(a) => n.agent_id.as_deref() == Some(a.as_str()),
                    None => n.session_id == session_id,
                })
                .count();
            if recent >= limit as usize {
                return Err(detail(
                    429,
                    &format!(
                        "Rate limit reached: {limit} notes per hour per agent or session. Steering this often usually means restarting with a better prompt."
                    ),
                ));
            }
        }
        let note_id = ids::note_id();
        let display = self.users[user.user_idx].display();
        let expires_at = now.add_secs(ttl);
        let mut metadata = json!({
            "preloop.ai/kind": "operator_note",
            "preloop.ai/noteId": note_id,
            "preloop.ai/managedAgentId": agent_id,
            "preloop.ai/author": {"userId": user.user_id, "display": display, "authMethod": user.auth_method},
            "preloop.ai/createdAt": now.to_iso_offset(),
            "preloop.ai/expiresAt": expires_at.to_iso_offset(),
        });
        if next_session {
            metadata["next_session"] = json!(true);
        }
        let envelope = json!({
            "kind": "message",
            "role": "user",
            "messageId": note_id,
            "contextId": session_id,
            "parts": [{"kind": "text", "text": text}],
            "metadata": metadata,
        });
        // The row's created_at is stamped after the envelope's createdAt,
        // as on the server (the two differ slightly, §6.1).
        let created_at = Timestamp::now().max(Timestamp(now.0 + 1));
        let row = self.next_row;
        self.next_row += 1;
        self.notes.push(Note {
            row,
            note_id,
            account_id: user.account_id.clone(),
            agent_id,
            session_id,
            next_session,
            body: text.to_string(),
            author_user_id: user.user_id.clone(),
            author_display: display,
            auth_method: user.auth_method.clone(),
            created_at,
            expires_at,
            status: NoteStatus::Pending,
            claimed_at: None,
            delivered_at: None,
            delivery_channel: None,
            delivery_event: None,
            undeliverable_reason: None,
            undeliverable_at: None,
            cancelled_at: None,
            expired_at: None,
            last_error: None,
            envelope,
        });
        Ok(self.notes.len() - 1)
    }

    // ----- views ----------------------------------------------------------

    /// `OperatorNoteResponse` (§5.1).
    pub fn note_view(&self, i: usize) -> NoteView {
        let n = &self.notes[i];
        NoteView {
            note_id: n.note_id.clone(),
            state: n.status.as_str(),
            text: n.body.clone(),
            managed_agent_id: n.agent_id.clone(),
            runtime_session_id: n.session_id.clone(),
            next_session: n.next_session,
            author: AuthorView {
                user_id: Some(n.author_user_id.clone()),
                agent_id: None,
                display: Some(n.author_display.clone()),
                auth_method: Some(n.auth_method.clone()),
            },
            created_at: naive(n.created_at),
            expires_at: Some(n.expires_at.to_iso_z()),
            claimed_at: n.claimed_at.map(Timestamp::to_iso_z),
            expired_at: n.expired_at.map(Timestamp::to_iso_z),
            undeliverable_at: n.undeliverable_at.map(Timestamp::to_iso_z),
            undeliverable_reason: n.undeliverable_reason.clone(),
            delivered_at: n.delivered_at.map(Timestamp::to_iso_z),
            delivery_channel: n.delivery_channel.clone(),
            delivery_event: n.delivery_event.clone(),
            delivered_turn_index: None,
            acknowledged_turn_id: None,
            cancelled_at: n.cancelled_at.map(Timestamp::to_iso_z),
        }
    }

    pub fn approval_view(&self, i: usize) -> Value {
        let a = &self.approvals[i];
        json!({
            "id": a.id,
            "account_id": a.account_id,
            "tool_configuration_id": a.tool_configuration_id,
            "approval_workflow_id": a.approval_workflow_id,
            "tool_name": a.tool_name,
            "tool_args": a.tool_args,
            "agent_reasoning": a.agent_reasoning,
            "execution_id": null,
            "status": a.status,
            "requested_at": a.requested_at.to_iso_z(),
            "resolved_at": a.resolved_at.map(Timestamp::to_iso_z),
            "expires_at": a.expires_at.map(Timestamp::to_iso_z),
            "approver_comment": a.approver_comment,
            "managed_agent_id": a.managed_agent_id,
            "runtime_session_id": null,
            "managed_agent_name": a.managed_agent_name,
            "api_key_id": a.api_key_id,
            "decided_by_ai": false,
            "auto_approved_reason": a.auto_approved_reason,
        })
    }

    // ----- approvals (§4.2 step 5, §5.6) ----------------------------------

    /// The account's agent tool configuration for `tool_name`, if any.
    pub fn tool_config(&self, account_id: &str, tool_name: &str) -> Option<&ToolConfig> {
        self.tool_configs
            .iter()
            .find(|t| t.account_id == account_id && t.tool_name == tool_name && t.tool_source == "agent")
    }

    /// The workflow an escalation uses: the agent's pin, else the account's
    /// auto-created "Agent Tool Approvals" (300 s).
    pub fn workflow_for(&mut self, account_id: &str, agent_id: &str) -> usize {
        if let Some(a) = self.agent_idx(account_id, agent_id)
            && let Some(wid) = self.agents[a].approval_workflow_id.clone()
            && let Some(w) = self.workflows.iter().position(|w| w.account_id == account_id && w.id == wid)
        {
            return w;
        }
        if let Some(w) =
            self.workflows.iter().position(|w| w.account_id == account_id && w.name == "Agent Tool Approvals")
        {
            return w;
        }
        self.workflows.push(Workflow {
            id: ids::uuid4(),
            account_id: account_id.to_string(),
            name: "Agent Tool Approvals".into(),
            approval_type: "standard".into(),
            timeout_seconds: 300,
        });
        self.workflows.len() - 1
    }

    /// Create an approval request; the tool's configuration is created on
    /// the first escalation (as the server does).
    pub fn create_approval(
        &mut self,
        id: &HookIdentity,
        tool_name: &str,
        tool_args: Value,
        agent_reasoning: Option<String>,
        auto_approved: bool,
    ) -> (usize, Option<Duration>) {
        let now = Timestamp::now();
        let w = self.workflow_for(&id.account_id, &id.agent_id);
        let (workflow_id, timeout, pinned) = {
            let wf = &self.workflows[w];
            let pinned = self
                .agent_idx(&id.account_id, &id.agent_id)
                .and_then(|a| self.agents[a].approval_workflow_id.clone())
                .is_some_and(|p| p == wf.id);
            (wf.id.clone(), wf.timeout_seconds, pinned)
        };
        let config_id = match self.tool_config(&id.account_id, tool_name) {
            Some(t) => t.id.clone(),
            None => {
                let tid = ids::uuid4();
                self.tool_configs.push(ToolConfig {
                    id: tid.clone(),
                    account_id: id.account_id.clone(),
                    tool_name: tool_name.to_string(),
                    tool_source: "agent".into(),
                    is_enabled: true,
                });
                tid
            }
        };
        self.approvals.push(Approval {
            id: ids::uuid4(),
            account_id: id.account_id.clone(),
            tool_configuration_id: config_id,
            approval_workflow_id: workflow_id,
            tool_name: tool_name.to_string(),
            tool_args,
            agent_reasoning,
            status: if auto_approved { "approved".into() } else { "pending".into() },
            requested_at: now,
            resolved_at: if auto_approved { Some(now) } else { None },
            expires_at: Some(now.add_secs(timeout)),
            approver_comment: if auto_approved { Some(AUTO_APPROVED_REASON.into()) } else { None },
            managed_agent_id: Some(id.agent_id.clone()),
            managed_agent_name: Some(id.agent_name.clone()),
            api_key_id: Some(id.credential_id.clone()),
            auto_approved_reason: if auto_approved { Some("native_tool_approvals_off".into()) } else { None },
        });
        // A pinned workflow waits timeout_seconds + the 2 s poll; otherwise
        // the fake's configurable default applies (302 s unless changed).
        let wait = if pinned { Some(Duration::from_secs((timeout + 2).max(0) as u64)) } else { None };
        (self.approvals.len() - 1, wait)
    }

    /// Decide a pending approval (§5.6). 404 / 400 `Request already <status>`.
    pub fn decide(
        &mut self,
        account_id: &str,
        approval_id: &str,
        approve: bool,
        comment: Option<String>,
    ) -> Result<usize, Response> {
        let Some(i) = self.approvals.iter().position(|a| a.id == approval_id) else {
            return Err(detail(404, "Approval request not found"));
        };
        if self.approvals[i].account_id != account_id {
            return Err(detail(
                403,
                if approve {
                    "Not authorized to approve this request"
                } else {
                    "Not authorized to decline this request"
                },
            ));
        }
        self.expire_stale_approvals(account_id);
        let a = &mut self.approvals[i];
        if a.status != "pending" {
            return Err(detail(400, &format!("Request already {}", a.status)));
        }
        a.status = if approve { "approved".into() } else { "declined".into() };
        a.resolved_at = Some(Timestamp::now());
        a.approver_comment = comment.filter(|c| !c.is_empty());
        Ok(i)
    }

    /// `expire_stale_pending`: pending approvals past `expires_at` → expired.
    pub fn expire_stale_approvals(&mut self, account_id: &str) {
        let now = Timestamp::now();
        for a in self.approvals.iter_mut().filter(|a| a.account_id == account_id) {
            if a.status == "pending" && a.expires_at.is_some_and(|e| e <= now) {
                a.status = "expired".into();
            }
        }
    }
}

/// A resolved send target (§5.1), one of them.
pub(crate) enum SendTarget {
    Agent(String),
    Session(String),
    Execution,
    Alias(String),
    External(String),
}

#[derive(Serialize)]
pub(crate) struct AuthorView {
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub display: Option<String>,
    pub auth_method: Option<String>,
}

/// `OperatorNoteResponse`, fields in the server's order.
#[derive(Serialize)]
pub(crate) struct NoteView {
    pub note_id: String,
    pub state: &'static str,
    pub text: String,
    pub managed_agent_id: Option<String>,
    pub runtime_session_id: Option<String>,
    pub next_session: bool,
    pub author: AuthorView,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub claimed_at: Option<String>,
    pub expired_at: Option<String>,
    pub undeliverable_at: Option<String>,
    pub undeliverable_reason: Option<String>,
    pub delivered_at: Option<String>,
    pub delivery_channel: Option<String>,
    pub delivery_event: Option<String>,
    pub delivered_turn_index: Option<i64>,
    pub acknowledged_turn_id: Option<String>,
    pub cancelled_at: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_and_aliases() {
        assert_eq!(normalize_session_id("  abc-1.2:3_x "), Some("abc-1.2:3_x".into()));
        assert_eq!(normalize_session_id("a b"), None);
        assert_eq!(normalize_session_id(""), None);
        assert_eq!(normalize_session_id(&"x".repeat(201)), None);
        assert_eq!(sanitize_alias("my alias/é"), Some("my-alias--".into()));
        assert_eq!(sanitize_alias(&"a".repeat(100)).unwrap().len(), 64);
        assert_eq!(sanitize_alias(""), None);
        assert_eq!(naive(Timestamp::parse("2026-12-02T09:20:38.291972Z").unwrap()), "2026-12-02T09:20:38.291972");
    }
}
