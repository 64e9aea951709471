//! The engine: what a hook does, harness-neutral. An adapter parses stdin
//! into an [`Input`], [`Engine::handle`] talks to the backend and the session
//! state and returns an [`Outcome`] plus the work that must wait until the
//! output is flushed ([`AfterFlush`]); the runner writes the output, then
//! calls [`Engine::finish`].
//!
//! What the engine may do with a note is fixed by the hook's registry row
//! ([`HookDef`]): whether its output carries notes, what the server does on
//! its permission check, its carrier limit. The delivery rules
//! (docs/guarantees.md):
//!
//! * A note is claimed only by a hook that can carry it. A note the server
//!   claims on a gate that cannot show it (deferred) is spooled for the next
//!   carrying hook; one it claims immediately (already `delivered` on the
//!   server) always goes out in this output, or is spooled ahead of
//!   everything else when the carrier is full.
//! * Pulled notes are claimed with deferral and acked only after the output
//!   that carries them was written and flushed; if the write fails they go
//!   back to the front of the spool.
//! * The spool is changed only under the session lock, so parallel hooks of
//!   one session never carry the same spooled note twice. When it must give
//!   something up, it gives up deferred notes (acked `spool_dropped`), never
//!   a note the server already recorded `delivered`.
//! * A block holds 1 to 5 notes, oldest first, and a note body is never cut.

use crate::backend::{Backend, Claimed, HookMode, PermissionAnswer};
use crate::config::{Config, FailPolicy};
use crate::error::Result;
use crate::local::LocalInbox;
pub use crate::log::NeverRead;
use crate::registry::{AgentKind, Carrier, Does, HookDef, ServerClaim};
use crate::render::{self, NoteElement};
use crate::server::ServerBackend;
use crate::session::{self, OwedAck, RunFiles, RunState, SessionFile, SpoolEntry};
use crate::time::Timestamp;
use crate::wire::*;
use serde_json::Value;
use std::time::Duration;

pub use crate::registry::CarrierLimit;

/// Most deferred notes a spool keeps; past it they are reported
/// `spool_dropped` rather than kept silently. Notes the server already
/// recorded `delivered` are never given up. A carrying hook does not pull
/// while the spool holds a block's worth ([`BLOCK_CAP`]), so only gates the
/// server hands notes to (Codex PermissionRequest, Cursor before*) fill it;
/// the server's own limits (20 notes per author per agent per hour) keep
/// that far below the cap.
pub const SPOOL_CAP: usize = 50;
/// Most notes in one block (the server's contract: 1 to 5).
pub const BLOCK_CAP: usize = 5;
const RUN_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Crash injection for the hardening suite (`hardening/tests/crash.rs`):
/// with `PRELOOP_TEST_KILL_AT=<point>` in its environment a hook dies by
/// SIGKILL when it reaches that point: `after_claim` (a backend handed it
/// notes), `after_spool_write` (the session state was written, or was
/// found to need no change),
/// `after_stdout` (the output was written and flushed), `before_ack` (just
/// before acking carried notes). Only in builds with the `fault-injection`
/// feature, which nothing that ships enables.
#[cfg(feature = "fault-injection")]
pub fn kill_point(point: &str) {
    if std::env::var_os("PRELOOP_TEST_KILL_AT").is_some_and(|v| v == point) {
        // SAFETY: plain libc calls with valid arguments.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        std::process::abort();
    }
}

/// Crash injection is compiled out of what ships (see the `fault-injection` feature).
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn kill_point(_point: &str) {}

/// A hook's input, harness-neutral.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub session_id: String,
    pub cwd: Option<String>,
    /// The harness's transcript of the session, if the payload names it
    /// (recorded in the session file for `sessions attach`).
    pub transcript_path: Option<String>,
    /// The harness's own id of the session that started this one, where the
    /// harness itself says so (OpenCode's sub-agent: `session.created`'s
    /// `parentID`, the session whose `task` tool runs it). Resolved at
    /// registration to that session's runtime id through its session file
    /// (ours, live, this mode) and recorded as the parent; it outranks
    /// `PRELOOP_PARENT_SESSION_ID` and ancestry (docs/guarantees.md, "Lineage").
    pub parent_session_id: Option<String>,
    pub kind: InputKind,
}

/// What a tool hook may do with notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carry {
    /// Its output shows notes: what the server hands it, pulled ones and
    /// the session's spool.
    All,
    /// Only a note the server claims on the check itself can go out (by
    /// holding the tool call); nothing else is claimed or carried here.
    ClaimedOnly,
    /// Nothing: what the server hands it is spooled.
    None,
}

