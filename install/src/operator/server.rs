//! [`Operator`] over a Preloop server's human routes ([`HumanApi`],
//! the HTTP client), with what this machine's session files add: the
//! harness session id and harness of a receipt, the transcript of a run.

use super::{NewNote, NotesOf, Operator, Pace, Sent, SessionNow, SessionRef, Side, Socket, To};
use crate::human_api::HumanApi;
use crate::output::{clip, safe_line};
use preloop_shared::config::{Config, Origin};
use preloop_shared::flow::is_uuid;
use preloop_shared::operator::{
    ActivityItem, Receipt, ReceiptState, RuntimeSessionItem, SendNoteBody, SessionFilter, SessionRow,
};
use preloop_shared::session::SessionFile;
use preloop_shared::time::Timestamp;
use preloop_shared::{AgentKind, Error, Harness, Result, fsutil};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// Notes per page of `GET /operator-notes` (the server's largest).
const NOTE_PAGE: usize = 200;
/// Sessions per page of `GET /runtime-sessions` (the server's largest).
const SESSION_PAGE: usize = 100;
/// The most pages read for one answer (20,000 notes, 10,000 sessions).
const MAX_PAGES: usize = 100;
/// The pages `sessions list` shows (its newest 500 sessions).
const LIST_PAGES: usize = 5;
/// The server's default window of `GET /runtime-sessions` (30 days).
const DEFAULT_WINDOW_SECS: i64 = 30 * 86_400;

pub struct Server {
    api: HumanApi,
    config: Config,
}

impl Server {
    pub fn new(api: HumanApi, config: Config) -> Server {
        Server { api, config }
    }

    /// A server session, with what this machine's session file adds.
    fn session_ref(&self, item: RuntimeSessionItem) -> SessionRef {
        let file = super::files_by_runtime(&self.config.home).remove(&item.id);
        SessionRef {
            runtime_id: item.id.clone(),
            external_id: item.external_session_id().or_else(|| file.as_ref().map(|f| f.external_session_id.clone())),
            ended_at: item.ended_at,
            file,
        }
    }

    /// Fill what a receipt from the server leaves out and this machine
    /// knows: the harness session id and harness of its session.
    fn fill(&self, mut receipts: Vec<Receipt>) -> Vec<Receipt> {
        self.fill_in(&mut receipts);
        receipts
    }

    /// Also marks [`Receipt::never_carried`]: a `delivered` note whose
    /// session file here names it uncarried at the session's end (the
    /// server has no word for it, docs/contracts/preloop-server.md §4.6).
    fn fill_in(&self, receipts: &mut [Receipt]) {
        let files = super::files_by_runtime(&self.config.home);
        for r in receipts {
            if let Some(f) = r.runtime_session_id.as_ref().and_then(|rid| files.get(rid)) {
                r.external_session_id.get_or_insert_with(|| f.external_session_id.clone());
                if r.harness.is_none() {
                    r.harness = f.agent_kind.harness().map(|h| h.slug().to_string());
                }
            }
            r.never_carried =
                r.state == ReceiptState::Delivered && files.values().any(|f| f.uncarried_notes.contains(&r.note_id));
        }
    }

    fn fill_one(&self, mut r: Receipt) -> Receipt {
        self.fill_in(std::slice::from_mut(&mut r));
        r
    }

    /// The notes of one session, of an agent, of an execution: every page
    /// to the end (a note id start resolves against all of them, red-team
    /// 4, P6), or an error past [`MAX_PAGES`] pages.
    fn list(&self, key: &'static str, value: String, state: Option<&ReceiptState>) -> Result<Vec<Receipt>> {
        let mut out = Vec::new();
        for page in 0..MAX_PAGES {
            let mut q = vec![
                (key, value.clone()),
                ("limit", NOTE_PAGE.to_string()),
                ("offset", (page * NOTE_PAGE).to_string()),
            ];
            if let Some(st) = state {
                q.push(("state", st.to_string()));
            }
            let got = self.api.list(&q)?;
            let n = got.len();
            out.extend(got);
            if n < NOTE_PAGE {
                return Ok(out);
            }
        }
        Err(Error::Refused(format!(
            "more than {} notes for {key} {value}: too many to read whole; name a note by its full id (16 hex characters)",
            MAX_PAGES * NOTE_PAGE
        )))
    }

