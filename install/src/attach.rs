//! `sessions attach <id>`: watch one session live and steer it from the same
//! terminal. What it shows comes from every source that has it:
//!
//! * the server (server mode): the attach socket `/api/v1/ws/runtime-sessions/{id}`
//!   (what the server's event bus relays; on Preloop 0.17.1 only `attached`),
//!   and, polled every 2 s, the REST activity timeline (tool calls with the
//!   sizes of their arguments, model calls through the gateway), the note
//!   receipts of the session, its pending approvals and its end
//!   (docs/contracts/preloop-server.md §5.7-§5.9);
//! * this machine: the harness transcript the hooks recorded
//!   (`transcript_path` in the session file): prompts, tool calls with their
//!   arguments, model calls;
//! * the local inbox (local mode): the session's receipts and its end.
//!
//! A line typed (a terminal) or read from stdin (no terminal) is sent as a
//! note to this session, and its receipt is followed as it changes. On a
//! terminal the input line stays at the bottom while events scroll above it;
//! without one, every event is one line (`--json`: one JSON object per line,
//! `schemas/preloop-hooks/attach-event.schema.json`). It ends when the
//! session ends, on Ctrl-C / Ctrl-D (terminal) or SIGINT / SIGTERM (and, on
//! a terminal, SIGQUIT / SIGHUP), always with the terminal restored
//! (`term`: also across SIGTSTP and SIGCONT).

use crate::notes;
use crate::operator::{NewNote, NotesOf, Operator, SessionRef, Socket, To};
use crate::ops::Ops;
use crate::output::{self, clip, safe_line};
use crate::term::{self, Key, LineEditor, RawMode};
use crate::transcript::{Follower, Happening};
use clap::Args;
use preloop_shared::operator::{ActivityItem, AttachMessage, JSON_SCHEMA_VERSION, Receipt, ReceiptState};
use preloop_shared::time::Timestamp;
use preloop_shared::{Error, Result};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, IsTerminal, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const HELP: &str = "Examples:
  preloop-hooks sessions attach 801fb481                # watch; type a line + Enter to send it as a note
  preloop-hooks sessions attach 801fb481 --json | jq .  # one JSON event per line
  echo \"Use the staging database.\" | preloop-hooks sessions attach 801fb481

Shows prompts, tool calls (with their arguments from the harness transcript on the agent's own
machine; the server keeps only their sizes), model calls, approvals waiting on a human, notes sent
and their receipts as they change, and the session's end. On a terminal, the line at the bottom
sends what you type as a note to this session; Ctrl-C or Ctrl-D (on an empty line) leaves. Without
a terminal it prints one event per line and reads notes from stdin, one per line. It exits 0 when
the session ends or you leave.";

#[derive(Args)]
pub struct AttachArgs {
    /// The session: its harness session id or its runtime id, or a unique start of one (the ID `sessions list` prints).
    id: String,
    /// One JSON event per line.
    #[arg(long)]
    json: bool,
    /// Only watch: do not read notes from the keyboard or stdin.
    #[arg(long)]
    no_input: bool,
    /// How many past events to show first.
    #[arg(long, default_value_t = 20, value_name = "N")]
    history: usize,
}

/// One thing that happened (`--json`: one per line).
#[derive(Debug, Clone, Serialize, Default)]
pub struct Event {
    pub schema: u32,
    pub at: Option<Timestamp>,
    pub kind: Kind,
    /// transcript | timeline | socket | receipts | session | inbox | attach
    pub source: &'static str,
    pub tool: Option<String>,
    pub args: Option<String>,
    pub text: Option<String>,
    pub note_id: Option<String>,
    pub state: Option<String>,
    pub detail: Option<String>,
}

/// What an [`Event`] is (`kind` in `--json`, as `schemas/preloop-hooks/attach-event.schema.json` names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Attached,
    SessionStarted,
    Prompt,
    ToolCall,
    ModelCall,
    ApprovalWaiting,
    NoteSent,
    NoteState,
    SessionEnded,
    /// After `session_ended`: each note the session never showed, with its text.
    NoteUndelivered,
    ServerEvent,
    #[default]
    Info,
}

