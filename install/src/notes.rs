//! `notes send|list|status|cancel` and `sessions list`: against the Preloop
//! server's human routes (server mode, user token) or the local inbox
//! (local mode), printed the same way.

use crate::server_op::{ServerOperator, ServerTarget};
use crate::util::{self, print_json, print_table};
use clap::{Args, Subcommand};
use preloop_shared::config::Config;
use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{Author, Receipt, SendRequest, Target};
use preloop_shared::session::{self, SessionFile};
use preloop_shared::time::{Timestamp, parse_duration_secs};
use preloop_shared::{Error, Harness, Result, fsutil};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum NotesCmd {
    /// Send a note to a running (or the next) session.
    #[command(after_help = SEND_EXAMPLES)]
    Send(SendArgs),
    /// List notes, newest first.
    #[command(
        after_help = "Examples:\n  preloop-hooks notes list --session 5a3e0c1e-…\n  preloop-hooks notes list --session 5a3e0c1e-… --state pending --json\n  preloop-hooks notes list --agent 0b0d… (server mode)"
    )]
    List(ListArgs),
    /// Show one note's receipt (state, channel, event, times).
    #[command(
        after_help = "Examples:\n  preloop-hooks notes status 3f2a9c0d1e4b5a6c\n  preloop-hooks notes status 3f2a9c0d1e4b5a6c --json | jq -r .state"
    )]
    Status(IdArgs),
    /// Withdraw a note that has not been delivered yet.
    #[command(
        after_help = "Example:\n  preloop-hooks notes cancel 3f2a9c0d1e4b5a6c\n\nOnly a pending note can be cancelled; any other state is shown unchanged and the command exits 1."
    )]
    Cancel(IdArgs),
}

const SEND_EXAMPLES: &str = "Examples:
  preloop-hooks notes send --session 5a3e0c1e-… \"Stop refactoring the tests, ship the fix.\"
  preloop-hooks notes send --alias worker-1 --expires-in 2h \"Deploy to eu-west-1.\"
  preloop-hooks notes send --next claude-code \"Run the checks first.\"
  preloop-hooks notes send --agent 0b0d… \"The deadline moved.\"     (server mode)
  preloop-hooks notes send --session 5a3e… --wait 5m \"Run the final checks.\"
  cat <<'NOTE' | preloop-hooks notes send --session 5a3e…
  Two things:
  1. the cluster is eu-west-1
  2. do not touch the tests
  NOTE

Name exactly one target. --json prints the note id and target only (with
--wait: the final receipt). --wait exit codes: 0 delivered, 3 undeliverable,
expired or cancelled, 4 still not delivered when the time ran out, 1 any
other error.";

#[derive(Subcommand)]
pub enum SessionsCmd {
    /// List sessions, newest first.
    #[command(
        after_help = "Examples:\n  preloop-hooks sessions list\n  preloop-hooks sessions list --active -o id | head -1 | xargs -I{} preloop-hooks notes send --session {} \"Ship it.\"\n  preloop-hooks sessions list --agent 0b0d… --json   (server mode: the agent's live sessions)\n\nSTATE: live (a hook ran in the last 15 minutes), idle, ended."
    )]
    List(SessionsArgs),
}

#[derive(Args)]
#[group(id = "target", required = true, multiple = false)]
pub struct TargetArgs {
    /// A harness session id (Claude Code session_id, Codex session id, Cursor conversation_id).
    #[arg(long, group = "target", value_name = "ID")]
    session: Option<String>,
    /// The alias a session was started with (PRELOOP_SESSION_ALIAS).
    #[arg(long, group = "target", value_name = "NAME")]
    alias: Option<String>,
    /// The next session of a harness (claude-code, codex, cursor) that starts after this note.
    #[arg(long, group = "target", value_name = "HARNESS")]
    next: Option<String>,
    /// A managed agent (server mode): its current session, or the next one it opens.
    #[arg(long, group = "target", value_name = "ID")]
    agent: Option<String>,
    /// A runtime session id.
    #[arg(long = "runtime-session", group = "target", value_name = "ID", hide = true)]
    runtime_session: Option<String>,
    /// The current or next session of a harness (older spelling; see --next).
    #[arg(long, group = "target", value_name = "HARNESS", hide = true)]
    harness: Option<String>,
}

