//! The registry: every harness and every hook binary we ship, once.
//!
//! Everything else derives from these two tables: the adapters (which
//! event a binary is, its carrier limit, its fail policy), the engine and
//! the backends (whether a hook carries, what the server does with a note on
//! a permission check), the installer (which binary goes on which event,
//! with which timeout), `doctor`, the demo, the hardening suite, the
//! benchmark and the docs (a test holds `docs/event-matrix.md` and the
//! README's harness table to it).
//!
//! A harness is one block of the `harnesses!` invocation below: its events
//! and its [`HarnessDef`]. The macro makes [`Harness`], the event enums of
//! [`event`], [`Event`], [`Harness::ALL`], [`Event::ALL`] and the conversions
//! between them from that block, so nothing here lists the harnesses a
//! second time. Its hooks are then its [`HookDef`] rows in [`HOOKS`]; the
//! tests check that every event has one. Everything a new harness touches
//! outside this file is listed, and counted, in `docs/adding-a-harness.md`
//! (a test keeps the list true).

use crate::wire::{DeliveryEvent, EvaluationPhase};

/// How much model-visible text one carrier takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CarrierLimit {
    /// Characters (Cursor, Copilot).
    Chars(usize),
    /// UTF-16 code units: a character outside the BMP counts two (Claude
    /// Code, which counts JavaScript string length).
    Utf16(usize),
    /// UTF-8 bytes (Codex: ~2,500 tokens, counted as bytes / 4).
    Bytes(usize),
    /// Characters after the harness turned every `<` into `&lt;` and every
    /// `>` into `&gt;` (Gemini's `additionalContext`).
    EscapedChars(usize),
}

impl CarrierLimit {
    /// The size of `s` as this carrier counts it.
    pub fn measure(self, s: &str) -> usize {
        match self {
            CarrierLimit::Chars(_) => s.chars().count(),
            CarrierLimit::Utf16(_) => s.chars().map(char::len_utf16).sum(),
            CarrierLimit::Bytes(_) => s.len(),
            CarrierLimit::EscapedChars(_) => s.chars().map(|c| if matches!(c, '<' | '>') { 4 } else { 1 }).sum(),
        }
    }

    pub fn max(self) -> usize {
        match self {
            CarrierLimit::Chars(n)
            | CarrierLimit::Utf16(n)
            | CarrierLimit::Bytes(n)
            | CarrierLimit::EscapedChars(n) => n,
        }
    }
}

/// What the harness does to our Stop-like continuations on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopBrake {
    /// Only `stop_hook_active` (one continuation per stop): our per-session
    /// cap is the only limit on the number (Claude Code, Codex, Gemini).
    StopHookActive,
    /// Cursor's per-script `loop_limit`, written by the installer and
    /// checked against `loop_count` by the adapter.
    LoopLimit(u32),
    /// A fixed cap of consecutive continuations, plus `stop_hook_active`
    /// (Copilot CLI: 8).
    Consecutive(u32),
    /// None at all: the harness continues whenever our plugin asks (Pi's
    /// `triggerTurn`), so our per-session `stop_rescue_cap` is the only
    /// brake.
    OursOnly,
}

/// The unit of a harness's hook `timeout` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutUnit {
    Seconds,
    Millis,
}

/// Where our hooks are declared: the harness's own hook config, or a
/// plugin of ours the harness loads in-process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declaration {
    /// A command per event in the harness's hook config file.
    HookConfig,
    /// A static, version-stamped JS/TS plugin file (the shim) that spawns
    /// `preloop-hooks hook <command>` per event and applies its answer,
    /// beside a manifest of ours it reads (Pi's extension).
    Plugin,
}

/// One harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HarnessDef {
    pub harness: Harness,
    /// In our binaries and on the command line: `claude-code`.
    pub slug: &'static str,
    /// The `source` the Preloop server knows it by: `claude_code`.
    pub source: &'static str,
    /// Other spellings of the source in onboarding files.
    pub source_aliases: &'static [&'static str],
    /// For people: `Claude Code`.
    pub name: &'static str,
    /// The version every behaviour we rely on was observed on.
    pub version: &'static str,
    /// How it was observed.
    pub evidence: Evidence,
    /// Its executable, for `doctor`.
    pub program: &'static str,
    /// The npm package the end-to-end suite installs, if any.
    pub npm_package: Option<&'static str>,
    /// The directory under `fixtures/` and `schemas/` holding its captures.
    pub fixtures: &'static str,
    pub stop_brake: StopBrake,
    pub timeout_unit: TimeoutUnit,
    /// How long it lets a SessionEnd hook run before killing it, if it
    /// does not wait for it (milliseconds). Every server-mode SessionEnd
    /// hands its calls to a detached worker ([`crate::detach`]); under such
    /// a harness that is what lets them finish at all.
    pub session_end_kill_ms: Option<u64>,
    /// How a run this harness's agent starts learns its parent session.
    pub lineage: Lineage,
    /// Where our hooks are declared.
    pub declaration: Declaration,
}

/// How a run an agent starts (a worker from its shell tool) learns that it
/// is that agent's child (docs/guarantees.md, "Lineage").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lineage {
    /// SessionStart exports `PRELOOP_PARENT_SESSION_ID` to the commands the
    /// model runs, through this channel (`$CLAUDE_ENV_FILE`, sessionStart's
    /// `env`); process ancestry where the variable did not arrive.
    Export(&'static str),
    /// No hook can export a variable: the parent is found by process
    /// ancestry ([`crate::lineage`]).
    Ancestry,
}

/// How a harness's behaviour was established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// Driven headless against a mock model, in this repository's e2e suite.
    RealBinary,
    /// Its documentation and third-party captures only (no binary can be had).
    Documented,
}

/// What a hook does, which decides how long a harness may let it run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Session start, prompt, post-tool, stop: a few short calls.
    Lifecycle,
    /// A permission check: may wait for a human's approval on the server, so
    /// its harness timeout must outlast our own permission budget.
    Permission,
    /// Session end.
    End,
    /// An idle-wake watcher: Claude Code's (`async`, `asyncRewake`), Pi's
    /// and OpenCode's (a child our extension or plugin keeps while the
    /// session is idle).
    Watch,
}

/// What the engine does for the hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Does {
    /// Register the session; pull notes when `pull`.
    SessionStart { pull: bool },
    /// A prompt: register with the first prompt; pull notes when `pull`.
    Prompt { pull: bool },
    /// A tool is about to run: the central permission check.
    Check,
    /// A tool has run: pull notes for the tool result.
    AfterTool,
    /// The turn is ending: pull a late note and continue the turn once.
    Stop,
    /// Report the end; pending notes become `undeliverable`.
    SessionEnd,
    /// Background watcher of an idle session.
    Watch,
}

/// Where a hook's notes reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    /// No output field reaches the model: a note the server hands this hook
    /// is spooled for the session's next carrying hook.
    None,
    /// A context field shown to the model beside the event (the field path).
    Context(&'static str),
    /// A continuation: the turn goes on with the note as its input.
    Continue(&'static str),
    /// Only a deny reason reaches the model (Gemini BeforeTool): a note the
    /// server claims on the check is carried by holding the tool call, and
    /// nothing else is carried here.
    DenyReason(&'static str),
    /// An idle-wake watcher: starts a turn with the block (how, for the
    /// docs: Claude Code's stderr and exit 2, Pi's and OpenCode's
    /// `continue` answer).
    Wake(&'static str),
}

impl Carrier {
    /// Whether the hook carries notes it pulls and the session's spool.
    pub fn carries(self) -> bool {
        matches!(self, Carrier::Context(_) | Carrier::Continue(_) | Carrier::Wake(_))
    }
    /// The output field, for the docs.
    pub fn field(self) -> Option<&'static str> {
        match self {
            Carrier::Context(f) | Carrier::Continue(f) | Carrier::DenyReason(f) => Some(f),
            Carrier::None | Carrier::Wake(_) => None,
        }
    }
}

/// What the Preloop server does with pending notes on a permission check
/// for this source and event (docs/contracts/preloop-server.md §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerClaim {
    /// Claims and records them `delivered` before answering.
    Immediate,
    /// Claims them `claimed`: the hook acks after a carrying output.
    Deferred,
    /// Claims nothing (the notes stay pending for a pull).
    Never,
}

/// Which fail policy setting applies when a gate cannot get an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailKey {
    /// `pre_tool_use_on_error` (default: open).
    PreToolUse,
    /// `permission_request_on_error` (default: deny).
    PermissionRequest,
}

/// A permission gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    pub phase: EvaluationPhase,
    pub fail: FailKey,
    pub server_claim: ServerClaim,
}

/// How long a hook's calls may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// `call_timeout_ms` per call.
    Call,
    /// `permission_timeout_secs` for the check (outlasts an approval wait).
    Permission,
    /// Everything within `session_end_budget_ms`; in server mode the calls
    /// go to a detached worker that outlives the harness's kill.
    SessionEnd,
    /// `watch_max_secs`.
    Watch,
}

macro_rules! count {
    () => { 0usize };
    ($head:ident $($tail:ident)*) => { 1usize + count!($($tail)*) };
}