impl Carry {
    /// The registry default for a hook's carrier.
    pub fn of(carrier: Carrier) -> Carry {
        match carrier {
            Carrier::Context(_) | Carrier::Continue(_) | Carrier::Wake(_) => Carry::All,
            Carrier::DenyReason(_) => Carry::ClaimedOnly,
            Carrier::None => Carry::None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum InputKind {
    /// Register the session and pull notes.
    SessionStart {
        pull: bool,
    },
    /// A prompt was submitted; the first one titles the session.
    Prompt {
        prompt: String,
        pull: bool,
    },
    /// A tool is about to run: ask the server.
    Tool {
        tool_name: String,
        /// Which MCP tool this is, where the harness's hook names it apart
        /// from `tool_name` or spells it in a way only its adapter can read
        /// (Gemini's `mcp_context.tool_name`, Copilot's `<server>-<tool>`);
        /// `None` elsewhere ([`is_send_note`]).
        mcp_tool: Option<McpTool>,
        tool_input: Value,
        model: Option<String>,
        /// What the hook may carry (the registry default, or less: a
        /// sub-agent's hook carries nothing for the session's agent).
        carry: Carry,
    },
    /// A tool has run: pull notes into its result (`carry: false` in a
    /// sub-agent: nothing is pulled).
    AfterTool {
        carry: bool,
    },
    /// The turn is ending; `may_continue` is the harness's own permission to
    /// continue it (`!stop_hook_active`, Cursor's `loop_count`).
    Stop {
        may_continue: bool,
    },
    SessionEnd {
        reason: String,
    },
}

impl InputKind {
    /// The same input for a hook whose output no one reads (a closed
    /// stdout): nothing is pulled or carried, a Stop does not continue.
    pub fn without_output(self) -> InputKind {
        match self {
            InputKind::SessionStart { .. } => InputKind::SessionStart { pull: false },
            InputKind::Prompt { prompt, .. } => InputKind::Prompt { prompt, pull: false },
            InputKind::Tool { tool_name, mcp_tool, tool_input, model, .. } => {
                InputKind::Tool { tool_name, mcp_tool, tool_input, model, carry: Carry::None }
            }
            InputKind::AfterTool { .. } => InputKind::AfterTool { carry: false },
            InputKind::Stop { .. } => InputKind::Stop { may_continue: false },
            end @ InputKind::SessionEnd { .. } => end,
        }
    }
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
    /// A gate's check failed and its fail policy answered (`decision` is
    /// that policy's): the log says `fail_open` / `fail_closed`, never `ok`.
    pub gate_failed: Option<FailPolicy>,
    /// PreToolUse: the tool input to run instead of the model's, when the
    /// hook adds something to it (Preloop's `send_note` gets the caller's
    /// session id, [`caller_session_rewrite`]). Never set with a deny; an
    /// adapter whose harness can rewrite only together with a grant leaves
    /// it unprinted (docs/event-matrix.md, "send_note caller session").
    pub tool_input: Option<Value>,
}

/// An MCP tool as far as the engine cares: Preloop's `send_note`, or any
/// other. An adapter that can read the MCP tool's own name gives this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpTool {
    SendNote,
    Other,
}

impl McpTool {
    /// The tool of this MCP name (the server's own name for it).
    pub fn named(tool: &str) -> McpTool {
        if tool == "send_note" { McpTool::SendNote } else { McpTool::Other }
    }
}

/// The field Preloop's `send_note` MCP tool reads the caller's harness
/// session id from ("Harness session id supplied by the Preloop hook").
pub const CALLER_SESSION_FIELD: &str = "preloop_caller_session_id";

/// Whether a tool call is an MCP tool named `send_note`. `mcp_tool` (the
/// MCP tool's own name, when the adapter has it: Gemini's
/// `mcp_context.tool_name`, Copilot's `<server>-<tool>`) decides when given;
/// otherwise the name as Claude Code and Codex spell an MCP tool,
/// `mcp__<server>__send_note` (the server name is the user's and may itself
/// hold `__`, so the tool is what follows the last `__`), or Cursor's
/// preToolUse `MCP:send_note`. A built-in tool that happens to be called
/// `send_note` is not one.
pub fn is_send_note(tool_name: &str, mcp_tool: Option<McpTool>) -> bool {
    if let Some(tool) = mcp_tool {
        return tool == McpTool::SendNote;
    }
    if let Some(rest) = tool_name.strip_prefix("mcp__") {
        return matches!(rest.rsplit_once("__"), Some((server, "send_note")) if !server.is_empty());
    }
    tool_name == "MCP:send_note"
}

/// Preloop's `send_note` with [`CALLER_SESSION_FIELD`] set to the caller's
/// harness session id (the hook payload's), replacing whatever the model
/// wrote there: a model-supplied value is never trusted. `None` for any other
/// tool ([`is_send_note`]), an input that is not a JSON object, or an empty
/// session id.
pub fn caller_session_rewrite(
    tool_name: &str,
    mcp_tool: Option<McpTool>,
    tool_input: &Value,
    session_id: &str,
) -> Option<Value> {
    if !is_send_note(tool_name, mcp_tool) || session_id.is_empty() {
        return None;
    }
    let mut obj = tool_input.as_object()?.clone();
    obj.insert(CALLER_SESSION_FIELD.to_string(), Value::String(session_id.to_string()));
    Some(Value::Object(obj))
}

impl Outcome {
    /// A deny with a reason (fail-closed answers).
    pub fn deny(reason: impl Into<String>) -> Outcome {
        Outcome { decision: Some(Decision::Deny), reason: Some(reason.into()), ..Outcome::default() }
    }
}

/// Work that waits until the output is flushed.
#[derive(Debug, Default)]
pub struct AfterFlush {
    /// Notes in the output: acked (deferred ones) after a successful write,
    /// returned to the spool after a failed one.
    carried: Vec<SpoolEntry>,
    /// Deferred notes that could not be kept: ack `spool_dropped`.
    dropped: Vec<String>,
}

impl AfterFlush {
    /// Ids of the notes the output carries.
    pub fn carried_ids(&self) -> Vec<String> {
        self.carried.iter().flat_map(|e| ids_of(&e.note)).collect()
    }
    /// Ids reported `spool_dropped` after the output.
    pub fn dropped_ids(&self) -> &[String] {
        &self.dropped
    }
}

pub struct Engine {
    pub def: &'static HookDef,
    pub config: Config,
    backend: Box<dyn Backend>,
    run: RunFiles,
    session_id: String,
    /// How much the calling hook's carrier takes.
    pub limit: CarrierLimit,
    /// Problems that did not change the answer, for the log.
    pub warnings: Vec<String>,
    /// Set by a session's end: the notes it never showed, for the log line.
    pub never_read: Option<NeverRead>,
    /// The input's transcript path, recorded at registration.
    transcript_path: Option<String>,
    /// The input's parent session, by the harness's id ([`Input::parent_session_id`]).
    harness_parent: Option<String>,
    /// The run's flow execution, read once ([`crate::config::execution_id`]).
    execution_id: Option<String>,
    /// The run state as this hook read it at its start, while the hook has
    /// written none: the pull and the no-note check use it instead of
    /// reading the file again (docs/performance.md, "Round five"). A hook
    /// of the same session that spools meanwhile is ordered after this one.
    seen: Option<RunState>,
}

impl Engine {
    pub fn new(def: &'static HookDef, config: Config, session_id: &str) -> Engine {
        let backend: Box<dyn Backend> = match &config.server {
            Some(server) => Box::new(ServerBackend::new(server, &config.settings)),
            None => Box::new(LocalInbox::new(&config.home, config.settings.note_ttl_secs)),
        };
        Engine::with_backend(def, config, session_id, backend)
    }

    pub fn with_backend(def: &'static HookDef, config: Config, session_id: &str, backend: Box<dyn Backend>) -> Engine {
        let run = RunFiles::new(&config.home, session_id);
        Engine {
            def,
            config,
            backend,
            run,
            session_id: session_id.to_string(),
            limit: def.limit,
            warnings: Vec::new(),
            never_read: None,
            transcript_path: None,
            harness_parent: None,
            execution_id: crate::config::execution_id(),
            seen: None,
        }
    }

    pub fn mode(&self) -> HookMode {
        self.backend.mode()
    }

    fn largest(&self) -> CarrierLimit {
        crate::registry::largest_limit(self.def.harness())
    }

    fn source(&self) -> String {
        self.def.harness().source().to_string()
    }

    /// Run the flow for one input.
    pub fn handle(&mut self, input: &Input) -> Result<(Outcome, AfterFlush)> {
        self.transcript_path = input.transcript_path.clone();
        self.harness_parent = input.parent_session_id.clone();
        self.seen = None;
        match &input.kind {
            InputKind::SessionStart { pull } => self.on_session_start(input, *pull),
            InputKind::Prompt { prompt, pull } => self.on_prompt(input, prompt, *pull),
            InputKind::Tool { .. } => self.on_tool(input),
            InputKind::AfterTool { carry } => self.on_after_tool(input, *carry),
            InputKind::Stop { may_continue } => self.on_stop(*may_continue),
            InputKind::SessionEnd { reason } => self.on_session_end(reason),
        }
    }

    // ----- registration ----------------------------------------------------

    fn register(&mut self, cwd: Option<&str>, first_prompt: Option<&str>) -> Result<SessionStartResponse> {
        let env = crate::config::Env::process();
        // A session is never its own parent: Cursor merges sessionStart's
        // `env` (our PRELOOP_PARENT_SESSION_ID export) into the same
        // session's later hooks, which register again.
        // The run state, read once here: after the server's answer it also
        // says whether anything changed (below).
        let (before, _) = self.run.read();
        let registered = before.runtime_session_id.clone();
        let first_registration = registered.is_none();
        let own_runtime_id = registered.or_else(|| {
            session::read_session_file(&self.config.home, &self.session_id).ok().flatten().map(|f| f.runtime_session_id)
        });
        // The parent the harness names (a sub-agent's session), where it
        // is a live session of ours: it outranks the variable, which names
        // the run the whole harness process was started from.
        let harness_parent = self.harness_parent.clone().and_then(|p| {
            let found = self.live_session_runtime_id(&p).filter(|id| own_runtime_id.as_deref() != Some(id.as_str()));
            if found.is_none() {
                self.warnings
                    .push(format!("parent session {} is not a live session here: not recorded", cut_chars(&p, 80)));
            }
            found
        });
        let parent = env.get("PRELOOP_PARENT_SESSION_ID").filter(|p| !p.is_empty() && harness_parent.is_none());
        let parent = match parent {
            Some(p) if own_runtime_id.as_deref() == Some(p.as_str()) => None,
            Some(p) if !is_uuid(&p) => {
                // The server takes a runtime session UUID here and refuses
                // anything longer than 64 characters with a 422, which would
                // leave the session unregistered: drop the hint, keep the run.
                self.warnings.push(format!(
                    "PRELOOP_PARENT_SESSION_ID ignored: not a runtime session id ({} chars)",
                    p.chars().count()
                ));
                None
            }
            p => p,
        };
        // Where no variable arrived, the parent by process ancestry, looked
        // for at the session's first registration only (docs/guarantees.md,
        // "Lineage"); every registration records the harness process.
        let parent = harness_parent.or(parent);
        let ancestry = crate::lineage::Ancestry::here(parent.is_none() && first_registration);
        let parent = parent.or_else(|| {
            crate::lineage::find_parent(&self.config.home, &ancestry, self.mode(), own_runtime_id.as_deref())
                .map(|(p, _)| p)
        });
        let harness_process = ancestry.harness_process();
        let alias =
            env.get("PRELOOP_SESSION_ALIAS").map(|a| crate::local::sanitize_alias(&a)).filter(|a| !a.is_empty());
        let req = SessionStartRequest {
            session_id: self.session_id.clone(),
            source: Some(self.source()),
            cwd: cwd.map(|c| cut_chars(c, MAX_CWD_CHARS)),
            parent_session_id: parent,
            alias,
            first_prompt: first_prompt.map(|p| cut_chars(p, MAX_FIRST_PROMPT_CHARS)),
            hook_event_name: first_prompt.and(self.def.server_event).map(str::to_string),
            transcript_path: self.transcript_path.clone(),
            harness_process: harness_process.clone(),
        };
        let resp = self.backend.session_start(&req)?;
        if !is_uuid(&resp.runtime_session_id) {
            return Err(crate::Error::Protocol {
                route: "session-start",
                detail: "runtime_session_id is not a UUID".into(),
            });
        }
        self.mirror_session(&resp, cwd, harness_process.as_ref())?;
        if let Some(p) = &harness_process
            && let Err(e) = crate::lineage::record(&self.config.home, p, &self.session_id)
        {
            self.warnings.push(format!("lineage: harness process not recorded: {e}"));
        }
        // Nothing to record (the run already holds this runtime id, and the
        // first prompt if this is one): no lock, no second read, no write
        // (docs/performance.md, "Round five"). A hook of the same session
        // that changes the state meanwhile is ordered after this one, as it
        // would be had this one taken the lock first.
        let changes = |state: &RunState| {
            state.runtime_session_id.as_deref() != Some(resp.runtime_session_id.as_str())
                || (first_prompt.is_some() && !state.first_prompt_registered)
        };
        if !changes(&before) {
            self.seen = Some(before);
            return Ok(resp);
        }
        let _g = self.run.lock(RUN_LOCK_WAIT)?;
        let (mut state, _) = self.run.read();
        if changes(&state) {
            state.runtime_session_id = Some(resp.runtime_session_id.clone());
            state.first_prompt_registered |= first_prompt.is_some();
            self.run.write(&state)?;
        }
        Ok(resp)
    }

    /// The runtime id of the live session of ours the harness calls
    /// `harness_id`: its session file, owned by us, not ended, of this mode.
    fn live_session_runtime_id(&self, harness_id: &str) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        if harness_id.is_empty() || harness_id == self.session_id {
            return None;
        }
        let path = session::session_file_path(&self.config.home, harness_id);
        let owned = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.uid() == crate::fsutil::euid());
        let file = session::read_session_file(&self.config.home, harness_id).ok().flatten().filter(|_| owned)?;
        (file.ended_at.is_none() && file.mode == self.mode() && is_uuid(&file.runtime_session_id))
            .then_some(file.runtime_session_id)
    }