#[derive(Args)]
pub struct SendArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// With --agent (or --harness): only a session started after this note may take it.
    #[arg(long)]
    next_session: bool,
    /// How long the note stays deliverable (90s, 15m, 2h, 1d; 60s to 7d; default 24h).
    #[arg(long, value_name = "DURATION")]
    expires_in: Option<String>,
    /// Wait up to DURATION for delivery (exit 0 delivered, 3 undeliverable/expired, 4 timeout).
    #[arg(long, value_name = "DURATION")]
    wait: Option<String>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    /// Who the note is from (local inbox only; default $USER).
    #[arg(long, value_name = "NAME")]
    from: Option<String>,
    /// The note. Read from stdin when absent (heredocs and pipes work).
    text: Option<String>,
}

#[derive(Args)]
pub struct ListArgs {
    /// Notes for this harness session id.
    #[arg(long, value_name = "ID", conflicts_with = "agent")]
    session: Option<String>,
    /// Notes for this managed agent (server mode).
    #[arg(long, value_name = "ID")]
    agent: Option<String>,
    #[arg(long = "runtime-session", value_name = "ID", hide = true, conflicts_with_all = ["session", "agent"])]
    runtime_session: Option<String>,
    /// Only notes in this state: pending, claimed, delivered, expired, cancelled, undeliverable.
    #[arg(long)]
    state: Option<String>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct IdArgs {
    /// The note id (16 hex characters).
    note_id: String,
    /// Print the receipt as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct SessionsArgs {
    /// Only sessions that have not ended.
    #[arg(long)]
    active: bool,
    /// Server mode: the live sessions the server knows for this agent.
    #[arg(long, value_name = "ID")]
    agent: Option<String>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    /// `id`: only the session ids, one per line.
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    output: Option<String>,
}

/// Where operator commands go.
pub enum Backend {
    Local(LocalInbox),
    Server(ServerOperator),
}

pub fn backend(config: &Config) -> Result<Backend> {
    Ok(match ServerOperator::from_config(config)? {
        Some(s) => Backend::Server(s),
        None => Backend::Local(LocalInbox::new(&config.home, config.settings.note_ttl_secs)),
    })
}

fn harness_arg(h: &str) -> Result<Harness> {
    Harness::from_slug(h)
        .ok_or_else(|| Error::Usage(format!("unknown harness {h:?}: use claude-code, codex or cursor")))
}

fn duration_arg(d: &str) -> Result<i64> {
    parse_duration_secs(d)
        .filter(|s| *s > 0)
        .ok_or_else(|| Error::Usage(format!("bad duration {d:?} (e.g. 90s, 15m, 2h, 1d)")))
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
            if name.len() == 36 && name.bytes().filter(|b| *b == b'-').count() == 4 {
                return Some(name);
            }
        }
    }
    std::env::var("PRELOOP_AGENT_ID").ok().filter(|s| !s.is_empty())
}

pub fn run_notes(cmd: NotesCmd) -> Result<()> {
    let config = Config::load(None);
    match cmd {
        NotesCmd::Send(a) => send(&config, a),
        NotesCmd::List(a) => list(&config, a),
        NotesCmd::Status(a) => {
            let r = match backend(&config)? {
                Backend::Local(ib) => ib.status(&a.note_id)?,
                Backend::Server(s) => s.get(&a.note_id)?,
            };
            if a.json {
                print_json(&r)
            } else {
                print_receipt(&r)
            }
            Ok(())
        }
        NotesCmd::Cancel(a) => {
            let r = match backend(&config)? {
                Backend::Local(ib) => ib.cancel(&a.note_id)?,
                Backend::Server(s) => s.cancel(&a.note_id)?,
            };
            if a.json {
                print_json(&r);
            }
            if r.state != "cancelled" {
                return Err(Error::Refused(format!(
                    "note {} is {}; only a pending note can be cancelled",
                    r.note_id, r.state
                )));
            }
            if !a.json {
                println!("cancelled {}", r.note_id);
            }
            Ok(())
        }
    }
}

