//! `notes send|list|status|cancel`: against the Preloop server's human
//! routes (server mode, user token) or the local inbox (local mode), with
//! the same targets, rules, messages and `--json` shapes in both modes.

use crate::ops::{Backend, Ops, SessionRef};
use crate::output::{self, clip, safe, safe_line, time};
use crate::server_op::ServerOperator;
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand, ValueEnum};
use preloop_shared::flow::is_uuid;
use preloop_shared::local::{LocalInbox, MAX_NOTE_CHARS};
use preloop_shared::operator::{Author, JSON_SCHEMA_VERSION, NOTE_STATES, Receipt, SendNoteBody, SendRequest, Target};
use preloop_shared::time::Timestamp;
use preloop_shared::{Error, Harness, Result, fsutil};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
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
        after_help = "Examples:\n  preloop-hooks notes status 3f2a9c0d1e4b5a6c\n  preloop-hooks notes status 3f2a9c0d1e4b5a6c --json | jq -r .state\n\nExit codes: 0 found, 1 not found or another error."
    )]
    Status(IdArgs),
    /// Withdraw a note that has not been delivered yet.
    #[command(
        after_help = "Example:\n  preloop-hooks notes cancel 3f2a9c0d1e4b5a6c\n\nOnly a pending note can be cancelled: exit 0 when this call cancelled it. A note in any other state\n(delivered, undeliverable, expired, already cancelled) is shown unchanged and the command exits 1."
    )]
    Cancel(IdArgs),
}

const SEND_EXAMPLES: &str = "Examples:
  preloop-hooks notes send --session 5a3e0c1e-… \"Stop refactoring the tests, ship the fix.\"
  preloop-hooks notes send --alias worker-1 --expires-in 2h \"Deploy to eu-west-1.\"
  preloop-hooks notes send --children all \"Wrap up and push.\"      # from a conductor's Bash tool
  preloop-hooks notes send --next claude-code \"Run the checks first.\"
  preloop-hooks notes send --session 5a3e… --wait 5m \"Run the final checks.\"
  cat <<'NOTE' | preloop-hooks notes send --session 5a3e…
  Two things:
  1. the cluster is eu-west-1
  2. do not touch the tests
  NOTE

Targets (exactly one):
  --session ID          a session: its harness session id or its runtime session id
  --alias NAME          the live session started with PRELOOP_SESSION_ALIAS=NAME
  --children latest|all the live runs a session started (from inside a Claude Code or
                        Cursor run: that run; or --parent SESSION); `all`: one note each,
                        at most 20
  --execution ID        the session a flow execution runs on
  --next HARNESS        the next session of a harness that starts after the note
  --agent ID            a managed agent's current or next session (server mode)

A session that has ended, or that has not started, is named on stderr before the note is queued
(the local inbox keeps a note for a session that has not started yet; a server refuses a session
it does not know). --json prints {schema, note_id, target, notes} (with --wait: the final
receipt, or {schema, notes, total} for several). --wait shows progress on a terminal; exit codes:
0 delivered, 3 undeliverable, expired, cancelled or its session ended, 4 still pending when the
time ran out or on Ctrl-C (the note stays pending: `preloop-hooks notes cancel ID`), 1 any other
error, 2 usage.";

const LIST_EXAMPLES: &str = "Examples:
  preloop-hooks notes list --session 5a3e0c1e-…
  preloop-hooks notes list --alias worker-1 --state pending --json
  preloop-hooks notes list --children all
  preloop-hooks notes list --agent 0b0d… (server mode)
  preloop-hooks notes list --all -o id

Targets (exactly one): --session ID, --alias NAME, --children latest|all [--parent SESSION],
--execution ID, --agent ID (server mode), --all (every note). --state: pending, claimed,
delivered, acknowledged, cancelled, expired, failed, undeliverable.";

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Children {
    /// The newest live child.
    Latest,
    /// Every live child (at most 20), one note each.
    All,
}

fn harness_values() -> PossibleValuesParser {
    PossibleValuesParser::new(Harness::all().map(|h| h.slug()))
}