impl Kind {
    /// The label of a text line.
    fn label(self) -> &'static str {
        match self {
            Kind::Attached => "attached",
            Kind::SessionStarted => "started",
            Kind::Prompt => "prompt",
            Kind::ToolCall => "tool",
            Kind::ModelCall => "model",
            Kind::ApprovalWaiting => "approval",
            Kind::NoteSent => "note sent",
            Kind::NoteState => "note",
            Kind::SessionEnded => "ended",
            Kind::NoteUndelivered => "never read",
            Kind::ServerEvent => "event",
            Kind::Info => "info",
        }
    }

    /// Its text is a quote (a note, a prompt, a model's reply).
    fn quotes(self) -> bool {
        matches!(self, Kind::NoteSent | Kind::NoteState | Kind::NoteUndelivered | Kind::Prompt | Kind::ModelCall)
    }
}

fn ev(kind: Kind, source: &'static str) -> Event {
    Event { schema: JSON_SCHEMA_VERSION, at: Some(Timestamp::now()), kind, source, ..Event::default() }
}

enum Msg {
    Event(Event),
    Byte(u8),
    Line(String),
    InputClosed,
    /// The session ended (after its last receipts were read).
    Ended,
    /// A source has sent its history (what happened before attach).
    Caught,
}

/// What the watchers share with the main loop.
struct Shared {
    stop: AtomicBool,
    /// Note id → last state shown.
    notes: Mutex<HashMap<String, ReceiptState>>,
}

pub fn run(a: AttachArgs) -> Result<()> {
    let ops = Ops::load()?;
    let mode = ops.mode();
    let s = crate::operator::ids::session(ops.op.as_ref(), &a.id)?.ok_or_else(|| {
        Error::NotFound(format!(
            "no session {} {} (`preloop-hooks sessions list` shows them)",
            safe_line(&a.id),
            mode.where_known()
        ))
    })?;
    notes::catch_interrupt();
    let tty = std::io::stdin().is_terminal() && output::stdout_is_tty() && !a.json && !a.no_input;
    let shared = Arc::new(Shared { stop: AtomicBool::new(false), notes: Mutex::new(HashMap::new()) });
    let (tx, rx) = mpsc::channel::<Msg>();
    let history = a.history;
    let mut first = ev(Kind::Attached, "attach");
    first.text = Some(format!(
        "{} ({} mode{})",
        s.name(),
        mode.as_str(),
        if s.name() != s.runtime_id { format!(", runtime id {}", s.runtime_id) } else { String::new() }
    ));
    let _ = tx.send(Msg::Event(first));
    // This machine's transcript.
    let transcript = s.file.as_ref().and_then(|f| f.transcript_path.clone()).map(PathBuf::from);
    if let Some(path) = transcript.clone() {
        spawn_transcript(path, history, tx.clone(), shared.clone());
    } else if s.file.is_none() {
        let mut e = ev(Kind::Info, "attach");
        e.text = Some("this session's hooks did not run on this machine: tool arguments are not known here (the server keeps only their sizes)".into());
        let _ = tx.send(Msg::Event(e));
    }
    // The transcript and the poller each send their history, then `Caught`.
    let sources = 1 + usize::from(transcript.is_some());
    spawn_poller(ops.op.clone(), s.clone(), transcript.is_some(), history, tx.clone(), shared.clone());
    if let Some(socket) = ops.op.socket(&s) {
        spawn_socket(socket, tx.clone(), shared.clone());
    }
    let raw = if tty { RawMode::enter() } else { None };
    if !a.no_input {
        spawn_input(raw.is_some(), tx.clone(), shared.clone());
    }
    drop(tx);
    if raw.is_some() {
        term::watch_resize();
    }
    let mut view = View { tty: raw.is_some(), json: a.json, editor: LineEditor::default(), width: term::width() };
    let result = main_loop(ops.op.as_ref(), &s, &rx, &shared, &mut view, sources);
    shared.stop.store(true, Ordering::SeqCst);
    if view.tty {
        let _ = output::redraw("", false);
    }
    drop(raw);
    result
}