fn send(config: &Config, a: SendArgs) -> Result<()> {
    let t = a.target;
    let expires_in_secs = a.expires_in.as_deref().map(duration_arg).transpose()?;
    let wait = a.wait.as_deref().map(duration_arg).transpose()?;
    let next_h = t.next.as_deref().map(harness_arg).transpose()?;
    let old_h = t.harness.as_deref().map(harness_arg).transpose()?;
    if a.next_session && t.agent.is_none() && old_h.is_none() {
        return Err(Error::Usage("--next-session goes with --agent (or use --next HARNESS)".into()));
    }
    let backend = backend(config)?;
    // Resolve the target before reading the body, so a bad target never waits on stdin.
    let server_target = match &backend {
        Backend::Local(_) => {
            if t.agent.is_some() {
                return Err(Error::Usage(
                    "--agent needs server mode (preloop-hooks login); in local mode use --session, --alias or --next"
                        .into(),
                ));
            }
            None
        }
        Backend::Server(_) => Some(if let Some(s) = &t.session {
            ServerTarget::ExternalSession(s.clone())
        } else if let Some(al) = &t.alias {
            ServerTarget::Alias(al.clone())
        } else if let Some(r) = &t.runtime_session {
            ServerTarget::RuntimeSession(r.clone())
        } else if let Some(id) = &t.agent {
            ServerTarget::Agent { agent_id: id.clone(), next_session: a.next_session }
        } else {
            let h = next_h.or(old_h).ok_or_else(|| Error::Usage("name exactly one target".into()))?;
            let agent_id = agent_for(&config.home, h).ok_or_else(|| {
                Error::Config(format!("no managed agent is known for {} on this machine (Preloop onboarding file or PRELOOP_AGENT_ID); use --agent ID", h.slug()))
            })?;
            ServerTarget::Agent { agent_id, next_session: next_h.is_some() || a.next_session }
        }),
    };
    let text = match a.text {
        Some(t) => t,
        None => {
            if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                eprintln!("reading the note from stdin; end it with Ctrl-D");
            }
            util::read_stdin("the note")?
        }
    };
    if text.is_empty() {
        return Err(Error::Usage("the note is empty (pass it as the last argument or on stdin)".into()));
    }
    let (receipt, target_json) = match &backend {
        Backend::Local(ib) => {
            let target = if let Some(s) = &t.session {
                Target::Session(s.clone())
            } else if let Some(al) = &t.alias {
                Target::Alias(al.clone())
            } else if let Some(r) = &t.runtime_session {
                Target::RuntimeSession(r.clone())
            } else if let Some(h) = next_h.or(old_h) {
                Target::Harness(h)
            } else {
                return Err(Error::Usage("name exactly one target".into()));
            };
            let display = a
                .from
                .clone()
                .or_else(|| std::env::var("USER").ok())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "local operator".into());
            let req = SendRequest {
                text,
                target: target.clone(),
                next_session: next_h.is_some() || a.next_session,
                expires_in_secs,
                author: Author { display: Some(display), auth_method: Some("local".into()), ..Author::default() },
            };
            let r = ib.send(&req)?;
            let tj = match &target {
                Target::Session(s) => json!({"session": s}),
                Target::Alias(al) => json!({"alias": al, "session": r.external_session_id}),
                Target::RuntimeSession(id) => json!({"runtime_session": id, "session": r.external_session_id}),
                Target::Harness(h) => json!({"harness": h.slug(), "next_session": r.next_session}),
            };
            if !a.json
                && wait.is_none()
                && let Target::Session(s) = &target
                && session::read_session_file(&config.home, s).ok().flatten().is_none()
            {
                eprintln!("note: no session {s} has started on this machine yet; the note waits for it");
            }
            (r, tj)
        }
        Backend::Server(s) => {
            let st = server_target.as_ref().ok_or_else(|| Error::Usage("name exactly one target".into()))?;
            let r = s.send(&text, st, expires_in_secs)?;
            let tj = match st {
                ServerTarget::ExternalSession(x) => json!({"session": x, "runtime_session_id": r.runtime_session_id}),
                ServerTarget::Alias(x) => json!({"alias": x, "runtime_session_id": r.runtime_session_id}),
                ServerTarget::RuntimeSession(x) => json!({"runtime_session_id": x}),
                ServerTarget::Agent { agent_id, next_session } => {
                    json!({"agent": agent_id, "next_session": next_session, "runtime_session_id": r.runtime_session_id})
                }
            };
            (r, tj)
        }
    };
    let Some(wait) = wait else {
        if a.json {
            print_json(&json!({"note_id": receipt.note_id, "target": target_json}));
        } else {
            println!("{} {} for {}", receipt.note_id, receipt.state, to_of(&receipt));
        }
        return Ok(());
    };
    if !a.json {
        eprintln!("{} sent to {}; waiting up to {} for delivery…", receipt.note_id, to_of(&receipt), human_secs(wait));
    }
    let poll = match backend {
        Backend::Local(_) => Duration::from_millis(500),
        Backend::Server(_) => Duration::from_secs(2),
    };
    let deadline = Instant::now() + Duration::from_secs(wait as u64);
    let mut last = receipt;
    loop {
        let now_done = last.is_delivered() || last.is_lost();
        if now_done || Instant::now() >= deadline {
            if a.json {
                print_json(&last)
            } else {
                print_receipt(&last)
            }
            if last.is_delivered() {
                return Ok(());
            }
            if last.is_lost() {
                return Err(Error::Undelivered(format!(
                    "note {} is {}{}",
                    last.note_id,
                    last.state,
                    last.undeliverable_reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
                )));
            }
            return Err(Error::WaitTimeout(format!(
                "note {} is still {} after {}",
                last.note_id,
                last.state,
                human_secs(wait)
            )));
        }
        std::thread::sleep(poll.min(deadline.saturating_duration_since(Instant::now())).max(Duration::from_millis(50)));
        let polled = match &backend {
            Backend::Local(ib) => ib.status(&last.note_id),
            Backend::Server(s) => s.get(&last.note_id),
        };
        match polled {
            Ok(r) => last = r,
            // A passing network failure: keep polling until the deadline.
            Err(Error::Unreachable { .. }) if Instant::now() < deadline => {}
            Err(e) => return Err(e),
        }
    }
}