/// The harnesses, each as one block: its doc, its name as a Rust identifier,
/// the events we hook (in the order the harness runs them) and the fields of
/// its [`HarnessDef`]. Everything that lists the harnesses or their events is
/// made here, so a harness cannot be in one list and missing from another.
macro_rules! harnesses {
    ($d:tt $(
        $(#[$doc:meta])*
        $harness:ident {
            adapter: $krate:ident,
            dialect: $module:ident,
            events: [$($ev:ident),+ $(,)?],
            $($field:ident: $value:expr),+ $(,)?
        }
    )+) => {
        /// Calls `$callback! { Harness crate dialect, ... }` with every
        /// harness of the registry, in its order: the variant of
        /// [`Harness`], the adapter crate (`preloop_claude_code`) and the
        /// installer's dialect module (`claude_code`). The crates above the
        /// adapters (the executable, the hardening suite) write their
        /// per-harness `match`es and lists through it, so a new harness is
        /// one registry block there too:
        ///
        /// ```
        /// macro_rules! slugs {
        ///     ($($h:ident $krate:ident $module:ident),+) => {
        ///         [$(stringify!($module)),+]
        ///     };
        /// }
        /// let modules = preloop_shared::for_each_harness!(slugs);
        /// assert_eq!(modules.len(), preloop_shared::Harness::ALL.len());
        /// assert_eq!(modules[0], "claude_code");
        /// ```
        #[macro_export]
        macro_rules! for_each_harness {
            ($d callback:ident) => {
                $d callback! { $($harness $krate $module),+ }
            };
        }

        /// The harnesses we ship hooks for.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Harness {
            $($(#[$doc])* $harness),+
        }

        impl Harness {
            /// Every harness, in registry order.
            pub const ALL: [Harness; count!($($harness)+)] = [$(Harness::$harness),+];
        }

        /// Every harness, in the order we list them (`HARNESSES[h as usize]`
        /// is `h`'s).
        pub const HARNESSES: &[HarnessDef] = &[$(
            HarnessDef { harness: Harness::$harness, $($field: $value),+ }
        ),+];

        /// The harness events we hook, one enum per harness.
        pub mod event {
            $(
                $(#[$doc])*
                #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
                pub enum $harness {
                    $($ev),+
                }

                impl $harness {
                    /// Every event of the harness, in registry order.
                    pub const ALL: [$harness; count!($($ev)+)] = [$($harness::$ev),+];

                    /// The event's registry row.
                    pub fn def(self) -> &'static super::HookDef {
                        super::Event::from(self).def()
                    }
                    /// The harness's own name for the event.
                    pub fn name(self) -> &'static str {
                        self.def().on
                    }
                    /// Our binary for the event.
                    pub fn binary(self) -> &'static str {
                        self.def().binary
                    }
                    /// The event by the harness's name for it.
                    pub fn from_name(name: &str) -> Option<$harness> {
                        Self::ALL.into_iter().find(|e| e.name() == name)
                    }
                }

                impl super::HarnessEvent for $harness {
                    const HARNESS: super::Harness = super::Harness::$harness;
                    fn all() -> &'static [Self] {
                        &Self::ALL
                    }
                }

                impl From<$harness> for super::Event {
                    fn from(e: $harness) -> super::Event {
                        super::Event::$harness(e)
                    }
                }
            )+
        }

        /// One hook of one harness.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Event {
            $($harness(event::$harness)),+
        }

        impl Event {
            /// Every event of every harness, by harness in registry order.
            pub const ALL: [Event; count!($($($ev)+)+)] = [$($(Event::$harness(event::$harness::$ev)),+),+];

            pub const fn harness(self) -> Harness {
                match self {
                    $(Event::$harness(_) => Harness::$harness),+
                }
            }

            /// Its place in `Event::ALL`: the events of the harnesses before
            /// its own, then its place among its harness's.
            pub const fn index(self) -> usize {
                const COUNTS: [usize; count!($($harness)+)] = [$(count!($($ev)+)),+];
                let (h, e) = match self {
                    $(Event::$harness(e) => (Harness::$harness as usize, e as usize)),+
                };
                let mut before = 0;
                let mut i = 0;
                while i < h {
                    before += COUNTS[i];
                    i += 1;
                }
                before + e
            }

            /// Our name for the event, the variant's (`PreToolUse`); our
            /// binary is `preloop-<slug>-<it in kebab case>`.
            pub fn ident(self) -> &'static str {
                match self {
                    $($(Event::$harness(event::$harness::$ev) => stringify!($ev)),+),+
                }
            }
        }
    };
}

/// What the event enums of [`event`] share, for code generic over a
/// harness (the test kit's suites).
pub trait HarnessEvent: Copy + Eq + std::hash::Hash + std::fmt::Debug + Into<Event> + 'static {
    /// The harness the events are of.
    const HARNESS: Harness;
    /// Every event of the harness, in registry order.
    fn all() -> &'static [Self];
    /// The event's registry row.
    fn def(self) -> &'static HookDef {
        Into::<Event>::into(self).def()
    }
    /// The harness's own name for the event.
    fn name(self) -> &'static str {
        self.def().on
    }
    /// Our binary for the event.
    fn binary(self) -> &'static str {
        self.def().binary
    }
}

/// Each event's row in [`HOOKS`] (the first, for the watcher installed on
/// two events), by [`Event::index`], found when the crate is compiled: an
/// event without a row does not build.
const ROW_OF: [usize; Event::ALL.len()] = {
    let mut rows = [0; Event::ALL.len()];
    let mut i = 0;
    while i < Event::ALL.len() {
        let mut j = 0;
        while Event::ALL[i].index() != HOOKS[j].event.index() {
            j += 1;
            assert!(j < HOOKS.len(), "an event has no row in HOOKS");
        }
        rows[i] = j;
        i += 1;
    }
    rows
};

impl Event {
    /// The event's row (the first, for the watcher installed on two events).
    pub fn def(self) -> &'static HookDef {
        &HOOKS[ROW_OF[self.index()]]
    }
    /// The harness's own name for the event.
    pub fn name(self) -> &'static str {
        self.def().on
    }
    /// Our binary for the event.
    pub fn binary(self) -> &'static str {
        self.def().binary
    }
    /// The event a binary serves (the first, for the watcher).
    pub fn from_binary(binary: &str) -> Option<Event> {
        by_binary(binary).map(|d| d.event)
    }
}

/// One hook binary on one harness event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookDef {
    pub event: Event,
    /// The harness's own name for the event, as in its config file and in
    /// the payload's `hook_event_name` (when it sends one).
    pub on: &'static str,
    /// Our binary's file name.
    pub binary: &'static str,
    pub role: Role,
    pub does: Does,
    pub carrier: Carrier,
    /// How much the carrier takes.
    pub limit: CarrierLimit,
    /// A permission check, if the hook is a gate.
    pub gate: Option<Gate>,
    pub budget: Budget,
    /// The `hook_event_name` we send the server for this hook, where the
    /// server gives the name a meaning (a prompt records the prompt time;
    /// Cursor's `preToolUse` decides the claim mode).
    pub server_event: Option<&'static str>,
    /// The delivery event a pull of this hook is recorded with.
    pub delivery: Option<DeliveryEvent>,
}

impl HookDef {
    /// The one gate each tool call passes (a pre-tool check: Claude Code's
    /// and Codex's PreToolUse, Cursor's and Copilot CLI's preToolUse, Gemini
    /// CLI's BeforeTool, Pi's tool_call, OpenCode's tool.execute.before),
    /// which `sessions list` counts as the session's tool calls. A
    /// permission-request gate (Codex's PermissionRequest, Cursor's shell
    /// and MCP gates) comes on top of it, so it is not one.
    pub fn is_tool_gate(&self) -> bool {
        matches!(self.does, Does::Check) && self.gate.is_some_and(|g| g.phase == EvaluationPhase::PreToolUse)
    }

    /// The row of a hook the log names by harness slug and event name (`on`).
    pub fn logged(harness: &str, on: &str) -> Option<&'static HookDef> {
        HOOKS.iter().find(|d| d.on == on && d.harness().slug() == harness)
    }

    pub fn harness(&self) -> Harness {
        self.event.harness()
    }

    /// The hook's stop-like brake, for a [`Does::Stop`] hook.
    pub fn is_stop(&self) -> bool {
        self.does == Does::Stop
    }
}