struct View {
    tty: bool,
    json: bool,
    editor: LineEditor,
    width: usize,
}

const PROMPT: &str = "note> ";

impl View {
    fn show(&mut self, e: &Event) -> Result<()> {
        if self.json {
            return output::json_line(e);
        }
        if !shown_to_people(e) {
            return Ok(());
        }
        let line = format_event(e);
        if !self.tty {
            return output::line(&line);
        }
        if term::take_resized() {
            self.width = term::width();
        }
        output::redraw(&clip_width(&output::shown(&line), self.width), true)?;
        self.prompt()
    }

    fn prompt(&mut self) -> Result<()> {
        if !self.tty {
            return Ok(());
        }
        if term::take_resized() {
            self.width = term::width();
        }
        let room = self.width.saturating_sub(PROMPT.len() + 1).max(10);
        let buf = safe_line(&self.editor.buf);
        let n = buf.chars().count();
        let shown: String = if n > room { buf.chars().skip(n - room).collect() } else { buf };
        output::redraw(&format!("{PROMPT}{shown}"), false)
    }
}

fn clip_width(line: &str, width: usize) -> String {
    if line.chars().count() > width && width > 1 {
        format!("{}…", line.chars().take(width - 1).collect::<String>())
    } else {
        line.to_string()
    }
}

/// Whether people see `e`: not a model reply with no text, which is only
/// tool calls that follow as their own lines (newcomer 4, P17; `--json`
/// keeps every event).
pub fn shown_to_people(e: &Event) -> bool {
    !(e.kind == Kind::ModelCall && e.text.as_deref().is_none_or(|x| x.trim().is_empty()))
}

/// `17:10:42Z  tool        Bash  echo hi`
pub fn format_event(e: &Event) -> String {
    let t = e.at.map(|t| t.to_iso_z().chars().skip(11).take(8).collect::<String>() + "Z").unwrap_or_default();
    let label = e.kind.label();
    let mut parts: Vec<String> = Vec::new();
    if let Some(id) = &e.note_id {
        parts.push(safe_line(id));
    }
    if let Some(tool) = &e.tool {
        parts.push(safe_line(tool));
    }
    if let Some(st) = &e.state {
        parts.push(safe_line(st));
    }
    if let Some(a) = &e.args {
        parts.push(clip(a, 160));
    }
    if let Some(x) = &e.text {
        parts.push(if e.kind.quotes() { format!("\"{}\"", clip(x, 120)) } else { clip(x, 200) });
    }
    if let Some(d) = &e.detail {
        parts.push(format!("({})", clip(d, 120)));
    }
    format!("{t}  {label:<10}  {}", parts.join("  "))
}

/// The history, held until every source has sent its own, then shown in
/// time order (the sources are threads: their first batches interleave).
struct History {
    waiting: usize,
    held: Vec<Event>,
    until: Instant,
}

impl History {
    /// How long the history waits for a slow source (a server that does not answer).
    const PATIENCE: Duration = Duration::from_secs(3);

    fn flush(&mut self, view: &mut View) -> Result<()> {
        self.waiting = 0;
        let mut held = std::mem::take(&mut self.held);
        held.sort_by_key(|e| e.at);
        held.iter().try_for_each(|e| view.show(e))
    }
}

