//! `notes send|list|status|cancel` and `sessions list`, against the local
//! inbox (no server configured) or the Preloop server.

use clap::{Args, Subcommand};
use preloop_shared::config::Config;
use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{Author, Receipt, SendRequest, SessionSummary, Target};
use preloop_shared::time::{parse_duration_secs, Timestamp};
use preloop_shared::{Error, Harness, Result};
use std::io::Read;
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum NotesCmd {
    /// Send a note to a session (the body is the argument, or stdin).
    Send(SendArgs),
    /// List notes, newest first.
    List(ListArgs),
    /// Show one note's receipt.
    Status(StatusArgs),
    /// Withdraw a note that has not been delivered.
    Cancel(IdArgs),
}

#[derive(Subcommand)]
pub enum SessionsCmd {
    /// List sessions, most recently started first.
    List(SessionsArgs),
}

#[derive(Args)]
#[group(id = "target", required = true, multiple = false)]
pub struct TargetArgs {
    /// The harness session id (Claude Code session_id, Codex session id, Cursor conversation_id).
    #[arg(long, group = "target")]
    session: Option<String>,
    /// The alias a session was started with (PRELOOP_SESSION_ALIAS).
    #[arg(long, group = "target")]
    alias: Option<String>,
    /// A runtime session id (from `sessions list` or the session file).
    #[arg(long = "runtime-session", group = "target")]
    runtime_session: Option<String>,
    /// The current or next session of a harness: claude-code, codex or cursor.
    #[arg(long, group = "target")]
    harness: Option<String>,
}

#[derive(Args)]
pub struct SendArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// With --harness: only a session started after this note may take it.
    #[arg(long)]
    next_session: bool,
    /// How long the note stays deliverable (e.g. 90s, 15m, 2h, 1d; default 24h).
    #[arg(long, value_name = "DURATION")]
    expires_in: Option<String>,
    /// Wait up to DURATION for a terminal receipt (exit 0 delivered, 3 undeliverable or expired, 4 timeout).
    #[arg(long, value_name = "DURATION")]
    wait: Option<String>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    /// Who the note is from (local inbox; default: $USER).
    #[arg(long, value_name = "NAME")]
    from: Option<String>,
    /// The note. Read from stdin when absent.
    text: Option<String>,
}

