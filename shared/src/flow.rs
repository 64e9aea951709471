//! The engine: what a hook does, harness-neutral. An adapter parses stdin
//! into an [`Input`], [`Engine::handle`] talks to the backend and the session
//! state and returns an [`Outcome`] plus the work that must wait until the
//! output is flushed ([`AfterFlush`]); the runner writes the output, then
//! calls [`Engine::finish`].
//!
//! Delivery guarantees (see docs/guarantees.md):
//! * A note is claimed only by a hook that can carry it; a non-carrying hook
//!   whose claim the server makes anyway spools the note for the next
//!   carrying hook of the session.
//! * Pulled notes are claimed with deferral and acked only after the output
//!   that carries them was written and flushed; if the write fails they go
//!   back to the spool.
//! * The spool is changed only under the session lock, so parallel hooks of
//!   one session never carry the same spooled note twice.

use crate::Harness;
use crate::backend::{Backend, Claimed, PermissionAnswer};
use crate::config::{Config, FailPolicy};
use crate::error::Result;
use crate::local::LocalInbox;
use crate::render::{self, NoteElement};
use crate::server::ServerBackend;
use crate::session::{self, OwedAck, RunFiles, RunState, SessionFile, SpoolEntry};
use crate::time::Timestamp;
use crate::wire::*;
use serde_json::Value;
use std::time::Duration;

/// Most notes a spool holds; past it, deferred notes are reported
/// `spool_dropped` rather than kept silently.
pub const SPOOL_CAP: usize = 5;
const RUN_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Crash injection for the hardening suite (`hardening/tests/crash.rs`):
/// with `PRELOOP_TEST_KILL_AT=<point>` in its environment a hook dies by
/// SIGKILL when it reaches that point: `after_claim` (a backend handed it
/// notes), `after_spool_write` (the session state was written),
/// `after_stdout` (the output was written and flushed), `before_ack` (just
/// before acking carried notes). Tests only; nothing sets it in production,
/// and an unset or unknown value does nothing.
pub fn kill_point(point: &str) {
    if std::env::var_os("PRELOOP_TEST_KILL_AT").is_some_and(|v| v == point) {
        unsafe extern "C" {
            fn kill(pid: i32, sig: i32) -> i32;
            fn getpid() -> i32;
        }
        // SAFETY: plain libc calls with valid arguments; 9 is SIGKILL.
        unsafe {
            kill(getpid(), 9);
        }
        std::process::abort();
    }
}

/// How much text a carrier takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CarrierLimit {
    /// Characters (Claude Code, Cursor: 10,000).
    Chars(usize),
    /// UTF-8 bytes (Codex: ~2,500 tokens, counted as bytes / 4).
    Bytes(usize),
}

impl CarrierLimit {
    fn measure(self, s: &str) -> usize {
        match self {
            CarrierLimit::Chars(_) => s.chars().count(),
            CarrierLimit::Bytes(_) => s.len(),
        }
    }
    fn max(self) -> usize {
        match self {
            CarrierLimit::Chars(n) | CarrierLimit::Bytes(n) => n,
        }
    }
}

/// A hook's input, harness-neutral.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub session_id: String,
    pub cwd: Option<String>,
    pub kind: InputKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum InputKind {
    /// Register the session and pull notes (`source`: startup, resume, ...).
    SessionStart {
        source: Option<String>,
        pull: bool,
    },
    /// A prompt was submitted; the first one titles the session.
    UserPrompt {
        prompt: String,
        hook_event_name: String,
        pull: bool,
    },
    /// A tool is about to run: ask the server.
    Tool {
        tool_name: String,
        tool_input: Value,
        phase: EvaluationPhase,
        hook_event_name: Option<String>,
        model: Option<String>,
        /// Whether this hook's output has a field the model reads.
        carries: bool,
    },
    /// The turn is ending; `may_continue` is the harness's own permission to
    /// continue it (Claude/Codex: `!stop_hook_active`).
    Stop {
        may_continue: bool,
    },
    SessionEnd {
        reason: String,
    },
}