    /// Runtime sessions `q` selects, page by page (100 each) up to `pages`
    /// pages; and whether that was all of them.
    fn session_pages(&self, q: &[(&str, String)], pages: usize) -> Result<(Vec<RuntimeSessionItem>, bool)> {
        let mut items: Vec<RuntimeSessionItem> = Vec::new();
        for page in 0..pages {
            let mut qq = q.to_vec();
            qq.push(("limit", SESSION_PAGE.to_string()));
            qq.push(("offset", (page * SESSION_PAGE).to_string()));
            let p = self.api.runtime_sessions(&qq)?;
            let more = p.has_more;
            items.extend(p.items);
            if !more {
                return Ok((items, true));
            }
        }
        Ok((items, false))
    }

    /// Every session of the account the server lists, or a refusal past
    /// [`MAX_PAGES`] pages: an id start is never called unique against a
    /// window.
    fn every_session(&self) -> Result<Vec<RuntimeSessionItem>> {
        let (items, whole) = self.session_pages(&[], MAX_PAGES)?;
        if !whole {
            return Err(Error::Refused(format!(
                "this account lists more than {} sessions, too many to tell whether a start of an id is unique; type the whole id (`preloop-hooks sessions list --wide` prints them)",
                MAX_PAGES * SESSION_PAGE
            )));
        }
        Ok(items.into_iter().filter(|i| !i.is_identity()).collect())
    }
}

impl Server {
    /// The managed agent this machine's hooks run as for a harness: a
    /// Preloop onboarding file or `PRELOOP_AGENT_ID` ([`agent_for`]); else
    /// the agent of this machine's latest server-mode run (one runtime token
    /// runs every harness here, as `login` stores it); else the account's
    /// only agent. README's two logins are enough (newcomer 4, P5).
    fn agent_of_machine(&self, h: Harness) -> Result<String> {
        if let Some(id) = agent_for(&self.config.home, h) {
            return Ok(id);
        }
        let mut files: Vec<SessionFile> = preloop_shared::session::all_session_files(&self.config.home)
            .into_iter()
            .filter(|f| f.mode == Side::Server.hooks())
            .collect();
        files.sort_by_key(|f| std::cmp::Reverse(f.started_at));
        for f in files.iter().take(5) {
            match self.api.runtime_session(&f.runtime_session_id) {
                Ok(item) => {
                    if let Some(id) = item.agent_id.or(item.managed_agent_id) {
                        return Ok(id);
                    }
                }
                Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let agents = self.api.agents()?.items;
        match agents.as_slice() {
            [one] => Ok(one.id.clone()),
            many => {
                let example = many.first().and_then(|a| a.display_name.clone()).unwrap_or_else(|| "NAME".into());
                Err(Error::Config(format!(
                    "which managed agent runs {} here is not known yet (no server-mode run on this machine, {} in this account): name it, e.g. `preloop-hooks notes send --agent {} --next-session \"…\"` (`preloop-hooks sessions list` shows the agents), or set PRELOOP_AGENT_ID",
                    h.slug(),
                    preloop_shared::words::count(many.len(), "agent"),
                    shell_word(&example)
                )))
            }
        }
    }
}

/// A word as a shell takes it (quoted when it needs to be).
fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:/".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", clip(s, 60).replace('\'', "'\\''"))
    }
}

impl Operator for Server {
    fn mode(&self) -> Side {
        Side::Server
    }

    fn mode_note(&self) -> Option<String> {
        match self.config.url.as_ref().map(|(_, o)| o) {
            Some(Origin::Onboarding(p)) => {
                Some(format!("server mode: {} (the URL comes from {})", self.api.base, p.display()))
            }
            _ => None,
        }
    }

    fn pace(&self) -> Pace {
        Pace { poll: Duration::from_secs(2), end_check: Duration::from_secs(2), settle: Duration::from_millis(1500) }
    }

    fn author_from_flag(&self) -> bool {
        false
    }

    fn check(&self, to: &To) -> Result<()> {
        match to {
            To::Execution(e) if !is_uuid(e) => {
                Err(Error::Usage(format!("--execution {:?}: an execution id is a UUID", clip(e, 70))))
            }
            _ => Ok(()),
        }
    }

    fn unknown_session_note(&self, _id: &str) -> Option<String> {
        // The server says so itself, with its own reason.
        None
    }