    /// The public session file. The local inbox keeps it itself; in server
    /// mode we mirror the server's answer into it, unsynced.
    fn mirror_session(
        &self,
        resp: &SessionStartResponse,
        cwd: Option<&str>,
        harness_process: Option<&crate::process::HarnessProcess>,
    ) -> Result<()> {
        if self.config.is_local() {
            return Ok(());
        }
        let existing = session::read_session_file(&self.config.home, &self.session_id).ok().flatten();
        let started_at = resp.started_at.as_deref().and_then(Timestamp::parse).unwrap_or_else(Timestamp::now);
        let same_run =
            existing.as_ref().filter(|e| e.runtime_session_id == resp.runtime_session_id && e.ended_at.is_none());
        let file = SessionFile {
            runtime_session_id: resp.runtime_session_id.clone(),
            started_at: same_run.map(|e| e.started_at).unwrap_or(started_at),
            agent_kind: AgentKind::of(self.def.harness()),
            cwd: existing.as_ref().and_then(|e| e.cwd.clone()).or(cwd.map(str::to_string)),
            external_session_id: self.session_id.clone(),
            mode: HookMode::Server,
            alias: resp.alias.clone(),
            parent_session_id: resp.parent_session_id.clone(),
            title: existing.as_ref().and_then(|e| e.title.clone()),
            last_prompt_at: existing.as_ref().and_then(|e| e.last_prompt_at),
            transcript_path: self
                .transcript_path
                .clone()
                .or_else(|| existing.as_ref().and_then(|e| e.transcript_path.clone())),
            execution_id: self.execution_id.clone().or_else(|| existing.as_ref().and_then(|e| e.execution_id.clone())),
            harness_process: harness_process
                .cloned()
                .or_else(|| existing.as_ref().and_then(|e| e.harness_process.clone())),
            ended_at: None,
            end_reason: None,
            uncarried_notes: existing.as_ref().map(|e| e.uncarried_notes.clone()).unwrap_or_default(),
        };
        if existing.as_ref() != Some(&file) {
            session::write_session_mirror(&self.config.home, &file)?;
        }
        Ok(())
    }