fn list(config: &Config, a: ListArgs) -> Result<()> {
    let notes: Vec<Receipt> = match backend(config)? {
        Backend::Local(ib) => {
            if a.agent.is_some() {
                return Err(Error::Usage("--agent needs server mode; in local mode list by --session".into()));
            }
            ib.list()?
                .into_iter()
                .filter(|n| a.session.as_ref().is_none_or(|s| n.external_session_id.as_ref() == Some(s)))
                .filter(|n| a.runtime_session.as_ref().is_none_or(|s| n.runtime_session_id.as_ref() == Some(s)))
                .filter(|n| a.state.as_ref().is_none_or(|s| &n.state == s))
                .collect()
        }
        Backend::Server(s) => {
            let mut q: Vec<(&str, String)> = Vec::new();
            if let Some(id) = &a.agent {
                q.push(("agent_id", id.clone()));
            } else if let Some(r) = &a.runtime_session {
                q.push(("runtime_session_id", r.clone()));
            } else if let Some(ext) = &a.session {
                let file = session::read_session_file(&config.home, ext)?.ok_or_else(|| {
                    Error::NotFound(format!("session {ext} has not started on this machine, so its runtime id is unknown; list by --agent instead"))
                })?;
                q.push(("runtime_session_id", file.runtime_session_id));
            } else {
                return Err(Error::Usage("name --session or --agent".into()));
            }
            if let Some(st) = &a.state {
                q.push(("state", st.clone()));
            }
            q.push(("limit", "200".into()));
            s.list(&q)?
        }
    };
    if a.json {
        print_json(&json!({"notes": notes, "total": notes.len()}));
    } else if notes.is_empty() {
        println!("no notes");
    } else {
        let rows: Vec<Vec<String>> = notes
            .iter()
            .map(|n| {
                vec![n.note_id.clone(), n.state.clone(), short_time(n.created_at), to_of(n), one_line(&n.text, 60)]
            })
            .collect();
        print_table(&["ID", "STATE", "CREATED", "TO", "TEXT"], &rows);
    }
    Ok(())
}

/// One row of `sessions list`.
#[derive(Debug, Clone, Serialize)]
pub struct SessionRow {
    pub runtime_session_id: String,
    pub external_session_id: Option<String>,
    pub alias: Option<String>,
    pub agent_kind: Option<String>,
    pub harness: Option<String>,
    pub cwd: Option<String>,
    pub title: Option<String>,
    pub parent_session_id: Option<String>,
    pub started_at: Option<Timestamp>,
    pub last_activity_at: Option<Timestamp>,
    pub ended_at: Option<Timestamp>,
    /// `live`, `idle` or `ended`.
    pub state: String,
}

