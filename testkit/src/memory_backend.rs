//! An in-memory [`Backend`] for engine unit tests (`Engine::with_backend`):
//! the server's note semantics (docs/contracts/preloop-server.md §4.2-§4.6) without a socket, every
//! call recorded, every answer scriptable, any route made to fail.
//!
//! ```ignore
//! let mem = MemoryBackend::server();
//! let a = mem.queue("deploy to eu-west-1");
//! let mut engine = Engine::with_backend(def, config, "s1", Box::new(mem.clone()));
//! let (out, after) = engine.handle(&input)?;
//! engine.finish(after, true);
//! assert_eq!(mem.state(&a), NoteState::Delivered);
//! ```
//!
//! What it does, like the server: a pull claims up to 5 pending notes
//! (`claimed` when deferred, else `delivered`); a permission check claims
//! them as the hook's registry row says ([`ServerClaim`]: immediate →
//! `delivered`, deferred → `claimed`, never → nothing); an ack moves a
//! `claimed` note of the same session to `delivered` or `undeliverable`
//! (`spool_dropped`); session-end turns the session's pending and claimed
//! notes `undeliverable` (`session_ended`). A note can only move forward, so
//! a test sees any double ack or a lost receipt.

use preloop_shared::backend::{Backend, Claimed, HookMode, PermissionAnswer};
use preloop_shared::error::{Error, Result};
use preloop_shared::registry::ServerClaim;
use preloop_shared::render::{NoteElement, render_element};
use preloop_shared::time::Timestamp;
use preloop_shared::wire::*;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// One recorded backend call, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    SessionStart(SessionStartRequest),
    PermissionCheck { req: PermissionCheckRequest, claim: ServerClaim, can_carry: bool },
    Pull(PendingRequest),
    Ack(AckRequest),
    SessionEvent(SessionEventRequest),
    SessionEnd(SessionEndRequest),
}

impl Call {
    /// The route name, as the server spells it.
    pub fn route(&self) -> &'static str {
        match self {
            Call::SessionStart(_) => "session-start",
            Call::PermissionCheck { .. } => "permission-check",
            Call::Pull(_) => "notes/pending",
            Call::Ack(_) => "notes/ack",
            Call::SessionEvent(_) => "session-event",
            Call::SessionEnd(_) => "session-end",
        }
    }
}

/// A note's receipt state in the memory backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteState {
    Pending,
    /// Claimed with deferral: waits for an ack.
    Claimed,
    Delivered,
    Undeliverable(UndeliverableReason),
}

/// One stored note.
#[derive(Debug, Clone)]
pub struct MemNote {
    pub element: NoteElement,
    pub state: NoteState,
    /// The route that claimed it (`notes/pending`, `permission-check`).
    pub claimed_by: Option<&'static str>,
    /// How many acks named it (delivered or dropped); more than one is a bug.
    pub acks: usize,
}

#[derive(Debug)]
pub struct MemState {
    pub mode: HookMode,
    pub calls: Vec<Call>,
    /// Note ids, oldest first, not yet claimed.
    pub queue: VecDeque<String>,
    pub notes: BTreeMap<String, MemNote>,
    /// The next permission checks' decisions (then `Allow`).
    pub decisions: VecDeque<(Decision, String)>,
    /// Routes that fail (`Unreachable`) this many more times (`u32::MAX`: until cleared).
    pub failing: BTreeMap<&'static str, u32>,
    /// Routes whose effect happens but whose answer is lost (the server
    /// acted, the hook sees an error), this many more times.
    pub answer_lost: BTreeMap<&'static str, u32>,
    pub runtime_session_id: String,
    pub ended: bool,
    seq: u64,
}

/// The backend; clone it to keep a handle while the engine owns a copy.
#[derive(Clone, Debug)]
pub struct MemoryBackend(Arc<Mutex<MemState>>);

impl MemoryBackend {
    /// Behaves as the Preloop server.
    pub fn server() -> MemoryBackend {
        MemoryBackend::with_mode(HookMode::Server)
    }

    /// Reports the local mode (the engine's local-inbox paths).
    pub fn local() -> MemoryBackend {
        MemoryBackend::with_mode(HookMode::Local)
    }