harnesses! {
    // The `$` the generated `for_each_harness!` writes its own metavariables with.
    $
    /// Claude Code 2.1.328 (`Watch`: the idle-wake watcher, on SessionStart and Stop).
    ClaudeCode {
        adapter: preloop_claude_code,
        dialect: claude_code,
        events: [SessionStart, UserPromptSubmit, PreToolUse, Stop, SessionEnd, Watch],
        slug: "claude-code",
        source: "claude_code",
        source_aliases: &[],
        name: "Claude Code",
        version: "2.1.328",
        evidence: Evidence::RealBinary,
        program: "claude",
        npm_package: Some("@anthropic-ai/claude-code"),
        fixtures: "claude-code-2.1.328",
        stop_brake: StopBrake::StopHookActive,
        timeout_unit: TimeoutUnit::Seconds,
        // Claude Code cancels SessionEnd hooks about 1.5 s in.
        session_end_kill_ms: Some(1500),
        lineage: Lineage::Export("`$CLAUDE_ENV_FILE`"),
        declaration: Declaration::HookConfig,
    }
    /// Codex CLI 0.169.0.
    Codex {
        adapter: preloop_codex,
        dialect: codex,
        events: [SessionStart, UserPromptSubmit, PreToolUse, PermissionRequest, Stop, SessionEnd],
        slug: "codex",
        source: "codex_cli",
        source_aliases: &["codex"],
        name: "Codex CLI",
        version: "0.169.0",
        evidence: Evidence::RealBinary,
        program: "codex",
        npm_package: Some("@openai/codex"),
        fixtures: "codex-0.169.0",
        stop_brake: StopBrake::StopHookActive,
        timeout_unit: TimeoutUnit::Seconds,
        // Codex kills SessionEnd hooks about 0.96 s in, whatever their timeout.
        session_end_kill_ms: Some(960),
        // No env file and no session variable (docs/contracts/codex.md §1).
        lineage: Lineage::Ancestry,
        declaration: Declaration::HookConfig,
    }
    /// Cursor CLI (documented contract: docs/contracts/cursor.md).
    Cursor {
        adapter: preloop_cursor,
        dialect: cursor,
        events: [
            SessionStart,
            BeforeSubmitPrompt,
            BeforeShellExecution,
            BeforeMcpExecution,
            PreToolUse,
            Stop,
            SessionEnd,
        ],
        slug: "cursor",
        source: "cursor",
        source_aliases: &[],
        name: "Cursor CLI",
        version: "2026.07.23",
        evidence: Evidence::Documented,
        program: "cursor-agent",
        npm_package: None,
        fixtures: "cursor",
        stop_brake: StopBrake::LoopLimit(CURSOR_LOOP_LIMIT),
        timeout_unit: TimeoutUnit::Seconds,
        session_end_kill_ms: None,
        lineage: Lineage::Export("its `env` output"),
        declaration: Declaration::HookConfig,
    }
    /// Gemini CLI 0.61.0.
    Gemini {
        adapter: preloop_gemini,
        dialect: gemini,
        events: [SessionStart, BeforeAgent, BeforeTool, AfterTool, AfterAgent, SessionEnd],
        slug: "gemini",
        source: "gemini_cli",
        source_aliases: &[],
        name: "Gemini CLI",
        version: "0.61.0",
        evidence: Evidence::RealBinary,
        program: "gemini",
        npm_package: Some("@google/gemini-cli"),
        fixtures: "gemini-cli-0.61.0",
        // No cap of its own (docs/contracts/gemini-cli.md §5): our
        // `stop_rescue_cap` and `stop_hook_active` are the only brakes.
        stop_brake: StopBrake::StopHookActive,
        // `timeout` is in milliseconds (gemini-cli.md §2).
        timeout_unit: TimeoutUnit::Millis,
        // SessionEnd is awaited in `-p` up to the hook's timeout (§5).
        session_end_kill_ms: None,
        // No env file, and no output field sets the commands' environment.
        lineage: Lineage::Ancestry,
        declaration: Declaration::HookConfig,
    }
    /// GitHub Copilot CLI 1.0.102 (camelCase hooks file).
    Copilot {
        adapter: preloop_copilot,
        dialect: copilot,
        events: [SessionStart, UserPromptSubmitted, PreToolUse, PostToolUse, AgentStop, SessionEnd],
        slug: "copilot",
        source: "copilot_cli",
        source_aliases: &[],
        name: "Copilot CLI",
        version: "1.0.102",
        evidence: Evidence::RealBinary,
        program: "copilot",
        npm_package: Some("@github/copilot"),
        fixtures: "copilot-cli-1.0.102",
        // At most 8 consecutive agentStop blocks (docs/contracts/copilot-cli.md §4).
        stop_brake: StopBrake::Consecutive(COPILOT_STOP_CAP),
        // `timeoutSec` (copilot-cli.md §2).
        timeout_unit: TimeoutUnit::Seconds,
        // sessionEnd is awaited (§4).
        session_end_kill_ms: None,
        // No env file, and no output field sets the commands' environment.
        lineage: Lineage::Ancestry,
        declaration: Declaration::HookConfig,
    }
    /// Pi (coding agent) 0.73.1: no hook config; our extension (the shim)
    /// spawns the hook commands (docs/contracts/pi.md).
    Pi {
        adapter: preloop_pi,
        dialect: pi,
        events: [SessionStart, BeforeAgentStart, ToolCall, ToolResult, AgentEnd, SessionShutdown, Watch],
        slug: "pi",
        source: "pi",
        source_aliases: &[],
        name: "Pi",
        version: "0.73.1",
        evidence: Evidence::RealBinary,
        program: "pi",
        npm_package: Some("@mariozechner/pi-coding-agent"),
        fixtures: "pi-0.73.1",
        // `triggerTurn` continues whenever asked (docs/contracts/pi.md §5).
        stop_brake: StopBrake::OursOnly,
        // The shim's per-event timeout in our manifest is in milliseconds.
        timeout_unit: TimeoutUnit::Millis,
        // session_shutdown is awaited (§5).
        session_end_kill_ms: None,
        // The shim cannot set the environment of Pi's bash tool.
        lineage: Lineage::Ancestry,
        declaration: Declaration::Plugin,
    }
    /// OpenCode 1.18.33: no hook commands; our plugin (the shim) spawns
    /// them from its hooks and events (docs/contracts/opencode.md).
    OpenCode {
        adapter: preloop_opencode,
        dialect: opencode,
        events: [SessionCreated, ChatMessage, ToolExecuteBefore, ToolExecuteAfter, TextComplete, Dispose, Watch],
        slug: "opencode",
        source: "opencode",
        source_aliases: &[],
        name: "OpenCode",
        version: "1.18.33",
        evidence: Evidence::RealBinary,
        program: "opencode",
        npm_package: Some("opencode-ai"),
        fixtures: "opencode-1.18.33",
        // `session.prompt` with `noReply` continues a finished turn
        // whenever asked: 202 requests in 45 s (docs/contracts/opencode.md §6).
        stop_brake: StopBrake::OursOnly,
        // The shim's per-event timeout in our manifest is in milliseconds.
        timeout_unit: TimeoutUnit::Millis,
        // `dispose` is awaited (§5).
        session_end_kill_ms: None,
        // `shell.env` could set a variable for the bash tool, but it would
        // need the server's runtime id, which the plugin does not know; the
        // bash tool and our hooks are both children of the OpenCode process.
        lineage: Lineage::Ancestry,
        declaration: Declaration::Plugin,
    }
}

/// Copilot CLI ignores an agentStop block after this many in a row
/// (docs/contracts/copilot-cli.md §4); our `stop_rescue_cap` (3) stays below it.
pub const COPILOT_STOP_CAP: u32 = 8;

/// The `loop_limit` the installer writes on Cursor's `stop` hook and the
/// adapter checks `loop_count` against: a follow-up is only produced where
/// Cursor accepts it (its own default is 5). Our per-session
/// `stop_rescue_cap` still applies.
pub const CURSOR_LOOP_LIMIT: u32 = 5;

/// Claude Code shows up to 10,000 UTF-16 units of any `additionalContext`
/// inline; past that the model gets a file path and a 2,000-unit preview.
const CLAUDE_LIMIT: CarrierLimit = CarrierLimit::Utf16(10_000);
/// The `additionalContextLimit` (tokens) the installer writes on our Codex
/// SessionStart, UserPromptSubmit and PreToolUse handlers: Codex then keeps
/// 4 bytes per token intact (20,000 bytes), enough for a whole 4,096-character
/// note of 4-byte characters with its framing (docs/contracts/measurements-2026-12.md M2).
pub const CODEX_CONTEXT_LIMIT_TOKENS: u64 = 5000;
const CODEX_LIMIT: CarrierLimit = CarrierLimit::Bytes(4 * CODEX_CONTEXT_LIMIT_TOKENS as usize);
/// Codex's Stop `reason` keeps 10,000 bytes whatever the handler says.
const CODEX_STOP_LIMIT: CarrierLimit = CarrierLimit::Bytes(10_000);
const CURSOR_LIMIT: CarrierLimit = CarrierLimit::Chars(10_000);
/// Gemini's `additionalContext` arrives with every `<`/`>` escaped to
/// `&lt;`/`&gt;` (docs/contracts/gemini-cli.md, Summary); 10,000 characters
/// as the model gets them.
const GEMINI_CONTEXT_LIMIT: CarrierLimit = CarrierLimit::EscapedChars(10_000);
/// Gemini's AfterAgent and BeforeTool reasons arrive verbatim.
const GEMINI_REASON_LIMIT: CarrierLimit = CarrierLimit::Chars(10_000);
/// Copilot cuts postToolUse context at 10,240 characters, silently
/// (docs/contracts/copilot-cli.md §4); the other carriers took 12,000-60,000
/// intact. One limit for all of them.
const COPILOT_LIMIT: CarrierLimit = CarrierLimit::Chars(10_000);
/// Pi carried 100,000 characters intact through every carrier
/// (docs/contracts/pi.md §6); ours is the same 10,000 as the others.
const PI_LIMIT: CarrierLimit = CarrierLimit::Chars(10_000);
/// OpenCode carried 60,000 characters intact in a prompt part and a tool
/// result (docs/contracts/opencode.md §3); ours is the same 10,000.
const OPENCODE_LIMIT: CarrierLimit = CarrierLimit::Chars(10_000);

const PRE_TOOL_USE: EvaluationPhase = EvaluationPhase::PreToolUse;
const PERMISSION_REQUEST: EvaluationPhase = EvaluationPhase::PermissionRequest;

const fn gate(phase: EvaluationPhase, fail: FailKey, server_claim: ServerClaim) -> Option<Gate> {
    Some(Gate { phase, fail, server_claim })
}

/// Claude Code's idle-wake watcher: one binary, one row for each event it
/// is installed on.
const fn claude_watch(on: &'static str) -> HookDef {
    HookDef {
        event: Event::ClaudeCode(event::ClaudeCode::Watch),
        on,
        binary: "preloop-claude-code-watch",
        role: Role::Watch,
        does: Does::Watch,
        carrier: Carrier::Wake("stderr, exit 2"),
        limit: CLAUDE_LIMIT,
        gate: None,
        budget: Budget::Watch,
        server_event: None,
        delivery: Some(DeliveryEvent::Stop),
    }
}