#[derive(Args)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("target").multiple(false)))]
pub struct TargetArgs {
    /// A session: its harness session id (Claude Code session_id, Codex session id, Cursor
    /// conversation_id) or its runtime session id.
    #[arg(long, group = "target", value_name = "ID")]
    session: Option<String>,
    /// The live session started with PRELOOP_SESSION_ALIAS=NAME.
    #[arg(long, group = "target", value_name = "NAME")]
    alias: Option<String>,
    /// The live runs a session started: from inside a run (its shell tool), that run; or --parent.
    #[arg(long, group = "target", value_enum, value_name = "latest|all")]
    children: Option<Children>,
    /// The session a flow execution runs on.
    #[arg(long, group = "target", value_name = "ID")]
    execution: Option<String>,
    /// The next session of a harness that starts after this note.
    #[arg(long, group = "target", value_name = "HARNESS", value_parser = harness_values())]
    next: Option<String>,
    /// A managed agent (server mode): its current session, or the next one it opens.
    #[arg(long, group = "target", value_name = "ID")]
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

#[derive(Args)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("list_target").multiple(false)))]
pub struct ListArgs {
    /// Notes of this session (harness session id or runtime id).
    #[arg(long, group = "list_target", value_name = "ID")]
    session: Option<String>,
    /// Notes of the sessions with this alias.
    #[arg(long, group = "list_target", value_name = "NAME")]
    alias: Option<String>,
    /// Notes of the runs a session started (that run when inside one; or --parent).
    #[arg(long, group = "list_target", value_enum, value_name = "latest|all")]
    children: Option<Children>,
    /// Notes of a flow execution.
    #[arg(long, group = "list_target", value_name = "ID")]
    execution: Option<String>,
    /// Notes of a managed agent (server mode).
    #[arg(long, group = "list_target", value_name = "ID")]
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
    /// Print JSON for scripts (same as -o json).
    #[arg(long)]
    json: bool,
    /// table (default), json, or id (only the note ids, one per line).
    #[arg(short = 'o', long = "output", value_name = "FORMAT", value_parser = ["table", "json", "id"])]
    output: Option<String>,
}

#[derive(Args)]
pub struct IdArgs {
    /// The note id (16 hex characters).
    note_id: String,
    /// Print the receipt as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run_notes(cmd: NotesCmd) -> Result<()> {
    match cmd {
        NotesCmd::Send(a) => send(a),
        NotesCmd::List(a) => list(a),
        NotesCmd::Status(a) => {
            check_note_id(&a.note_id)?;
            let ops = Ops::load()?;
            let mut r = receipt(&ops, &a.note_id)?;
            ops.fill(std::slice::from_mut(&mut r));
            if a.json {
                return output::json(&ReceiptOut::new(&r));
            }
            print_receipt(&r)?;
            // The one receipt that can over-report (docs/guarantees.md):
            // a note the server recorded delivered at its claim that no
            // output carried, because the session ended first.
            match preloop_shared::session::uncarried_by(&ops.config.home, &r.note_id) {
                Some(s) if r.state == "delivered" => output::print_pairs(&[(
                    "carried",
                    format!(
                        "never: session {} ended before a hook could show it (the server recorded it delivered when it was claimed)",
                        safe_line(&s)
                    ),
                )]),
                _ => Ok(()),
            }
        }
        NotesCmd::Cancel(a) => {
            check_note_id(&a.note_id)?;
            let ops = Ops::load()?;
            let before = receipt(&ops, &a.note_id)?;
            let was_pending = before.state == "pending";
            let mut r = if was_pending {
                match &ops.backend {
                    Backend::Local(ib) => ib.cancel(&a.note_id)?,
                    Backend::Server(s) => s.cancel(&a.note_id)?,
                }
            } else {
                before
            };
            ops.fill(std::slice::from_mut(&mut r));
            if a.json {
                output::json(&ReceiptOut::new(&r))?;
            }
            if !was_pending || r.state != "cancelled" {
                let state = match (r.state.as_str(), r.cancelled_at) {
                    ("cancelled", Some(t)) => format!("already cancelled (at {})", time(Some(t))),
                    (st, _) => format!(
                        "{st}{}",
                        r.undeliverable_reason.as_deref().map(|x| format!(" ({})", safe_line(x))).unwrap_or_default()
                    ),
                };
                return Err(Error::Refused(format!(
                    "note {} is {state}; only a pending note can be cancelled",
                    r.note_id
                )));
            }
            if a.json {
                return Ok(());
            }
            output::line(&format!("cancelled {}", r.note_id))
        }
    }
}

fn check_note_id(id: &str) -> Result<()> {
    if id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(Error::Usage(format!("{:?} is not a note id (16 hex characters, e.g. 3f2a9c0d1e4b5a6c)", clip(id, 40))))
    }
}

