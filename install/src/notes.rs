//! `notes send|list|status|cancel`: against the Preloop server's human
//! routes (server mode, user token) or the local inbox (local mode), with
//! the same targets, rules, messages and `--json` shapes in both modes.

use crate::error::{CliError, CliResult};
use crate::operator::{NewNote, NotesOf, Operator, Sent, SessionRef, To, ids};
use crate::ops::Ops;
use crate::output::{self, clip, safe, safe_line, time};
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand, ValueEnum};
use preloop_shared::local::MAX_NOTE_CHARS;
use preloop_shared::operator::{JSON_SCHEMA_VERSION, NOTE_STATES, Receipt, ReceiptState};
use preloop_shared::time::Timestamp;
use preloop_shared::{Error, Harness, Result};
use serde::Serialize;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum NotesCmd {
    /// Send a note to a running (or the next) session.
    #[command(after_help = SEND_EXAMPLES, override_usage = "preloop-hooks notes send <TARGET> [OPTIONS] [TEXT]")]
    Send(SendArgs),
    /// List the notes of one target, newest first.
    #[command(after_help = LIST_EXAMPLES, override_usage = "preloop-hooks notes list <TARGET> [OPTIONS]")]
    List(ListArgs),
    /// Show one note's receipt (state, channel, event, times).
    #[command(
        after_help = "Examples:\n  preloop-hooks notes status 3f2a9c0d1e4b5a6c\n  preloop-hooks notes status 3f2a9c0d --json | jq -r .state   # a unique start of the id will do\n\nExit codes: 0 found, 1 not found or another error, 2 not a note id or a start several notes share."
    )]
    Status(IdArgs),
    /// Withdraw a note that has not been delivered yet.
    #[command(
        after_help = "Example:\n  preloop-hooks notes cancel 3f2a9c0d     # the note id, or a unique start of it\n\nOnly a pending note can be cancelled: exit 0 when this call cancelled it. A note in any other state\n(delivered, undeliverable, expired, already cancelled) is shown unchanged and the command exits 1."
    )]
    Cancel(IdArgs),
}

const SEND_EXAMPLES: &str = "Examples:
  preloop-hooks notes send --session 801fb481 \"Stop refactoring the tests, ship the fix.\"
  preloop-hooks notes send --alias worker-1 --expires-in 2h \"Deploy to eu-west-1.\"
  preloop-hooks notes send --children all \"Wrap up and push.\"      # from a conductor's Bash tool
  preloop-hooks notes send --next claude-code \"Run the checks first.\"
  preloop-hooks notes send --session 801fb481 --wait 5m \"Run the final checks.\"
  preloop-hooks notes send --session \"$ID\" --not-started \"Read AGENTS.md first.\"  # before it starts
  cat <<'NOTE' | preloop-hooks notes send --session 801fb481
  Two things:
  1. the cluster is eu-west-1
  2. do not touch the tests
  NOTE

Targets (exactly one):
  --session ID          a session: its harness or runtime session id, or a unique start of
                        one (4+ characters; the ID `sessions list` prints)
  --alias NAME          the live session started with PRELOOP_SESSION_ALIAS=NAME
  --children latest|all the live runs a session started: from inside a run (any harness),
                        that run's; or --parent SESSION's; `all`: one note each, at most 20
  --execution ID        the session a flow execution runs on
  --next HARNESS        the next session of a harness that starts after the note
  --agent ID|NAME       a managed agent's current or next session (server mode; the id or the
                        name `sessions list --agent` takes)

Ids work as in git: a start of an id that several sessions share exits 2 and names them; an id no
known session has or starts with exits 1 and nothing is queued. For a session that has not started
yet, give its full id (a UUID, as every harness names its sessions) and --not-started (the local
inbox keeps the note for it, and `notes list --session ID` shows it; a server refuses a session it
does not know); a full id alone is not enough, as a mistyped one would wait for a session that
never comes. A session that has ended is named on stderr before the note is queued.

--json prints {schema, note_id, target, notes} (with --wait: the final receipt, or {schema, notes,
total} for several). --wait shows progress on a terminal; exit codes: 0 delivered, 3
undeliverable, expired, cancelled or its session ended, 4 still pending when the time ran out or
on Ctrl-C or SIGTERM (the note stays pending: `preloop-hooks notes cancel ID`), 1 any other error,
2 usage.";

const LIST_EXAMPLES: &str = "Examples:
  preloop-hooks notes list --session 801fb481
  preloop-hooks notes list --alias worker-1 --state pending --json
  preloop-hooks notes list --children all
  preloop-hooks notes list --agent \"Release worker\"      # server mode: an agent id or name
  preloop-hooks notes list --all -o id
  preloop-hooks notes list --undelivered --children all   # what a conductor's workers never read

Targets (exactly one): --session ID (or a unique start of one), --alias NAME, --children latest|all [--parent SESSION],
--execution ID, --agent ID|NAME (server mode), --all (every note). --state: pending, claimed,
delivered, acknowledged, cancelled, expired, failed, undeliverable.
--undelivered: the notes their session never showed (undeliverable: session_ended, spool_dropped;
or never_carried: recorded delivered at a claim no output carried), with their text; with no
target, those of the last 24 hours.";

/// `--children`, the same for `notes send` and `notes list`: a conductor's
/// children are found in every harness (README, "Sending notes").
const CHILDREN_HELP: &str =
    "The live runs a session started: from inside a run (its shell tool, in any harness), that run's; or --parent's.";

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Children {
    /// The newest live child.
    Latest,
    /// Every live child (at most 20).
    All,
}

fn harness_values() -> PossibleValuesParser {
    PossibleValuesParser::new(Harness::all().map(|h| h.slug()))
}

#[derive(Args, Default)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("target").multiple(false)))]
pub struct TargetArgs {
    /// A session: its harness session id (Claude Code session_id, Codex session id, Cursor
    /// conversation_id) or its runtime session id, or a unique start of one (the ID `sessions list` prints).
    #[arg(long, group = "target", value_name = "ID")]
    session: Option<String>,
    /// The live session started with PRELOOP_SESSION_ALIAS=NAME.
    #[arg(long, group = "target", value_name = "NAME")]
    alias: Option<String>,
    #[arg(long, group = "target", value_enum, value_name = "latest|all", help = CHILDREN_HELP)]
    children: Option<Children>,
    /// The session a flow execution runs on.
    #[arg(long, group = "target", value_name = "ID")]
    execution: Option<String>,
    /// The next session of a harness that starts after this note.
    #[arg(long, group = "target", value_name = "HARNESS", value_parser = harness_values())]
    next: Option<String>,
    /// A managed agent (server mode), by its id or display name: its current session, or the next one it opens.
    #[arg(long, group = "target", value_name = "ID|NAME")]
    agent: Option<String>,
    /// A runtime session id (older spelling; --session takes it too).
    #[arg(long = "runtime-session", group = "target", value_name = "ID", hide = true)]
    runtime_session: Option<String>,
    /// The current or next session of a harness (older spelling; see --next).
    #[arg(long, group = "target", value_name = "HARNESS", hide = true, value_parser = harness_values())]
    harness: Option<String>,
    /// With --children: whose children (default: the run this command runs in).
    #[arg(long, value_name = "SESSION", requires = "children")]
    parent: Option<String>,
}