/// Cursor's two gates, beforeShellExecution and beforeMCPExecution: one
/// contract (a decision, never a context), so one row shape; the server
/// knows each by its own name.
const fn cursor_gate(cursor: event::Cursor, on: &'static str, binary: &'static str) -> HookDef {
    HookDef {
        event: Event::Cursor(cursor),
        on,
        binary,
        role: Role::Permission,
        does: Does::Check,
        carrier: Carrier::None,
        limit: CURSOR_LIMIT,
        gate: gate(PERMISSION_REQUEST, FailKey::PermissionRequest, ServerClaim::Deferred),
        budget: Permission,
        server_event: Some(on),
        delivery: Some(DeliveryEvent::PreToolUse),
    }
}

use Budget::{Call, Permission};
use Role::{End, Lifecycle};

/// Every hook binary, by harness, in the order each harness runs them.
pub const HOOKS: &[HookDef] = &[
    // ---- Claude Code 2.1.328 (docs/contracts/claude-code.md)
    HookDef {
        event: Event::ClaudeCode(event::ClaudeCode::SessionStart),
        on: "SessionStart",
        binary: "preloop-claude-code-session-start",
        role: Lifecycle,
        does: Does::SessionStart { pull: true },
        carrier: Carrier::Context("hookSpecificOutput.additionalContext"),
        limit: CLAUDE_LIMIT,
        gate: None,
        budget: Call,
        server_event: None,
        delivery: Some(DeliveryEvent::SessionStart),
    },
    HookDef {
        event: Event::ClaudeCode(event::ClaudeCode::UserPromptSubmit),
        on: "UserPromptSubmit",
        binary: "preloop-claude-code-user-prompt-submit",
        role: Lifecycle,
        does: Does::Prompt { pull: true },
        carrier: Carrier::Context("hookSpecificOutput.additionalContext"),
        limit: CLAUDE_LIMIT,
        gate: None,
        budget: Call,
        server_event: Some("UserPromptSubmit"),
        delivery: Some(DeliveryEvent::SessionStart),
    },
    HookDef {
        event: Event::ClaudeCode(event::ClaudeCode::PreToolUse),
        on: "PreToolUse",
        binary: "preloop-claude-code-pre-tool-use",
        role: Role::Permission,
        does: Does::Check,
        carrier: Carrier::Context("hookSpecificOutput.additionalContext"),
        limit: CLAUDE_LIMIT,
        gate: gate(PRE_TOOL_USE, FailKey::PreToolUse, ServerClaim::Immediate),
        budget: Permission,
        server_event: Some("PreToolUse"),
        delivery: Some(DeliveryEvent::PreToolUse),
    },
    HookDef {
        event: Event::ClaudeCode(event::ClaudeCode::Stop),
        on: "Stop",
        binary: "preloop-claude-code-stop",
        role: Lifecycle,
        does: Does::Stop,
        carrier: Carrier::Continue("hookSpecificOutput.additionalContext"),
        limit: CLAUDE_LIMIT,
        gate: None,
        budget: Call,
        server_event: Some("Stop"),
        delivery: Some(DeliveryEvent::Stop),
    },
    HookDef {
        event: Event::ClaudeCode(event::ClaudeCode::SessionEnd),
        on: "SessionEnd",
        binary: "preloop-claude-code-session-end",
        role: End,
        does: Does::SessionEnd,
        carrier: Carrier::None,
        limit: CLAUDE_LIMIT,
        gate: None,
        budget: Budget::SessionEnd,
        server_event: Some("SessionEnd"),
        delivery: None,
    },
    claude_watch("SessionStart"),
    claude_watch("Stop"),
    // ---- Codex CLI 0.169.0 (docs/contracts/codex.md)
    HookDef {
        event: Event::Codex(event::Codex::SessionStart),
        on: "SessionStart",
        binary: "preloop-codex-session-start",
        role: Lifecycle,
        does: Does::SessionStart { pull: true },
        carrier: Carrier::Context("hookSpecificOutput.additionalContext"),
        limit: CODEX_LIMIT,
        gate: None,
        budget: Call,
        server_event: None,
        delivery: Some(DeliveryEvent::SessionStart),
    },
    HookDef {
        event: Event::Codex(event::Codex::UserPromptSubmit),
        on: "UserPromptSubmit",
        binary: "preloop-codex-user-prompt-submit",
        role: Lifecycle,
        does: Does::Prompt { pull: true },
        carrier: Carrier::Context("hookSpecificOutput.additionalContext"),
        limit: CODEX_LIMIT,
        gate: None,
        budget: Call,
        server_event: Some("UserPromptSubmit"),
        delivery: Some(DeliveryEvent::SessionStart),
    },
    HookDef {
        event: Event::Codex(event::Codex::PreToolUse),
        on: "PreToolUse",
        binary: "preloop-codex-pre-tool-use",
        role: Role::Permission,
        does: Does::Check,
        carrier: Carrier::Context("hookSpecificOutput.additionalContext"),
        limit: CODEX_LIMIT,
        gate: gate(PRE_TOOL_USE, FailKey::PreToolUse, ServerClaim::Immediate),
        budget: Permission,
        server_event: Some("PreToolUse"),
        delivery: Some(DeliveryEvent::PreToolUse),
    },
    HookDef {
        event: Event::Codex(event::Codex::PermissionRequest),
        on: "PermissionRequest",
        binary: "preloop-codex-permission-request",
        role: Role::Permission,
        does: Does::Check,
        carrier: Carrier::None,
        limit: CODEX_LIMIT,
        gate: gate(PERMISSION_REQUEST, FailKey::PermissionRequest, ServerClaim::Deferred),
        budget: Permission,
        server_event: Some("PermissionRequest"),
        delivery: Some(DeliveryEvent::PreToolUse),
    },
    HookDef {
        event: Event::Codex(event::Codex::Stop),
        on: "Stop",
        binary: "preloop-codex-stop",
        role: Lifecycle,
        does: Does::Stop,
        carrier: Carrier::Continue("reason"),
        limit: CODEX_STOP_LIMIT,
        gate: None,
        budget: Call,
        server_event: Some("Stop"),
        delivery: Some(DeliveryEvent::Stop),
    },
    HookDef {
        event: Event::Codex(event::Codex::SessionEnd),
        on: "SessionEnd",
        binary: "preloop-codex-session-end",
        role: End,
        does: Does::SessionEnd,
        carrier: Carrier::None,
        limit: CODEX_LIMIT,
        gate: None,
        budget: Budget::SessionEnd,
        server_event: Some("SessionEnd"),
        delivery: None,
    },
    // ---- Cursor CLI (docs/contracts/cursor.md)
    HookDef {
        event: Event::Cursor(event::Cursor::SessionStart),
        on: "sessionStart",
        binary: "preloop-cursor-session-start",
        role: Lifecycle,
        does: Does::SessionStart { pull: true },
        carrier: Carrier::Context("additional_context"),
        limit: CURSOR_LIMIT,
        gate: None,
        budget: Call,
        server_event: None,
        delivery: Some(DeliveryEvent::SessionStart),
    },
    HookDef {
        event: Event::Cursor(event::Cursor::BeforeSubmitPrompt),
        on: "beforeSubmitPrompt",
        binary: "preloop-cursor-before-submit-prompt",
        role: Lifecycle,
        does: Does::Prompt { pull: false },
        carrier: Carrier::None,
        limit: CURSOR_LIMIT,
        gate: None,
        budget: Call,
        server_event: Some("beforeSubmitPrompt"),
        delivery: None,
    },
    cursor_gate(event::Cursor::BeforeShellExecution, "beforeShellExecution", "preloop-cursor-before-shell-execution"),
    cursor_gate(event::Cursor::BeforeMcpExecution, "beforeMCPExecution", "preloop-cursor-before-mcp-execution"),
    HookDef {
        event: Event::Cursor(event::Cursor::PreToolUse),
        on: "preToolUse",
        binary: "preloop-cursor-pre-tool-use",
        role: Role::Permission,
        does: Does::Check,
        carrier: Carrier::Context("additional_context"),
        limit: CURSOR_LIMIT,
        gate: gate(PRE_TOOL_USE, FailKey::PreToolUse, ServerClaim::Immediate),
        budget: Permission,
        server_event: Some("preToolUse"),
        delivery: Some(DeliveryEvent::PreToolUse),
    },
    HookDef {
        event: Event::Cursor(event::Cursor::Stop),
        on: "stop",
        binary: "preloop-cursor-stop",
        role: Lifecycle,
        does: Does::Stop,
        carrier: Carrier::Continue("followup_message"),
        limit: CURSOR_LIMIT,
        gate: None,
        budget: Call,
        server_event: Some("stop"),
        delivery: Some(DeliveryEvent::Stop),
    },
    HookDef {
        event: Event::Cursor(event::Cursor::SessionEnd),
        on: "sessionEnd",
        binary: "preloop-cursor-session-end",
        role: End,
        does: Does::SessionEnd,
        carrier: Carrier::None,
        limit: CURSOR_LIMIT,
        gate: None,
        budget: Budget::SessionEnd,
        server_event: Some("sessionEnd"),
        delivery: None,
    },
    // ---- Gemini CLI 0.61.0 (docs/contracts/gemini-cli.md)
    HookDef {
        event: Event::Gemini(event::Gemini::SessionStart),
        on: "SessionStart",
        binary: "preloop-gemini-session-start",
        role: Lifecycle,
        does: Does::SessionStart { pull: true },
        carrier: Carrier::Context("hookSpecificOutput.additionalContext"),
        limit: GEMINI_CONTEXT_LIMIT,
        gate: None,
        budget: Call,
        server_event: None,
        delivery: Some(DeliveryEvent::SessionStart),
    },
    HookDef {
        event: Event::Gemini(event::Gemini::BeforeAgent),
        on: "BeforeAgent",
        binary: "preloop-gemini-before-agent",
        role: Lifecycle,
        does: Does::Prompt { pull: true },
        carrier: Carrier::Context("hookSpecificOutput.additionalContext"),
        limit: GEMINI_CONTEXT_LIMIT,
        gate: None,
        budget: Call,
        // The server records a prompt time only for this name (§4.1).
        server_event: Some("UserPromptSubmit"),
        delivery: Some(DeliveryEvent::SessionStart),
    },
    HookDef {
        event: Event::Gemini(event::Gemini::BeforeTool),
        on: "BeforeTool",
        binary: "preloop-gemini-before-tool",
        role: Role::Permission,
        does: Does::Check,
        // The server claims immediately for gemini_cli (preloop-server.md
        // §4.2, trap 25) and only a deny reason reaches the model here: a
        // note it hands back holds the tool call.
        carrier: Carrier::DenyReason("reason"),
        limit: GEMINI_REASON_LIMIT,
        gate: gate(PRE_TOOL_USE, FailKey::PreToolUse, ServerClaim::Immediate),
        budget: Permission,
        server_event: Some("BeforeTool"),
        delivery: Some(DeliveryEvent::PreToolUse),
    },
    HookDef {
        event: Event::Gemini(event::Gemini::AfterTool),
        on: "AfterTool",
        binary: "preloop-gemini-after-tool",
        role: Lifecycle,
        does: Does::AfterTool,
        carrier: Carrier::Context("hookSpecificOutput.additionalContext"),
        limit: GEMINI_CONTEXT_LIMIT,
        gate: None,
        budget: Call,
        server_event: None,
        delivery: Some(DeliveryEvent::PreToolUse),
    },
    HookDef {
        event: Event::Gemini(event::Gemini::AfterAgent),
        on: "AfterAgent",
        binary: "preloop-gemini-after-agent",
        role: Lifecycle,
        does: Does::Stop,
        carrier: Carrier::Continue("reason"),
        limit: GEMINI_REASON_LIMIT,
        gate: None,
        budget: Call,
        server_event: Some("Stop"),
        delivery: Some(DeliveryEvent::Stop),
    },
    HookDef {
        event: Event::Gemini(event::Gemini::SessionEnd),
        on: "SessionEnd",
        binary: "preloop-gemini-session-end",
        role: End,
        does: Does::SessionEnd,
        carrier: Carrier::None,
        limit: GEMINI_CONTEXT_LIMIT,
        gate: None,
        budget: Budget::SessionEnd,
        server_event: Some("SessionEnd"),
        delivery: None,
    },
    // ---- GitHub Copilot CLI 1.0.102, camelCase hooks file (docs/contracts/copilot-cli.md)
    HookDef {
        event: Event::Copilot(event::Copilot::SessionStart),
        on: "sessionStart",
        binary: "preloop-copilot-session-start",
        role: Lifecycle,
        does: Does::SessionStart { pull: true },
        carrier: Carrier::Context("additionalContext"),
        limit: COPILOT_LIMIT,
        gate: None,
        budget: Call,
        server_event: None,
        delivery: Some(DeliveryEvent::SessionStart),
    },
    HookDef {
        event: Event::Copilot(event::Copilot::UserPromptSubmitted),
        on: "userPromptSubmitted",
        binary: "preloop-copilot-user-prompt-submitted",
        role: Lifecycle,
        does: Does::Prompt { pull: true },
        carrier: Carrier::Context("additionalContext"),
        limit: COPILOT_LIMIT,
        gate: None,
        budget: Call,
        server_event: Some("UserPromptSubmit"),
        delivery: Some(DeliveryEvent::SessionStart),
    },
    HookDef {
        event: Event::Copilot(event::Copilot::PreToolUse),
        on: "preToolUse",
        binary: "preloop-copilot-pre-tool-use",
        role: Role::Permission,
        does: Does::Check,
        // The server never hands copilot_cli a note here (preloop-server.md
        // §4.2, trap 26): this context carries only the session's spool.
        carrier: Carrier::Context("additionalContext"),
        limit: COPILOT_LIMIT,
        gate: gate(PRE_TOOL_USE, FailKey::PreToolUse, ServerClaim::Never),
        budget: Permission,
        server_event: Some("preToolUse"),
        delivery: Some(DeliveryEvent::PreToolUse),
    },
    HookDef {
        event: Event::Copilot(event::Copilot::PostToolUse),
        on: "postToolUse",
        binary: "preloop-copilot-post-tool-use",
        role: Lifecycle,
        does: Does::AfterTool,
        carrier: Carrier::Context("additionalContext"),
        limit: COPILOT_LIMIT,
        gate: None,
        budget: Call,
        server_event: None,
        delivery: Some(DeliveryEvent::PreToolUse),
    },
    HookDef {
        event: Event::Copilot(event::Copilot::AgentStop),
        on: "agentStop",
        binary: "preloop-copilot-agent-stop",
        role: Lifecycle,
        does: Does::Stop,
        carrier: Carrier::Continue("reason"),
        limit: COPILOT_LIMIT,
        gate: None,
        budget: Call,
        server_event: Some("Stop"),
        delivery: Some(DeliveryEvent::Stop),
    },
    HookDef {
        event: Event::Copilot(event::Copilot::SessionEnd),
        on: "sessionEnd",
        binary: "preloop-copilot-session-end",
        role: End,
        does: Does::SessionEnd,
        carrier: Carrier::None,
        limit: COPILOT_LIMIT,
        gate: None,
        budget: Budget::SessionEnd,
        server_event: Some("SessionEnd"),
        delivery: None,
    },
    // ---- Pi 0.73.1, through our extension (docs/contracts/pi.md)
    HookDef {
        event: Event::Pi(event::Pi::SessionStart),
        on: "session_start",
        binary: "preloop-pi-session-start",
        role: Lifecycle,
        does: Does::SessionStart { pull: true },
        // `sendMessage(.., {deliverAs: "nextTurn"})`: with the first prompt.
        carrier: Carrier::Context("context"),
        limit: PI_LIMIT,
        gate: None,
        budget: Call,
        server_event: None,
        delivery: Some(DeliveryEvent::SessionStart),
    },
    HookDef {
        event: Event::Pi(event::Pi::BeforeAgentStart),
        on: "before_agent_start",
        binary: "preloop-pi-before-agent-start",
        role: Lifecycle,
        does: Does::Prompt { pull: true },
        // `return {message}`: its own user message after every prompt.
        carrier: Carrier::Context("context"),
        limit: PI_LIMIT,
        gate: None,
        budget: Call,
        server_event: Some("UserPromptSubmit"),
        delivery: Some(DeliveryEvent::SessionStart),
    },
    HookDef {
        event: Event::Pi(event::Pi::ToolCall),
        on: "tool_call",
        binary: "preloop-pi-tool-call",
        role: Role::Permission,
        does: Does::Check,
        // A deny only (`return {block, reason}`): a note here and one from
        // tool_result would be two steers in one batch (pi.md §6). The
        // server never claims a note for `pi` on a check (preloop-server.md §4.2).
        carrier: Carrier::None,
        limit: PI_LIMIT,
        gate: gate(PRE_TOOL_USE, FailKey::PreToolUse, ServerClaim::Never),
        budget: Permission,
        server_event: Some("PreToolUse"),
        delivery: Some(DeliveryEvent::PreToolUse),
    },
    HookDef {
        event: Event::Pi(event::Pi::ToolResult),
        on: "tool_result",
        binary: "preloop-pi-tool-result",
        role: Lifecycle,
        does: Does::AfterTool,
        // `sendMessage(.., {deliverAs: "steer"})`: after this batch's results.
        carrier: Carrier::Context("context"),
        limit: PI_LIMIT,
        gate: None,
        budget: Call,
        server_event: None,
        delivery: Some(DeliveryEvent::PreToolUse),
    },
    HookDef {
        event: Event::Pi(event::Pi::AgentEnd),
        on: "agent_end",
        binary: "preloop-pi-agent-end",
        role: Lifecycle,
        does: Does::Stop,
        // A timer, then `sendMessage(.., {triggerTurn: true})`: a new run,
        // where Pi stays alive (RPC, interactive; never -p or json).
        carrier: Carrier::Continue("continue"),
        limit: PI_LIMIT,
        gate: None,
        budget: Call,
        server_event: Some("Stop"),
        delivery: Some(DeliveryEvent::Stop),
    },
    HookDef {
        event: Event::Pi(event::Pi::SessionShutdown),
        on: "session_shutdown",
        binary: "preloop-pi-session-shutdown",
        role: End,
        does: Does::SessionEnd,
        carrier: Carrier::None,
        limit: PI_LIMIT,
        gate: None,
        budget: Budget::SessionEnd,
        server_event: Some("SessionEnd"),
        delivery: None,
    },
    HookDef {
        event: Event::Pi(event::Pi::Watch),
        // Not a Pi event: our extension runs it while the session is idle
        // (after session_start and agent_end, where `has_ui`).
        on: "idle",
        binary: "preloop-pi-watch",
        role: Role::Watch,
        does: Does::Watch,
        // `sendMessage(.., {triggerTurn: true})`: a new run with the note.
        carrier: Carrier::Wake("`continue`, starts a turn"),
        limit: PI_LIMIT,
        gate: None,
        budget: Budget::Watch,
        server_event: None,
        delivery: Some(DeliveryEvent::Stop),
    },
    // ---- OpenCode 1.18.33, through our plugin (docs/contracts/opencode.md)
    HookDef {
        event: Event::OpenCode(event::OpenCode::SessionCreated),
        on: "session.created",
        binary: "preloop-opencode-session-created",
        role: Lifecycle,
        // An event OpenCode does not await (it can land after chat.message):
        // it registers, and claims nothing it could only keep in memory.
        does: Does::SessionStart { pull: false },
        carrier: Carrier::None,
        limit: OPENCODE_LIMIT,
        gate: None,
        budget: Call,
        server_event: None,
        delivery: None,
    },
    HookDef {
        event: Event::OpenCode(event::OpenCode::ChatMessage),
        on: "chat.message",
        binary: "preloop-opencode-chat-message",
        role: Lifecycle,
        does: Does::Prompt { pull: true },
        // A synthetic text part pushed into the prompt's user message.
        carrier: Carrier::Context("context"),
        limit: OPENCODE_LIMIT,
        gate: None,
        budget: Call,
        server_event: Some("UserPromptSubmit"),
        delivery: Some(DeliveryEvent::SessionStart),
    },
    HookDef {
        event: Event::OpenCode(event::OpenCode::ToolExecuteBefore),
        on: "tool.execute.before",
        binary: "preloop-opencode-tool-execute-before",
        role: Role::Permission,
        does: Does::Check,
        // A deny only (the shim throws the reason, which becomes the tool's
        // result). The server never claims a note for `opencode` on a check
        // (preloop-server.md §4.2).
        carrier: Carrier::None,
        limit: OPENCODE_LIMIT,
        gate: gate(PRE_TOOL_USE, FailKey::PreToolUse, ServerClaim::Never),
        budget: Permission,
        server_event: Some("PreToolUse"),
        delivery: Some(DeliveryEvent::PreToolUse),
    },
    HookDef {
        event: Event::OpenCode(event::OpenCode::ToolExecuteAfter),
        on: "tool.execute.after",
        binary: "preloop-opencode-tool-execute-after",
        role: Lifecycle,
        does: Does::AfterTool,
        // Appended to the tool's output (the tool message the model gets).
        carrier: Carrier::Context("context"),
        limit: OPENCODE_LIMIT,
        gate: None,
        budget: Call,
        server_event: None,
        delivery: Some(DeliveryEvent::PreToolUse),
    },
    HookDef {
        event: Event::OpenCode(event::OpenCode::TextComplete),
        on: "experimental.text.complete",
        binary: "preloop-opencode-text-complete",
        role: Lifecycle,
        does: Does::Stop,
        // `client.session.prompt({noReply: true})`: a stored user message
        // the loop answers with one more request.
        carrier: Carrier::Continue("continue"),
        limit: OPENCODE_LIMIT,
        gate: None,
        budget: Call,
        server_event: Some("Stop"),
        delivery: Some(DeliveryEvent::Stop),
    },
    HookDef {
        event: Event::OpenCode(event::OpenCode::Dispose),
        on: "dispose",
        binary: "preloop-opencode-dispose",
        role: End,
        does: Does::SessionEnd,
        carrier: Carrier::None,
        limit: OPENCODE_LIMIT,
        gate: None,
        budget: Budget::SessionEnd,
        server_event: Some("SessionEnd"),
        delivery: None,
    },
    HookDef {
        event: Event::OpenCode(event::OpenCode::Watch),
        // Not an OpenCode event: our plugin runs it on `session.idle` where
        // OpenCode stays alive (`serve`, the TUI; never `run`, which
        // disposes at the first idle).
        on: "idle",
        binary: "preloop-opencode-watch",
        role: Role::Watch,
        does: Does::Watch,
        // `client.session.promptAsync`: a new turn with the note
        // (docs/contracts/opencode.md §6).
        carrier: Carrier::Wake("`continue`, starts a turn"),
        limit: OPENCODE_LIMIT,
        gate: None,
        budget: Budget::Watch,
        server_event: None,
        delivery: Some(DeliveryEvent::Stop),
    },
];