fn receipt(ops: &Ops, id: &str) -> Result<Receipt> {
    match &ops.backend {
        Backend::Local(ib) => ib.status(id),
        Backend::Server(s) => s.receipt(id),
    }
}

// ----- send -------------------------------------------------------------

/// The target of a send, resolved enough to say what it is.
#[derive(Debug, Clone)]
enum Resolved {
    /// One session (found, or by an id nobody knows yet).
    Session {
        id: String,
        found: Option<SessionRef>,
    },
    Alias(String),
    Children {
        parent: SessionRef,
        all: bool,
    },
    Execution(String),
    Next(Harness),
    /// `--harness H` without --next-session: its current or next session (local).
    HarnessCurrent(Harness),
    Agent {
        agent_id: String,
        next_session: bool,
    },
}

/// What `notes send --json` prints (without --wait):
/// `schemas/preloop-hooks/notes-send.schema.json`.
#[derive(Serialize)]
struct SendOut {
    schema: u32,
    note_id: String,
    target: TargetOut,
    notes: Vec<SentNote>,
}

#[derive(Serialize, Default, Clone)]
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

#[derive(Serialize)]
struct SentNote {
    note_id: String,
    state: String,
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
    let mode = if ops.is_local() { "local" } else { "server" };
    preloop_shared::lineage::enclosing_session(&ops.config.home, mode).map(|f| f.runtime_session_id).ok_or_else(|| {
        Error::Usage(
            "--children needs the parent session: run it from inside a run (its shell tool: PRELOOP_PARENT_SESSION_ID or the process tree names that run), or pass --parent SESSION"
                .into(),
        )
    })
}

fn no_target(what: &str) -> Error {
    Error::Usage(format!("name exactly one target {what}"))
}

fn resolve(ops: &Ops, t: &TargetArgs, next_session: bool) -> Result<Resolved> {
    let harness = |s: &str| Harness::from_slug(s).ok_or_else(|| Error::Usage(format!("unknown harness {s:?}")));
    if next_session && t.agent.is_none() && t.harness.is_none() {
        return Err(Error::Usage("--next-session goes with --agent (or use --next HARNESS)".into()));
    }
    if let Some(s) = t.session.as_ref().or(t.runtime_session.as_ref()) {
        return Ok(Resolved::Session { id: s.clone(), found: ops.find_session(s)? });
    }
    if let Some(a) = &t.alias {
        if a.is_empty() || a.len() > 64 || !a.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err(Error::Usage(format!(
                "--alias {:?}: an alias is 1-64 characters of A-Z a-z 0-9 . _ -",
                clip(a, 70)
            )));
        }
        return Ok(Resolved::Alias(a.clone()));
    }
    if let Some(c) = t.children {
        let p = parent_from_env(ops, t.parent.as_ref())?;
        let parent = ops
            .find_session(&p)?
            .ok_or_else(|| Error::NotFound(format!("the parent session {p} is not known {}", where_(ops))))?;
        return Ok(Resolved::Children { parent, all: c == Children::All });
    }
    if let Some(e) = &t.execution {
        if !ops.is_local() && !is_uuid(e) {
            return Err(Error::Usage(format!("--execution {:?}: an execution id is a UUID", clip(e, 70))));
        }
        return Ok(Resolved::Execution(e.clone()));
    }
    if let Some(h) = &t.next {
        return Ok(Resolved::Next(harness(h)?));
    }
    if let Some(h) = &t.harness {
        let h = harness(h)?;
        return Ok(if next_session { Resolved::Next(h) } else { Resolved::HarnessCurrent(h) });
    }
    if let Some(a) = &t.agent {
        if ops.is_local() {
            return Err(Error::Usage(
                "--agent needs server mode (`preloop-hooks login --user --url URL`); on the local inbox use --session, --alias, --children or --next".into(),
            ));
        }
        if !is_uuid(a) {
            return Err(Error::Usage(format!(
                "--agent {:?}: an agent id is a UUID (`preloop-hooks sessions list --json` shows agent_id)",
                clip(a, 70)
            )));
        }
        return Ok(Resolved::Agent { agent_id: a.clone(), next_session });
    }
    Err(no_target("(--session, --alias, --children, --execution, --next or --agent)"))
}