    fn with_mode(mode: HookMode) -> MemoryBackend {
        MemoryBackend(Arc::new(Mutex::new(MemState {
            mode,
            calls: Vec::new(),
            queue: VecDeque::new(),
            notes: BTreeMap::new(),
            decisions: VecDeque::new(),
            failing: BTreeMap::new(),
            answer_lost: BTreeMap::new(),
            runtime_session_id: "5f9c7c7b-e77b-4e3c-99be-5a7a623325db".into(),
            ended: false,
            seq: 0,
        })))
    }

    /// The state, locked (for anything the helpers below do not cover).
    pub fn lock(&self) -> MutexGuard<'_, MemState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue a pending note from a human operator; returns its id.
    pub fn queue(&self, text: &str) -> String {
        let mut st = self.lock();
        st.seq += 1;
        let id = format!("{:016x}", 0xa000_0000_0000_0000u64 + st.seq);
        let at = Timestamp::from_secs(1_790_000_000 + st.seq as i64);
        let element = render_element(&id, "Olive Operator", "jwt", at, text);
        st.notes.insert(id.clone(), MemNote { element, state: NoteState::Pending, claimed_by: None, acks: 0 });
        st.queue.push_back(id.clone());
        id
    }

    /// Queue `n` notes of `text` plus their index; returns their ids.
    pub fn queue_n(&self, n: usize, text: &str) -> Vec<String> {
        (0..n).map(|i| self.queue(&format!("{text} {i}"))).collect()
    }

    /// A note element as the server would render it, not queued (for a
    /// spool planted by the test).
    pub fn element(id: &str, text: &str) -> NoteElement {
        render_element(id, "Olive Operator", "jwt", Timestamp::from_secs(1_790_000_000), text)
    }

    /// The next permission check answers `decision` with `reason`.
    pub fn decide_next(&self, decision: Decision, reason: &str) {
        self.lock().decisions.push_back((decision, reason.to_string()));
    }

    /// `route` fails (server unreachable) `times` more times.
    pub fn fail(&self, route: &'static str, times: u32) {
        self.lock().failing.insert(route, times);
    }

    /// `route` fails until [`MemoryBackend::heal`].
    pub fn fail_always(&self, route: &'static str) {
        self.fail(route, u32::MAX);
    }

    /// No route fails any more.
    pub fn heal(&self) {
        let mut st = self.lock();
        st.failing.clear();
        st.answer_lost.clear();
    }

    /// `route` acts but its answer is lost, `times` more times.
    pub fn lose_answer(&self, route: &'static str, times: u32) {
        self.lock().answer_lost.insert(route, times);
    }

    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The routes called, in order.
    pub fn routes(&self) -> Vec<&'static str> {
        self.lock().calls.iter().map(Call::route).collect()
    }

    /// Every ack request, in order.
    pub fn acks(&self) -> Vec<AckRequest> {
        self.lock()
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Ack(a) => Some(a.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn clear_calls(&self) {
        self.lock().calls.clear();
    }

    pub fn state(&self, id: &str) -> NoteState {
        self.lock().notes.get(id).unwrap_or_else(|| panic!("no note {id}")).state
    }

    pub fn note(&self, id: &str) -> MemNote {
        self.lock().notes.get(id).cloned().unwrap_or_else(|| panic!("no note {id}"))
    }

    /// Ids of notes in `state`.
    pub fn in_state(&self, state: NoteState) -> Vec<String> {
        self.lock().notes.iter().filter(|(_, n)| n.state == state).map(|(id, _)| id.clone()).collect()
    }

    fn enter(&self, call: Call) -> Result<MutexGuard<'_, MemState>> {
        let route = call.route();
        let mut st = self.lock();
        st.calls.push(call);
        if let Some(n) = st.failing.get_mut(route)
            && *n > 0
        {
            *n = n.saturating_sub(if *n == u32::MAX { 0 } else { 1 });
            return Err(Error::Unreachable { route, detail: "memory backend: failing on purpose".into() });
        }
        Ok(st)
    }

    /// After the effect: an error if this route's answer is to be lost.
    fn answer(st: &mut MemState, route: &'static str) -> Result<()> {
        if let Some(n) = st.answer_lost.get_mut(route)
            && *n > 0
        {
            *n -= 1;
            return Err(Error::Unreachable { route, detail: "memory backend: answer lost on purpose".into() });
        }
        Ok(())
    }

    fn claim(st: &mut MemState, route: &'static str, deferred: bool) -> Option<Claimed> {
        if st.ended {
            return None;
        }
        let mut notes = Vec::new();
        while notes.len() < 5 {
            let Some(id) = st.queue.pop_front() else { break };
            let n = st.notes.get_mut(&id).expect("queued notes exist");
            n.state = if deferred { NoteState::Claimed } else { NoteState::Delivered };
            n.claimed_by = Some(route);
            notes.push(n.element.clone());
        }
        (!notes.is_empty()).then_some(Claimed { notes, deferred })
    }
}