impl Harness {
    /// Every harness, in registry order.
    pub fn all() -> impl Iterator<Item = Harness> {
        Harness::ALL.into_iter()
    }

    /// The harness's row (the macro makes `HARNESSES` in `Harness` order).
    pub const fn def(self) -> &'static HarnessDef {
        &HARNESSES[self as usize]
    }

    /// The `source` the server knows the harness by.
    pub fn source(self) -> &'static str {
        self.def().source
    }

    /// The name in our binaries and on the command line.
    pub fn slug(self) -> &'static str {
        self.def().slug
    }

    /// For people.
    pub fn name(self) -> &'static str {
        self.def().name
    }

    pub fn from_slug(s: &str) -> Option<Harness> {
        HARNESSES.iter().find(|h| h.slug == s || h.source == s).map(|h| h.harness)
    }

    /// A slug, a source or one of its aliases ([`AgentKind`]'s rule).
    pub fn from_source(s: &str) -> Option<Harness> {
        AgentKind::from(s).harness()
    }

    /// Whether an onboarding file's `source` is meant for this harness.
    pub fn accepts_source(self, src: &str) -> bool {
        Harness::from_source(src) == Some(self)
    }

    /// Our hooks for this harness, in registry order (the watcher twice).
    pub fn hooks(self) -> impl Iterator<Item = &'static HookDef> {
        HOOKS.iter().filter(move |d| d.harness() == self)
    }
}