fn where_(ops: &Ops) -> &'static str {
    if ops.is_local() { "on this machine" } else { "in this account" }
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

/// Warnings about the target before anything is sent: ended, not started.
fn announce(ops: &Ops, r: &Resolved) {
    let Resolved::Session { id, found } = r else { return };
    match found {
        None if ops.is_local() => crate::errln!(
            "preloop-hooks: no session {} has started on this machine yet; the note waits for it (the local inbox keeps notes for a session that has not started; a server refuses a session it does not know)",
            safe_line(id)
        ),
        None => {}
        Some(s) if s.ended_at.is_some() => crate::errln!(
            "preloop-hooks: session {} ended at {}; the note waits in case it is resumed",
            safe_line(s.name()),
            time(s.ended_at)
        ),
        Some(_) => {}
    }
    // A session whose hooks use the local inbox never reads the server, and
    // the other way round: say which mode this note went through and why.
    if let Some(f) = found.as_ref().and_then(|s| s.file.clone()).or_else(|| ops.local_file(id))
        && f.mode != ops.mode()
    {
        crate::errln!(
            "preloop-hooks: {} mode ({}), but the hooks of session {} ran in {} mode: they will not read this note there",
            ops.mode(),
            if ops.is_local() { "no server URL configured" } else { "a server URL and a user token are configured" },
            safe_line(&f.external_session_id),
            f.mode
        );
    }
}

fn send(a: SendArgs) -> Result<()> {
    let expires_in_secs = a.expires_in.as_deref().map(|d| output::parse_duration("--expires-in", d)).transpose()?;
    if let Some(e) = expires_in_secs
        && e < 60
    {
        return Err(Error::Usage(format!("--expires-in {e}s: a note lives 60s to 7d")));
    }
    let wait = a.wait.as_deref().map(|d| output::parse_duration("--wait", d)).transpose()?;
    let ops = Ops::load()?;
    // Resolve the target before reading the body, so a bad target never waits on stdin.
    let resolved = resolve(&ops, &a.target, a.next_session)?;
    let text = read_text(a.text)?;
    if a.from.is_some() && !ops.is_local() {
        crate::errln!(
            "preloop-hooks: --from applies to the local inbox only; the server names the author from the user token"
        );
    }
    announce(&ops, &resolved);
    let (mut receipts, target) = match &ops.backend {
        Backend::Local(ib) => send_local(ib, &resolved, text, expires_in_secs, a.from.as_deref())?,
        Backend::Server(s) => send_server(&ops.config.home, s, &resolved, text, expires_in_secs)?,
    };
    ops.fill(&mut receipts);
    let Some(wait) = wait else {
        if a.json {
            let first = receipts.first().map(|r| r.note_id.clone()).unwrap_or_default();
            return output::json(&SendOut {
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
            });
        }
        for r in &receipts {
            output::line(&format!("{} {} for {}", r.note_id, r.state, to_of(r)))?;
        }
        return Ok(());
    };
    wait_for(&ops, &resolved, receipts, wait, a.json)
}

fn local_author(from: Option<&str>) -> Author {
    let display = from
        .map(str::to_string)
        .or_else(|| std::env::var("USER").ok())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "local operator".into());
    Author { display: Some(display), auth_method: Some("local".into()), ..Author::default() }
}