impl Backend for MemoryBackend {
    fn mode(&self) -> HookMode {
        self.lock().mode
    }

    fn session_start(&self, req: &SessionStartRequest) -> Result<SessionStartResponse> {
        let mut st = self.enter(Call::SessionStart(req.clone()))?;
        st.ended = false;
        let rid = st.runtime_session_id.clone();
        Self::answer(&mut st, "session-start")?;
        Ok(SessionStartResponse {
            runtime_session_id: rid,
            parent_session_id: req.parent_session_id.clone(),
            started_at: None,
            created: Some(true),
            alias: req.alias.clone(),
        })
    }

    fn permission_check(
        &self,
        req: &PermissionCheckRequest,
        claim: ServerClaim,
        can_carry: bool,
    ) -> Result<PermissionAnswer> {
        let mut st = self.enter(Call::PermissionCheck { req: req.clone(), claim, can_carry })?;
        let (decision, reason) = st.decisions.pop_front().unwrap_or((Decision::Allow, String::new()));
        let note = if st.mode == HookMode::Local {
            // The local inbox claims (deferred) only what the hook can carry.
            if can_carry { Self::claim(&mut st, "permission-check", true) } else { None }
        } else {
            match claim {
                ServerClaim::Immediate => Self::claim(&mut st, "permission-check", false),
                ServerClaim::Deferred => Self::claim(&mut st, "permission-check", true),
                ServerClaim::Never => None,
            }
        };
        Self::answer(&mut st, "permission-check")?;
        let decision = if st.mode == HookMode::Local { None } else { Some(decision) };
        Ok(PermissionAnswer { decision, reason, timed_out: false, note })
    }

    fn pull(&self, req: &PendingRequest) -> Result<Option<Claimed>> {
        let mut st = self.enter(Call::Pull(req.clone()))?;
        let claimed = Self::claim(&mut st, "notes/pending", req.defer_delivery);
        Self::answer(&mut st, "notes/pending")?;
        Ok(claimed)
    }

    fn ack(&self, req: &AckRequest) -> Result<()> {
        let mut st = self.enter(Call::Ack(req.clone()))?;
        for id in &req.note_ids {
            let Some(n) = st.notes.get_mut(id) else { continue };
            n.acks += 1;
            // §4.4: only a claimed note moves; anything else is left alone.
            if n.state == NoteState::Claimed {
                n.state = match req.undeliverable_reason {
                    None => NoteState::Delivered,
                    Some(r) => NoteState::Undeliverable(r),
                };
            }
        }
        Self::answer(&mut st, "notes/ack")
    }

    fn session_event(&self, req: &SessionEventRequest) -> Result<()> {
        let mut st = self.enter(Call::SessionEvent(req.clone()))?;
        Self::answer(&mut st, "session-event")
    }

    fn session_end(&self, req: &SessionEndRequest) -> Result<SessionEndResponse> {
        let mut st = self.enter(Call::SessionEnd(req.clone()))?;
        let mut marked = 0;
        st.queue.clear();
        for n in st.notes.values_mut() {
            if matches!(n.state, NoteState::Pending | NoteState::Claimed) {
                n.state = NoteState::Undeliverable(UndeliverableReason::SessionEnded);
                marked += 1;
            }
        }
        st.ended = true;
        let rid = st.runtime_session_id.clone();
        Self::answer(&mut st, "session-end")?;
        // As a server answers: the count, not the ids.
        Ok(SessionEndResponse { runtime_session_id: Some(rid), marked, marked_note_ids: Vec::new() })
    }
}