/// Who runs a session, as a session file, a hook's registration or the
/// server names it (`agent_kind`): one of our harnesses under the word it
/// came as, or a word no harness of this build answers to (a newer build's
/// harness, a custom managed agent's kind on the server). It travels as that
/// word, unchanged both ways: `codex` (a managed agent's kind) stays `codex`
/// though it is [`Harness::Codex`]'s `codex_cli`, and an unknown word never
/// makes a session file unreadable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AgentKind {
    /// One of ours, and the registry's word it came as (its `source`, a
    /// `source_aliases` entry or its slug).
    Harness(Harness, &'static str),
    /// A word this build does not know, kept as it came.
    Other(String),
}

impl AgentKind {
    /// What our hooks write for `h`: its `source`.
    pub fn of(h: Harness) -> AgentKind {
        AgentKind::Harness(h, h.source())
    }

    /// The harness, when the word is one of ours ([`Harness::from_source`]).
    pub fn harness(&self) -> Option<Harness> {
        match self {
            AgentKind::Harness(h, _) => Some(*h),
            AgentKind::Other(_) => None,
        }
    }

    /// The word as it came.
    pub fn as_str(&self) -> &str {
        match self {
            AgentKind::Harness(_, w) => w,
            AgentKind::Other(w) => w,
        }
    }
}

impl From<&str> for AgentKind {
    fn from(s: &str) -> AgentKind {
        // In `Harness::from_source`'s order: a slug or source, then an alias.
        let own = |h: &'static HarnessDef| [h.slug, h.source].into_iter().find(|w| *w == s);
        let alias = |h: &'static HarnessDef| h.source_aliases.iter().copied().find(|w| *w == s);
        (HARNESSES.iter().find_map(|h| own(h).map(|w| AgentKind::Harness(h.harness, w))))
            .or_else(|| HARNESSES.iter().find_map(|h| alias(h).map(|w| AgentKind::Harness(h.harness, w))))
            .unwrap_or_else(|| AgentKind::Other(s.to_string()))
    }
}

impl From<String> for AgentKind {
    fn from(s: String) -> AgentKind {
        match AgentKind::from(s.as_str()) {
            AgentKind::Other(_) => AgentKind::Other(s),
            known => known,
        }
    }
}

impl From<AgentKind> for String {
    fn from(k: AgentKind) -> String {
        match k {
            AgentKind::Harness(_, w) => w.to_string(),
            AgentKind::Other(w) => w,
        }
    }
}

impl serde::Serialize for AgentKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for AgentKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AgentKind, D::Error> {
        String::deserialize(d).map(AgentKind::from)
    }
}

impl std::fmt::Display for AgentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The registry row of a harness event (`def_of(event::Codex::Stop)`).
pub fn def_of(event: impl Into<Event>) -> &'static HookDef {
    event.into().def()
}

/// An event name's words in lower case, joined by `sep`: `PreToolUse` →
/// `pre-tool-use` (Codex's schema files), `pre_tool_use` (its trust keys).
pub fn lower_words(name: &str, sep: char) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push(sep);
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The largest carrier of a harness: a note that fits no carrier of this
/// hook but fits that one waits for it (a body is never cut).
pub fn largest_limit(harness: Harness) -> CarrierLimit {
    harness
        .hooks()
        .filter(|d| d.carrier.carries())
        .map(|d| d.limit)
        .max_by_key(|l| l.max())
        .unwrap_or(CarrierLimit::Chars(10_000))
}

/// The row of a binary (its first, for the watcher).
pub fn by_binary(binary: &str) -> Option<&'static HookDef> {
    HOOKS.iter().find(|d| d.binary == binary)
}

/// Every distinct binary, in registry order.
pub fn binaries() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for d in HOOKS {
        if !out.contains(&d.binary) {
            out.push(d.binary);
        }
    }
    out
}

/// Hook event names the Preloop server treats as a submitted prompt on
/// `session-start` (it records the prompt time). The local inbox mirrors it.
pub const SERVER_PROMPT_EVENTS: &[&str] = &["UserPromptSubmit", "beforeSubmitPrompt"];

