//! An [`Operator`] in memory, for the commands' unit tests (as the engine's
//! tests use `testkit`'s memory backend through `Engine::with_backend`):
//! sessions and notes in a `Vec`, receipts that change state after a given
//! number of reads, and a log of the calls that change something.

use super::{NewNote, NotesOf, Operator, Pace, Sent, SessionNow, SessionRef, Side, Socket, To};
use preloop_shared::operator::{ActivityItem, Receipt, ReceiptState, SessionFilter, SessionRow};
use preloop_shared::time::Timestamp;
use preloop_shared::{Error, Result};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

#[derive(Default)]
struct State {
    sessions: Vec<SessionRow>,
    notes: Vec<Receipt>,
    /// Note id → (reads before the change, the state it changes to).
    script: HashMap<String, (u32, ReceiptState)>,
    /// `send <note id>`, `cancel <note id>`.
    calls: Vec<String>,
}

pub struct Memory {
    mode: Side,
    state: Mutex<State>,
}

impl Memory {
    pub fn new(mode: Side) -> Memory {
        Memory { mode, state: Mutex::new(State::default()) }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A session with this harness id and runtime id, last active `age_secs` ago.
    pub fn session(self, external: &str, runtime: &str, age_secs: i64) -> Memory {
        let at = Timestamp::now().add_secs(-age_secs);
        let row = SessionRow {
            id: external.to_string(),
            runtime_session_id: runtime.to_string(),
            external_session_id: Some(external.to_string()),
            agent_id: None,
            agent_name: None,
            kind: Some("claude-code".into()),
            agent_kind: Some("claude_code".into()),
            alias: None,
            title: None,
            label: format!("title {runtime}"),
            cwd: None,
            parent_session_id: None,
            execution_id: None,
            started_at: Some(at),
            last_activity_at: Some(at),
            ended_at: None,
            state: "live".into(),
            tool_calls: None,
            model_calls: None,
            pending_approvals: None,
            undelivered_notes: None,
            transcript_path: None,
        };
        self.state().sessions.push(row);
        self
    }

    /// A note already sent to `session`, in `state`, created `age_secs` ago.
    pub fn note(self, id: &str, session: &str, state: ReceiptState, age_secs: i64) -> Memory {
        let r = receipt(id, Some(session), state, Timestamp::now().add_secs(-age_secs));
        self.state().notes.push(r);
        self
    }

    /// `session` was started by the session with runtime id `parent`.
    pub fn child_of(self, session: &str, parent: &str) -> Memory {
        for s in self.state().sessions.iter_mut().filter(|s| s.id == session) {
            s.parent_session_id = Some(parent.to_string());
        }
        self
    }

    /// `note` ended undeliverable for `reason`, `age_secs` ago.
    pub fn undeliverable(self, note: &str, reason: &str, age_secs: i64) -> Memory {
        for n in self.state().notes.iter_mut().filter(|n| n.note_id == note) {
            n.state = ReceiptState::Undeliverable;
            n.undeliverable_reason = Some(reason.to_string());
            n.undeliverable_at = Some(Timestamp::now().add_secs(-age_secs));
        }
        self
    }

    /// `note` was recorded delivered but no output carried it (what the
    /// server mode's session files add, [`Receipt::never_carried`]).
    pub fn never_carried(self, note: &str) -> Memory {
        for n in self.state().notes.iter_mut().filter(|n| n.note_id == note) {
            n.state = ReceiptState::Delivered;
            n.never_carried = true;
        }
        self
    }

    /// After `reads` more reads of its receipt, `note` is in `state`.
    pub fn changes_after(&self, note: &str, reads: u32, state: ReceiptState) {
        self.state().script.insert(note.to_string(), (reads, state));
    }

    /// The session ends now.
    pub fn end(&self, session: &str) {
        let now = Timestamp::now();
        for s in self.state().sessions.iter_mut().filter(|s| s.id == session || s.runtime_session_id == session) {
            s.ended_at = Some(now);
            s.state = "ended".into();
        }
    }

    /// The calls that changed something, in order.
    pub fn calls(&self) -> Vec<String> {
        self.state().calls.clone()
    }

    fn find(&self, id: &str) -> Option<SessionRow> {
        self.state().sessions.iter().find(|s| s.id == id || s.runtime_session_id == id).cloned()
    }
}

fn receipt(id: &str, session: Option<&str>, state: ReceiptState, at: Timestamp) -> Receipt {
    Receipt {
        text: format!("note {id}"),
        external_session_id: session.map(str::to_string),
        created_at: Some(at),
        ..Receipt::new(id, state)
    }
}

fn session_ref(row: &SessionRow) -> SessionRef {
    SessionRef {
        runtime_id: row.runtime_session_id.clone(),
        external_id: row.external_session_id.clone(),
        file: None,
        ended_at: row.ended_at,
    }
}

impl Operator for Memory {
    fn mode(&self) -> Side {
        self.mode
    }

    fn mode_note(&self) -> Option<String> {
        None
    }