fn main_loop(
    op: &dyn Operator,
    s: &SessionRef,
    rx: &Receiver<Msg>,
    shared: &Shared,
    view: &mut View,
    sources: usize,
) -> Result<()> {
    view.prompt()?;
    let mut input_open = true;
    let mut history = History { waiting: sources, held: Vec::new(), until: Instant::now() + History::PATIENCE };
    loop {
        if notes::interrupted() || term::leave_requested() {
            return Ok(());
        }
        if history.waiting > 0 && Instant::now() >= history.until {
            history.flush(view)?;
        }
        let msg = match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => {
                if view.tty && term::take_resized() {
                    view.width = term::width();
                    view.prompt()?;
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return history.flush(view),
        };
        match msg {
            // The header shows at once; the rest of the history waits for its sources.
            Msg::Event(e) if history.waiting > 0 && e.kind != Kind::Attached => history.held.push(e),
            Msg::Event(e) => view.show(&e)?,
            Msg::Caught => {
                history.waiting = history.waiting.saturating_sub(1);
                if history.waiting == 0 {
                    history.flush(view)?;
                }
            }
            Msg::Ended => return history.flush(view),
            Msg::InputClosed => input_open = false,
            Msg::Byte(b) => match view.editor.feed(b) {
                Key::Quit => return Ok(()),
                Key::Line(l) => {
                    if !l.trim().is_empty() {
                        send_note(op, s, &l, shared, view)?;
                    }
                    view.prompt()?;
                }
                Key::None => view.prompt()?,
            },
            Msg::Line(l) => {
                if !l.trim().is_empty() {
                    send_note(op, s, &l, shared, view)?;
                }
            }
        }
        let _ = input_open;
    }
}

fn send_note(op: &dyn Operator, s: &SessionRef, text: &str, shared: &Shared, view: &mut View) -> Result<()> {
    let to = To::Session { id: s.name().to_string(), found: Some(s.clone()) };
    let sent = op
        .send(&to, &NewNote { text: text.to_string(), ..NewNote::default() })
        .and_then(|sent| sent.receipts.into_iter().next().ok_or_else(|| Error::NotFound("no note was sent".into())));
    match sent {
        Ok(r) => {
            shared.notes.lock().unwrap_or_else(|e| e.into_inner()).insert(r.note_id.clone(), r.state.clone());
            let mut e = ev(Kind::NoteSent, "attach");
            e.note_id = Some(r.note_id.clone());
            e.state = Some(r.state.to_string());
            e.text = Some(r.text.clone());
            view.show(&e)
        }
        Err(err) => {
            let mut e = ev(Kind::Info, "attach");
            e.text = Some(format!("the note was not sent: {err}"));
            view.show(&e)
        }
    }
}

// ----- watchers ----------------------------------------------------------

fn sleep_unless_stopped(shared: &Shared, d: Duration) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if shared.stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    !shared.stop.load(Ordering::SeqCst)
}

fn spawn_transcript(path: PathBuf, history: usize, tx: Sender<Msg>, shared: Arc<Shared>) {
    std::thread::spawn(move || {
        let mut f = Follower::new(path);
        let mut first = true;
        let mut caught = false;
        loop {
            let mut got = f.poll();
            if first {
                first = false;
                let skip = got.len().saturating_sub(history);
                got.drain(..skip);
            }
            for (at, h) in got {
                let mut e = match h {
                    Happening::Prompt(p) => {
                        let mut e = ev(Kind::Prompt, "transcript");
                        e.text = Some(p);
                        e
                    }
                    Happening::ToolCall { name, args } => {
                        let mut e = ev(Kind::ToolCall, "transcript");
                        e.tool = Some(name);
                        e.args = Some(args);
                        e
                    }
                    Happening::ModelCall(text) => {
                        let mut e = ev(Kind::ModelCall, "transcript");
                        e.text = text;
                        e
                    }
                };
                e.at = at.or(e.at);
                if tx.send(Msg::Event(e)).is_err() {
                    return;
                }
            }
            if !caught {
                caught = true;
                let _ = tx.send(Msg::Caught);
            }
            if !sleep_unless_stopped(&shared, Duration::from_millis(300)) {
                return;
            }
        }
    });
}