    /// Register the session if no hook of it has yet (hooks installed mid-session,
    /// or a SessionStart that could not reach the server). A session that
    /// has ended is left ended ([`Engine::has_ended`]): `Ok(false)`.
    fn ensure_registered(&mut self, cwd: Option<&str>) -> Result<bool> {
        let (state, err) = self.run.read();
        if let Some(e) = err {
            self.warnings.push(format!("run state unreadable, starting afresh: {e}"));
        }
        if state.runtime_session_id.is_none() {
            if self.has_ended(&state) {
                return Ok(false);
            }
            self.register(cwd, None)?;
            // A tool hook may write the state before it carries: no
            // remembered state past here.
            self.seen = None;
        }
        Ok(true)
    }

    /// Whether this session has ended: SessionEnd removed its run state and
    /// its session file records the end. Registering again would reopen it
    /// (docs/contracts/preloop-server.md §4.1), and only a SessionStart (a
    /// resume) may do that: a late hook of an ended session (a prompt, a
    /// tool call, a Stop that arrives after SessionEnd) stays neutral and
    /// claims nothing. Costs a file read only when the run state is gone.
    fn has_ended(&mut self, state: &RunState) -> bool {
        if state.runtime_session_id.is_some() {
            return false;
        }
        let ended = session::read_session_file(&self.config.home, &self.session_id)
            .ok()
            .flatten()
            .is_some_and(|f| f.ended_at.is_some());
        if ended {
            self.warnings.push(format!(
                "{}: the session has ended; only a SessionStart (resume) reopens it, so this hook claims nothing",
                self.def.on
            ));
        }
        ended
    }

    // ----- events ------------------------------------------------------------

    fn delivery(&self) -> DeliveryEvent {
        self.def.delivery.unwrap_or(DeliveryEvent::SessionStart)
    }

    fn on_session_start(&mut self, input: &Input, pull: bool) -> Result<(Outcome, AfterFlush)> {
        // A resume right after the session's end: its SessionEnd worker
        // goes first (shared/src/detach.rs).
        if let Some(w) = crate::ending::wait_for_ending(&self.config.home, &self.session_id, crate::ending::ENDING_WAIT)
        {
            self.warnings.push(w);
        }
        let resp = self.register(input.cwd.as_deref(), None)?;
        let mut out = Outcome { runtime_session_id: Some(resp.runtime_session_id), ..Outcome::default() };
        let mut after = AfterFlush::default();
        if pull {
            let claimed = self.pull(self.delivery())?;
            self.carry_into(claimed, &mut out, &mut after);
        }
        Ok((out, after))
    }

    fn on_prompt(&mut self, input: &Input, prompt: &str, pull: bool) -> Result<(Outcome, AfterFlush)> {
        let (state, _) = self.run.read();
        if self.has_ended(&state) {
            return Ok((Outcome::default(), AfterFlush::default()));
        }
        if !state.first_prompt_registered || state.runtime_session_id.is_none() {
            let first = Some(prompt).filter(|p| !p.trim().is_empty());
            self.register(input.cwd.as_deref(), first)?;
        } else {
            self.seen = Some(state);
        }
        let mut out = Outcome::default();
        let mut after = AfterFlush::default();
        if pull {
            let claimed = self.pull(self.delivery())?;
            self.carry_into(claimed, &mut out, &mut after);
        }
        Ok((out, after))
    }