#[derive(Args)]
pub struct SendArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// With --session: the session has not started yet, so take its id as typed (the local inbox
    /// keeps the note for it; a server refuses a session it does not know). Without it, an id no
    /// known session has or starts with is refused.
    #[arg(long)]
    not_started: bool,
    /// With --agent: only a session started after this note may take it.
    #[arg(long)]
    next_session: bool,
    /// How long the note stays deliverable (90s, 15m, 2h, 1h30m, 1d; 60s to 7d; default 24h).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    expires_in: Option<String>,
    /// Wait up to DURATION for delivery (exit 0 delivered, 3 not deliverable, 4 still pending).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    wait: Option<String>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    /// Who the note is from (local inbox only; the server names the author from the user token).
    #[arg(long, value_name = "NAME")]
    from: Option<String>,
    /// The note. Read from stdin when absent (heredocs and pipes work).
    text: Option<String>,
}

#[derive(Args, Default)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("list_target").multiple(false)))]
pub struct ListArgs {
    /// Notes of this session (harness session id or runtime id, or a unique start of one).
    #[arg(long, group = "list_target", value_name = "ID")]
    session: Option<String>,
    /// Notes of the sessions with this alias.
    #[arg(long, group = "list_target", value_name = "NAME")]
    alias: Option<String>,
    #[arg(long, group = "list_target", value_enum, value_name = "latest|all", help = CHILDREN_HELP)]
    children: Option<Children>,
    /// Notes of a flow execution.
    #[arg(long, group = "list_target", value_name = "ID")]
    execution: Option<String>,
    /// Notes of a managed agent (server mode), by its id or display name.
    #[arg(long, group = "list_target", value_name = "ID|NAME")]
    agent: Option<String>,
    /// Every note (server mode: of every agent of the account).
    #[arg(long, group = "list_target")]
    all: bool,
    #[arg(long = "runtime-session", group = "list_target", value_name = "ID", hide = true)]
    runtime_session: Option<String>,
    /// With --children: whose children.
    #[arg(long, value_name = "SESSION", requires = "children")]
    parent: Option<String>,
    /// Only notes in this state.
    #[arg(long, value_parser = PossibleValuesParser::new(NOTE_STATES.iter().copied()))]
    state: Option<String>,
    /// Only the notes their session never showed (undeliverable, or recorded delivered but never
    /// carried), with their text; without a target, those of the last 24 hours.
    #[arg(long, conflicts_with = "state")]
    undelivered: bool,
    /// Print JSON for scripts (same as -o json).
    #[arg(long)]
    json: bool,
    /// table (default), json, or id (only the note ids, one per line).
    #[arg(short = 'o', long = "output", value_name = "FORMAT", value_parser = ["table", "json", "id"])]
    output: Option<String>,
}

#[derive(Args)]
pub struct IdArgs {
    /// The note id: 16 hex characters, or the first 4 or more of one when no other note starts so.
    note_id: String,
    /// Print the receipt as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run_notes(cmd: NotesCmd) -> CliResult<()> {
    match cmd {
        NotesCmd::Send(a) => send(a),
        NotesCmd::List(a) => Ok(list(a)?),
        NotesCmd::Status(a) => Ok(status(a)?),
        NotesCmd::Cancel(a) => Ok(cancel(a)?),
    }
}

/// ` (you typed X)` after an id the user typed differently.
fn typed_note(typed: &str, shown: &str) -> String {
    if typed == shown { String::new() } else { format!(" (you typed {})", safe_line(typed)) }
}

// ----- status and cancel ------------------------------------------------

fn status(a: IdArgs) -> Result<()> {
    let ops = Ops::load()?;
    let id = ids::note(ops.op.as_ref(), &a.note_id)?;
    let r = ops.op.receipt(&id)?;
    if a.json {
        return output::json(&ReceiptOut::new(&r));
    }
    print_receipt(&r)?;
    // The one receipt that can over-report (docs/guarantees.md): a note the
    // server recorded delivered at its claim that no output carried,
    // because the session ended first.
    match preloop_shared::session::uncarried_by(&ops.config.home, &r.note_id) {
        Some(s) if r.state == ReceiptState::Delivered => output::print_pairs(&[(
            "carried",
            format!(
                "never: session {} ended before a hook could show it (the server recorded it delivered when it was claimed)",
                safe_line(&s)
            ),
        )]),
        _ => Ok(()),
    }
}

/// What `notes cancel` did: the receipt after the call, and why it did not
/// cancel when it did not.
#[derive(Debug)]
struct Cancelled {
    receipt: Receipt,
    refused: Option<String>,
}

/// Only a pending note is cancelled; any other state is reported unchanged
/// (with when it was cancelled, or why it was undeliverable).
fn cancel_note(op: &dyn Operator, id: &str) -> Result<Cancelled> {
    let before = op.receipt(id)?;
    let was_pending = before.state == ReceiptState::Pending;
    let r = if was_pending { op.cancel(id)? } else { before };
    if was_pending && r.state == ReceiptState::Cancelled {
        return Ok(Cancelled { receipt: r, refused: None });
    }
    let state = match (&r.state, r.cancelled_at) {
        (ReceiptState::Cancelled, Some(t)) => format!("already cancelled (at {})", time(Some(t))),
        (st, _) => format!(
            "{st}{}",
            r.undeliverable_reason.as_deref().map(|x| format!(" ({})", safe_line(x))).unwrap_or_default()
        ),
    };
    Ok(Cancelled {
        refused: Some(format!("note {} is {state}; only a pending note can be cancelled", r.note_id)),
        receipt: r,
    })
}

fn cancel(a: IdArgs) -> Result<()> {
    let ops = Ops::load()?;
    let id = ids::note(ops.op.as_ref(), &a.note_id)?;
    let c = cancel_note(ops.op.as_ref(), &id)?;
    if a.json {
        output::json(&ReceiptOut::new(&c.receipt))?;
    }
    if let Some(why) = c.refused {
        return Err(Error::Refused(why));
    }
    if a.json {
        return Ok(());
    }
    output::line(&format!("cancelled {}{}", c.receipt.note_id, typed_note(&a.note_id, &c.receipt.note_id)))
}

// ----- send -------------------------------------------------------------

/// What `notes send --json` prints (without --wait):
/// `schemas/preloop-hooks/notes-send.schema.json`.
#[derive(Serialize)]
struct SendOut {
    schema: u32,
    note_id: String,
    target: TargetOut,
    notes: Vec<SentNote>,
}

#[derive(Serialize, Default, Clone, Debug, PartialEq)]
struct TargetOut {
    /// session | alias | children | execution | next | agent
    kind: &'static str,
    session: Option<String>,
    runtime_session_id: Option<String>,
    alias: Option<String>,
    harness: Option<String>,
    next_session: bool,
    agent_id: Option<String>,
    children: Option<&'static str>,
    parent_session_id: Option<String>,
    execution_id: Option<String>,
}