#[derive(Args)]
pub struct ListArgs {
    /// Only notes for this harness session id.
    #[arg(long)]
    session: Option<String>,
    /// Only notes in this state (pending, claimed, delivered, expired, cancelled, undeliverable).
    #[arg(long)]
    state: Option<String>,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct StatusArgs {
    note_id: String,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct IdArgs {
    note_id: String,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct SessionsArgs {
    /// Only live sessions.
    #[arg(long)]
    active: bool,
    #[arg(long)]
    json: bool,
    /// `id`: print only the harness session ids, one per line.
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    output: Option<String>,
}

fn inbox(config: &Config) -> Result<LocalInbox> {
    if let Some(server) = &config.server {
        return Err(Error::Config(format!(
            "a Preloop server is configured ({}); operator commands against the server need `preloop-hooks login` (not available in this build). Unset it to use the local inbox.",
            server.origin
        )));
    }
    Ok(LocalInbox::new(&config.home, config.settings.note_ttl_secs))
}

fn print_json<T: serde::Serialize>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

pub fn run_notes(cmd: NotesCmd) -> Result<()> {
    let config = Config::load(None);
    match cmd {
        NotesCmd::Send(a) => send(&config, a),
        NotesCmd::List(a) => {
            let ib = inbox(&config)?;
            let notes: Vec<Receipt> = ib
                .list()?
                .into_iter()
                .filter(|n| a.session.as_ref().is_none_or(|s| n.external_session_id.as_ref() == Some(s)))
                .filter(|n| a.state.as_ref().is_none_or(|s| &n.state == s))
                .collect();
            if a.json {
                print_json(&serde_json::json!({"notes": notes, "total": notes.len()}));
            } else if notes.is_empty() {
                println!("no notes");
            } else {
                println!("{:<16}  {:<13}  {:<20}  {:<24}  TEXT", "ID", "STATE", "CREATED", "TO");
                for n in &notes {
                    println!("{:<16}  {:<13}  {:<20}  {:<24}  {}", n.note_id, n.state, short_time(n.created_at), to_of(n), one_line(&n.text, 60));
                }
            }
            Ok(())
        }
        NotesCmd::Status(a) => {
            let r = inbox(&config)?.status(&a.note_id)?;
            if a.json { print_json(&r) } else { print_receipt(&r) }
            Ok(())
        }
        NotesCmd::Cancel(a) => {
            let r = inbox(&config)?.cancel(&a.note_id)?;
            if a.json {
                print_json(&r);
            }
            if r.state != "cancelled" {
                return Err(Error::Refused(format!("note {} is {}; only a pending note can be cancelled", r.note_id, r.state)));
            }
            if !a.json {
                println!("cancelled {}", r.note_id);
            }
            Ok(())
        }
    }
}

fn send(config: &Config, a: SendArgs) -> Result<()> {
    let ib = inbox(config)?;
    let text = match a.text {
        Some(t) => t,
        None => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).map_err(|e| Error::io("read the note from stdin", e))?;
            s.strip_suffix('\n').map(str::to_string).unwrap_or(s)
        }
    };
    let t = a.target;
    let target = if let Some(s) = t.session {
        Target::Session(s)
    } else if let Some(al) = t.alias {
        Target::Alias(al)
    } else if let Some(r) = t.runtime_session {
        Target::RuntimeSession(r)
    } else if let Some(h) = t.harness {
        Target::Harness(Harness::from_slug(&h).ok_or_else(|| Error::Usage(format!("unknown harness {h:?}: use claude-code, codex or cursor")))?)
    } else {
        return Err(Error::Usage("name exactly one of --session, --alias, --runtime-session or --harness".into()));
    };
    let expires_in_secs = match a.expires_in.as_deref() {
        Some(d) => Some(parse_duration_secs(d).ok_or_else(|| Error::Usage(format!("bad duration {d:?}")))?),
        None => None,
    };
    let wait = match a.wait.as_deref() {
        Some(d) => Some(parse_duration_secs(d).filter(|s| *s > 0).ok_or_else(|| Error::Usage(format!("bad duration {d:?}")))?),
        None => None,
    };
    let display = a.from.or_else(|| std::env::var("USER").ok()).filter(|s| !s.is_empty()).unwrap_or_else(|| "local operator".into());
    let req = SendRequest {
        text,
        target: target.clone(),
        next_session: a.next_session,
        expires_in_secs,
        author: Author { display: Some(display), auth_method: Some("local".into()), ..Author::default() },
    };
    let r = ib.send(&req)?;
    let Some(wait) = wait else {
        if a.json {
            print_json(&serde_json::json!({"note_id": r.note_id, "target": target_json(&target, &r), "state": r.state}));
        } else {
            println!("{} pending for {}", r.note_id, to_of(&r));
            if let Target::Session(s) = &target {
                if preloop_shared::session::read_session_file(&config.home, s).ok().flatten().is_none() {
                    eprintln!("note: no session {s} has started on this machine yet; the note waits for it");
                }
            }
        }
        return Ok(());
    };
    let deadline = Instant::now() + Duration::from_secs(wait as u64);
    loop {
        let r = ib.status(&r.note_id)?;
        if r.is_delivered() || r.is_lost() || Instant::now() >= deadline {
            if a.json { print_json(&r) } else { print_receipt(&r) }
            if r.is_delivered() {
                return Ok(());
            }
            if r.is_lost() {
                return Err(Error::Undelivered(format!("note {} is {}", r.note_id, r.state)));
            }
            return Err(Error::WaitTimeout(format!("note {} still {} after {wait}s", r.note_id, r.state)));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn target_json(t: &Target, r: &Receipt) -> serde_json::Value {
    match t {
        Target::Session(s) => serde_json::json!({"session": s}),
        Target::Alias(a) => serde_json::json!({"alias": a, "session": r.external_session_id}),
        Target::RuntimeSession(id) => serde_json::json!({"runtime_session": id, "session": r.external_session_id}),
        Target::Harness(h) => serde_json::json!({"harness": h.slug(), "next_session": r.next_session}),
    }
}

pub fn run_sessions(cmd: SessionsCmd) -> Result<()> {
    let config = Config::load(None);
    let SessionsCmd::List(a) = cmd;
    let rows: Vec<SessionSummary> = inbox(&config)?.sessions().into_iter().filter(|s| !a.active || s.state == "live").collect();
    match a.output.as_deref() {
        Some("id") => {
            for s in &rows {
                println!("{}", s.external_session_id.as_deref().unwrap_or(&s.runtime_session_id));
            }
            return Ok(());
        }
        Some(other) if other != "table" => return Err(Error::Usage(format!("unknown output format {other:?} (id, table)"))),
        _ => {}
    }
    if a.json {
        print_json(&serde_json::json!({"sessions": rows, "total": rows.len()}));
        return Ok(());
    }
    if rows.is_empty() {
        println!("no sessions");
        return Ok(());
    }
    println!("{:<36}  {:<12}  {:<20}  {:<6}  {:<12}  TITLE", "SESSION", "KIND", "STARTED", "STATE", "ALIAS");
    for s in &rows {
        println!(
            "{:<36}  {:<12}  {:<20}  {:<6}  {:<12}  {}",
            s.external_session_id.as_deref().unwrap_or("-"),
            s.agent_kind.as_deref().unwrap_or("-"),
            short_time(s.started_at),
            s.state,
            s.alias.as_deref().unwrap_or("-"),
            one_line(s.title.as_deref().or(s.cwd.as_deref()).unwrap_or(""), 50)
        );
    }
    Ok(())
}

fn print_receipt(r: &Receipt) {
    println!("note     {}", r.note_id);
    println!("state    {}", r.state);
    println!("to       {}", to_of(r));
    println!("created  {}", short_time(r.created_at));
    if let Some(t) = r.delivered_at {
        println!("delivered {} via {} at {}", short_time(Some(t)), r.delivery_channel.as_deref().unwrap_or("-"), r.delivery_event.as_deref().unwrap_or("-"));
    } else if let Some(t) = r.claimed_at {
        println!("claimed  {} ({})", short_time(Some(t)), r.delivery_event.as_deref().unwrap_or("-"));
    }
    if let Some(t) = r.undeliverable_at {
        println!("undeliverable {} ({})", short_time(Some(t)), r.undeliverable_reason.as_deref().unwrap_or("-"));
    }
    if let Some(t) = r.expired_at {
        println!("expired  {}", short_time(Some(t)));
    }
    if let Some(t) = r.cancelled_at {
        println!("cancelled {}", short_time(Some(t)));
    }
}

fn to_of(r: &Receipt) -> String {
    match (&r.external_session_id, &r.harness) {
        (Some(s), _) => format!("session {s}"),
        (None, Some(h)) if r.next_session => format!("next {h} session"),
        (None, Some(h)) => format!("{h} (current or next)"),
        _ => r.runtime_session_id.clone().unwrap_or_else(|| "-".into()),
    }
}

fn short_time(t: Option<Timestamp>) -> String {
    t.map(|t| t.to_iso_z().chars().take(19).collect::<String>().replace('T', " ")).unwrap_or_else(|| "-".into())
}

fn one_line(s: &str, max: usize) -> String {
    let l = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if l.chars().count() > max { format!("{}…", l.chars().take(max - 1).collect::<String>()) } else { l }
}