/// What the hook should answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Model-visible text (a framed note block), if any.
    pub context: Option<String>,
    /// The permission decision; `None` leaves the harness's flow alone.
    pub decision: Option<Decision>,
    pub reason: Option<String>,
    /// Stop: continue the turn with `context`.
    pub continue_turn: bool,
    /// SessionStart: the runtime session id (lineage export).
    pub runtime_session_id: Option<String>,
    /// Ids of the notes in `context`, for the log.
    pub note_ids: Vec<String>,
}

/// Work that waits until the output is flushed.
#[derive(Debug, Default)]
pub struct AfterFlush {
    /// Notes in the output: acked (deferred ones) after a successful write,
    /// returned to the spool after a failed one.
    carried: Vec<SpoolEntry>,
    /// Deferred notes that could not be kept: ack `spool_dropped`.
    dropped: Vec<String>,
    /// Report the turn end.
    session_event: Option<SessionEventRequest>,
}

pub struct Engine {
    pub harness: Harness,
    pub config: Config,
    backend: Box<dyn Backend>,
    run: RunFiles,
    session_id: String,
    /// How much the calling hook's carrier takes.
    pub limit: CarrierLimit,
    /// Problems that did not change the answer, for the log.
    pub warnings: Vec<String>,
}

impl Engine {
    pub fn new(harness: Harness, config: Config, session_id: &str) -> Engine {
        let backend: Box<dyn Backend> = match &config.server {
            Some(server) => Box::new(ServerBackend::new(server, &config.settings)),
            None => Box::new(LocalInbox::new(&config.home, config.settings.note_ttl_secs)),
        };
        Engine::with_backend(harness, config, session_id, backend)
    }

    pub fn with_backend(harness: Harness, config: Config, session_id: &str, backend: Box<dyn Backend>) -> Engine {
        let run = RunFiles::new(&config.home, session_id);
        Engine {
            harness,
            config,
            backend,
            run,
            session_id: session_id.to_string(),
            limit: CarrierLimit::Chars(10_000),
            warnings: Vec::new(),
        }
    }