impl TargetOut {
    /// The target as the command named it, completed with what the send
    /// learned (the session an alias named, the agent of `--next`).
    fn of(to: &To, sent: &Sent) -> TargetOut {
        let t = match to {
            To::Session { id, found } => TargetOut {
                kind: "session",
                session: Some(found.as_ref().and_then(|f| f.external_id.clone()).unwrap_or_else(|| id.clone())),
                runtime_session_id: found.as_ref().map(|f| f.runtime_id.clone()),
                ..TargetOut::default()
            },
            To::Alias(al) => TargetOut { kind: "alias", alias: Some(al.clone()), ..TargetOut::default() },
            To::Children { parent, all } => TargetOut {
                kind: "children",
                children: Some(if *all { "all" } else { "latest" }),
                parent_session_id: Some(parent.runtime_id.clone()),
                ..TargetOut::default()
            },
            To::Execution(e) => TargetOut { kind: "execution", execution_id: Some(e.clone()), ..TargetOut::default() },
            To::Next(h) | To::HarnessCurrent(h) => TargetOut {
                kind: "next",
                harness: Some(h.slug().into()),
                next_session: matches!(to, To::Next(_)),
                ..TargetOut::default()
            },
            To::Agent { agent_id, next_session } => TargetOut {
                kind: "agent",
                agent_id: Some(agent_id.clone()),
                next_session: *next_session,
                ..TargetOut::default()
            },
        };
        TargetOut {
            session: t.session.or_else(|| sent.session.clone()),
            runtime_session_id: t.runtime_session_id.or_else(|| sent.runtime_session_id.clone()),
            agent_id: t.agent_id.or_else(|| sent.agent_id.clone()),
            ..t
        }
    }
}

#[derive(Serialize)]
struct SentNote {
    note_id: String,
    state: ReceiptState,
    session: Option<String>,
    runtime_session_id: Option<String>,
}

/// A receipt with the schema version (`notes status --json`, `send --wait --json`):
/// `schemas/preloop-hooks/receipt.schema.json`.
#[derive(Serialize)]
pub struct ReceiptOut<'a> {
    schema: u32,
    #[serde(flatten)]
    receipt: &'a Receipt,
}

impl<'a> ReceiptOut<'a> {
    pub fn new(receipt: &'a Receipt) -> ReceiptOut<'a> {
        ReceiptOut { schema: JSON_SCHEMA_VERSION, receipt }
    }
}

/// `notes list --json`: `schemas/preloop-hooks/notes-list.schema.json`.
#[derive(Serialize)]
struct NoteListOut<'a> {
    schema: u32,
    notes: &'a [Receipt],
    total: usize,
}

/// The parent of `--children`: `--parent`, else the run this command was
/// started from: its PRELOOP_PARENT_SESSION_ID (Claude Code, Cursor), else
/// the nearest ancestor process that serves a live session of ours (a
/// conductor's shell tool in any harness; docs/guarantees.md, "Lineage").
fn parent_from_env(ops: &Ops, flag: Option<&String>) -> Result<String> {
    if let Some(p) = flag {
        return Ok(p.clone());
    }
    if let Some(p) = std::env::var("PRELOOP_PARENT_SESSION_ID").ok().filter(|p| !p.trim().is_empty()) {
        return Ok(p);
    }
    preloop_shared::lineage::enclosing_session(&ops.config.home, ops.mode().hooks())
        .map(|f| f.runtime_session_id)
        .ok_or_else(|| {
            Error::Usage(
                "--children needs the parent session: run it from inside a run (its shell tool: PRELOOP_PARENT_SESSION_ID or the process tree names that run), or pass --parent SESSION"
                    .into(),
            )
        })
}

/// The parent session of `--children`, known to the operator.
fn parent_session(ops: &Ops, flag: Option<&String>) -> Result<SessionRef> {
    let p = parent_from_env(ops, flag)?;
    ids::session(ops.op.as_ref(), &p)?.ok_or_else(|| {
        Error::NotFound(format!(
            "the parent session {} is not known {} (`preloop-hooks sessions list` shows them)",
            safe_line(&p),
            ops.mode().where_known()
        ))
    })
}

fn no_target(what: &str) -> Error {
    Error::Usage(format!("name exactly one target {what}"))
}

/// The one target of `notes send`, resolved enough to say what it is, and
/// refused when this side cannot take it.
fn resolve(ops: &Ops, t: &TargetArgs, next_session: bool, not_started: bool) -> Result<To> {
    let harness = |s: &str| Harness::from_slug(s).ok_or_else(|| Error::Usage(format!("unknown harness {s:?}")));
    if next_session && t.agent.is_none() && t.harness.is_none() {
        return Err(Error::Usage("--next-session goes with --agent (or use --next HARNESS)".into()));
    }
    let session = t.session.as_ref().or(t.runtime_session.as_ref());
    if not_started && session.is_none() {
        return Err(Error::Usage("--not-started goes with --session ID".into()));
    }
    if let Some(s) = session.filter(|s| not_started && !ids::is_full_session_id(s)) {
        return Err(ids::not_a_full_id(s));
    }
    let to = if let Some(s) = session {
        // A session that has not started has no id to start with: only its
        // full id, as typed, and only when the user says so.
        let found = if not_started { ops.op.find_session(s)? } else { ids::session(ops.op.as_ref(), s)? };
        if found.is_none() && !not_started {
            mode_mismatch(ops, s, None);
            return Err(ids::unknown_session(ops.op.as_ref(), s, true));
        }
        To::Session { id: s.clone(), found }
    } else if let Some(a) = &t.alias {
        if a.is_empty() || a.len() > 64 || !a.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err(Error::Usage(format!(
                "--alias {:?}: an alias is 1-64 characters of A-Z a-z 0-9 . _ -",
                clip(a, 70)
            )));
        }
        To::Alias(a.clone())
    } else if let Some(c) = t.children {
        To::Children { parent: parent_session(ops, t.parent.as_ref())?, all: c == Children::All }
    } else if let Some(e) = &t.execution {
        To::Execution(e.clone())
    } else if let Some(h) = &t.next {
        To::Next(harness(h)?)
    } else if let Some(h) = &t.harness {
        let h = harness(h)?;
        if next_session { To::Next(h) } else { To::HarnessCurrent(h) }
    } else if let Some(a) = &t.agent {
        To::Agent { agent_id: a.clone(), next_session }
    } else {
        return Err(no_target("(--session, --alias, --children, --execution, --next or --agent)"));
    };
    ops.op.check(&to)?;
    // An agent by id or name, as `sessions list --agent` takes it.
    let to = match to {
        To::Agent { agent_id, next_session } => To::Agent { agent_id: ops.op.agent_id(&agent_id)?, next_session },
        other => other,
    };
    Ok(to)
}

fn read_text(arg: Option<String>) -> Result<String> {
    let text = match arg {
        Some(t) => t,
        None => {
            if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                crate::errln!("reading the note from stdin; end it with Ctrl-D");
            }
            crate::util::read_stdin("the note")?
        }
    };
    if text.trim().is_empty() {
        return Err(Error::Usage(
            "the note is empty or only whitespace (pass it as the last argument or on stdin)".into(),
        ));
    }
    let n = text.chars().count();
    if n > MAX_NOTE_CHARS {
        return Err(Error::Usage(format!("a note is 1-{MAX_NOTE_CHARS} characters; this one has {n}")));
    }
    Ok(text)
}

/// Warnings about the target before anything is sent: ended, not started,
/// read by hooks of the other mode.
fn announce(ops: &Ops, to: &To) {
    let To::Session { id, found } = to else { return };
    match found {
        None => {
            if let Some(note) = ops.op.unknown_session_note(id) {
                crate::errln!("preloop-hooks: {note}");
            }
        }
        Some(s) if s.ended_at.is_some() => crate::errln!(
            "preloop-hooks: session {} ended at {}; the note waits in case it is resumed",
            safe_line(s.name()),
            time(s.ended_at)
        ),
        Some(_) => {}
    }
    mode_mismatch(ops, id, found.as_ref());
}