    fn send(&self, to: &To, note: &NewNote) -> Result<Sent> {
        let mut body = SendNoteBody {
            text: note.text.clone(),
            expires_in_seconds: note.expires_in_secs.map(|e| e as i64),
            ..SendNoteBody::default()
        };
        let mut agent = None;
        match to {
            To::Session { found: Some(f), .. } => body.runtime_session_id = Some(f.runtime_id.clone()),
            // Nobody knows it yet: let the server say so with its own reason.
            To::Session { id, found: None } => body.external_session_id = Some(id.clone()),
            To::Alias(al) => body.alias = Some(al.clone()),
            To::Children { parent, all } => {
                body.children = Some(if *all { "all" } else { "latest" }.into());
                body.parent_session_id = Some(parent.runtime_id.clone());
            }
            To::Execution(e) => body.execution_id = Some(e.clone()),
            To::Next(h) | To::HarnessCurrent(h) => {
                let agent_id = self.agent_of_machine(*h)?;
                body.agent_id = Some(agent_id.clone());
                body.next_session = matches!(to, To::Next(_));
                agent = Some(agent_id);
            }
            To::Agent { agent_id, next_session } => {
                body.agent_id = Some(agent_id.clone());
                body.next_session = *next_session;
            }
        }
        let answer = self.api.send(&body).map_err(|e| match (to, &e) {
            (To::Children { parent, .. }, Error::NotFound(m)) if m.contains("no_live_children") => {
                Error::NotFound(preloop_shared::operator::no_live_children(parent.name()))
            }
            _ => e,
        });
        let receipts = self.fill(answer?);
        let runtime_session_id = match receipts.as_slice() {
            [r] => r.runtime_session_id.clone(),
            _ => None,
        };
        Ok(Sent { receipts, session: None, runtime_session_id, agent_id: agent })
    }

    fn receipt(&self, note_id: &str) -> Result<Receipt> {
        self.api.receipt(note_id).map(|r| self.fill_one(r))
    }

    fn cancel(&self, note_id: &str) -> Result<Receipt> {
        self.api.cancel(note_id).map(|r| self.fill_one(r))
    }

    fn notes(&self, of: &NotesOf, state: Option<&ReceiptState>) -> Result<Vec<Receipt>> {
        let session_ids: Vec<String> = match of {
            NotesOf::Session(s) => {
                return Ok(self.fill(self.list("runtime_session_id", s.runtime_id.clone(), state)?));
            }
            // A server takes no note for a session it does not know (404
            // "No matching session in this account."): none waits for it.
            NotesOf::NotStarted(_) => return Ok(Vec::new()),
            NotesOf::Agent(ag) => {
                let id = self.agent_id(ag)?;
                return Ok(self.fill(self.list("agent_id", id, state)?));
            }
            NotesOf::Execution(e) => {
                if !is_uuid(e) {
                    return Err(Error::Usage(format!("--execution {:?}: an execution id is a UUID", clip(e, 70))));
                }
                return Ok(self.fill(self.list("execution_id", e.clone(), state)?));
            }
            NotesOf::Alias(al) => {
                let page = self.api.runtime_sessions(&[("alias", al.clone()), ("limit", "100".into())])?;
                let ids: Vec<String> = page.items.into_iter().filter(|i| !i.is_identity()).map(|i| i.id).collect();
                if ids.is_empty() {
                    return Err(Error::NotFound(format!("no session in this account has the alias {al:?}")));
                }
                ids
            }
            NotesOf::Children { parent, latest } => {
                let mut page = self
                    .api
                    .runtime_sessions(&[("parent_session_id", parent.runtime_id.clone()), ("limit", "100".into())])?
                    .items;
                page.sort_by_key(|i| std::cmp::Reverse(i.started_at));
                if *latest {
                    page.truncate(1);
                }
                page.into_iter().map(|i| i.id).collect()
            }
            NotesOf::All => {
                // Every agent of the account, and the sessions with no
                // managed agent that hold notes (red-team 4, P6).
                let mut out = Vec::new();
                for ag in self.api.agents()?.items {
                    out.extend(self.list("agent_id", ag.id, state)?);
                }
                // `note_count` counts only the states that steer (pending,
                // claimed, delivered, acknowledged: docs/contracts/preloop-server.md
                // §5.7): a session it shows 0 may still hold undeliverable,
                // expired or cancelled notes, so it is skipped only for a
                // state it counts.
                let counted = state.is_some_and(|st| {
                    matches!(
                        st,
                        ReceiptState::Pending
                            | ReceiptState::Claimed
                            | ReceiptState::Delivered
                            | ReceiptState::Acknowledged
                    )
                });
                for s in self.every_session()? {
                    if s.managed_agent_id.is_none() && !(counted && s.note_count == Some(0)) {
                        out.extend(self.list("runtime_session_id", s.id, state)?);
                    }
                }
                let mut seen = std::collections::HashSet::new();
                out.retain(|r| seen.insert(r.note_id.clone()));
                return Ok(self.fill(out));
            }
        };
        let mut out = Vec::new();
        for id in session_ids {
            out.extend(self.list("runtime_session_id", id, state)?);
        }
        Ok(self.fill(out))
    }