/// A session with no hook activity for this long is idle.
pub const IDLE_AFTER_SECS: i64 = 15 * 60;

/// The last hook invocation per harness session id, from the hook log.
pub fn last_activity(home: &Path) -> HashMap<String, Timestamp> {
    let mut out: HashMap<String, Timestamp> = HashMap::new();
    for name in ["hooks.log.1", "hooks.log"] {
        let Ok(text) = std::fs::read_to_string(home.join("log").join(name)) else { continue };
        for line in text.lines() {
            let Some(t) = line.split(' ').next().and_then(Timestamp::parse) else { continue };
            let Some(sid) = line.split(' ').find_map(|w| w.strip_prefix("session=")).filter(|s| *s != "-") else {
                continue;
            };
            let e = out.entry(sid.to_string()).or_insert(t);
            if t > *e {
                *e = t;
            }
        }
    }
    out
}

pub fn session_rows(home: &Path) -> Vec<SessionRow> {
    let activity = last_activity(home);
    let now = Timestamp::now();
    let mut rows: Vec<SessionRow> = session::all_session_files(home)
        .into_iter()
        .map(|f| row_of(&f, activity.get(&f.external_session_id).copied(), now))
        .collect();
    rows.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(b.last_activity_at.cmp(&a.last_activity_at)));
    rows
}

fn row_of(f: &SessionFile, logged: Option<Timestamp>, now: Timestamp) -> SessionRow {
    let last = [Some(f.started_at), f.last_prompt_at, f.ended_at, logged].into_iter().flatten().max();
    let state = if f.ended_at.is_some() {
        "ended"
    } else if last.is_some_and(|t| now.secs() - t.secs() <= IDLE_AFTER_SECS) {
        "live"
    } else {
        "idle"
    };
    SessionRow {
        runtime_session_id: f.runtime_session_id.clone(),
        external_session_id: Some(f.external_session_id.clone()),
        alias: f.alias.clone(),
        agent_kind: Some(f.agent_kind.clone()),
        harness: Harness::from_source(&f.agent_kind).map(|h| h.slug().to_string()),
        cwd: f.cwd.clone(),
        title: f.title.clone(),
        parent_session_id: f.parent_session_id.clone(),
        started_at: Some(f.started_at),
        last_activity_at: last,
        ended_at: f.ended_at,
        state: state.into(),
    }
}

pub fn run_sessions(cmd: SessionsCmd) -> Result<()> {
    let config = Config::load(None);
    let SessionsCmd::List(a) = cmd;
    match a.output.as_deref() {
        None | Some("id") | Some("table") => {}
        Some(other) => return Err(Error::Usage(format!("unknown output format {other:?} (id, table)"))),
    }
    let local = session_rows(&config.home);
    let mut rows = match (&a.agent, backend(&config)?) {
        (None, _) => local,
        (Some(_), Backend::Local(_)) => {
            return Err(Error::Usage("--agent needs server mode (preloop-hooks login)".into()));
        }
        (Some(agent), Backend::Server(s)) => {
            let now = Timestamp::now();
            s.session_targets(agent)?
                .into_iter()
                .map(|t| {
                    let id = t.get("id").and_then(Value::as_str).unwrap_or("").to_string();
                    let mine = local.iter().find(|r| r.runtime_session_id == id).cloned();
                    mine.unwrap_or_else(|| {
                        let started = t.get("started_at").and_then(Value::as_str).and_then(Timestamp::parse);
                        SessionRow {
                            runtime_session_id: id,
                            external_session_id: None,
                            alias: t.get("alias").and_then(Value::as_str).map(str::to_string),
                            agent_kind: t.get("session_source_type").and_then(Value::as_str).map(str::to_string),
                            harness: None,
                            cwd: None,
                            title: t.get("session_reference").and_then(Value::as_str).map(str::to_string),
                            parent_session_id: None,
                            started_at: started,
                            last_activity_at: started,
                            ended_at: None,
                            state: if started.is_some_and(|s| now.secs() - s.secs() <= IDLE_AFTER_SECS) {
                                "live".into()
                            } else {
                                "idle".into()
                            },
                        }
                    })
                })
                .collect()
        }
    };
    if a.active {
        rows.retain(|r| r.state != "ended");
    }
    if a.output.as_deref() == Some("id") {
        for r in &rows {
            println!("{}", r.external_session_id.as_deref().unwrap_or(&r.runtime_session_id));
        }
        return Ok(());
    }
    if a.json {
        print_json(&json!({"sessions": rows, "total": rows.len()}));
        return Ok(());
    }
    if rows.is_empty() {
        println!("no sessions");
        return Ok(());
    }
    let now = Timestamp::now();
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.external_session_id.clone().unwrap_or_else(|| r.runtime_session_id.clone()),
                r.harness.clone().or_else(|| r.agent_kind.clone()).unwrap_or_else(|| "-".into()),
                ago(r.started_at, now),
                ago(r.last_activity_at, now),
                r.state.clone(),
                r.alias.clone().unwrap_or_else(|| "-".into()),
                one_line(r.cwd.as_deref().or(r.title.as_deref()).unwrap_or("-"), 60),
            ]
        })
        .collect();
    print_table(&["SESSION", "HARNESS", "STARTED", "LAST ACTIVITY", "STATE", "ALIAS", "CWD"], &table);
    Ok(())
}