/// A session whose hooks use the local inbox never reads the server, and
/// the other way round: say which mode this note goes through and why.
fn mode_mismatch(ops: &Ops, id: &str, found: Option<&SessionRef>) {
    let mode = ops.mode();
    if let Some(f) = found.and_then(|s| s.file.clone()).or_else(|| ops.local_file(id))
        && f.mode != mode.hooks()
    {
        crate::errln!(
            "preloop-hooks: {} mode ({}), but the hooks of session {} ran in {} mode: they will not read this note there",
            mode.as_str(),
            mode.why(),
            safe_line(&f.external_session_id),
            f.mode
        );
    }
}

fn send(a: SendArgs) -> CliResult<()> {
    let expires_in_secs = a.expires_in.as_deref().map(|d| output::parse_duration("--expires-in", d)).transpose()?;
    if let Some(e) = expires_in_secs
        && e < 60
    {
        return Err(Error::Usage(format!("--expires-in {e}s: a note lives 60s to 7d")).into());
    }
    let wait = a.wait.as_deref().map(|d| output::parse_duration("--wait", d)).transpose()?;
    let ops = Ops::load()?;
    // Resolve the target before reading the body, so a bad target never waits on stdin.
    let to = resolve(&ops, &a.target, a.next_session, a.not_started)?;
    let text = read_text(a.text)?;
    if a.from.is_some() && !ops.op.author_from_flag() {
        crate::errln!(
            "preloop-hooks: --from applies to the local inbox only; the server names the author from the user token"
        );
    }
    announce(&ops, &to);
    let sent = ops.op.send(&to, &NewNote { text, expires_in_secs, from: a.from })?;
    let target = TargetOut::of(&to, &sent);
    let mut receipts = sent.receipts;
    // The session's harness id where the side answered only its runtime id
    // (a server, with no session file here): the id the user knows.
    let typed = match &to {
        To::Session { id, found: Some(s) } => {
            for r in receipts.iter_mut() {
                if r.external_session_id.is_none() {
                    r.external_session_id = s.external_id.clone();
                }
            }
            typed_note(id, s.name())
        }
        _ => String::new(),
    };
    let Some(wait) = wait else {
        if a.json {
            let first = receipts.first().map(|r| r.note_id.clone()).unwrap_or_default();
            return Ok(output::json(&SendOut {
                schema: JSON_SCHEMA_VERSION,
                note_id: first,
                target,
                notes: receipts
                    .iter()
                    .map(|r| SentNote {
                        note_id: r.note_id.clone(),
                        state: r.state.clone(),
                        session: r.external_session_id.clone(),
                        runtime_session_id: r.runtime_session_id.clone(),
                    })
                    .collect(),
            })?);
        }
        for r in &receipts {
            output::line(&format!("{} {} for {}{typed}", r.note_id, r.state, to_of(r)))?;
        }
        return Ok(());
    };
    wait_for(&ops, receipts, wait, a.json, &typed)
}

// ----- wait -------------------------------------------------------------

/// The signal that stopped the wait (0: none yet).
static INTERRUPTED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_interrupt(signal: libc::c_int) {
    INTERRUPTED.store(signal, std::sync::atomic::Ordering::SeqCst);
}

/// Catch Ctrl-C (SIGINT) and SIGTERM so a wait can say what is left behind.
pub fn catch_interrupt() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_interrupt as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_interrupt as *const () as libc::sighandler_t);
    }
}

pub fn interrupted() -> bool {
    interrupted_by().is_some()
}

/// The signal caught, if one was.
fn interrupted_by() -> Option<libc::c_int> {
    Some(INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)).filter(|&s| s != 0)
}

/// How a wait that a signal stopped says so: Ctrl-C is SIGINT; anything
/// else (`timeout`, `kill`, a supervisor) is named as the signal it was.
fn stopped_by(signal: libc::c_int) -> String {
    match signal {
        libc::SIGINT => ", stopped waiting on Ctrl-C".into(),
        libc::SIGTERM => ", stopped waiting on SIGTERM".into(),
        n => format!(", stopped waiting on signal {n}"),
    }
}

/// Why a wait stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaitEnd {
    /// Every note reached a final state.
    Final,
    /// A signal: Ctrl-C (SIGINT) or SIGTERM.
    Interrupted(libc::c_int),
    /// The time ran out.
    Timeout,
    /// Every session a pending note waits for has ended.
    Ended(Option<Timestamp>),
}

/// The notes after a wait, and why it stopped.
#[derive(Debug)]
struct Waited {
    receipts: Vec<Receipt>,
    end: WaitEnd,
    elapsed: Duration,
}

/// Poll the receipts until all are final, the time runs out, the wait is
/// interrupted, or every session a pending note waits for has ended (a
/// session that has ended takes nothing: do not sit out the wait).
/// `progress` sees the receipts between polls.
fn wait_until(
    op: &dyn Operator,
    mut receipts: Vec<Receipt>,
    wait: Duration,
    mut progress: impl FnMut(&[Receipt], Duration) -> Result<()>,
) -> Result<Waited> {
    let pace = op.pace();
    let started = Instant::now();
    let deadline = started.checked_add(wait);
    let mut checked_end: Option<Instant> = None;
    let end = loop {
        if receipts.iter().all(Receipt::is_final) {
            break WaitEnd::Final;
        }
        if let Some(signal) = interrupted_by() {
            break WaitEnd::Interrupted(signal);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break WaitEnd::Timeout;
        }
        if checked_end.is_none_or(|t| t.elapsed() >= pace.end_check) {
            checked_end = Some(Instant::now());
            let ends: Vec<Option<Timestamp>> =
                receipts.iter().filter(|r| !r.is_final()).map(|r| op.session_ended(r)).collect();
            if !ends.is_empty() && ends.iter().all(Option::is_some) {
                // The end may have settled the notes (undeliverable): read them once more.
                refresh(op, &mut receipts)?;
                if receipts.iter().all(Receipt::is_final) {
                    break WaitEnd::Final;
                }
                break WaitEnd::Ended(ends.into_iter().flatten().max());
            }
        }
        progress(&receipts, started.elapsed())?;
        let step = deadline.map(|d| d.saturating_duration_since(Instant::now())).unwrap_or(pace.poll).min(pace.poll);
        // Sleep in short ticks, so Ctrl-C is seen at once.
        let tick = pace.poll.min(Duration::from_millis(50));
        let until = Instant::now() + step.max(tick);
        while Instant::now() < until && !interrupted() {
            std::thread::sleep(tick.min(until.saturating_duration_since(Instant::now())));
        }
        refresh(op, &mut receipts)?;
    };
    Ok(Waited { receipts, end, elapsed: started.elapsed() })
}