/// Report receipts that are new or changed.
fn receipt_events(receipts: &[Receipt], shared: &Shared, source: &'static str) -> Vec<Event> {
    let mut known = shared.notes.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = Vec::new();
    let mut sorted: Vec<&Receipt> = receipts.iter().collect();
    sorted.sort_by_key(|r| r.created_at);
    for r in sorted {
        match known.get(&r.note_id) {
            Some(st) if *st == r.state => {}
            Some(_) => {
                let mut e = ev(Kind::NoteState, source);
                e.at = r.last_transition().or(e.at);
                e.note_id = Some(r.note_id.clone());
                e.state = Some(r.state.to_string());
                e.detail = r.undeliverable_reason.clone().or(r.delivery_event.clone());
                out.push(e);
            }
            None => {
                let mut e = ev(Kind::NoteSent, source);
                e.at = r.created_at.or(e.at);
                e.note_id = Some(r.note_id.clone());
                e.state = Some(r.state.to_string());
                e.text = Some(r.text.clone());
                e.detail = r.author.display.as_ref().map(|d| format!("from {d}")).map(|d| {
                    match r.undeliverable_reason.as_ref().or(r.delivery_event.as_ref()) {
                        Some(x) => format!("{d}; {x}"),
                        None => d,
                    }
                });
                out.push(e);
            }
        }
        known.insert(r.note_id.clone(), r.state.clone());
    }
    out
}

/// The end line's text: the notes it never read follow it.
fn ended_text(unread: usize) -> String {
    match unread {
        0 => "the session ended".into(),
        n => format!(
            "the session ended; {} it never showed {} (`preloop-hooks notes status ID` shows one whole)",
            preloop_shared::words::count(n, "note"),
            preloop_shared::words::noun_for(n, "follows", "follow")
        ),
    }
}

/// One `note_undelivered` event per note the session never showed, oldest
/// first, at the session's end, with its text and why (`session_ended`,
/// `spool_dropped`, `never_carried`).
fn never_shown_events(unread: &[Receipt], source: &'static str, end: Option<Timestamp>) -> Vec<Event> {
    let mut out: Vec<Event> = unread
        .iter()
        .map(|r| {
            let mut e = ev(Kind::NoteUndelivered, source);
            e.at = end.or(e.at);
            e.note_id = Some(r.note_id.clone());
            e.state = Some(r.state.to_string());
            e.text = Some(r.text.clone());
            e.detail = Some(r.never_shown_reason().to_string());
            e
        })
        .collect();
    out.reverse();
    out
}

fn ended_event(at: Option<Timestamp>, source: &'static str) -> Event {
    let mut e = ev(Kind::SessionEnded, source);
    e.at = at.or(e.at);
    e.text = Some("the session ended".into());
    e
}

fn activity_event(item: &ActivityItem, with_transcript: bool) -> Option<Event> {
    let kind = item.activity_type.as_str();
    let mut e = match kind {
        "tool_call" if with_transcript => return None,
        "tool_call" => {
            let mut e = ev(Kind::ToolCall, "timeline");
            e.tool = item.tool_name.clone().or(item.title.clone());
            // The server keeps only the sizes of the arguments.
            e.args =
                item.metadata.as_ref().and_then(|m| m.get("arguments_summary")).and_then(|s| s.as_object()).map(|o| {
                    let sizes: Vec<String> = o.iter().map(|(k, v)| format!("{k}: {v} chars")).collect();
                    format!("[{}]", sizes.join(", "))
                });
            e.state = item.status.clone();
            e
        }
        // Delivered notes: the receipts say so.
        "agent_control_message" => return None,
        // The end: the session's own `ended` line says it, once.
        "session_ended" | "session_end" => return None,
        "session_started" => {
            let mut e = ev(Kind::SessionStarted, "timeline");
            e.text = item.summary.clone();
            e
        }
        k if k.contains("model") || k.contains("request") || k.contains("gateway") || k.contains("llm") => {
            let mut e = ev(Kind::ModelCall, "timeline");
            e.text = item.summary.clone().or(item.title.clone());
            e
        }
        _ => {
            let mut e = ev(Kind::ServerEvent, "timeline");
            e.tool = Some(kind.to_string());
            e.text = item.summary.clone().or(item.title.clone());
            e
        }
    };
    e.at = item.timestamp.or(e.at);
    Some(e)
}

fn activity_key(i: &ActivityItem) -> String {
    i.activity_id
        .clone()
        .unwrap_or_else(|| format!("{}@{}", i.activity_type, i.timestamp.map(|t| t.0).unwrap_or_default()))
}