/// The registry as Markdown: one row per hook binary, the table at the top
/// of docs/event-matrix.md (a test keeps the document in step).
pub fn markdown_hooks() -> String {
    let mut out = String::from(
        "| harness | event | binary | engine | carrier (limit) | gate: phase, on error, server claim | budget |\n|---|---|---|---|---|---|---|\n",
    );
    for d in HOOKS {
        let h = d.harness().def();
        let does = match d.does {
            Does::SessionStart { pull: true } => "register, pull",
            Does::SessionStart { pull: false } => "register",
            Does::Prompt { pull: true } => "first prompt, pull",
            Does::Prompt { pull: false } => "first prompt",
            Does::Check => "permission check",
            Does::AfterTool => "pull",
            Does::Stop => "stop rescue",
            Does::SessionEnd => "end",
            Does::Watch => "idle wake",
        };
        let limit = match d.limit {
            CarrierLimit::Chars(n) => format!("{n} chars"),
            CarrierLimit::Utf16(n) => format!("{n} UTF-16 units"),
            CarrierLimit::Bytes(n) => format!("{n} bytes"),
            CarrierLimit::EscapedChars(n) => format!("{n} chars after escaping"),
        };
        let carrier = match d.carrier {
            Carrier::None if d.gate.is_some() => "none: a note the server hands it is spooled".to_string(),
            Carrier::None => "none".to_string(),
            Carrier::Context(f) => format!("`{f}` ({limit})"),
            Carrier::Continue(f) => format!("`{f}`, continues the turn ({limit})"),
            Carrier::DenyReason(f) => format!("`{f}`: holds the call ({limit})"),
            Carrier::Wake(how) => format!("{how} ({limit})"),
        };
        let gate = match d.gate {
            None => "-".to_string(),
            Some(g) => format!(
                "{}, {}, {}",
                match g.phase {
                    EvaluationPhase::PreToolUse => "pre_tool_use",
                    EvaluationPhase::PermissionRequest => "permission_request",
                },
                match g.fail {
                    FailKey::PreToolUse => "`pre_tool_use_on_error` (open)",
                    FailKey::PermissionRequest => "`permission_request_on_error` (deny)",
                },
                match g.server_claim {
                    ServerClaim::Immediate => "immediate",
                    ServerClaim::Deferred => "deferred",
                    ServerClaim::Never => "never",
                }
            ),
        };
        let budget = match d.budget {
            Call => "call_timeout_ms".to_string(),
            Permission => "permission_timeout_secs".to_string(),
            Budget::SessionEnd => match h.session_end_kill_ms {
                Some(ms) => format!("detached worker (the hook is killed at ~{ms} ms)"),
                None => "detached worker (the hook is awaited)".to_string(),
            },
            Budget::Watch => "watch_max_secs".to_string(),
        };
        out.push_str(&format!(
            "| {} {} | {} | `{}` | {does} | {carrier} | {gate} | {budget} |\n",
            h.name, h.version, d.on, d.binary
        ));
    }
    out
}

/// The harness table of the README: each harness with its version, the
/// events we hook and how its behaviour was established.
pub fn markdown_harnesses() -> String {
    let mut out = String::from("| harness | events | proven |\n|---|---|---|\n");
    for h in HARNESSES {
        let mut events: Vec<&str> = Vec::new();
        for d in h.harness.hooks().filter(|d| d.does != Does::Watch) {
            if !events.contains(&d.on) {
                events.push(d.on);
            }
        }
        out.push_str(&format!(
            "| {} {} | {} | {} |\n",
            h.name,
            h.version,
            events.join(", "),
            evidence_words(h.evidence)
        ));
    }
    out
}

/// How a run each harness's agent starts learns its parent session: the
/// lineage table of docs/event-matrix.md.
pub fn markdown_lineage() -> String {
    let mut out = String::from("| harness | a run its agent starts learns its parent from |\n|---|---|\n");
    for h in HARNESSES {
        out.push_str(&format!("| {} {} | {} |\n", h.name, h.version, lineage_how(h.lineage)));
    }
    out
}

/// The lineage table of docs/guarantees.md: how a worker a conductor of
/// each harness starts learns its parent, and how that was established.
pub fn markdown_lineage_guarantees() -> String {
    let mut out = String::from(
        "| harness of the conductor | how the worker learns its parent | the harness's behaviour established on |\n|---|---|---|\n",
    );
    for h in HARNESSES {
        let how = lineage_how(h.lineage);
        out.push_str(&format!("| {} {} | {how} | {} |\n", h.name, h.version, evidence_words(h.evidence)));
    }
    out
}

/// A [`Lineage`] in the docs' words.
fn lineage_how(lineage: Lineage) -> String {
    match lineage {
        Lineage::Export(via) => format!(
            "`PRELOOP_PARENT_SESSION_ID`, which SessionStart exports through {via}; process ancestry where it did not arrive"
        ),
        Lineage::Ancestry => "process ancestry (no hook can export a variable to the commands it runs)".to_string(),
    }
}

/// An [`Evidence`] in the docs' words.
fn evidence_words(evidence: Evidence) -> &'static str {
    match evidence {
        Evidence::RealBinary => "the real binary, end to end",
        Evidence::Documented => "its documentation and public captures",
    }
}