    fn on_tool(&mut self, input: &Input) -> Result<(Outcome, AfterFlush)> {
        let InputKind::Tool { tool_name, mcp_tool, tool_input, model, carry } = &input.kind else {
            unreachable!("on_tool takes a tool input")
        };
        #[allow(
            clippy::expect_used,
            reason = "an invariant: adapters build a tool input only for a registry row with a gate"
        )]
        let gate = self.def.gate.expect("a tool input comes from a gate");
        // The check runs whatever happens here: a central deny is never
        // skipped. An ended session is not reopened; the server claims
        // nothing on a check of an ended session (§4.3, trap 19) and the
        // local inbox is asked for nothing.
        let carry = match self.ensure_registered(input.cwd.as_deref()) {
            Ok(true) => carry,
            Ok(false) => &Carry::None,
            Err(e) => {
                // Not fatal: the check still runs (it falls back to the agent's session).
                self.warnings.push(format!("registration failed: {e}"));
                carry
            }
        };
        // The gate checks the input that will run: Preloop's `send_note` with
        // the caller's session id (set here, never the model's).
        let rewritten = caller_session_rewrite(tool_name, *mcp_tool, tool_input, &input.session_id);
        let tool_input = rewritten.as_ref().unwrap_or(tool_input);
        let req = PermissionCheckRequest {
            tool_name: cut_chars(tool_name, MAX_TOOL_NAME_CHARS),
            tool_input: if tool_input.is_object() { tool_input.clone() } else { Value::Object(Default::default()) },
            source: self.source(),
            hook_event_name: self.def.server_event.map(str::to_string),
            session_id: self.session_id.clone(),
            model: model.as_deref().map(|m| cut_chars(m, 255)),
            cwd: input.cwd.clone(),
            evaluation_phase: gate.phase,
            flow_execution_id: self.execution_id.clone(),
        };
        let mut out = Outcome::default();
        let mut after = AfterFlush::default();
        // The local inbox claims only what this hook can carry, and never
        // where the server would not hand a note out either.
        let can_carry = *carry == Carry::All && gate.server_claim != ServerClaim::Never;
        let answer = match self.backend.permission_check(&req, gate.server_claim, can_carry) {
            Ok(a) => a,
            Err(e) => {
                let policy = self.config.settings.fail_policy(gate.fail);
                self.warnings.push(format!("permission-check failed ({}): {e}", e.kind()));
                out.gate_failed = Some(policy);
                if policy == FailPolicy::Deny {
                    out.decision = Some(Decision::Deny);
                    out.reason = Some(fail_closed_reason(e.kind()));
                } else {
                    // Fail open leaves the harness's own flow: the rewrite
                    // grants nothing, so it still rides.
                    out.tool_input = rewritten;
                }
                // The spool can still ride this output; a spool failure never
                // changes the fail policy's decision.
                if *carry == Carry::All {
                    self.carry_into(None, &mut out, &mut after);
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
            out.reason = Some(if reason.trim().is_empty() { "Denied by Preloop".to_string() } else { reason });
            if timed_out {
                self.warnings.push("approval timed out".into());
            }
        }
        // The engine never changes the server's decision for a note
        // (docs/contracts/preloop-server.md §4.2): `out.decision` is the
        // server's. One adapter does, by design: Gemini's BeforeTool has no
        // field the model reads but a deny's reason, so when the check
        // claimed a note (recorded delivered at once) its output holds the
        // call (a deny with the note as the reason, hooks/gemini/src/lib.rs),
        // and the model reads the note before the tool runs.
        match carry {
            Carry::All => self.carry_into(note, &mut out, &mut after),
            Carry::ClaimedOnly => {
                if let Some(note) = note {
                    self.carry_claimed_only(note, &mut out, &mut after);
                }
            }
            Carry::None => {
                if let Some(note) = note {
                    self.spool_only(note, &mut after);
                }
            }
        }
        // A deny carries no rewrite: there is no input to run.
        if out.decision != Some(Decision::Deny) {
            out.tool_input = rewritten;
        }
        Ok((out, after))
    }

    fn on_after_tool(&mut self, input: &Input, carry: bool) -> Result<(Outcome, AfterFlush)> {
        let mut out = Outcome::default();
        let mut after = AfterFlush::default();
        if !carry || !self.ensure_registered(input.cwd.as_deref())? {
            return Ok((out, after));
        }
        let claimed = self.pull(self.delivery())?;
        self.carry_into(claimed, &mut out, &mut after);
        Ok((out, after))
    }

    fn on_stop(&mut self, may_continue: bool) -> Result<(Outcome, AfterFlush)> {
        let mut out = Outcome::default();
        let mut after = AfterFlush::default();
        let cap = self.config.settings.stop_rescue_cap;
        let (state, _) = self.run.read();
        if self.has_ended(&state) {
            // A Stop after SessionEnd: no turn end to report, nothing to claim.
            return Ok((out, after));
        }
        let may_pull = may_continue && state.stop_rescues < cap;
        if may_pull && state.runtime_session_id.is_none() {
            // A session we never registered cannot be addressed; do not claim.
            self.ensure_registered(None)?;
        }
        // Report the turn end now: the server answers it with a 204 whatever
        // it records, so the answer is read after the output (`finish`, via
        // `Backend::settle`) and the report overlaps the pull instead of
        // adding a round trip.
        let event = SessionEventRequest {
            session_id: self.session_id.clone(),
            hook_event_name: self.def.server_event.unwrap_or("Stop").to_string(),
            source: self.source(),
        };
        if let Err(e) = self.backend.session_event(&event) {
            self.warnings.push(format!("session-event failed: {e}"));
        }
        if !may_pull {
            return Ok((out, after));
        }
        // Hold the session lock across the pull so concurrent Stops cannot
        // both spend a rescue: the cap holds.
        let _g = self.run.lock(RUN_LOCK_WAIT)?;
        let (mut state, _) = self.run.read();
        if state.stop_rescues >= cap {
            return Ok((out, after));
        }
        let claimed = self.pull(self.delivery())?;
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
            // The notes are in hand and go out whatever the write does.
            self.keep_state(&state, &mut after);
        }
        Ok((out, after))
    }

    /// The session-end call. The detached worker, which nothing waits for,
    /// tries it again after a transient failure ([`crate::Error::is_transient`]:
    /// a loaded server that did not answer within the call timeout, a 5xx),
    /// [`WORKER_END_ATTEMPTS`] times in all, a second apart: the server
    /// takes a repeated end as a no-op (`marked: 0`, docs/contracts/preloop-server.md
    /// §4.6), so a first call that did arrive costs nothing, and one that did
    /// not still ends the session and its pending notes. A hook ending the
    /// session in-process has its budget and calls once.
    fn end_on_server(&mut self, reason: &str) -> Result<SessionEndResponse> {
        let req = SessionEndRequest { external_session_id: self.session_id.clone(), reason: cut_chars(reason, 255) };
        let attempts = if crate::ending::in_worker() { WORKER_END_ATTEMPTS } else { 1 };
        let mut tried = 1;
        loop {
            match self.backend.session_end(&req) {
                Err(e) if tried < attempts && e.is_transient() => {
                    self.warnings.push(format!("session-end attempt {tried} failed ({e}); trying again"));
                    std::thread::sleep(Duration::from_secs(1));
                    tried += 1;
                }
                r => return r,
            }
        }
    }

    fn on_session_end(&mut self, reason: &str) -> Result<(Outcome, AfterFlush)> {
        let (state, _) = self.run.read();
        // Deferred spooled notes will never be carried: report them first, so
        // the sender sees spool_dropped rather than session_ended.
        let dropped: Vec<String> = state.spool.iter().filter(|e| e.deferred).flat_map(|e| ids_of(&e.note)).collect();
        // Notes the server recorded delivered at the claim (an immediate
        // claim beyond the carrier's room, or in a sub-agent) that no output
        // carried: the one case where a receipt over-reports. Named in the
        // hook log and kept in the session file for `notes status` and
        // `doctor`; the server (0.17.1) has no route that records it on the
        // session's timeline (session-event takes only an event name).
        let uncarried: Vec<String> = state.spool.iter().filter(|e| !e.deferred).flat_map(|e| ids_of(&e.note)).collect();
        for id in &uncarried {
            self.warnings.push(format!(
                "spooled note {id} (already recorded delivered by the server) was never carried: the session ended; its receipt over-reports"
            ));
        }
        self.retry_owed(&state.owed_acks);
        let mut never_read = NeverRead { count: uncarried.len() as u64, ids: uncarried.clone() };
        if !dropped.is_empty() {
            match self.backend.ack(&AckRequest {
                note_ids: dropped.clone(),
                session_id: self.session_id.clone(),
                undeliverable_reason: Some(UndeliverableReason::SpoolDropped),
            }) {
                Ok(()) => {
                    never_read.count += dropped.len() as u64;
                    never_read.ids.extend(dropped);
                }
                // Still claimed: the end below marks them (session_ended) and counts them.
                Err(e) => self.warnings.push(format!("spool_dropped ack failed: {e}")),
            }
        }
        let resp = self.end_on_server(reason)?;
        if resp.marked > 0 {
            self.warnings.push(format!(
                "{} marked undeliverable (session_ended)",
                crate::words::count(usize::try_from(resp.marked).unwrap_or(usize::MAX), "note")
            ));
        }
        never_read.count += resp.marked.max(0) as u64;
        never_read.ids.extend(resp.marked_note_ids);
        self.never_read = Some(never_read);
        if crate::ending::in_worker() && crate::ending::superseded(&self.config.home, &self.session_id) {
            // The session was started again while this worker ended it:
            // its files are the new run's now, and the end may have reached
            // the server after the new start, so register it again (which
            // reopens it, docs/contracts/preloop-server.md §4.1).
            self.warnings.push(
                "the session started again before this end was done: registered again, local files left to the new run"
                    .into(),
            );
            // Not `register`: this worker is not the harness's child, so
            // it neither records a harness process nor looks for a parent.
            let again = SessionStartRequest {
                session_id: self.session_id.clone(),
                source: Some(self.source()),
                cwd: None,
                parent_session_id: None,
                alias: None,
                first_prompt: None,
                hook_event_name: None,
                transcript_path: None,
                harness_process: None,
            };
            if let Err(e) = self.backend.session_start(&again) {
                self.warnings.push(format!("registering the new run again failed: {e}"));
            }
            return Ok((Outcome::default(), AfterFlush::default()));
        }
        crate::lineage::forget_session(&self.config.home, &self.session_id);
        if !self.config.is_local()
            && let Ok(Some(mut f)) = session::read_session_file(&self.config.home, &self.session_id)
            && f.ended_at.is_none()
        {
            f.ended_at = Some(Timestamp::now());
            f.end_reason = Some(reason.to_string());
            f.uncarried_notes.extend(uncarried);
            // The server holds the end; this file only mirrors it.
            let _ = session::write_session_mirror(&self.config.home, &f);
        }
        self.run.remove(RUN_LOCK_WAIT);
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
        self.carry_into(claimed, &mut out, &mut after);
        Ok((out, after))
    }

    // ----- notes ------------------------------------------------------------

    fn pull(&mut self, event: DeliveryEvent) -> Result<Option<Claimed>> {
        // Never claim what this output cannot carry. The spool goes out
        // first: when it already fills this carrier (a block's worth, or a
        // note that waits for a larger carrier), claim nothing (what is
        // claimed now could not go out in this output, would be carried by
        // another hook, and the server records the claiming hook as the
        // receipt's `delivery_event`; it stays pending for a later hook).
        let spool = match &self.seen {
            Some(seen) => seen.spool.clone(),
            None => self.run.read().0.spool,
        };
        let (limit, largest) = (self.limit, self.largest());
        if !spool.is_empty() {
            let Split { take, rest, .. } = split_to_fit(limit, largest, spool.clone());
            if take.len() >= BLOCK_CAP || !rest.is_empty() {
                return Ok(None);
            }
        }
        // The local inbox stops at the first note this carrier cannot show
        // even alone (one that waits for a larger carrier, as a 4,096-emoji
        // note on Codex's Stop): it stays pending for the hook that can carry
        // it, so its receipt names that hook. Notes that fit alone but not
        // together are claimed, and the rest is spooled, as on the server,
        // which claims up to 5 whatever their size (§4.3).
        let now = Timestamp::now();
        let fits = |notes: &[NoteElement]| {
            notes.last().is_none_or(|n| {
                let e = SpoolEntry { note: n.clone(), deferred: true, spooled_at: now };
                split_to_fit(limit, largest, vec![e]).rest.is_empty()
            })
        };
        let req = PendingRequest { channel: "hook", event, defer_delivery: true, session_id: self.session_id.clone() };
        let claimed = self.backend.pull_fitting(&req, &fits)?;
        if claimed.is_some() {
            kill_point("after_claim");
        }
        Ok(claimed)
    }

    /// Merge the spool with `claimed`, put what fits into `out`, keep the
    /// rest spooled. Never fails: what is in hand goes out whatever happens
    /// to the session state, and what cannot be kept is reported.
    fn carry_into(&mut self, claimed: Option<Claimed>, out: &mut Outcome, after: &mut AfterFlush) {
        let peek = self.seen.take().unwrap_or_else(|| self.run.read().0);
        if claimed.is_none() && peek.spool.is_empty() && peek.owed_acks.is_empty() {
            return; // the no-note path: no lock, no write
        }
        let guard = match self.run.lock(RUN_LOCK_WAIT) {
            Ok(g) => g,
            Err(e) => {
                // Cannot touch the spool: still deliver what was just claimed.
                self.warnings.push(format!("spool busy: {e}"));
                if let Some(c) = claimed {
                    self.carry_without_state(to_entries(c), out, after, "spool busy");
                }
                return;
            }
        };
        let (mut state, unreadable) = self.run.read();
        let before = state.clone();
        let owed = std::mem::take(&mut state.owed_acks);
        let taken = self.take_for_output(&mut state, claimed, after);
        // The common with-note case (what was claimed fits this output, no
        // spool, nothing owed) leaves the state as it was: rewriting it would
        // only cost the hook a write, synced if it holds notes
        // (docs/performance.md). An unreadable state is rewritten, which
        // repairs it.
        if state == before && unreadable.is_none() {
            kill_point("after_spool_write");
        } else {
            self.keep_state(&state, after);
        }
        drop(guard);
        self.retry_owed(&owed);
        self.fill(&taken, out);
        after.carried = taken;
    }

    /// A gate whose only carrier is holding the tool call (Gemini
    /// BeforeTool): the notes the server claimed on the check go out now,
    /// the spool is left for the session's carrying hooks.
    fn carry_claimed_only(&mut self, claimed: Claimed, out: &mut Outcome, after: &mut AfterFlush) {
        self.carry_without_state(to_entries(claimed), out, after, "carrier full");
    }

    /// Carry what fits of `entries` without the spool; keep the rest in the
    /// spool if it can be written, else report it.
    fn carry_without_state(&mut self, entries: Vec<SpoolEntry>, out: &mut Outcome, after: &mut AfterFlush, why: &str) {
        let Split { take, rest: leftovers, oversized } = split_to_fit(self.limit, self.largest(), entries);
        self.give_up_oversized(oversized, after);
        if !leftovers.is_empty() {
            self.warnings.push(format!("{} spooled: {why}", crate::words::count(leftovers.len(), "note")));
            self.spool_entries(leftovers, after);
        }
        self.fill(&take, out);
        after.carried = take;
    }

    /// Spool notes a non-carrying hook received.
    fn spool_only(&mut self, claimed: Claimed, after: &mut AfterFlush) {
        self.spool_entries(to_entries(claimed), after);
    }

    fn spool_entries(&mut self, entries: Vec<SpoolEntry>, after: &mut AfterFlush) {
        let _g = match self.run.lock(RUN_LOCK_WAIT) {
            Ok(g) => g,
            Err(e) => {
                self.report_unkept(&entries, after, &format!("spool busy: {e}"));
                return;
            }
        };
        let (mut state, _) = self.run.read();
        // Notes the server already recorded delivered go first: the next
        // carrier takes them before anything else.
        let (immediate, deferred): (Vec<_>, Vec<_>) = entries.into_iter().partition(|e| !e.deferred);
        let mut spool = immediate;
        spool.append(&mut state.spool);
        spool.extend(deferred);
        state.spool = spool;
        self.enforce_spool_limits(&mut state, Timestamp::now(), after);
        self.keep_state(&state, after);
    }

    /// Write the session state (with its lock held); what it could not
    /// keep is reported instead of being left claimed.
    fn keep_state(&mut self, state: &RunState, after: &mut AfterFlush) {
        match self.run.write(state) {
            Ok(()) => kill_point("after_spool_write"),
            Err(e) => self.lost_state(state, after, &e),
        }
    }

    /// The session state could not be written: every spooled note that is
    /// not in this output is lost to it. Deferred ones are reported
    /// `spool_dropped`; the others were already recorded delivered.
    fn lost_state(&mut self, state: &RunState, after: &mut AfterFlush, e: &crate::Error) {
        self.warnings.push(format!("session state not written: {e}"));
        let kept = state.spool.clone();
        self.report_unkept(&kept, after, "session state not written");
    }

    fn report_unkept(&mut self, entries: &[SpoolEntry], after: &mut AfterFlush, why: &str) {
        for e in entries {
            if e.deferred {
                after.dropped.extend(ids_of(&e.note));
            } else {
                self.warnings.push(format!(
                    "note {} (already recorded delivered by the server) could not be kept: {why}",
                    e.note.id
                ));
            }
        }
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
            // Immediate claims first (already delivered on the server), then
            // the spool in order, then new deferred claims.
            let (immediate, deferred): (Vec<_>, Vec<_>) = to_entries(c).into_iter().partition(|e| !e.deferred);
            let mut all = immediate;
            all.append(&mut merged);
            all.extend(deferred);
            merged = all;
        }
        let Split { take, rest, oversized } = split_to_fit(self.limit, self.largest(), merged);
        self.give_up_oversized(oversized, after);
        state.spool = rest;
        self.enforce_spool_limits(state, now, after);
        take
    }

    /// A note longer than any carrier of the harness is never shown cut:
    /// a deferred one is reported `spool_dropped` (its receipt says the
    /// model did not get it), an immediate one (already recorded delivered
    /// by the server, which broke its own limit to send it) is named in the log.
    fn give_up_oversized(&mut self, oversized: Vec<SpoolEntry>, after: &mut AfterFlush) {
        for e in oversized {
            let size = self.largest().measure(&e.note.element);
            self.warnings.push(format!(
                "note {} ({size} units) is longer than any {} carrier ({}); it is not shown cut",
                e.note.id,
                self.def.harness().name(),
                self.largest().max()
            ));
            if e.deferred {
                after.dropped.extend(ids_of(&e.note));
            }
        }
    }

    /// Deferred notes past their lifetime, or past the cap, are given up
    /// (acked `spool_dropped` after the output); notes the server already
    /// recorded delivered are always kept.
    fn enforce_spool_limits(&mut self, state: &mut RunState, now: Timestamp, after: &mut AfterFlush) {
        let ttl = self.config.settings.note_ttl_secs;
        let mut kept = Vec::with_capacity(state.spool.len());
        let mut deferred_kept = 0;
        for e in std::mem::take(&mut state.spool) {
            if !e.deferred {
                kept.push(e);
                continue;
            }
            let why = if e.spooled_at.add_secs(ttl) <= now {
                Some("expired")
            } else if deferred_kept >= SPOOL_CAP {
                Some("spool full")
            } else {
                None
            };
            match why {
                Some(why) => {
                    self.warnings.push(format!("spooled note {} dropped ({why})", e.note.id));
                    after.dropped.extend(ids_of(&e.note));
                }
                None => {
                    deferred_kept += 1;
                    kept.push(e);
                }
            }
        }
        state.spool = kept;
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
            if let Err(e) = self.run.write(&state) {
                self.warnings.push(format!("owed acks not kept: {e}"));
            }
        }
    }

    /// After the output: ack what was written (or put it back if writing
    /// failed), report drops, read the turn-end report's answer.
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
            let mut drop_now = AfterFlush::default();
            match self.run.lock(RUN_LOCK_WAIT) {
                Ok(_g) => {
                    let (mut state, _) = self.run.read();
                    let mut spool = after.carried.clone();
                    spool.append(&mut state.spool);
                    state.spool = spool;
                    self.enforce_spool_limits(&mut state, Timestamp::now(), &mut drop_now);
                    if let Err(e) = self.run.write(&state) {
                        self.warnings.push(format!("unwritten notes not kept: {e}"));
                        self.report_unkept(&after.carried, &mut drop_now, "output not written, state not written");
                    }
                }
                Err(e) => self.report_unkept(&after.carried, &mut drop_now, &format!("output not written: {e}")),
            }
            if !drop_now.dropped.is_empty() {
                self.ack_dropped(drop_now.dropped);
            }
        }
        if !after.dropped.is_empty() {
            self.ack_dropped(after.dropped);
        }
        for e in self.backend.settle() {
            self.warnings.push(format!("session-event failed: {e}"));
        }
    }

    fn ack_dropped(&mut self, ids: Vec<String>) {
        let req = AckRequest {
            note_ids: ids.clone(),
            session_id: self.session_id.clone(),
            undeliverable_reason: Some(UndeliverableReason::SpoolDropped),
        };
        if self.backend.ack(&req).is_err() {
            self.owe(vec![OwedAck { note_ids: ids, dropped: true }]);
        }
    }
}