    pub fn mode(&self) -> &'static str {
        self.backend.mode()
    }

    /// Run the flow for one input.
    pub fn handle(&mut self, input: &Input) -> Result<(Outcome, AfterFlush)> {
        match &input.kind {
            InputKind::SessionStart { source, pull } => self.on_session_start(input, source.as_deref(), *pull),
            InputKind::UserPrompt { prompt, hook_event_name, pull } => {
                self.on_user_prompt(input, prompt, hook_event_name, *pull)
            }
            InputKind::Tool { .. } => self.on_tool(input),
            InputKind::Stop { may_continue } => self.on_stop(*may_continue),
            InputKind::SessionEnd { reason } => self.on_session_end(reason),
        }
    }

    // ----- registration ----------------------------------------------------

    fn register(
        &mut self,
        cwd: Option<&str>,
        first_prompt: Option<&str>,
        hook_event_name: Option<&str>,
    ) -> Result<SessionStartResponse> {
        let env = crate::config::Env::process();
        // A session is never its own parent: Cursor merges sessionStart's
        // `env` (our PRELOOP_PARENT_SESSION_ID export) into the same
        // session's later hooks, which register again.
        let own_runtime_id = self.run.read().0.runtime_session_id.or_else(|| {
            session::read_session_file(&self.config.home, &self.session_id).ok().flatten().map(|f| f.runtime_session_id)
        });
        let req = SessionStartRequest {
            session_id: self.session_id.clone(),
            source: Some(self.harness.source().to_string()),
            cwd: cwd.map(str::to_string),
            parent_session_id: env
                .get("PRELOOP_PARENT_SESSION_ID")
                .filter(|p| !p.is_empty() && own_runtime_id.as_deref() != Some(p.as_str())),
            alias: env.get("PRELOOP_SESSION_ALIAS").filter(|a| !a.is_empty()),
            first_prompt: first_prompt.map(|p| p.chars().take(20_000).collect()),
            hook_event_name: hook_event_name.map(str::to_string),
        };
        let resp = self.backend.session_start(&req)?;
        self.write_session_file(&resp, cwd)?;
        let _g = self.run.lock(RUN_LOCK_WAIT)?;
        let (mut state, _) = self.run.read();
        if state.runtime_session_id.as_deref() != Some(resp.runtime_session_id.as_str())
            || (first_prompt.is_some() && !state.first_prompt_registered)
        {
            state.runtime_session_id = Some(resp.runtime_session_id.clone());
            state.first_prompt_registered |= first_prompt.is_some();
            self.run.write(&state)?;
        }
        Ok(resp)
    }

    /// The public session file. The local inbox keeps it itself; in server
    /// mode we write it from the server's answer.
    fn write_session_file(&self, resp: &SessionStartResponse, cwd: Option<&str>) -> Result<()> {
        if self.config.is_local() {
            return Ok(());
        }
        let existing = session::read_session_file(&self.config.home, &self.session_id).ok().flatten();
        let started_at = resp.started_at.as_deref().and_then(Timestamp::parse).unwrap_or_else(Timestamp::now);
        let file = SessionFile {
            runtime_session_id: resp.runtime_session_id.clone(),
            started_at: existing
                .as_ref()
                .filter(|e| e.runtime_session_id == resp.runtime_session_id && e.ended_at.is_none())
                .map(|e| e.started_at)
                .unwrap_or(started_at),
            agent_kind: self.harness.source().to_string(),
            cwd: existing.as_ref().and_then(|e| e.cwd.clone()).or(cwd.map(str::to_string)),
            external_session_id: self.session_id.clone(),
            mode: "server".into(),
            alias: resp.alias.clone(),
            parent_session_id: resp.parent_session_id.clone(),
            title: existing.as_ref().and_then(|e| e.title.clone()),
            last_prompt_at: existing.as_ref().and_then(|e| e.last_prompt_at),
            ended_at: None,
            end_reason: None,
        };
        if existing.as_ref() != Some(&file) {
            session::write_session_file(&self.config.home, &file)?;
        }
        Ok(())
    }

    /// Register the session if no hook of it has yet (hooks installed mid-session,
    /// or a SessionStart that could not reach the server).
    fn ensure_registered(&mut self, cwd: Option<&str>) -> Result<()> {
        let (state, err) = self.run.read();
        if let Some(e) = err {
            self.warnings.push(format!("run state unreadable, starting afresh: {e}"));
        }
        if state.runtime_session_id.is_none() {
            self.register(cwd, None, None)?;
        }
        Ok(())
    }

    // ----- events ------------------------------------------------------------

    fn on_session_start(&mut self, input: &Input, _source: Option<&str>, pull: bool) -> Result<(Outcome, AfterFlush)> {
        let resp = self.register(input.cwd.as_deref(), None, None)?;
        let mut out = Outcome { runtime_session_id: Some(resp.runtime_session_id), ..Outcome::default() };
        let mut after = AfterFlush::default();
        if pull {
            let claimed = self.pull(DeliveryEvent::SessionStart)?;
            self.carry_into(claimed, &mut out, &mut after)?;
        }
        Ok((out, after))
    }

    fn on_user_prompt(
        &mut self,
        input: &Input,
        prompt: &str,
        hook_event_name: &str,
        pull: bool,
    ) -> Result<(Outcome, AfterFlush)> {
        let (state, _) = self.run.read();
        if !state.first_prompt_registered || state.runtime_session_id.is_none() {
            self.register(input.cwd.as_deref(), Some(prompt), Some(hook_event_name))?;
        }
        let mut out = Outcome::default();
        let mut after = AfterFlush::default();
        if pull {
            let claimed = self.pull(DeliveryEvent::SessionStart)?;
            self.carry_into(claimed, &mut out, &mut after)?;
        }
        Ok((out, after))
    }

    fn on_tool(&mut self, input: &Input) -> Result<(Outcome, AfterFlush)> {
        let InputKind::Tool { tool_name, tool_input, phase, hook_event_name, model, carries } = &input.kind else {
            unreachable!("on_tool takes a tool input")
        };
        if let Err(e) = self.ensure_registered(input.cwd.as_deref()) {
            // Not fatal: the check still runs (it falls back to the agent's session).
            self.warnings.push(format!("registration failed: {e}"));
        }
        let req = PermissionCheckRequest {
            tool_name: tool_name.clone(),
            tool_input: if tool_input.is_object() { tool_input.clone() } else { Value::Object(Default::default()) },
            source: self.harness.source().to_string(),
            hook_event_name: hook_event_name.clone(),
            session_id: self.session_id.clone(),
            model: model.clone(),
            cwd: input.cwd.clone(),
            evaluation_phase: *phase,
        };
        let mut out = Outcome::default();
        let mut after = AfterFlush::default();
        let answer = match self.backend.permission_check(&req, *carries) {
            Ok(a) => a,
            Err(e) => {
                let policy = match phase {
                    EvaluationPhase::PreToolUse => self.config.settings.pre_tool_use_on_error,
                    EvaluationPhase::PermissionRequest => self.config.settings.permission_request_on_error,
                };
                self.warnings.push(format!("permission-check failed ({}): {e}", e.kind()));
                if policy == FailPolicy::Deny {
                    out.decision = Some(Decision::Deny);
                    out.reason = Some(format!(
                        "Preloop could not check this tool call ({}); denied by the hook's fail-closed policy.",
                        e.kind()
                    ));
                }
                // The spool can still ride this output; a spool failure never
                // changes the fail policy's decision.
                if *carries && let Err(e) = self.carry_into(None, &mut out, &mut after) {
                    self.warnings.push(format!("spool not carried: {e}"));
                }
                return Ok((out, after));
            }
        };
        let PermissionAnswer { decision, reason, timed_out, note } = answer;
        if note.is_some() {
            kill_point("after_claim");
        }
        out.decision = decision;
        if decision == Some(Decision::Deny) {
            out.reason = Some(if reason.is_empty() { "Denied by Preloop".to_string() } else { reason });
            if timed_out {
                self.warnings.push("approval timed out".into());
            }
        }
        // Note handling never changes the decision (contract §4.2): a spool
        // that cannot be written is logged (and acked spool_dropped by
        // `finish`), and the server's answer still goes out.
        let noted = if *carries {
            self.carry_into(note, &mut out, &mut after)
        } else if let Some(note) = note {
            self.spool_only(note, &mut after)
        } else {
            Ok(())
        };
        if let Err(e) = noted {
            self.warnings.push(format!("note handling failed, decision kept: {e}"));
        }
        Ok((out, after))
    }

    fn on_stop(&mut self, may_continue: bool) -> Result<(Outcome, AfterFlush)> {
        let mut out = Outcome::default();
        let mut after = AfterFlush {
            session_event: Some(SessionEventRequest {
                session_id: self.session_id.clone(),
                hook_event_name: "Stop".into(),
                source: self.harness.source().to_string(),
            }),
            ..AfterFlush::default()
        };
        if !may_continue {
            return Ok((out, after));
        }
        let cap = self.config.settings.stop_rescue_cap;
        let (state, _) = self.run.read();
        if state.stop_rescues >= cap {
            return Ok((out, after));
        }
        if state.runtime_session_id.is_none() {
            // A session we never registered cannot be addressed; do not claim.
            self.ensure_registered(None)?;
        }
        // Hold the session lock across the pull so concurrent Stops cannot
        // both spend a rescue: the cap holds.
        let _g = self.run.lock(RUN_LOCK_WAIT)?;
        let (mut state, _) = self.run.read();
        if state.stop_rescues >= cap {
            return Ok((out, after));
        }
        let claimed = self.backend.pull(&PendingRequest {
            channel: "hook",
            event: DeliveryEvent::Stop,
            defer_delivery: true,
            session_id: self.session_id.clone(),
        })?;
        if claimed.is_some() {
            kill_point("after_claim");
        }
        let unchanged = state.clone();
        let taken = self.take_for_output(&mut state, claimed, &mut after);
        if !taken.is_empty() {
            state.stop_rescues += 1;
            out.continue_turn = true;
            self.fill(&taken, &mut out);
            after.carried = taken;
        }
        // The no-note Stop changes nothing: no fsync'd rewrite of the state.
        if state != unchanged {
            self.run.write(&state)?;
        }
        kill_point("after_spool_write");
        Ok((out, after))
    }

    fn on_session_end(&mut self, reason: &str) -> Result<(Outcome, AfterFlush)> {
        let (state, _) = self.run.read();
        // Deferred spooled notes will never be carried: report them first, so
        // the sender sees spool_dropped rather than session_ended.
        let dropped: Vec<String> = state.spool.iter().filter(|e| e.deferred).flat_map(|e| ids_of(&e.note)).collect();
        for e in state.spool.iter().filter(|e| !e.deferred) {
            self.warnings.push(format!("spooled note {} (claimed as delivered) dropped at session end", e.note.id));
        }
        self.retry_owed(&state.owed_acks);
        if !dropped.is_empty()
            && let Err(e) = self.backend.ack(&AckRequest {
                note_ids: dropped,
                session_id: self.session_id.clone(),
                undeliverable_reason: Some(UndeliverableReason::SpoolDropped),
            })
        {
            self.warnings.push(format!("spool_dropped ack failed: {e}"));
        }
        let resp = self.backend.session_end(&SessionEndRequest {
            external_session_id: self.session_id.clone(),
            reason: reason.to_string(),
        })?;
        if resp.marked > 0 {
            self.warnings.push(format!("{} note(s) marked undeliverable (session_ended)", resp.marked));
        }
        if !self.config.is_local()
            && let Ok(Some(mut f)) = session::read_session_file(&self.config.home, &self.session_id)
            && f.ended_at.is_none()
        {
            f.ended_at = Some(Timestamp::now());
            f.end_reason = Some(reason.to_string());
            let _ = session::write_session_file(&self.config.home, &f);
        }
        self.run.remove();
        Ok((Outcome::default(), AfterFlush::default()))
    }

    /// One poll of a background watcher (Claude Code's idle wake): claim
    /// what is pending, deferred, as a Stop delivery, merge it with the spool
    /// and put what fits into the outcome; [`Engine::finish`] acks it once
    /// written. A session no hook has registered yet claims nothing (the
    /// watcher may start before its SessionStart hook is done).
    pub fn poll_idle(&mut self) -> Result<(Outcome, AfterFlush)> {
        let mut out = Outcome::default();
        let mut after = AfterFlush::default();
        if self.run.read().0.runtime_session_id.is_none() {
            return Ok((out, after));
        }
        let claimed = self.pull(DeliveryEvent::Stop)?;
        self.carry_into(claimed, &mut out, &mut after)?;
        Ok((out, after))
    }

    // ----- notes ------------------------------------------------------------

    fn pull(&mut self, event: DeliveryEvent) -> Result<Option<Claimed>> {
        let claimed = self.backend.pull(&PendingRequest {
            channel: "hook",
            event,
            defer_delivery: true,
            session_id: self.session_id.clone(),
        })?;
        if claimed.is_some() {
            kill_point("after_claim");
        }
        Ok(claimed)
    }

    /// Merge the spool with `claimed`, put what fits into `out`, keep the rest
    /// spooled.
    fn carry_into(&mut self, claimed: Option<Claimed>, out: &mut Outcome, after: &mut AfterFlush) -> Result<()> {
        let (peek, _) = self.run.read();
        if claimed.is_none() && peek.spool.is_empty() && peek.owed_acks.is_empty() {
            return Ok(()); // the no-note path: no lock, no write
        }
        let _g = match self.run.lock(RUN_LOCK_WAIT) {
            Ok(g) => g,
            Err(e) => {
                // Cannot touch the spool: still deliver what was just claimed,
                // within the carrier's limit; what does not fit cannot be kept,
                // so a deferred claim is reported spool_dropped.
                self.warnings.push(format!("spool busy: {e}"));
                if let Some(c) = claimed {
                    let (take, rest) = split_to_fit(self.limit, to_entries(c));
                    for e in rest {
                        self.warnings.push(format!("note {} dropped: spool busy", e.note.id));
                        if e.deferred {
                            after.dropped.extend(ids_of(&e.note));
                        }
                    }
                    self.fill(&take, out);
                    after.carried = take;
                }
                return Ok(());
            }
        };
        let (mut state, _) = self.run.read();
        let owed = std::mem::take(&mut state.owed_acks);
        let taken = self.take_for_output(&mut state, claimed, after);
        self.run.write(&state)?;
        kill_point("after_spool_write");
        drop(_g);
        self.retry_owed(&owed);
        self.fill(&taken, out);
        after.carried = taken;
        Ok(())
    }

    /// Spool notes a non-carrying hook received.
    fn spool_only(&mut self, claimed: Claimed, after: &mut AfterFlush) -> Result<()> {
        let _g = self.run.lock(RUN_LOCK_WAIT);
        let (mut state, _) = self.run.read();
        let now = Timestamp::now();
        state.spool.extend(to_entries(claimed));
        self.enforce_spool_limits(&mut state, now, after);
        if let Err(e) = self.run.write(&state) {
            // Could not keep them: report rather than lose silently.
            after.dropped.extend(state.spool.iter().filter(|e| e.deferred).flat_map(|e| ids_of(&e.note)));
            return Err(e);
        }
        kill_point("after_spool_write");
        Ok(())
    }

    /// With the session lock held: take the oldest notes that fit the carrier,
    /// leave the rest in `state.spool`.
    fn take_for_output(
        &mut self,
        state: &mut RunState,
        claimed: Option<Claimed>,
        after: &mut AfterFlush,
    ) -> Vec<SpoolEntry> {
        let now = Timestamp::now();
        // Drop what expired while spooled before anything is carried.
        self.enforce_spool_limits(state, now, after);
        let mut merged = std::mem::take(&mut state.spool);
        if let Some(c) = claimed {
            merged.extend(to_entries(c));
        }
        let (take, rest) = split_to_fit(self.limit, merged);
        state.spool = rest;
        self.enforce_spool_limits(state, now, after);
        take
    }

    fn enforce_spool_limits(&mut self, state: &mut RunState, now: Timestamp, after: &mut AfterFlush) {
        let ttl = self.config.settings.note_ttl_secs;
        let (keep, expired): (Vec<_>, Vec<_>) =
            std::mem::take(&mut state.spool).into_iter().partition(|e| e.spooled_at.add_secs(ttl) > now);
        state.spool = keep;
        let overflow = if state.spool.len() > SPOOL_CAP { state.spool.split_off(SPOOL_CAP) } else { Vec::new() };
        for e in expired.iter().chain(overflow.iter()) {
            self.warnings.push(format!(
                "spooled note {} dropped ({})",
                e.note.id,
                if overflow.contains(e) { "spool full" } else { "expired" }
            ));
            if e.deferred {
                after.dropped.extend(ids_of(&e.note));
            }
        }
    }

    fn fill(&self, taken: &[SpoolEntry], out: &mut Outcome) {
        let notes: Vec<NoteElement> = taken.iter().map(|e| e.note.clone()).collect();
        out.context = render::frame(&notes);
        out.note_ids = notes.iter().flat_map(ids_of).collect();
    }

    fn retry_owed(&mut self, owed: &[OwedAck]) {
        let mut still = Vec::new();
        for a in owed {
            let req = AckRequest {
                note_ids: a.note_ids.clone(),
                session_id: self.session_id.clone(),
                undeliverable_reason: a.dropped.then_some(UndeliverableReason::SpoolDropped),
            };
            if self.backend.ack(&req).is_err() {
                still.push(a.clone());
            }
        }
        if !still.is_empty() {
            self.owe(still);
        }
    }

    fn owe(&mut self, acks: Vec<OwedAck>) {
        if let Ok(_g) = self.run.lock(RUN_LOCK_WAIT) {
            let (mut state, _) = self.run.read();
            state.owed_acks.extend(acks);
            let _ = self.run.write(&state);
        }
    }

    /// After the output: ack what was written (or put it back if writing
    /// failed), report drops, report the turn end.
    pub fn finish(&mut self, after: AfterFlush, written: bool) {
        let carried_deferred: Vec<String> =
            after.carried.iter().filter(|e| e.deferred).flat_map(|e| ids_of(&e.note)).collect();
        if written {
            if !carried_deferred.is_empty() {
                kill_point("before_ack");
                let req = AckRequest {
                    note_ids: carried_deferred.clone(),
                    session_id: self.session_id.clone(),
                    undeliverable_reason: None,
                };
                if let Err(e) = self.backend.ack(&req) {
                    self.warnings.push(format!("ack failed, owed to the next hook: {e}"));
                    self.owe(vec![OwedAck { note_ids: carried_deferred, dropped: false }]);
                }
            }
        } else if !after.carried.is_empty() {
            // The harness never got them: back to the front of the spool.
            if let Ok(_g) = self.run.lock(RUN_LOCK_WAIT) {
                let (mut state, _) = self.run.read();
                let mut spool = after.carried.clone();
                spool.append(&mut state.spool);
                state.spool = spool;
                let mut drop_now = AfterFlush::default();
                self.enforce_spool_limits(&mut state, Timestamp::now(), &mut drop_now);
                let _ = self.run.write(&state);
                if !drop_now.dropped.is_empty() {
                    let _ = self.backend.ack(&AckRequest {
                        note_ids: drop_now.dropped,
                        session_id: self.session_id.clone(),
                        undeliverable_reason: Some(UndeliverableReason::SpoolDropped),
                    });
                }
            }
        }
        if !after.dropped.is_empty() {
            let req = AckRequest {
                note_ids: after.dropped.clone(),
                session_id: self.session_id.clone(),
                undeliverable_reason: Some(UndeliverableReason::SpoolDropped),
            };
            if self.backend.ack(&req).is_err() {
                self.owe(vec![OwedAck { note_ids: after.dropped, dropped: true }]);
            }
        }
        if let Some(ev) = after.session_event
            && let Err(e) = self.backend.session_event(&ev)
        {
            self.warnings.push(format!("session-event failed: {e}"));
        }
    }
}