/// Follow the session on the operator's side: its activity timeline (the
/// server's; none on the local inbox), the receipts of its notes, the
/// approvals waiting on a human, and its end.
fn spawn_poller(
    op: Arc<dyn Operator>,
    s: SessionRef,
    with_transcript: bool,
    history: usize,
    tx: Sender<Msg>,
    shared: Arc<Shared>,
) {
    std::thread::spawn(move || {
        let pace = op.pace();
        let source = op.mode().receipts_source();
        let of = NotesOf::Session(s.clone());
        let receipts = || op.notes(&of, None).map(|r| receipt_events(&r, &shared, source)).unwrap_or_default();
        let mut seen: HashSet<String> = HashSet::new();
        let mut first = true;
        let mut approvals: Option<u64> = None;
        let mut warned = false;
        let mut caught = false;
        let send = |e: Event| tx.send(Msg::Event(e)).is_ok();
        loop {
            let mut events = Vec::new();
            match op.timeline(&s, 100) {
                Ok(items) => {
                    let mut items: Vec<ActivityItem> =
                        items.into_iter().filter(|i| !seen.contains(&activity_key(i))).collect();
                    items.reverse(); // oldest first
                    if first {
                        let skip = items.len().saturating_sub(history);
                        for i in items.drain(..skip) {
                            seen.insert(activity_key(&i));
                        }
                    }
                    for i in items {
                        seen.insert(activity_key(&i));
                        events.extend(activity_event(&i, with_transcript));
                    }
                }
                Err(e) if !warned => {
                    warned = true;
                    let mut x = ev(Kind::Info, "timeline");
                    x.text = Some(format!("the activity timeline cannot be read: {e}"));
                    events.push(x);
                }
                Err(_) => {}
            }
            events.extend(receipts());
            first = false;
            let mut ended = None;
            if let Ok(now) = op.session_now(&s) {
                if let Some(n) = now.pending_approvals {
                    if approvals != Some(n) && (n > 0 || approvals.is_some_and(|a| a > 0)) {
                        let mut e = ev(Kind::ApprovalWaiting, "session");
                        e.state = Some(n.to_string());
                        e.text = Some(if n == 0 {
                            "no approval waits on a human any more".into()
                        } else {
                            format!(
                                "{} waiting on a human",
                                preloop_shared::words::count(usize::try_from(n).unwrap_or(usize::MAX), "approval")
                            )
                        });
                        events.push(e);
                    }
                    approvals = Some(n);
                }
                ended = now.ended_at;
            }
            events.sort_by_key(|e| e.at);
            for e in events {
                if !send(e) {
                    return;
                }
            }
            if !caught {
                caught = true;
                let _ = tx.send(Msg::Caught);
            }
            if let Some(end) = ended {
                // The hooks' SessionEnd may still be settling receipts.
                std::thread::sleep(pace.settle);
                for e in receipts() {
                    send(e);
                }
                // A run's end names what it never read, with the text.
                let unread = notes::never_shown(op.as_ref(), &of, None).unwrap_or_default();
                let mut end_event = ended_event(Some(end), "session");
                end_event.text = Some(ended_text(unread.len()));
                send(end_event);
                for e in never_shown_events(&unread, source, Some(end)) {
                    send(e);
                }
                let _ = tx.send(Msg::Ended);
                return;
            }
            if !sleep_unless_stopped(&shared, pace.poll) {
                return;
            }
        }
    });
}