/// Read again the receipts that are not final yet.
fn refresh(op: &dyn Operator, receipts: &mut [Receipt]) -> Result<()> {
    for r in receipts.iter_mut().filter(|r| !r.is_final()) {
        match op.receipt(&r.note_id) {
            Ok(mut fresh) => {
                fresh.external_session_id = fresh.external_session_id.or(r.external_session_id.take());
                fresh.harness = fresh.harness.or(r.harness.take());
                *r = fresh;
            }
            // A passing network failure: keep polling until the deadline.
            Err(Error::Unreachable { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The exit of a wait: 0 delivered, 3 (`Undelivered`) lost or its session
/// ended, 4 (`WaitTimeout`) still pending when the time ran out or on Ctrl-C.
fn wait_verdict(w: &Waited) -> CliResult<()> {
    let lost: Vec<&Receipt> = w.receipts.iter().filter(|r| r.is_lost()).collect();
    let pending: Vec<&Receipt> = w.receipts.iter().filter(|r| !r.is_final()).collect();
    let cancel_hint = |p: &[&Receipt]| {
        p.iter().map(|r| format!("preloop-hooks notes cancel {}", r.note_id)).collect::<Vec<_>>().join("; ")
    };
    if !lost.is_empty() {
        return Err(CliError::Undelivered(
            lost.iter()
                .map(|r| {
                    format!(
                        "note {} is {}{}",
                        r.note_id,
                        r.state,
                        r.undeliverable_reason.as_deref().map(|x| format!(" ({x})")).unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        ));
    }
    let notes = || pending.iter().map(|r| format!("note {}", r.note_id)).collect::<Vec<_>>().join(", ");
    match w.end {
        WaitEnd::Ended(at) => Err(CliError::Undelivered(format!(
            "the session ended{}; {} still pending in case it is resumed (cancel: {})",
            at.map(|t| format!(" at {}", time(Some(t)))).unwrap_or_default(),
            notes(),
            cancel_hint(&pending)
        ))),
        WaitEnd::Timeout | WaitEnd::Interrupted(_) if !pending.is_empty() => Err(CliError::WaitTimeout(format!(
            "{} still {} after {}{} (cancel: {})",
            notes(),
            pending[0].state,
            output::human_secs(w.elapsed.as_secs()),
            match w.end {
                WaitEnd::Interrupted(signal) => stopped_by(signal),
                _ => String::new(),
            },
            cancel_hint(&pending)
        ))),
        _ => Ok(()),
    }
}

/// `typed`: ` (you typed X)` when the id typed is not the one resolved, as
/// without `--wait` (newcomer 4, P10).
fn wait_for(ops: &Ops, receipts: Vec<Receipt>, wait: u64, json: bool, typed: &str) -> CliResult<()> {
    catch_interrupt();
    let tty = output::stderr_is_tty() && !json;
    if !json {
        crate::errln!(
            "{} sent to {}{typed}; waiting up to {} for delivery…",
            receipts.iter().map(|r| r.note_id.as_str()).collect::<Vec<_>>().join(", "),
            receipts.iter().map(to_of).collect::<Vec<_>>().join(", "),
            output::human_secs(wait)
        );
    }
    let mut last_line = String::new();
    let waited = wait_until(ops.op.as_ref(), receipts, Duration::from_secs(wait), |receipts, elapsed| {
        if !tty {
            return Ok(());
        }
        let states: BTreeSet<&str> = receipts.iter().map(|r| r.state.as_str()).collect();
        let l = format!(
            "{} · {} elapsed (Ctrl-C stops waiting)",
            states.into_iter().collect::<Vec<_>>().join(", "),
            output::human_secs(elapsed.as_secs())
        );
        if l != last_line {
            output::status(&l);
            last_line = l;
        }
        Ok(())
    })?;
    if tty && !last_line.is_empty() {
        output::status("");
    }
    if json {
        if let [one] = waited.receipts.as_slice() {
            output::json(&ReceiptOut::new(one))?;
        } else {
            let notes = &waited.receipts;
            output::json(&NoteListOut { schema: JSON_SCHEMA_VERSION, notes, total: notes.len() })?;
        }
    } else {
        for r in &waited.receipts {
            print_receipt(r)?;
        }
    }
    wait_verdict(&waited)
}

// ----- list -------------------------------------------------------------

/// Whose notes `notes list` shows, resolved.
fn notes_of(ops: &Ops, a: &ListArgs) -> Result<NotesOf> {
    Ok(if let Some(id) = a.session.as_ref().or(a.runtime_session.as_ref()) {
        match ids::session(ops.op.as_ref(), id)? {
            Some(s) => NotesOf::Session(s),
            // A full id no session has yet: the notes waiting for it
            // (`notes send --not-started`), newcomer-ux-4, P4.
            None if ids::is_full_session_id(id) => {
                crate::errln!(
                    "preloop-hooks: no session {} has started {} yet; these are the notes waiting for it",
                    safe_line(id),
                    ops.op.mode().where_known()
                );
                NotesOf::NotStarted(id.clone())
            }
            None => return Err(ids::unknown_session(ops.op.as_ref(), id, false)),
        }
    } else if let Some(al) = &a.alias {
        NotesOf::Alias(al.clone())
    } else if let Some(c) = a.children {
        NotesOf::Children { parent: parent_session(ops, a.parent.as_ref())?, latest: c == Children::Latest }
    } else if let Some(e) = &a.execution {
        NotesOf::Execution(e.clone())
    } else if let Some(ag) = &a.agent {
        NotesOf::Agent(ag.clone())
    } else {
        NotesOf::All
    })
}

/// The notes of a target in one state (or any), newest first, each once.
fn list_notes(op: &dyn Operator, of: &NotesOf, state: Option<&ReceiptState>) -> Result<Vec<Receipt>> {
    let mut notes = op.notes(of, state)?;
    if let Some(st) = state {
        notes.retain(|n| &n.state == st);
    }
    newest_first_once(&mut notes);
    Ok(notes)
}

fn newest_first_once(notes: &mut Vec<Receipt>) {
    notes.sort_by(|x, y| y.created_at.cmp(&x.created_at).then(y.note_id.cmp(&x.note_id)));
    notes.dedup_by(|x, y| x.note_id == y.note_id);
}

/// How far back `notes list --undelivered` without a target looks.
pub const RECENT_UNDELIVERED_SECS: i64 = 24 * 3600;

/// The notes of a target that their session never showed the model
/// ([`Receipt::never_shown`]: undeliverable, or recorded delivered at a
/// claim no output carried), newest first, each once; with `since`, only
/// those that became so (or were sent) since then. The same in both
/// modes: one read of the target's notes (`GET /operator-notes` in server
/// mode, which answers every state with its text), filtered here.
pub fn never_shown(op: &dyn Operator, of: &NotesOf, since: Option<Timestamp>) -> Result<Vec<Receipt>> {
    let mut notes = op.notes(of, None)?;
    notes.retain(|n| n.never_shown() && since.is_none_or(|t| n.last_transition().is_some_and(|at| at >= t)));
    newest_first_once(&mut notes);
    Ok(notes)
}

fn list(a: ListArgs) -> Result<()> {
    let fmt = match (a.output.as_deref(), a.json) {
        (Some(o), _) => o.to_string(),
        (None, true) => "json".into(),
        (None, false) => "table".into(),
    };
    let any = a.session.is_some()
        || a.alias.is_some()
        || a.children.is_some()
        || a.execution.is_some()
        || a.agent.is_some()
        || a.all
        || a.runtime_session.is_some();
    if !any && !a.undelivered {
        return Err(no_target(
            "(--session ID, --alias NAME, --children latest|all, --execution ID, --agent ID, or --all for every note)",
        ));
    }
    let ops = Ops::load()?;
    let of = notes_of(&ops, &a)?;
    let notes = if a.undelivered {
        let since = (!any).then(|| Timestamp::now().add_secs(-RECENT_UNDELIVERED_SECS));
        never_shown(ops.op.as_ref(), &of, since)?
    } else {
        let state = a.state.as_deref().map(ReceiptState::from);
        list_notes(ops.op.as_ref(), &of, state.as_ref())?
    };
    match fmt.as_str() {
        "json" => output::json(&NoteListOut { schema: JSON_SCHEMA_VERSION, notes: &notes, total: notes.len() }),
        "id" => {
            for n in &notes {
                output::line(&n.note_id)?;
            }
            Ok(())
        }
        _ if notes.is_empty() && a.undelivered => output::line("no undelivered notes"),
        _ if notes.is_empty() => output::line("no notes"),
        _ => {
            // One session's notes all go to it: no TO column then.
            let show_to = !matches!(of, NotesOf::Session(_) | NotesOf::NotStarted(_));
            let rows: Vec<Vec<String>> = notes
                .iter()
                .map(|n| {
                    let mut row = vec![n.note_id.clone(), n.state.to_string(), event_or_reason(n), time(n.created_at)];
                    if show_to {
                        row.push(clip(&to_of(n), 44));
                    }
                    row.push(clip(&n.text, 60));
                    row
                })
                .collect();
            let header: &[&str] = if show_to {
                &["ID", "STATE", "EVENT/REASON", "CREATED", "TO", "TEXT"]
            } else {
                &["ID", "STATE", "EVENT/REASON", "CREATED", "TEXT"]
            };
            output::print_table(header, &rows)
        }
    }
}

/// The delivery event of a delivered note, the reason of an undeliverable
/// one, `never_carried` for a delivered one no output carried.
pub fn event_or_reason(n: &Receipt) -> String {
    if n.never_carried {
        return "never_carried".into();
    }
    n.undeliverable_reason
        .clone()
        .or_else(|| n.delivery_event.clone())
        .map(|s| safe_line(&s))
        .unwrap_or_else(|| "-".into())
}

// ----- printing ---------------------------------------------------------

pub fn print_receipt(r: &Receipt) -> Result<()> {
    let mut rows: Vec<(&str, String)> = vec![
        ("note", r.note_id.clone()),
        ("state", r.state.to_string()),
        ("to", to_of(r)),
        ("created", time(r.created_at)),
    ];
    if let Some(t) = r.expires_at {
        rows.push(("expires", time(Some(t))));
    }
    if let Some(c) = &r.delivery_channel {
        rows.push(("channel", format!("{} ({})", safe_line(c), safe_line(r.delivery_event.as_deref().unwrap_or("-")))));
    }
    if let Some(t) = r.claimed_at {
        rows.push(("claimed", time(Some(t))));
    }
    if let Some(t) = r.delivered_at {
        rows.push(("delivered", time(Some(t))));
    }
    if let Some(t) = r.undeliverable_at {
        rows.push((
            "undeliverable",
            format!("{} ({})", time(Some(t)), safe_line(r.undeliverable_reason.as_deref().unwrap_or("-"))),
        ));
    }
    if let Some(t) = r.expired_at {
        rows.push(("expired", time(Some(t))));
    }
    if let Some(t) = r.cancelled_at {
        rows.push(("cancelled", time(Some(t))));
    }
    if let Some(d) = &r.author.display {
        rows.push((
            "from",
            format!("{} ({})", safe_line(d), safe_line(r.author.auth_method.as_deref().unwrap_or("-"))),
        ));
    }
    rows.push(("text", safe(&r.text).replace('\n', "\n               ")));
    output::print_pairs(&rows)
}

/// Where a note goes, by the id the operator knows first: the harness
/// session id, then the runtime id.
pub fn to_of(r: &Receipt) -> String {
    let s = match (&r.external_session_id, &r.runtime_session_id, &r.harness, &r.managed_agent_id) {
        (Some(s), _, _, _) => format!("session {s}"),
        (None, Some(rs), _, _) => format!("runtime session {rs}"),
        (None, None, Some(h), _) if r.next_session => format!("next {h} session"),
        (None, None, Some(h), _) => format!("{h} (current or next)"),
        (None, None, None, Some(a)) if r.next_session => format!("agent {a} (next session)"),
        (None, None, None, Some(a)) => format!("agent {a}"),
        _ => "-".into(),
    };
    safe_line(&s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::Side;
    use crate::operator::memory::Memory;
    use preloop_shared::config::{Config, Env};
    use std::sync::Arc;

    const N1: &str = "00000000000000a1";
    const N2: &str = "00000000000000a2";
    const N3: &str = "00000000000000a3";

    /// The commands against `mem`, with a home that holds no session file.
    fn ops(mem: Memory) -> (Ops, Arc<Memory>) {
        let mem = Arc::new(mem);
        let home = std::env::temp_dir().join("preloop-notes-unit-no-home");
        let config = Config::load_from(&Env::of(&[("PRELOOP_HOME", &home.to_string_lossy())]), None);
        (Ops::with_operator(config, mem.clone()), mem)
    }

    fn session(id: &str) -> TargetArgs {
        TargetArgs { session: Some(id.into()), ..TargetArgs::default() }
    }

    #[test]
    fn a_session_is_found_by_its_harness_id_or_its_runtime_id() {
        let (ops, _) = ops(Memory::new(Side::Local).session("ext-1", "rt-1", 10));
        for id in ["ext-1", "rt-1"] {
            let To::Session { found: Some(s), .. } = resolve(&ops, &session(id), false, false).unwrap() else {
                panic!("{id} is found")
            };
            assert_eq!((s.runtime_id.as_str(), s.name()), ("rt-1", "ext-1"));
        }
        // An id no known session has or starts with is refused (exit 1)
        // unless the user says the session has not started yet.
        let err = resolve(&ops, &session("nobody"), false, false).unwrap_err();
        assert_eq!(crate::error::exit_of(&err).code(), 1);
        assert_eq!(
            err.to_string(),
            "no session nobody on this machine (no session id is or starts with it; `preloop-hooks sessions list` shows them)"
        );
        let full = "22222222-2222-3333-4444-555555555555";
        assert_eq!(
            resolve(&ops, &session(full), false, true).unwrap(),
            To::Session { id: full.into(), found: None },
            "--not-started: the full id as typed"
        );
        // --not-started takes a full id only: a start (of a known id or
        // not) would wait for a session that never comes (newcomer-ux-4, P4).
        for short in ["nobody", "ext-", "daa2b8c4", "22222222-2222-3333-4444"] {
            let err = resolve(&ops, &session(short), false, true).unwrap_err();
            assert_eq!(crate::error::exit_of(&err).code(), 2, "{short}");
            assert!(err.to_string().starts_with("--not-started takes a session's full id"), "{err}");
        }
        let To::Session { found: Some(s), .. } = resolve(&ops, &session("ext-"), false, false).unwrap() else {
            panic!("a unique start names its session")
        };
        assert_eq!(s.runtime_id, "rt-1");
        let not_started = resolve(&ops, &TargetArgs { alias: Some("w".into()), ..TargetArgs::default() }, false, true);
        assert!(matches!(not_started, Err(Error::Usage(m)) if m == "--not-started goes with --session ID"));
    }

    #[test]
    fn the_side_refuses_a_target_it_cannot_take_before_anything_is_sent() {
        let (local, mem) = ops(Memory::new(Side::Local));
        let agent = TargetArgs { agent: Some("0b0d".into()), ..TargetArgs::default() };
        assert!(matches!(resolve(&local, &agent, false, false), Err(Error::Usage(_))));
        let (server, _) = ops(Memory::new(Side::Server));
        assert_eq!(
            resolve(&server, &agent, true, false).unwrap(),
            To::Agent { agent_id: "0b0d".into(), next_session: true }
        );
        // --next-session goes with --agent or --harness only.
        assert!(matches!(resolve(&server, &session("s"), true, false), Err(Error::Usage(_))));
        let bad = TargetArgs { alias: Some("two words".into()), ..TargetArgs::default() };
        assert!(matches!(resolve(&server, &bad, false, false), Err(Error::Usage(m)) if m.contains("1-64 characters")));
        assert!(
            matches!(resolve(&server, &TargetArgs::default(), false, false), Err(Error::Usage(m)) if m.contains("exactly one target"))
        );
        assert!(mem.calls().is_empty(), "nothing was sent");
    }

    #[test]
    fn children_of_an_unknown_parent_are_refused_naming_where_sessions_are_known() {
        for (mode, place) in [(Side::Local, "on this machine"), (Side::Server, "in this account")] {
            let (ops, _) = ops(Memory::new(mode));
            let t =
                TargetArgs { children: Some(Children::Latest), parent: Some("ghost".into()), ..TargetArgs::default() };
            let err = resolve(&ops, &t, false, false).unwrap_err();
            assert!(
                matches!(&err, Error::NotFound(m) if m == &format!("the parent session ghost is not known {place} (`preloop-hooks sessions list` shows them)")),
                "{err}"
            );
        }
    }

    #[test]
    fn the_json_target_names_what_the_send_learned() {
        let sent = Sent { session: Some("ext-9".into()), runtime_session_id: Some("rt-9".into()), ..Sent::default() };
        let t = TargetOut::of(&To::Alias("w".into()), &sent);
        assert_eq!((t.kind, t.alias.as_deref(), t.session.as_deref()), ("alias", Some("w"), Some("ext-9")));
        assert_eq!(t.runtime_session_id.as_deref(), Some("rt-9"));
        let (ops, _) = ops(Memory::new(Side::Local).session("ext-1", "rt-1", 10));
        let to = resolve(&ops, &session("rt-1"), false, false).unwrap();
        let t = TargetOut::of(&to, &Sent::default());
        assert_eq!((t.session.as_deref(), t.runtime_session_id.as_deref()), (Some("ext-1"), Some("rt-1")));
    }

    fn pending(ops: &Ops, id: &str) -> Vec<Receipt> {
        vec![ops.op.receipt(id).unwrap()]
    }

    #[test]
    fn a_wait_ends_when_the_note_is_delivered() {
        let (ops, mem) =
            ops(Memory::new(Side::Local).session("ext-1", "rt-1", 10).note(N1, "ext-1", ReceiptState::Pending, 1));
        let receipts = pending(&ops, N1);
        mem.changes_after(N1, 3, ReceiptState::Delivered);
        let mut seen = 0;
        let w = wait_until(ops.op.as_ref(), receipts, Duration::from_secs(10), |r, _| {
            seen += 1;
            assert_eq!(r[0].state, ReceiptState::Pending, "progress sees the notes still waiting");
            Ok(())
        })
        .unwrap();
        assert_eq!((w.end, &w.receipts[0].state), (WaitEnd::Final, &ReceiptState::Delivered));
        assert!(seen >= 3, "one progress call per poll: {seen}");
        wait_verdict(&w).unwrap();
    }

    #[test]
    fn a_wait_that_runs_out_exits_4_and_names_the_cancel() {
        let (ops, _) =
            ops(Memory::new(Side::Local).session("ext-1", "rt-1", 10).note(N1, "ext-1", ReceiptState::Pending, 1));
        let w = wait_until(ops.op.as_ref(), pending(&ops, N1), Duration::from_millis(40), |_, _| Ok(())).unwrap();
        assert_eq!(w.end, WaitEnd::Timeout);
        let err = wait_verdict(&w).unwrap_err();
        assert_eq!(err.exit().code(), 4);
        assert!(
            matches!(&err, CliError::WaitTimeout(m) if m.starts_with(&format!("note {N1} still pending after")) && m.ends_with(&format!("(cancel: preloop-hooks notes cancel {N1})"))),
            "{err}"
        );
    }

    #[test]
    fn a_wait_stopped_by_a_signal_names_the_signal() {
        let (ops, _) = ops(Memory::new(Side::Local).note(N1, "ext-1", ReceiptState::Pending, 1));
        for (signal, said) in [
            (libc::SIGINT, "stopped waiting on Ctrl-C"),
            (libc::SIGTERM, "stopped waiting on SIGTERM"),
            (libc::SIGHUP, "stopped waiting on signal 1"),
        ] {
            let w = Waited { receipts: pending(&ops, N1), end: WaitEnd::Interrupted(signal), elapsed: Duration::ZERO };
            let err = wait_verdict(&w).unwrap_err();
            assert_eq!(err.exit().code(), 4);
            assert!(err.to_string().contains(&format!("still pending after 0s, {said} (cancel: ")), "{err}");
        }
    }

    #[test]
    fn a_wait_stops_when_the_session_ends_and_exits_3() {
        let (ops, mem) =
            ops(Memory::new(Side::Local).session("ext-1", "rt-1", 10).note(N1, "ext-1", ReceiptState::Pending, 1));
        mem.end("ext-1");
        let w = wait_until(ops.op.as_ref(), pending(&ops, N1), Duration::from_secs(10), |_, _| Ok(())).unwrap();
        assert!(matches!(w.end, WaitEnd::Ended(Some(_))), "{:?}", w.end);
        let err = wait_verdict(&w).unwrap_err();
        assert_eq!(err.exit().code(), 3);
        assert!(
            err.to_string()
                .contains(&format!("still pending in case it is resumed (cancel: preloop-hooks notes cancel {N1})")),
            "{err}"
        );
    }

    #[test]
    fn a_wait_that_sees_the_end_reads_the_notes_it_settled() {
        let (ops, mem) =
            ops(Memory::new(Side::Server).session("ext-1", "rt-1", 10).note(N1, "ext-1", ReceiptState::Pending, 1));
        let receipts = pending(&ops, N1);
        // The end and the note's new state land together, between two polls.
        mem.end("ext-1");
        mem.changes_after(N1, 0, ReceiptState::Undeliverable);
        let w = wait_until(ops.op.as_ref(), receipts, Duration::from_secs(10), |_, _| Ok(())).unwrap();
        assert_eq!((w.end, &w.receipts[0].state), (WaitEnd::Final, &ReceiptState::Undeliverable));
        assert_eq!(wait_verdict(&w).unwrap_err().to_string(), format!("note {N1} is undeliverable"));
    }

    #[test]
    fn a_lost_note_exits_3_with_its_state() {
        let (ops, mem) =
            ops(Memory::new(Side::Server).session("ext-1", "rt-1", 10).note(N1, "ext-1", ReceiptState::Pending, 1));
        mem.changes_after(N1, 0, ReceiptState::Expired);
        let w = wait_until(ops.op.as_ref(), pending(&ops, N1), Duration::from_secs(10), |_, _| Ok(())).unwrap();
        assert_eq!(w.end, WaitEnd::Final);
        let err = wait_verdict(&w).unwrap_err();
        assert!(matches!(&err, CliError::Undelivered(m) if m == &format!("note {N1} is expired")), "{err}");
    }

    #[test]
    fn notes_list_newest_first_each_once_in_the_state_asked() {
        let mem = Memory::new(Side::Local)
            .session("ext-1", "rt-1", 10)
            .note(N1, "ext-1", ReceiptState::Pending, 30)
            .note(N2, "ext-1", ReceiptState::Delivered, 10)
            .note(N3, "ext-1", ReceiptState::Pending, 20)
            .note(N3, "ext-1", ReceiptState::Pending, 20);
        let (ops, _) = ops(mem);
        let ids = |v: Vec<Receipt>| v.into_iter().map(|r| r.note_id).collect::<Vec<_>>();
        assert_eq!(ids(list_notes(ops.op.as_ref(), &NotesOf::All, None).unwrap()), [N2, N3, N1]);
        assert_eq!(ids(list_notes(ops.op.as_ref(), &NotesOf::All, Some(&ReceiptState::Pending)).unwrap()), [N3, N1]);
        let a = ListArgs { session: Some("rt-1".into()), ..ListArgs::default() };
        let of = notes_of(&ops, &a).unwrap();
        assert!(matches!(&of, NotesOf::Session(s) if s.name() == "ext-1"));
        let unknown = ListArgs { session: Some("nobody".into()), ..ListArgs::default() };
        assert_eq!(crate::error::exit_of(&notes_of(&ops, &unknown).unwrap_err()).code(), 1, "not an empty list");
        assert_eq!(list_notes(ops.op.as_ref(), &of, None).unwrap().len(), 3);
    }

    #[test]
    fn only_a_pending_note_is_cancelled() {
        let mem = Memory::new(Side::Local).note(N1, "ext-1", ReceiptState::Pending, 3).note(
            N2,
            "ext-1",
            ReceiptState::Delivered,
            2,
        );
        let (ops, mem) = ops(mem);
        let c = cancel_note(ops.op.as_ref(), N1).unwrap();
        assert_eq!((&c.receipt.state, c.refused), (&ReceiptState::Cancelled, None));
        let again = cancel_note(ops.op.as_ref(), N1).unwrap();
        assert!(
            again.refused.as_deref().is_some_and(|m| m.starts_with(&format!("note {N1} is already cancelled (at "))),
            "{again:?}"
        );
        let c = cancel_note(ops.op.as_ref(), N2).unwrap();
        assert_eq!(
            c.refused.as_deref(),
            Some(format!("note {N2} is delivered; only a pending note can be cancelled").as_str())
        );
        assert_eq!(mem.calls(), [format!("cancel {N1}")], "a note that is not pending is never sent a cancel");
    }

    /// #33 part 3 (K2, D-1): `notes list --undelivered` names, in both
    /// modes, the notes a session never showed: undeliverable for any
    /// reason, and the delivered one no output carried; not the ones it
    /// showed, nor those still pending.
    #[test]
    fn undelivered_lists_what_a_session_never_showed_in_both_modes() {
        for mode in [Side::Local, Side::Server] {
            let mem = Memory::new(mode)
                .session("ext-1", "rt-1", 60)
                .note(N1, "ext-1", ReceiptState::Pending, 50)
                .note(N2, "ext-1", ReceiptState::Pending, 40)
                .note(N3, "ext-1", ReceiptState::Delivered, 30)
                .note("00000000000000a4", "ext-1", ReceiptState::Pending, 20)
                .note("00000000000000a5", "ext-1", ReceiptState::Pending, 10)
                .undeliverable(N1, "session_ended", 5)
                .undeliverable(N2, "spool_dropped", 5)
                .never_carried("00000000000000a4");
            let (ops, _) = ops(mem);
            let s = ids::session(ops.op.as_ref(), "ext-1").unwrap().unwrap();
            let got = never_shown(ops.op.as_ref(), &NotesOf::Session(s), None).unwrap();
            let ids: Vec<&str> = got.iter().map(|r| r.note_id.as_str()).collect();
            assert_eq!(ids, ["00000000000000a4", N2, N1], "{mode:?}: newest first, nothing shown or pending");
            let why: Vec<&str> = got.iter().map(Receipt::never_shown_reason).collect();
            assert_eq!(why, ["never_carried", "spool_dropped", "session_ended"], "{mode:?}");
            assert!(got.iter().all(|r| r.text.starts_with("note ")), "{mode:?}: with their text");
            assert_eq!(event_or_reason(&got[0]), "never_carried", "{mode:?}: the table's EVENT/REASON says so");
        }
    }

    /// `--undelivered --children all`: a conductor's workers; without a
    /// target: only the recent ones (24 hours).
    #[test]
    fn undelivered_of_a_conductors_children_and_of_everything_recent() {
        for mode in [Side::Local, Side::Server] {
            let mem = Memory::new(mode)
                .session("boss", "rt-boss", 60)
                .session("kid-1", "rt-kid-1", 50)
                .session("kid-2", "rt-kid-2", 40)
                .session("other", "rt-other", 30)
                .child_of("kid-1", "rt-boss")
                .child_of("kid-2", "rt-boss")
                .note(N1, "kid-1", ReceiptState::Pending, 3 * 86_400)
                .note(N2, "kid-2", ReceiptState::Pending, 20)
                .note(N3, "other", ReceiptState::Pending, 10)
                .undeliverable(N1, "session_ended", 2 * 86_400)
                .undeliverable(N2, "session_ended", 5)
                .undeliverable(N3, "session_ended", 5);
            let (ops, _) = ops(mem);
            let boss = ids::session(ops.op.as_ref(), "boss").unwrap().unwrap();
            let kids = NotesOf::Children { parent: boss, latest: false };
            let got = never_shown(ops.op.as_ref(), &kids, None).unwrap();
            assert_eq!(got.iter().map(|r| r.note_id.as_str()).collect::<Vec<_>>(), [N2, N1], "{mode:?}");
            let recent = Timestamp::now().add_secs(-RECENT_UNDELIVERED_SECS);
            let got = never_shown(ops.op.as_ref(), &NotesOf::All, Some(recent)).unwrap();
            assert_eq!(got.iter().map(|r| r.note_id.as_str()).collect::<Vec<_>>(), [N3, N2], "{mode:?}: the last day");
        }
    }

    /// A receipt's `--json` carries `never_carried` only when true, and the
    /// schema takes both.
    #[test]
    fn never_carried_is_in_the_json_only_when_true() {
        let mut r = Receipt::new(N1, ReceiptState::Delivered);
        let v = serde_json::to_value(ReceiptOut::new(&r)).unwrap();
        assert!(v.get("never_carried").is_none(), "{v}");
        r.never_carried = true;
        let v = serde_json::to_value(ReceiptOut::new(&r)).unwrap();
        assert_eq!(v["never_carried"], serde_json::json!(true));
        let back: Receipt = serde_json::from_value(v).unwrap();
        assert!(back.never_carried);
    }
}