fn send_local(
    ib: &LocalInbox,
    r: &Resolved,
    text: String,
    expires_in_secs: Option<u64>,
    from: Option<&str>,
) -> Result<(Vec<Receipt>, TargetOut)> {
    let (target, next_session, mut t) = match r {
        Resolved::Session { id, found } => (
            Target::Session(id.clone()),
            false,
            TargetOut {
                kind: "session",
                session: Some(found.as_ref().and_then(|f| f.external_id.clone()).unwrap_or_else(|| id.clone())),
                runtime_session_id: found.as_ref().map(|f| f.runtime_id.clone()),
                ..TargetOut::default()
            },
        ),
        Resolved::Alias(al) => (
            Target::Alias(al.clone()),
            false,
            TargetOut { kind: "alias", alias: Some(al.clone()), ..TargetOut::default() },
        ),
        Resolved::Children { parent, all } => (
            Target::Children { parent: parent.runtime_id.clone(), all: *all },
            false,
            TargetOut {
                kind: "children",
                children: Some(if *all { "all" } else { "latest" }),
                parent_session_id: Some(parent.runtime_id.clone()),
                ..TargetOut::default()
            },
        ),
        Resolved::Execution(e) => (
            Target::Execution(e.clone()),
            false,
            TargetOut { kind: "execution", execution_id: Some(e.clone()), ..TargetOut::default() },
        ),
        Resolved::Next(h) => (
            Target::Harness(*h),
            true,
            TargetOut { kind: "next", harness: Some(h.slug().into()), next_session: true, ..TargetOut::default() },
        ),
        Resolved::HarnessCurrent(h) => (
            Target::Harness(*h),
            false,
            TargetOut { kind: "next", harness: Some(h.slug().into()), ..TargetOut::default() },
        ),
        Resolved::Agent { .. } => return Err(Error::Usage("--agent needs server mode".into())),
    };
    let req = SendRequest {
        text,
        target,
        next_session,
        expires_in_secs: expires_in_secs.map(|s| s as i64),
        author: local_author(from),
    };
    let receipts = ib.send_all(&req)?;
    if matches!(r, Resolved::Alias(_)) && receipts.len() == 1 {
        t.session = receipts[0].external_session_id.clone();
        t.runtime_session_id = receipts[0].runtime_session_id.clone();
    }
    Ok((receipts, t))
}