/// The attach socket (`ws://`, or `wss://` for an https server, with the
/// web PKI roots). Relays what arrives; answers nothing but pings.
fn spawn_socket(socket: Socket, tx: Sender<Msg>, shared: Arc<Shared>) {
    std::thread::spawn(move || {
        let info = |text: String| {
            let mut e = ev(Kind::Info, "socket");
            e.text = Some(text);
            let _ = tx.send(Msg::Event(e));
        };
        let mut ws = match connect_socket(&socket) {
            Ok(ws) => ws,
            Err(why) => {
                info(format!("the attach socket is not available ({why}); following the session over REST"));
                return;
            }
        };
        let mut last_ping = Instant::now();
        loop {
            if shared.stop.load(Ordering::SeqCst) {
                let _ = ws.close(None);
                return;
            }
            match ws.read() {
                Ok(tungstenite::Message::Text(t)) => {
                    let text = socket.clean(t.as_str());
                    let m: AttachMessage = serde_json::from_str(&text).unwrap_or_default();
                    let e = match m.kind.as_str() {
                        "pong" | "heartbeat" => None,
                        "attached" => {
                            let mut e = ev(Kind::Attached, "socket");
                            e.text =
                                Some("the server's attach socket is open (it relays the server's event bus)".into());
                            Some(e)
                        }
                        "error" => {
                            let mut e = ev(Kind::Info, "socket");
                            e.text = Some(format!(
                                "the attach socket refused: {} ({})",
                                m.error.unwrap_or_default(),
                                m.detail.unwrap_or_default()
                            ));
                            Some(e)
                        }
                        other => {
                            let mut e = ev(Kind::ServerEvent, "socket");
                            e.tool = Some(if other.is_empty() { "message".into() } else { other.to_string() });
                            e.text = Some(text.clone());
                            Some(e)
                        }
                    };
                    if let Some(e) = e
                        && tx.send(Msg::Event(e)).is_err()
                    {
                        return;
                    }
                }
                Ok(tungstenite::Message::Close(_)) => return,
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    if last_ping.elapsed() >= Duration::from_secs(30) {
                        last_ping = Instant::now();
                        let _ = ws.send(tungstenite::Message::text(r#"{"type":"ping"}"#));
                    }
                }
                Err(_) => return,
            }
        }
    });
}

type WebSocket = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<std::net::TcpStream>>;

fn connect_socket(socket: &Socket) -> std::result::Result<WebSocket, String> {
    let url = socket.url.as_str();
    use tungstenite::client::IntoClientRequest;
    let (tls, rest) = match url.split_once("://") {
        Some(("wss", r)) => (true, r),
        Some((_, r)) => (false, r),
        None => (false, url),
    };
    let authority = rest.split('/').next().unwrap_or("");
    let host_port = if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{authority}:{}", if tls { 443 } else { 80 })
    };
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&host_port)
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| "cannot resolve the server".to_string())?;
    let stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| preloop_shared::http::describe_io(&e))?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    // A handle on the same socket, to shorten its read timeout after the handshake.
    let same = stream.try_clone().map_err(|e| preloop_shared::http::describe_io(&e))?;
    let mut req = url.into_client_request().map_err(|e| e.to_string())?;
    let auth = format!("Bearer {}", socket.token.expose());
    req.headers_mut().insert(
        "Authorization",
        tungstenite::http::HeaderValue::from_str(&auth).map_err(|_| "unusable token".to_string())?,
    );
    let connector = if tls {
        let roots = rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tungstenite::Connector::Rustls(Arc::new(config))
    } else {
        tungstenite::Connector::Plain
    };
    let (ws, _) = tungstenite::client_tls_with_config(req, stream, None, Some(connector)).map_err(|e| match e {
        tungstenite::HandshakeError::Failure(f) => socket.clean(&f.to_string()),
        tungstenite::HandshakeError::Interrupted(_) => "the handshake timed out".into(),
    })?;
    let _ = same.set_read_timeout(Some(Duration::from_millis(500)));
    Ok(ws)
}