fn to_entries(c: Claimed) -> Vec<SpoolEntry> {
    let now = Timestamp::now();
    c.notes.into_iter().map(|note| SpoolEntry { note, deferred: c.deferred, spooled_at: now }).collect()
}

/// The oldest entries whose framed block fits `limit` (at least one, so a
/// single oversized note still moves, cut to fit by [`cut_to_fit`], rather than
/// it waiting forever), and the rest, in order.
fn split_to_fit(limit: CarrierLimit, entries: Vec<SpoolEntry>) -> (Vec<SpoolEntry>, Vec<SpoolEntry>) {
    let mut take: Vec<SpoolEntry> = Vec::new();
    let mut rest = Vec::new();
    for e in entries {
        if !rest.is_empty() || (!take.is_empty() && !fits(limit, &take, &e)) {
            rest.push(e);
        } else {
            take.push(e);
        }
    }
    if let [only] = take.as_mut_slice() {
        cut_to_fit(limit, only);
    }
    (take, rest)
}

/// A single note larger than the carrier (only a server that breaks its own
/// 4,096-character limit sends one) is cut to fit and marked as cut: an
/// over-long output breaks the event's schema, and Cursor drops an
/// over-long context whole (the note would be acked delivered, yet lost).
fn cut_to_fit(limit: CarrierLimit, e: &mut SpoolEntry) {
    const MARK: &str = "\n[cut by preloop-hooks: longer than this harness shows]\n</operator-note>";
    let measure = |n: &NoteElement| render::frame(std::slice::from_ref(n)).map_or(0, |b| limit.measure(&b));
    if measure(&e.note) <= limit.max() {
        return;
    }
    let el = &e.note.element;
    let head = el.find('\n').map_or(0, |i| i + 1);
    let mut shell = e.note.clone();
    shell.element = format!("{}{}", &el[..head], MARK);
    let Some(room) = limit.max().checked_sub(measure(&shell)) else { return };
    let mut used = 0;
    let body: String = el[head..]
        .chars()
        .take_while(|c| {
            used += limit.measure(c.encode_utf8(&mut [0; 4]));
            used <= room
        })
        .collect();
    e.note.element = format!("{}{body}{MARK}", &el[..head]);
}

fn fits(limit: CarrierLimit, take: &[SpoolEntry], next: &SpoolEntry) -> bool {
    let mut notes: Vec<NoteElement> = take.iter().map(|e| e.note.clone()).collect();
    notes.push(next.note.clone());
    render::frame(&notes).is_some_and(|b| limit.measure(&b) <= limit.max())
}

/// The ids to ack for one element (an unparseable server block may stand
/// for several, comma-joined).
fn ids_of(n: &NoteElement) -> Vec<String> {
    n.id.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect()
}