    fn pace(&self) -> Pace {
        let tick = Duration::from_millis(5);
        Pace { poll: tick, end_check: tick, settle: Duration::ZERO }
    }

    fn author_from_flag(&self) -> bool {
        self.mode == Side::Local
    }

    fn check(&self, to: &To) -> Result<()> {
        match to {
            To::Agent { .. } if self.mode == Side::Local => Err(Error::Usage("--agent needs server mode".into())),
            _ => Ok(()),
        }
    }

    fn unknown_session_note(&self, _id: &str) -> Option<String> {
        None
    }

    fn send(&self, to: &To, note: &NewNote) -> Result<Sent> {
        let sessions: Vec<String> = match to {
            To::Session { id, found } => {
                vec![found.as_ref().map(|f| f.name().to_string()).unwrap_or_else(|| id.clone())]
            }
            To::Alias(a) => {
                self.state().sessions.iter().filter(|s| s.alias.as_deref() == Some(a)).map(|s| s.id.clone()).collect()
            }
            _ => Vec::new(),
        };
        let mut st = self.state();
        let mut receipts = Vec::new();
        for s in sessions {
            let id = format!("{:016x}", 0xa000 + st.notes.len());
            let mut r = receipt(&id, Some(&s), ReceiptState::Pending, Timestamp::now());
            r.text = note.text.clone();
            st.calls.push(format!("send {id}"));
            st.notes.push(r.clone());
            receipts.push(r);
        }
        Ok(Sent { receipts, ..Sent::default() })
    }

    fn receipt(&self, note_id: &str) -> Result<Receipt> {
        let mut st = self.state();
        if let Some((reads, state)) = st.script.get_mut(note_id) {
            if *reads == 0 {
                let state = state.clone();
                st.script.remove(note_id);
                if let Some(n) = st.notes.iter_mut().find(|n| n.note_id == note_id) {
                    n.state = state;
                }
            } else {
                *reads -= 1;
            }
        }
        st.notes
            .iter()
            .find(|n| n.note_id == note_id)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("note {note_id} not found")))
    }

    fn cancel(&self, note_id: &str) -> Result<Receipt> {
        let mut st = self.state();
        st.calls.push(format!("cancel {note_id}"));
        let n = st
            .notes
            .iter_mut()
            .find(|n| n.note_id == note_id)
            .ok_or_else(|| Error::NotFound(format!("note {note_id} not found")))?;
        if n.state == ReceiptState::Pending {
            n.state = ReceiptState::Cancelled;
            n.cancelled_at = Some(Timestamp::now());
        }
        Ok(n.clone())
    }

    fn notes(&self, of: &NotesOf, _state: Option<&ReceiptState>) -> Result<Vec<Receipt>> {
        let st = self.state();
        Ok(match of {
            NotesOf::All => st.notes.clone(),
            NotesOf::Session(s) => {
                st.notes.iter().filter(|n| n.external_session_id.as_deref() == Some(s.name())).cloned().collect()
            }
            NotesOf::NotStarted(id) => {
                st.notes.iter().filter(|n| n.external_session_id.as_deref() == Some(id.as_str())).cloned().collect()
            }
            NotesOf::Children { parent, latest } => {
                let mut kids: Vec<&SessionRow> = st
                    .sessions
                    .iter()
                    .filter(|s| s.parent_session_id.as_deref() == Some(parent.runtime_id.as_str()))
                    .collect();
                kids.sort_by_key(|s| std::cmp::Reverse(s.started_at));
                if *latest {
                    kids.truncate(1);
                }
                let ids: Vec<&str> = kids.iter().map(|s| s.id.as_str()).collect();
                st.notes
                    .iter()
                    .filter(|n| n.external_session_id.as_deref().is_some_and(|s| ids.contains(&s)))
                    .cloned()
                    .collect()
            }
            _ => Vec::new(),
        })
    }

    fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRow>> {
        let mut rows: Vec<SessionRow> = self.state().sessions.iter().filter(|s| filter.admits(s)).cloned().collect();
        SessionRow::sort_most_recent_first(&mut rows);
        Ok(rows)
    }

    fn agent_id(&self, id_or_name: &str) -> Result<String> {
        Ok(id_or_name.to_string())
    }

    fn find_session(&self, id: &str) -> Result<Option<SessionRef>> {
        Ok(self.find(id).as_ref().map(session_ref))
    }

    fn session_ended(&self, note: &Receipt) -> Option<Timestamp> {
        self.find(note.external_session_id.as_deref()?)?.ended_at
    }

    fn session_now(&self, s: &SessionRef) -> Result<SessionNow> {
        Ok(SessionNow { ended_at: self.find(&s.runtime_id).and_then(|r| r.ended_at), pending_approvals: None })
    }

    fn timeline(&self, _s: &SessionRef, _limit: u32) -> Result<Vec<ActivityItem>> {
        Ok(Vec::new())
    }

    fn socket(&self, _s: &SessionRef) -> Option<Socket> {
        None
    }
}