fn spawn_input(raw: bool, tx: Sender<Msg>, shared: Arc<Shared>) {
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        if raw {
            let mut b = [0u8; 1];
            let mut lock = stdin.lock();
            loop {
                match lock.read(&mut b) {
                    Ok(1) => {
                        if tx.send(Msg::Byte(b[0])).is_err() || shared.stop.load(Ordering::SeqCst) {
                            return;
                        }
                    }
                    _ => {
                        let _ = tx.send(Msg::InputClosed);
                        return;
                    }
                }
            }
        }
        for line in stdin.lock().lines() {
            match line {
                Ok(l) => {
                    if tx.send(Msg::Line(l)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(Msg::InputClosed);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// N17, P17: a model reply with no text (only tool calls, which follow
    /// as their own lines) is not a row for people; one with text is.
    #[test]
    fn a_model_call_without_text_is_not_shown_to_people() {
        let mut e = ev(Kind::ModelCall, "transcript");
        assert!(!shown_to_people(&e));
        e.text = Some("  ".into());
        assert!(!shown_to_people(&e));
        e.text = Some("Step one.".into());
        assert!(shown_to_people(&e));
        assert!(format_event(&e).ends_with("model       \"Step one.\""), "{}", format_event(&e));
    }

    #[test]
    fn events_print_on_one_safe_line() {
        let mut e = ev(Kind::ToolCall, "transcript");
        e.at = Timestamp::parse("2026-12-02T10:00:01Z");
        e.tool = Some("Bash".into());
        e.args = Some("echo \x1b[31mhi\nthere".into());
        assert_eq!(format_event(&e), "10:00:01Z  tool        Bash  echo \\e[31mhi there");
        let mut n = ev(Kind::NoteState, "receipts");
        n.at = e.at;
        n.note_id = Some("0123456789abcdef".into());
        n.state = Some("delivered".into());
        n.detail = Some("pre_tool_use".into());
        assert_eq!(format_event(&n), "10:00:01Z  note        0123456789abcdef  delivered  (pre_tool_use)");
    }

    /// #33 part 3: when the session ends, attach names the notes it never
    /// showed, with their text (escaped), after the end line, in both modes.
    #[test]
    fn the_end_names_the_notes_the_session_never_showed() {
        use crate::operator::Side;
        use crate::operator::memory::Memory;
        for mode in [Side::Local, Side::Server] {
            let mem = Memory::new(mode)
                .session("ext-1", "rt-1", 60)
                .note("00000000000000a1", "ext-1", ReceiptState::Pending, 30)
                .note("00000000000000a2", "ext-1", ReceiptState::Delivered, 20)
                .note("00000000000000a3", "ext-1", ReceiptState::Pending, 10)
                .undeliverable("00000000000000a1", "session_ended", 1)
                .never_carried("00000000000000a3");
            mem.end("ext-1");
            let op: Arc<dyn Operator> = Arc::new(mem);
            let s = op.find_session("ext-1").unwrap().unwrap();
            let shared = Arc::new(Shared { stop: AtomicBool::new(false), notes: Mutex::new(HashMap::new()) });
            let (tx, rx) = mpsc::channel();
            spawn_poller(op, s, false, 20, tx, shared.clone());
            let mut events = Vec::new();
            loop {
                match rx.recv_timeout(Duration::from_secs(10)).expect("the poller ends") {
                    Msg::Event(e) => events.push(e),
                    Msg::Ended => break,
                    _ => {}
                }
            }
            shared.stop.store(true, Ordering::SeqCst);
            let end = events.iter().position(|e| e.kind == Kind::SessionEnded).expect("an end event");
            assert!(events[end].text.as_deref().unwrap().contains("2 notes it never showed follow"), "{mode:?}");
            let after: Vec<(&str, &str)> = events[end + 1..]
                .iter()
                .map(|e| (e.note_id.as_deref().unwrap(), e.detail.as_deref().unwrap()))
                .collect();
            assert_eq!(
                after,
                [("00000000000000a1", "session_ended"), ("00000000000000a3", "never_carried")],
                "{mode:?}: oldest first, each with why"
            );
            assert!(events[end + 1..].iter().all(|e| e.kind == Kind::NoteUndelivered && e.text.is_some()));
        }
        let mut e = ev(Kind::NoteUndelivered, "inbox");
        e.at = Timestamp::parse("2026-12-02T10:00:01Z");
        e.note_id = Some("0123456789abcdef".into());
        e.state = Some("undeliverable".into());
        e.text = Some("Use \x1b[31mstaging\nnow".into());
        e.detail = Some("session_ended".into());
        assert_eq!(
            format_event(&e),
            "10:00:01Z  never read  0123456789abcdef  undeliverable  \"Use \\e[31mstaging now\"  (session_ended)"
        );
    }
}