    fn sessions(&self, f: &SessionFilter) -> Result<Vec<SessionRow>> {
        let mut q: Vec<(&str, String)> = Vec::new();
        if f.active {
            q.push(("status", "active".into()));
        }
        if let Some(a) = &f.agent {
            q.push(("agent", a.clone()));
        }
        // No `agent_kind`: the server takes it as the managed agent's kind,
        // while KIND is the session's own harness (one runtime token runs
        // every harness of a machine, newcomer 4 P1); it is filtered here.
        if let Some(al) = &f.alias {
            q.push(("alias", al.clone()));
        }
        let mut f = f.clone();
        if let Some(p) = &f.parent {
            let rid = self.find_session(p)?.map(|r| r.runtime_id).ok_or_else(|| {
                Error::NotFound(format!("the parent session {} is not known in this account", safe_line(p)))
            })?;
            q.push(("parent_session_id", rid.clone()));
            f.parent = Some(rid);
        }
        if let Some(e) = &f.execution {
            q.push(("flow_execution_id", e.clone()));
        }
        // `start_date` only to widen the server's default window (30 days):
        // `--since` is LAST ACTIVITY or STARTED, checked below.
        let now = Timestamp::now();
        if let Some(t) = f.since.filter(|t| *t < now.add_secs(-DEFAULT_WINDOW_SECS)) {
            q.push(("start_date", t.to_iso_z()));
        }
        // Filters applied here rather than by the server read further.
        let pages = if f.kind.is_some() || f.since.is_some() { MAX_PAGES } else { LIST_PAGES };
        let (items, _) = self.session_pages(&q, pages)?;
        let files = super::files_by_runtime(&self.config.home);
        let mut rows: Vec<SessionRow> = items
            .into_iter()
            .filter(|i| !i.is_identity())
            .map(|i| row_of(&i, files.get(&i.id), now))
            .filter(|r| f.admits(r))
            .collect();
        SessionRow::sort_most_recent_first(&mut rows);
        Ok(rows)
    }

    fn id_candidates(&self) -> Result<Vec<SessionRow>> {
        let files = super::files_by_runtime(&self.config.home);
        let now = Timestamp::now();
        let mut rows: Vec<SessionRow> =
            self.every_session()?.into_iter().map(|i| row_of(&i, files.get(&i.id), now)).collect();
        SessionRow::sort_most_recent_first(&mut rows);
        Ok(rows)
    }