pub fn print_receipt(r: &Receipt) {
    let mut rows: Vec<(&str, String)> = vec![
        ("note", r.note_id.clone()),
        ("state", r.state.clone()),
        ("to", to_of(r)),
        ("created", short_time(r.created_at)),
    ];
    if let Some(t) = r.expires_at {
        rows.push(("expires", short_time(Some(t))));
    }
    if let Some(c) = &r.delivery_channel {
        rows.push(("channel", format!("{c} ({})", r.delivery_event.as_deref().unwrap_or("-"))));
    }
    if let Some(t) = r.claimed_at {
        rows.push(("claimed", short_time(Some(t))));
    }
    if let Some(t) = r.delivered_at {
        rows.push(("delivered", short_time(Some(t))));
    }
    if let Some(t) = r.undeliverable_at {
        rows.push((
            "undeliverable",
            format!("{} ({})", short_time(Some(t)), r.undeliverable_reason.as_deref().unwrap_or("-")),
        ));
    }
    if let Some(t) = r.expired_at {
        rows.push(("expired", short_time(Some(t))));
    }
    if let Some(t) = r.cancelled_at {
        rows.push(("cancelled", short_time(Some(t))));
    }
    if let Some(d) = &r.author.display {
        rows.push(("from", format!("{d} ({})", r.author.auth_method.as_deref().unwrap_or("-"))));
    }
    for (k, v) in rows {
        println!("{k:<14}{v}");
    }
}

pub fn to_of(r: &Receipt) -> String {
    match (&r.external_session_id, &r.harness, &r.runtime_session_id, &r.managed_agent_id) {
        (Some(s), _, _, _) => format!("session {s}"),
        (None, Some(h), _, _) if r.next_session => format!("next {h} session"),
        (None, Some(h), _, _) => format!("{h} (current or next)"),
        (None, None, Some(rs), _) => format!("runtime session {rs}"),
        (None, None, None, Some(a)) if r.next_session => format!("agent {a} (next session)"),
        (None, None, None, Some(a)) => format!("agent {a}"),
        _ => "-".into(),
    }
}

pub fn short_time(t: Option<Timestamp>) -> String {
    t.map(|t| t.to_iso_z().chars().take(19).collect::<String>().replace('T', " ") + "Z").unwrap_or_else(|| "-".into())
}

fn ago(t: Option<Timestamp>, now: Timestamp) -> String {
    let Some(t) = t else { return "-".into() };
    let s = (now.secs() - t.secs()).max(0);
    match s {
        0..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86_399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

fn human_secs(s: i64) -> String {
    if s % 3600 == 0 && s >= 3600 {
        format!("{}h", s / 3600)
    } else if s % 60 == 0 && s >= 60 {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

pub fn one_line(s: &str, max: usize) -> String {
    let l = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if l.chars().count() > max { format!("{}…", l.chars().take(max - 1).collect::<String>()) } else { l }
}