/// The reason a fail-closed gate gives.
pub fn fail_closed_reason(kind: &str) -> String {
    format!("Preloop could not check this tool call ({kind}); denied by the hook's fail-closed policy.")
}

/// How often the detached SessionEnd worker makes its session-end call
/// before it gives up (the engine's `end_on_server`).
pub const WORKER_END_ATTEMPTS: u32 = 3;

/// The server's field limits (docs/contracts/preloop-server.md §4.1, §4.2).
const MAX_CWD_CHARS: usize = 4096;
const MAX_FIRST_PROMPT_CHARS: usize = 20_000;
const MAX_TOOL_NAME_CHARS: usize = 255;

fn cut_chars(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// A runtime session id as the server issues them (a UUID).
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

fn to_entries(c: Claimed) -> Vec<SpoolEntry> {
    let now = Timestamp::now();
    c.notes.into_iter().map(|note| SpoolEntry { note, deferred: c.deferred, spooled_at: now }).collect()
}

/// How a list of notes splits over one carrier.
#[derive(Debug, Default, PartialEq)]
pub struct Split {
    /// The oldest notes whose framed block fits the carrier (at most
    /// [`BLOCK_CAP`]).
    pub take: Vec<SpoolEntry>,
    /// What waits for a later carrier, in order.
    pub rest: Vec<SpoolEntry>,
    /// Notes no carrier of the harness can show whole (only a server that
    /// breaks its own 4,096-character limit sends one). A body is never
    /// cut, so these never go out.
    pub oversized: Vec<SpoolEntry>,
}

/// Split `entries` (oldest first) over a carrier of `limit`; `largest` is
/// the harness's largest carrier: a note that does not fit this carrier but
/// fits that one waits for it.
pub fn split_to_fit(limit: CarrierLimit, largest: CarrierLimit, entries: Vec<SpoolEntry>) -> Split {
    let mut split = Split::default();
    for e in entries {
        if !fits(largest, &[], &e) {
            split.oversized.push(e);
        } else if !split.rest.is_empty() || split.take.len() >= BLOCK_CAP || !fits(limit, &split.take, &e) {
            split.rest.push(e);
        } else {
            split.take.push(e);
        }
    }
    split
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

/// Whether a hook of this kind runs the engine at all with a closed stdout
/// (only SessionEnd has nothing to print).
pub fn needs_stdout(def: &HookDef) -> bool {
    def.does != Does::SessionEnd
}

#[cfg(test)]
mod caller_session_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn send_note_is_recognised_by_its_mcp_spellings_only() {
        for yes in ["mcp__preloop__send_note", "mcp__a__b__send_note", "mcp__x__send_note", "MCP:send_note"] {
            assert!(is_send_note(yes, None), "{yes}");
        }
        for no in [
            "send_note",
            "Bash",
            "mcp__send_note",
            "mcp____send_note",
            "mcp__preloop__send_notes",
            "mcp__preloop__send_note_x",
            "mcp__preloop__list_notes",
            "MCP:other",
            "mcp:send_note",
        ] {
            assert!(!is_send_note(no, None), "{no}");
        }
    }

    #[test]
    fn the_adapters_mcp_tool_name_decides_when_given() {
        // Gemini's `mcp_<server>_send_note` (ambiguous: a server name may
        // hold `_`) is read from `mcp_context.tool_name`; Copilot's
        // `<server>-send_note` from its adapter.
        assert!(is_send_note("mcp_preloop_send_note", Some(McpTool::named("send_note"))));
        assert!(is_send_note("my-srv-send_note", Some(McpTool::SendNote)));
        assert!(!is_send_note("mcp_preloop_send_note", None));
        assert!(!is_send_note("mcp_preloop_list_notes", Some(McpTool::named("list_notes"))));
        assert_eq!(McpTool::named("send_notes"), McpTool::Other);
        // The adapter's answer wins over a name that looks like one.
        assert!(!is_send_note("mcp__preloop__send_note", Some(McpTool::Other)));
        assert_eq!(
            caller_session_rewrite(
                "mcp_p_send_note",
                Some(McpTool::SendNote),
                &json!({"text": "t", "preloop_caller_session_id": "F"}),
                "s"
            ),
            Some(json!({"text": "t", "preloop_caller_session_id": "s"}))
        );
    }

    #[test]
    fn the_callers_session_replaces_a_forged_one_and_nothing_else_changes() {
        let forged = json!({"text": "t", "runtime_session_id": "rt", "preloop_caller_session_id": "FORGED"});
        let got = caller_session_rewrite("mcp__preloop__send_note", None, &forged, "sess-1").unwrap();
        assert_eq!(got, json!({"text": "t", "runtime_session_id": "rt", "preloop_caller_session_id": "sess-1"}));
        let plain = json!({"text": "t"});
        assert_eq!(
            caller_session_rewrite("mcp__preloop__send_note", None, &plain, "s").unwrap(),
            json!({"text": "t", "preloop_caller_session_id": "s"})
        );
        assert_eq!(caller_session_rewrite("Bash", None, &forged, "s"), None);
        assert_eq!(caller_session_rewrite("mcp__preloop__send_note", None, &json!("text"), "s"), None);
        assert_eq!(caller_session_rewrite("mcp__preloop__send_note", None, &plain, ""), None);
    }
}