    fn agent_id(&self, id_or_name: &str) -> Result<String> {
        if is_uuid(id_or_name) {
            return Ok(id_or_name.to_string());
        }
        // By display name, as the server's `agent` filter of `sessions list` matches it.
        let agents = self.api.agents()?.items;
        let hits: Vec<_> = agents.iter().filter(|a| a.display_name.as_deref() == Some(id_or_name)).collect();
        match hits.as_slice() {
            [one] => Ok(one.id.clone()),
            [] => Err(Error::NotFound(format!(
                "no managed agent in this account has the id or name {:?} (`preloop-hooks sessions list --json` shows agent_id and agent_name)",
                clip(id_or_name, 70)
            ))),
            many => Err(Error::Usage(format!(
                "{} in this account are named {:?} ({}): give its id",
                preloop_shared::words::count(many.len(), "agent"),
                clip(id_or_name, 70),
                many.iter().map(|a| a.id.as_str()).collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    fn find_session(&self, id: &str) -> Result<Option<SessionRef>> {
        // A file written by server-mode hooks names the runtime id the server knows.
        let file = super::local_file(&self.config.home, id);
        let candidates: Vec<String> = file
            .iter()
            .filter(|f| f.mode == Side::Server.hooks())
            .map(|f| f.runtime_session_id.clone())
            .chain(is_uuid(id).then(|| id.to_string()))
            .collect();
        for rid in candidates {
            match self.api.runtime_session(&rid) {
                Ok(item) => return Ok(Some(self.session_ref(item))),
                Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let page = self.api.runtime_sessions(&[("query", id.to_string()), ("limit", "100".into())])?;
        let mut hits: Vec<RuntimeSessionItem> =
            page.items.into_iter().filter(|i| i.external_session_id().as_deref() == Some(id)).collect();
        if hits.len() > 1 {
            let ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
            return Err(Error::Usage(format!(
                "{} in this account carry the harness id {id} (runtime ids {}): name one by its runtime id",
                preloop_shared::words::count(hits.len(), "session"),
                ids.join(", ")
            )));
        }
        Ok(hits.pop().map(|item| self.session_ref(item)))
    }

    fn session_ended(&self, note: &Receipt) -> Option<Timestamp> {
        self.api.runtime_session(note.runtime_session_id.as_deref()?).ok().and_then(|i| i.ended_at)
    }

    fn session_now(&self, s: &SessionRef) -> Result<SessionNow> {
        let item = self.api.runtime_session(&s.runtime_id)?;
        Ok(SessionNow { ended_at: item.ended_at, pending_approvals: Some(item.pending_approval_count.unwrap_or(0)) })
    }

    fn timeline(&self, s: &SessionRef, limit: u32) -> Result<Vec<ActivityItem>> {
        Ok(self.api.activity(&s.runtime_id, limit)?.items)
    }

    fn socket(&self, s: &SessionRef) -> Option<Socket> {
        Some(Socket {
            url: self.api.socket_url(&s.runtime_id),
            token: self.api.token().clone(),
            secrets: self.api.secrets().to_vec(),
        })
    }
}

/// A server session as a row, with what this machine's session file adds.
pub fn row_of(i: &RuntimeSessionItem, file: Option<&SessionFile>, now: Timestamp) -> SessionRow {
    let source =
        i.runtime_principal_name.as_deref().and_then(|n| n.split_once(" in ")).map(|(s, _)| AgentKind::from(s));
    let kind = (source.as_ref().and_then(AgentKind::harness))
        .or_else(|| file.and_then(|f| f.agent_kind.harness()))
        .or_else(|| i.agent_kind.as_ref().and_then(AgentKind::harness))
        .map(|h| h.slug().to_string());
    let external = i.external_session_id().or_else(|| file.map(|f| f.external_session_id.clone()));
    let last = [i.last_activity_at, i.started_at].into_iter().flatten().max();
    SessionRow {
        id: external.clone().unwrap_or_else(|| i.id.clone()),
        runtime_session_id: i.id.clone(),
        external_session_id: external,
        agent_id: i.agent_id.clone().or(i.managed_agent_id.clone()),
        agent_name: i.agent_name.clone().or(i.managed_agent_name.clone()),
        label: SessionRow::label_of(
            i.title.as_deref(),
            kind.as_deref().or(source.as_ref().map(AgentKind::as_str)).or(i.agent_kind.as_ref().map(AgentKind::as_str)),
            i.cwd.as_deref(),
            i.started_at,
        ),
        kind,
        agent_kind: source.or(i.agent_kind.clone()),
        alias: i.alias.clone(),
        title: i.title.clone(),
        cwd: i.cwd.clone(),
        parent_session_id: i.parent_session_id.clone(),
        execution_id: i.flow_execution_id.clone(),
        started_at: i.started_at,
        last_activity_at: last,
        ended_at: i.ended_at,
        state: SessionRow::state_of(i.ended_at.is_some(), last, now).to_string(),
        tool_calls: i.tool_call_count,
        // The server counts model calls through its gateway only: a run seen
        // through hooks alone reports 0, which means "not counted".
        model_calls: i.total_requests.filter(|&n| n > 0),
        pending_approvals: i.pending_approval_count,
        undelivered_notes: None,
        transcript_path: file.and_then(|f| f.transcript_path.clone()),
    }
}

/// The agent this machine's hooks run as for a harness (server mode): the
/// `agent_id` (or directory name) of a matching Preloop onboarding file,
/// else `PRELOOP_AGENT_ID`.
pub fn agent_for(home: &Path, harness: Harness) -> Option<String> {
    let dir = home.join("agents");
    let mut names = fsutil::list_names(&dir);
    names.sort();
    for name in names {
        let Ok(Some(v)) = fsutil::read_json::<Value>(&dir.join(&name).join("permission_hook.json")) else { continue };
        if v.get("source").and_then(Value::as_str).is_some_and(|s| harness.accepts_source(s)) {
            if let Some(id) = v.get("agent_id").or_else(|| v.get("managed_agent_id")).and_then(Value::as_str) {
                return Some(id.to_string());
            }
            if is_uuid(&name) {
                return Some(name);
            }
        }
    }
    std::env::var("PRELOOP_AGENT_ID").ok().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_count_of_0_from_the_server_is_not_counted() {
        let now = Timestamp::now();
        let item = |n| RuntimeSessionItem { id: "r".into(), total_requests: n, ..RuntimeSessionItem::default() };
        assert_eq!(row_of(&item(Some(0)), None, now).model_calls, None, "hooks alone: the gateway saw nothing");
        assert_eq!(row_of(&item(Some(3)), None, now).model_calls, Some(3));
        assert_eq!(row_of(&item(None), None, now).model_calls, None);
    }
}