/// `e2e/kit/registry.json`: what the end-to-end kit takes from the
/// registry (each harness's version, npm package, program, and hook
/// command per event), so the kit names no version or binary of its own.
pub fn e2e_kit_json() -> String {
    #[derive(serde::Serialize)]
    struct KitHarness {
        slug: &'static str,
        name: &'static str,
        version: &'static str,
        npm_package: Option<&'static str>,
        /// Its executable: `node_modules/.bin/<program>` of the npm package,
        /// and the kit module `e2e/kit/<program>.py`.
        program: &'static str,
        /// `[event, hook command]`, in registry order (the watcher apart).
        hooks: Vec<(&'static str, &'static str)>,
        watch: Option<&'static str>,
    }
    #[derive(serde::Serialize)]
    struct Kit {
        generated_from: &'static str,
        harnesses: Vec<KitHarness>,
    }
    let kit = Kit {
        generated_from: "shared/src/registry.rs (its test e2e_kit_follows_the_registry; PRELOOP_BLESS=1 rewrites this file)",
        harnesses: HARNESSES
            .iter()
            .map(|h| KitHarness {
                slug: h.slug,
                name: h.name,
                version: h.version,
                npm_package: h.npm_package,
                program: h.program,
                hooks: h.harness.hooks().filter(|d| d.does != Does::Watch).map(|d| (d.on, d.binary)).collect(),
                watch: h.harness.hooks().find(|d| d.does == Does::Watch).map(|d| d.binary),
            })
            .collect(),
    };
    serde_json::to_string_pretty(&kit).map(|t| t + "\n").unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every hook (not the watcher) has its canonical capture at
    /// `fixtures/<fixtures>/<event>.json` (a link to one of several captures
    /// where there are more): the payload the benchmark and the hardening
    /// suite run the hook with, so neither names a harness to find it.
    #[test]
    fn every_hook_has_its_canonical_capture() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        for d in HOOKS.iter().filter(|d| d.does != Does::Watch) {
            let path = root.join(d.harness().def().fixtures).join(format!("{}.json", d.on));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: no canonical capture {} ({e})", d.binary, path.display()));
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert!(v.is_object(), "{}: {} is not a JSON object", d.binary, path.display());
        }
    }

    /// The end-to-end kit's versions, packages and hook commands are the
    /// registry's: `e2e/kit/registry.json` is generated (PRELOOP_BLESS=1
    /// rewrites it), and no kit file pins a version of its own.
    #[test]
    fn e2e_kit_follows_the_registry() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let path = root.join("e2e/kit/registry.json");
        let json = e2e_kit_json();
        for h in HARNESSES {
            let events: Vec<&str> = h.harness.hooks().filter(|d| d.does != Does::Watch).map(|d| d.on).collect();
            let mut unique = events.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), events.len(), "{}: two hooks on one event", h.slug);
        }
        if std::fs::read_to_string(&path).unwrap_or_default() != json {
            assert!(crate::blessing(), "e2e/kit/registry.json is not the registry's (PRELOOP_BLESS=1 rewrites it)");
            std::fs::write(&path, &json).unwrap();
        }
        for entry in std::fs::read_dir(root.join("e2e/kit")).unwrap() {
            let p = entry.unwrap().path();
            if p.extension().is_none_or(|e| e != "py") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            for h in HARNESSES {
                let pinned = format!("\"{}\"", h.version);
                assert!(
                    !text.contains(&pinned),
                    "{} pins {} {}: read it from registry.json",
                    p.display(),
                    h.name,
                    h.version
                );
                for d in h.harness.hooks() {
                    let named = format!("\"{}\"", d.binary);
                    assert!(!text.contains(&named), "{} names {}: read it from registry.json", p.display(), d.binary);
                }
            }
        }
    }

    #[test]
    fn rows_are_consistent() {
        for d in HOOKS {
            let h = d.harness().def();
            assert!(d.binary.starts_with(&format!("preloop-{}-", h.slug)), "{d:?}");
            assert_eq!(d.gate.is_some(), d.does == Does::Check, "{}", d.binary);
            assert_eq!(d.role == Role::Permission, d.gate.is_some(), "{}", d.binary);
            assert_eq!(d.role == End, d.does == Does::SessionEnd, "{}", d.binary);
            assert_eq!(d.budget == Budget::SessionEnd, d.does == Does::SessionEnd, "{}", d.binary);
            if let Some(g) = d.gate {
                // A gate that cannot show a note must not be handed one it
                // would have to keep as `delivered`.
                if !d.carrier.carries() && !matches!(d.carrier, Carrier::DenyReason(_)) {
                    assert_ne!(g.server_claim, ServerClaim::Immediate, "{}", d.binary);
                }
            }
            if d.carrier.carries() {
                assert!(d.delivery.is_some(), "{}", d.binary);
            }
        }
        for h in HARNESSES {
            assert_eq!(Harness::from_slug(h.slug), Some(h.harness));
            assert_eq!(Harness::from_source(h.source), Some(h.harness));
            assert!(h.harness.hooks().any(|d| d.does == Does::SessionEnd), "{} has no SessionEnd", h.name);
        }
        let bins = binaries();
        let mut sorted = bins.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(bins.len(), sorted.len());
    }

    /// Every event of every harness has its row, named after it, and the
    /// rows are grouped by harness in registry order.
    #[test]
    fn every_event_has_a_row() {
        for (i, e) in Event::ALL.into_iter().enumerate() {
            let d = HOOKS.iter().find(|d| d.event == e).unwrap_or_else(|| panic!("{e:?} has no HookDef row"));
            // `def` (a table made at compile time) is the first row, as a scan finds it.
            assert_eq!((e.index(), e.def().event, e.def().binary), (i, e, d.binary), "{e:?}");
            let slug = e.harness().slug();
            assert_eq!(d.binary, format!("preloop-{slug}-{}", lower_words(e.ident(), '-')), "{e:?}");
            assert_eq!(Event::from_binary(d.binary), Some(e));
        }
        for (i, h) in Harness::ALL.into_iter().enumerate() {
            assert_eq!(h.def().harness, h);
            assert_eq!(HARNESSES[i].harness, h);
        }
        let order: Vec<usize> = HOOKS.iter().map(|d| d.harness() as usize).collect();
        assert!(order.is_sorted(), "HOOKS is not grouped by harness in registry order");
        assert_eq!(Harness::ALL.len(), HARNESSES.len());
    }

    /// The generated tables in docs/event-matrix.md, docs/guarantees.md and
    /// README.md are the registry's (PRELOOP_BLESS=1 rewrites them), and every binary the
    /// matrix's prose tables name exists.
    #[test]
    fn docs_follow_the_registry() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for (file, marker, table) in [
            ("docs/event-matrix.md", "registry:hooks", markdown_hooks()),
            ("docs/event-matrix.md", "registry:lineage", markdown_lineage()),
            ("docs/guarantees.md", "registry:lineage", markdown_lineage_guarantees()),
            ("README.md", "registry:harnesses", markdown_harnesses()),
        ] {
            let path = root.join(file);
            let text = std::fs::read_to_string(&path).unwrap();
            let begin = format!("<!-- {marker} begin (generated from shared/src/registry.rs) -->\n");
            let end = format!("<!-- {marker} end -->");
            let (Some(b), Some(e)) = (text.find(&begin), text.find(&end)) else {
                panic!("{file} has no {marker} block")
            };
            let current = &text[b + begin.len()..e];
            if current != table {
                if crate::blessing() {
                    let new = format!("{}{table}{}", &text[..b + begin.len()], &text[e..]);
                    std::fs::write(&path, new).unwrap();
                } else {
                    panic!("{file}: the {marker} table is not the registry's (PRELOOP_BLESS=1 rewrites it)");
                }
            }
        }
        let matrix = std::fs::read_to_string(root.join("docs/event-matrix.md")).unwrap();
        let named: std::collections::BTreeSet<&str> = matrix
            .split('`')
            .filter(|w| w.starts_with("preloop-") && w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
            .filter(|w| *w != "preloop-hooks" && *w != "preloop-fake-server")
            .collect();
        for w in &named {
            assert!(by_binary(w).is_some(), "docs/event-matrix.md names {w}, which the registry does not have");
        }
        for b in binaries() {
            assert!(named.contains(b), "docs/event-matrix.md does not mention {b}");
        }
    }

    /// Every contract in docs/contracts/ is on its index page: a new
    /// harness's contract brings its row there (docs/adding-a-harness.md,
    /// "New files").
    #[test]
    fn contracts_are_indexed() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/contracts");
        let index = std::fs::read_to_string(dir.join("README.md")).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".md") && name != "README.md" {
                assert!(index.contains(&name), "docs/contracts/README.md does not index {name}: add its row");
            }
        }
    }

    /// Whether a Rust file names `h` the way per-harness code does: a path to
    /// its variant or its adapter crate, or its slug or source as a string.
    fn rust_names(text: &str, h: Harness) -> bool {
        let ident = format!("{h:?}");
        let def = h.def();
        let token = |pat: String| {
            text.match_indices(&pat)
                .any(|(i, _)| !text[i + pat.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_'))
        };
        ["Harness", "Event", "event"].iter().any(|p| token(format!("{p}::{ident}")))
            || token(format!("preloop_{}", def.slug.replace('-', "_")))
            || text.contains(&format!("\"{}\"", def.slug))
            || text.contains(&format!("\"{}\"", def.source))
    }

    /// Whether any other file mentions `h`: its slug, source or name.
    fn mentions(text: &str, h: Harness) -> bool {
        let text = text.to_lowercase();
        let d = h.def();
        [d.slug, d.source, &d.name.to_lowercase()].iter().any(|w| text.contains(w))
    }

    /// The workspace's Rust files outside the adapter crates (`hooks/`).
    fn rust_files(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                let skip = name.starts_with('.') || name == "target" || name == "node_modules";
                if !skip && path != root.join("hooks") {
                    rust_files(&path, root, out);
                }
            } else if kind.is_file() && name.ends_with(".rs") {
                out.push(path.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }

    /// docs/adding-a-harness.md lists and counts the existing files a new
    /// harness edits, and lists apart those written from the registry.
    /// Checked both ways where a machine can: every listed file exists and
    /// names every harness (none is stale), every Rust file outside the
    /// adapter crates that names every harness is in one of the two tables
    /// (a new per-harness match or list cannot go unmentioned), and the
    /// count the page states is the number of rows of the first.
    #[test]
    fn adding_a_harness_counts_its_places() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let root = root.canonicalize().unwrap();
        let doc = std::fs::read_to_string(root.join("docs/adding-a-harness.md")).unwrap();
        let (Some(b), Some(e)) = (doc.find("<!-- places begin"), doc.find("<!-- places end -->")) else {
            panic!("docs/adding-a-harness.md has no places table")
        };
        let files_of = |rows: &str| -> Vec<String> {
            rows.lines()
                .filter_map(|l| l.strip_prefix("| `"))
                .map(|l| l.split('`').next().unwrap().to_string())
                .collect()
        };
        let listed = files_of(&doc[b..e]);
        let (Some(db), Some(de)) = (doc.find("<!-- derived begin -->"), doc.find("<!-- derived end -->")) else {
            panic!("docs/adding-a-harness.md has no table of the files written from the registry")
        };
        let derived = files_of(&doc[db..de]);
        for file in &derived {
            assert!(
                root.join(file).exists(),
                "docs/adding-a-harness.md says {file} follows the registry: no such file"
            );
            assert!(!listed.contains(file), "docs/adding-a-harness.md lists {file} in both tables");
        }
        let stated: usize = doc
            .split("**")
            .find_map(|w| w.strip_suffix(" existing files").and_then(|n| n.parse().ok()))
            .expect("the page states \"**N existing files**\"");
        assert_eq!(
            stated,
            listed.len(),
            "docs/adding-a-harness.md says {stated} existing files and lists {}",
            listed.len()
        );

        for file in &listed {
            let text = std::fs::read_to_string(root.join(file))
                .unwrap_or_else(|e| panic!("docs/adding-a-harness.md lists {file}: {e}"));
            for h in Harness::ALL {
                // The e2e suite drives only the harnesses we can run.
                if file.starts_with("e2e/") && h.def().evidence != Evidence::RealBinary {
                    continue;
                }
                let named = if file.ends_with(".rs") { rust_names(&text, h) } else { mentions(&text, h) };
                assert!(named, "docs/adding-a-harness.md lists {file}, which does not name {}", h.name());
            }
        }

        let mut files = Vec::new();
        rust_files(&root, &root, &mut files);
        files.sort();
        assert!(files.iter().any(|f| f == "shared/src/registry.rs"), "the walk missed the workspace");
        let unlisted: Vec<&String> = files
            .iter()
            .filter(|f| !listed.contains(f) && !derived.contains(f))
            .filter(|f| {
                let text = std::fs::read_to_string(root.join(f)).unwrap();
                // A source file's unit tests may walk every harness; what
                // a new harness must be added to is the code before them.
                let code = match text.find("#[cfg(test)]\nmod tests") {
                    Some(i) if f.contains("/src/") => &text[..i],
                    _ => &text,
                };
                Harness::ALL.into_iter().all(|h| rust_names(code, h))
            })
            .collect();
        assert!(
            unlisted.is_empty(),
            "these files name every harness, so a new one goes there too: list them in docs/adding-a-harness.md: {unlisted:?}"
        );
    }

    /// Every harness has exactly one gate per tool call, which `sessions
    /// list` counts ([`HookDef::is_tool_gate`]), found again by the name the
    /// hook log gives it.
    #[test]
    fn each_harness_has_one_tool_gate() {
        for h in Harness::ALL {
            let gates: Vec<&HookDef> = h.hooks().filter(|d| d.is_tool_gate()).collect();
            assert_eq!(gates.len(), 1, "{}: {gates:?}", h.name());
            assert_eq!(HookDef::logged(h.slug(), gates[0].on).map(|d| d.binary), Some(gates[0].binary));
        }
    }

    #[test]
    fn limits_measure_what_the_harness_counts() {
        assert_eq!(CarrierLimit::Chars(10).measure("é<"), 2);
        assert_eq!(CarrierLimit::Bytes(10).measure("é<"), 3);
        assert_eq!(CarrierLimit::EscapedChars(10).measure("é<>"), 9);
    }
}