fn send_server(
    home: &Path,
    s: &ServerOperator,
    r: &Resolved,
    text: String,
    expires_in_secs: Option<u64>,
) -> Result<(Vec<Receipt>, TargetOut)> {
    let mut body =
        SendNoteBody { text, expires_in_seconds: expires_in_secs.map(|e| e as i64), ..SendNoteBody::default() };
    let mut t = TargetOut::default();
    match r {
        Resolved::Session { id, found: Some(f) } => {
            body.runtime_session_id = Some(f.runtime_id.clone());
            t = TargetOut {
                kind: "session",
                session: f.external_id.clone().or_else(|| Some(id.clone())),
                runtime_session_id: Some(f.runtime_id.clone()),
                ..t
            };
        }
        Resolved::Session { id, found: None } => {
            // Nobody knows it yet: let the server say so with its own reason.
            body.external_session_id = Some(id.clone());
            t = TargetOut { kind: "session", session: Some(id.clone()), ..t };
        }
        Resolved::Alias(al) => {
            body.alias = Some(al.clone());
            t = TargetOut { kind: "alias", alias: Some(al.clone()), ..t };
        }
        Resolved::Children { parent, all } => {
            body.children = Some(if *all { "all" } else { "latest" }.into());
            body.parent_session_id = Some(parent.runtime_id.clone());
            t = TargetOut {
                kind: "children",
                children: Some(if *all { "all" } else { "latest" }),
                parent_session_id: Some(parent.runtime_id.clone()),
                ..t
            };
        }
        Resolved::Execution(e) => {
            body.execution_id = Some(e.clone());
            t = TargetOut { kind: "execution", execution_id: Some(e.clone()), ..t };
        }
        Resolved::Next(h) | Resolved::HarnessCurrent(h) => {
            let next = matches!(r, Resolved::Next(_));
            let agent_id = agent_for(home, *h).ok_or_else(|| {
                Error::Config(format!(
                    "no managed agent is known for {} on this machine (a Preloop onboarding file or PRELOOP_AGENT_ID); use --agent ID",
                    h.slug()
                ))
            })?;
            body.agent_id = Some(agent_id.clone());
            body.next_session = next;
            t = TargetOut {
                kind: "next",
                harness: Some(h.slug().into()),
                agent_id: Some(agent_id),
                next_session: next,
                ..t
            };
        }
        Resolved::Agent { agent_id, next_session } => {
            body.agent_id = Some(agent_id.clone());
            body.next_session = *next_session;
            t = TargetOut { kind: "agent", agent_id: Some(agent_id.clone()), next_session: *next_session, ..t };
        }
    }
    let receipts = s.send(&body)?;
    if t.runtime_session_id.is_none() && receipts.len() == 1 {
        t.runtime_session_id = receipts[0].runtime_session_id.clone();
    }
    Ok((receipts, t))
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

// ----- wait -------------------------------------------------------------

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Catch Ctrl-C (and SIGTERM) so a wait can say what is left behind.
pub fn catch_interrupt() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_sigint as *const () as libc::sighandler_t);
    }
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Whether the session a note waits for has ended (and so it cannot be
/// delivered unless the session is resumed).
fn session_ended(ops: &Ops, r: &Receipt) -> Option<Timestamp> {
    match &ops.backend {
        Backend::Local(ib) => {
            let s = r.external_session_id.as_deref()?;
            ib.resolve_session(s).and_then(|f| f.ended_at)
        }
        Backend::Server(s) => s.runtime_session(r.runtime_session_id.as_deref()?).ok().and_then(|i| i.ended_at),
    }
}

fn wait_for(ops: &Ops, resolved: &Resolved, mut receipts: Vec<Receipt>, wait: u64, json: bool) -> Result<()> {
    catch_interrupt();
    let started = Instant::now();
    let deadline = started.checked_add(Duration::from_secs(wait));
    let tty = output::stderr_is_tty() && !json;
    let poll = if ops.is_local() { Duration::from_millis(500) } else { Duration::from_secs(2) };
    let targets = receipts.iter().map(to_of).collect::<Vec<_>>().join(", ");
    if !json {
        crate::errln!(
            "{} sent to {}; waiting up to {} for delivery…",
            receipts.iter().map(|r| r.note_id.as_str()).collect::<Vec<_>>().join(", "),
            targets,
            output::human_secs(wait)
        );
    }
    let _ = resolved;
    let mut last_line = String::new();
    let mut ended: Option<Timestamp> = None;
    let mut checked_end = Instant::now() - Duration::from_secs(60);
    let outcome = loop {
        if receipts.iter().all(Receipt::is_final) {
            break "final";
        }
        if interrupted() {
            break "interrupted";
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break "timeout";
        }
        // A session that has ended takes nothing: do not sit out the wait.
        if checked_end.elapsed() >= Duration::from_secs(2) {
            checked_end = Instant::now();
            let pending: Vec<&Receipt> = receipts.iter().filter(|r| !r.is_final()).collect();
            let ends: Vec<Option<Timestamp>> = pending.iter().map(|r| session_ended(ops, r)).collect();
            if !pending.is_empty() && ends.iter().all(Option::is_some) {
                ended = ends.into_iter().flatten().max();
                break "ended";
            }
        }
        if tty {
            let states: BTreeSet<&str> = receipts.iter().map(|r| r.state.as_str()).collect();
            let l = format!(
                "{} · {} elapsed (Ctrl-C stops waiting)",
                states.into_iter().collect::<Vec<_>>().join(", "),
                output::human_secs(started.elapsed().as_secs())
            );
            if l != last_line {
                output::status(&l);
                last_line = l;
            }
        }
        let step = deadline.map(|d| d.saturating_duration_since(Instant::now())).unwrap_or(poll).min(poll);
        let until = Instant::now() + step.max(Duration::from_millis(50));
        while Instant::now() < until && !interrupted() {
            std::thread::sleep(Duration::from_millis(50));
        }
        for r in receipts.iter_mut().filter(|r| !r.is_final()) {
            let polled = match &ops.backend {
                Backend::Local(ib) => ib.status(&r.note_id),
                Backend::Server(s) => s.receipt(&r.note_id),
            };
            match polled {
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
    };
    if tty && !last_line.is_empty() {
        output::status("");
    }
    if json {
        if receipts.len() == 1 {
            output::json(&ReceiptOut::new(&receipts[0]))?;
        } else {
            output::json(&NoteListOut { schema: JSON_SCHEMA_VERSION, notes: &receipts, total: receipts.len() })?;
        }
    } else {
        for r in &receipts {
            print_receipt(r)?;
        }
    }
    let lost: Vec<&Receipt> = receipts.iter().filter(|r| r.is_lost()).collect();
    let pending: Vec<&Receipt> = receipts.iter().filter(|r| !r.is_final()).collect();
    let cancel_hint = |p: &[&Receipt]| {
        p.iter().map(|r| format!("preloop-hooks notes cancel {}", r.note_id)).collect::<Vec<_>>().join("; ")
    };
    if !lost.is_empty() {
        return Err(Error::Undelivered(
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
    match outcome {
        "ended" => Err(Error::Undelivered(format!(
            "the session ended{}; {} still pending in case it is resumed (cancel: {})",
            ended.map(|t| format!(" at {}", time(Some(t)))).unwrap_or_default(),
            pending.iter().map(|r| format!("note {}", r.note_id)).collect::<Vec<_>>().join(", "),
            cancel_hint(&pending)
        ))),
        "timeout" | "interrupted" if !pending.is_empty() => Err(Error::WaitTimeout(format!(
            "{} still {} after {}{} (cancel: {})",
            pending.iter().map(|r| format!("note {}", r.note_id)).collect::<Vec<_>>().join(", "),
            pending[0].state,
            output::human_secs(started.elapsed().as_secs()),
            if outcome == "interrupted" { ", stopped waiting on Ctrl-C" } else { "" },
            cancel_hint(&pending)
        ))),
        _ => Ok(()),
    }
}

// ----- list -------------------------------------------------------------

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
    if !any {
        return Err(no_target(
            "(--session ID, --alias NAME, --children latest|all, --execution ID, --agent ID, or --all for every note)",
        ));
    }
    let ops = Ops::load()?;
    let mut notes = match &ops.backend {
        Backend::Local(ib) => list_local(&ops, ib, &a)?,
        Backend::Server(s) => list_server(&ops, s, &a)?,
    };
    if let Some(st) = &a.state {
        notes.retain(|n| &n.state == st);
    }
    notes.sort_by(|x, y| y.created_at.cmp(&x.created_at).then(y.note_id.cmp(&x.note_id)));
    notes.dedup_by(|x, y| x.note_id == y.note_id);
    ops.fill(&mut notes);
    match fmt.as_str() {
        "json" => output::json(&NoteListOut { schema: JSON_SCHEMA_VERSION, notes: &notes, total: notes.len() }),
        "id" => {
            for n in &notes {
                output::line(&n.note_id)?;
            }
            Ok(())
        }
        _ if notes.is_empty() => output::line("no notes"),
        _ => {
            // One session's notes all go to it: no TO column then.
            let show_to = a.session.is_none() && a.runtime_session.is_none();
            let rows: Vec<Vec<String>> = notes
                .iter()
                .map(|n| {
                    let mut row = vec![n.note_id.clone(), n.state.clone(), event_or_reason(n), time(n.created_at)];
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

/// The delivery event of a delivered note, the reason of an undeliverable one.
pub fn event_or_reason(n: &Receipt) -> String {
    n.undeliverable_reason
        .clone()
        .or_else(|| n.delivery_event.clone())
        .map(|s| safe_line(&s))
        .unwrap_or_else(|| "-".into())
}

fn list_local(ops: &Ops, ib: &LocalInbox, a: &ListArgs) -> Result<Vec<Receipt>> {
    if a.agent.is_some() {
        return Err(Error::Usage(
            "--agent needs server mode; on the local inbox list by --session, --alias, --children, --execution or --all"
                .into(),
        ));
    }
    let all = ib.list()?;
    let sessions: Option<BTreeSet<String>> = if let Some(s) = a.session.as_ref().or(a.runtime_session.as_ref()) {
        Some(
            std::iter::once(ib.resolve_session(s).map(|f| f.external_session_id).unwrap_or_else(|| s.clone()))
                .collect(),
        )
    } else if let Some(al) = &a.alias {
        Some(
            ib.sessions()
                .into_iter()
                .filter(|r| r.alias.as_deref() == Some(al.as_str()))
                .filter_map(|r| r.external_session_id)
                .collect(),
        )
    } else if let Some(c) = a.children {
        let p = parent_from_env(ops, a.parent.as_ref())?;
        let parent = ops
            .find_session(&p)?
            .ok_or_else(|| Error::NotFound(format!("the parent session {p} is not known on this machine")))?;
        let mut kids: Vec<_> = ib
            .sessions()
            .into_iter()
            .filter(|r| r.parent_session_id.as_deref() == Some(parent.runtime_id.as_str()))
            .collect();
        kids.sort_by_key(|r| std::cmp::Reverse(r.started_at));
        if c == Children::Latest {
            kids.truncate(1);
        }
        Some(kids.into_iter().filter_map(|r| r.external_session_id).collect())
    } else {
        a.execution.as_ref().map(|e| ib.execution_sessions(e).into_iter().map(|f| f.external_session_id).collect())
    };
    Ok(match sessions {
        None => all,
        Some(set) => {
            all.into_iter().filter(|n| n.external_session_id.as_ref().is_some_and(|s| set.contains(s))).collect()
        }
    })
}

fn list_server(ops: &Ops, s: &ServerOperator, a: &ListArgs) -> Result<Vec<Receipt>> {
    let q = |k: &'static str, v: String| {
        let mut q = vec![(k, v), ("limit", "200".to_string())];
        if let Some(st) = &a.state {
            q.push(("state", st.clone()));
        }
        q
    };
    if let Some(id) = a.session.as_ref().or(a.runtime_session.as_ref()) {
        let f = ops
            .find_session(id)?
            .ok_or_else(|| Error::NotFound(format!("no session {} in this account", safe_line(id))))?;
        return s.list(&q("runtime_session_id", f.runtime_id));
    }
    if let Some(ag) = &a.agent {
        if !is_uuid(ag) {
            return Err(Error::Usage(format!("--agent {:?}: an agent id is a UUID", clip(ag, 70))));
        }
        return s.list(&q("agent_id", ag.clone()));
    }
    if let Some(e) = &a.execution {
        if !is_uuid(e) {
            return Err(Error::Usage(format!("--execution {:?}: an execution id is a UUID", clip(e, 70))));
        }
        return s.list(&q("execution_id", e.clone()));
    }
    let session_ids: Vec<String> = if let Some(al) = &a.alias {
        let page = s.runtime_sessions(&[("alias", al.clone()), ("limit", "100".into())])?;
        let ids: Vec<String> = page.items.into_iter().filter(|i| !i.is_identity()).map(|i| i.id).collect();
        if ids.is_empty() {
            return Err(Error::NotFound(format!("no session in this account has the alias {al:?}")));
        }
        ids
    } else if let Some(c) = a.children {
        let p = parent_from_env(ops, a.parent.as_ref())?;
        let parent = ops
            .find_session(&p)?
            .ok_or_else(|| Error::NotFound(format!("the parent session {p} is not known in this account")))?;
        let mut page = s.runtime_sessions(&[("parent_session_id", parent.runtime_id), ("limit", "100".into())])?.items;
        page.sort_by_key(|i| std::cmp::Reverse(i.started_at));
        if c == Children::Latest {
            page.truncate(1);
        }
        page.into_iter().map(|i| i.id).collect()
    } else {
        // --all: every agent of the account.
        let mut out = Vec::new();
        for ag in s.agents()?.items {
            out.extend(s.list(&q("agent_id", ag.id))?);
        }
        return Ok(out);
    };
    let mut out = Vec::new();
    for id in session_ids {
        out.extend(s.list(&q("runtime_session_id", id))?);
    }
    Ok(out)
}

// ----- printing ---------------------------------------------------------

pub fn print_receipt(r: &Receipt) -> Result<()> {
    let mut rows: Vec<(&str, String)> = vec![
        ("note", r.note_id.clone()),
        ("state", r.state.clone()),
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
