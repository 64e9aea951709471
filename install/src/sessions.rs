//! `sessions list` and `sessions attach`: find the run to steer and watch
//! it, on the server (across the account, filters applied by the server) or
//! on the local inbox (over this machine's session files).

use crate::operator::{NotesOf, Operator, SessionRef, ids};
use crate::ops::Ops;
use crate::output::{self, ago, clip};
use crate::transcript;
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};
use preloop_shared::operator::{JSON_SCHEMA_VERSION, SessionFilter, SessionRow};
use preloop_shared::time::Timestamp;
use preloop_shared::{Error, Harness, Result};
use serde::Serialize;

#[derive(Subcommand)]
pub enum SessionsCmd {
    /// List sessions, most recently active first.
    #[command(after_help = LIST_HELP)]
    List(ListArgs),
    /// Watch one session live and steer it: what it does, and a line that sends a note.
    #[command(after_help = crate::attach::HELP)]
    Attach(crate::attach::AttachArgs),
}

const LIST_HELP: &str = "Examples:
  preloop-hooks sessions list
  preloop-hooks sessions list --active --since 2h --kind claude-code
  preloop-hooks sessions list --all -o id                # every session, not the 30 most recent
  preloop-hooks sessions list --parent 801fb481       # the runs a conductor started
  preloop-hooks sessions list --agent \"Release worker\" --active -o id | head -1 \\
    | xargs -I{} preloop-hooks notes send --session {} \"Ship the fix, leave the tests.\"

Columns: ID (the shortest start of the id, at least 8 characters, that no other session's id shares:
every command that takes a session id takes it, as git and docker take a unique prefix; --wide or
-o id for full ids),
AGENT, KIND, STARTED, LAST ACTIVITY, STATE (live: activity in the last 15 minutes, idle, ended),
TOOLS and MODEL (calls seen: tool calls by the hooks' tool gate; model calls by Preloop's gateway
on the server, or in the harness transcript on this machine; `-` where they are not counted: a run
seen only through hooks on another machine, a transcript in a format not read here), APPROVALS
(tool calls waiting on a human's approval, server mode), UNDELIVERED (notes the session never showed:
undeliverable, or never carried; `notes list --undelivered --session ID` lists them), TITLE (or kind, working directory and start
time). A filter selects by what its column shows, in both modes: --kind by KIND (the harness the
session runs in, not its managed agent's kind), --agent by AGENT (name or id), --active by STATE
(not ended), --since by LAST ACTIVITY or STARTED. On the server the filters cover the account (last
30 days); the agent's identity session is hidden. On the local inbox they run over the session files
on this machine (--agent needs server mode). At most 30 rows, the most recently
active (--limit N, --all); stderr says how many were left out.";

/// How many sessions `sessions list` shows unless told (gh's default).
const DEFAULT_LIMIT: u64 = 30;

fn kind_values() -> PossibleValuesParser {
    PossibleValuesParser::new(Harness::all().map(|h| h.slug()))
}

#[derive(Args)]
pub struct ListArgs {
    /// Only this managed agent's sessions (id or display name; server mode).
    #[arg(long, value_name = "ID|NAME")]
    agent: Option<String>,
    /// Only sessions of this harness (what the KIND column shows).
    #[arg(long, value_name = "KIND", value_parser = kind_values())]
    kind: Option<String>,
    /// Only sessions started or active within this period (90m, 2h, 1d): the
    /// server's last recorded activity (tool call, prompt, turn end) or start,
    /// the local inbox's last hook activity, prompt, start or end.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    since: Option<String>,
    /// Only sessions that have not ended.
    #[arg(long)]
    active: bool,
    /// Only the runs this session started (its harness or runtime id, or a unique start of one).
    #[arg(long, value_name = "SESSION")]
    parent: Option<String>,
    /// Only the sessions of this flow execution.
    #[arg(long, value_name = "ID")]
    execution: Option<String>,
    /// Only sessions with this alias.
    #[arg(long, value_name = "NAME")]
    alias: Option<String>,
    /// Show at most N sessions, the most recently active.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_LIMIT, value_parser = clap::value_parser!(u64).range(1..))]
    limit: u64,
    /// Show every session (no --limit; a server lists the last 30 days, at most 500).
    #[arg(long, conflicts_with = "limit")]
    all: bool,
    /// Show full ids.
    #[arg(long)]
    wide: bool,
    /// Print JSON for scripts (same as -o json).
    #[arg(long)]
    json: bool,
    /// table (default), json, or id (only the full ids, one per line, as notes send --session takes them).
    #[arg(short = 'o', long = "output", value_name = "FORMAT", value_parser = ["table", "json", "id"])]
    output: Option<String>,
}

/// `sessions list --json`: `schemas/preloop-hooks/sessions.schema.json`.
#[derive(Serialize)]
struct SessionsOut<'a> {
    schema: u32,
    mode: &'static str,
    sessions: &'a [SessionRow],
    total: usize,
}

pub fn run(cmd: SessionsCmd) -> Result<()> {
    match cmd {
        SessionsCmd::List(a) => list(a),
        SessionsCmd::Attach(a) => crate::attach::run(a),
    }
}

fn list(a: ListArgs) -> Result<()> {
    let since = a.since.as_deref().map(|d| output::parse_duration("--since", d)).transpose()?;
    let fmt = match (a.output.as_deref(), a.json) {
        (Some(o), _) => o.to_string(),
        (None, true) => "json".into(),
        (None, false) => "table".into(),
    };
    let ops = Ops::load_for_listing()?;
    // The parent as every command takes a session: a unique start of an id.
    let parent = match &a.parent {
        Some(p) => Some(
            ids::session(ops.op.as_ref(), p)?
                .ok_or_else(|| {
                    Error::NotFound(format!(
                        "the parent session {} is not known {} (`preloop-hooks sessions list` shows them)",
                        output::safe_line(p),
                        ops.mode().where_known()
                    ))
                })?
                .runtime_id,
        ),
        None => None,
    };
    let filter = SessionFilter {
        agent: a.agent.clone(),
        kind: a.kind.as_deref().and_then(Harness::from_slug),
        since: since.map(|s| Timestamp::now().add_secs(-(s as i64))),
        active: a.active,
        parent,
        execution: a.execution.clone(),
        alias: a.alias.clone(),
    };
    let all_rows = rows(&ops, &filter)?;
    let limit = if a.all { all_rows.len() } else { usize::try_from(a.limit).unwrap_or(usize::MAX) };
    let mut shown = all_rows[..all_rows.len().min(limit)].to_vec();
    if fmt != "id" {
        count_undelivered(ops.op.as_ref(), &mut shown);
    }
    let rows = &shown[..];
    if rows.len() < all_rows.len() {
        crate::errln!(
            "preloop-hooks: showing the {} most recently active of {} (--limit N for more, --all for every one)",
            rows.len(),
            preloop_shared::words::count(all_rows.len(), "session")
        );
    }
    match fmt.as_str() {
        "id" => {
            for r in rows {
                output::line(&r.id)?;
            }
            Ok(())
        }
        "json" => output::json(&SessionsOut {
            schema: JSON_SCHEMA_VERSION,
            mode: ops.mode().as_str(),
            sessions: rows,
            total: rows.len(),
        }),
        _ if rows.is_empty() => output::line("no sessions"),
        _ => {
            // Short ids must name one session among all the ids resolve
            // against (every session of the account, red-team 4 P6; the
            // list's own window when that cannot be read whole).
            let ids = if a.wide {
                rows.iter().map(|r| r.id.clone()).collect()
            } else {
                let known = match ops.op.id_candidates() {
                    Ok(k) => k,
                    Err(_) if filter == SessionFilter::default() => all_rows.clone(),
                    Err(_) => ops.op.sessions(&SessionFilter::default())?,
                };
                ids::short_ids(rows, &known)
            };
            print_table(rows, &ids, a.wide)?;
            if output::stdout_is_tty() {
                crate::errln!(
                    "Steer: preloop-hooks notes send --session <id> \"…\". Watch: preloop-hooks sessions attach <id>. (IDs are shortened to a unique start, which every command takes; --wide: full ids)"
                );
            }
            Ok(())
        }
    }
}

/// The rows `filter` selects, most recently active first, in either mode,
/// with the model calls this machine counts in a transcript.
pub fn rows(ops: &Ops, filter: &SessionFilter) -> Result<Vec<SessionRow>> {
    let mut rows = ops.op.sessions(filter)?;
    for r in rows.iter_mut() {
        if let Some(n) = r.transcript_path.as_deref().and_then(transcript::count_model_calls) {
            r.model_calls = Some(r.model_calls.unwrap_or(0).max(n));
        }
    }
    Ok(rows)
}

/// Fill each row's [`SessionRow::undelivered_notes`]: the notes its session
/// never showed ([`crate::notes::never_shown`]), one read of its notes per
/// row shown; `None` where they cannot be read (the list still shows).
pub fn count_undelivered(op: &dyn Operator, rows: &mut [SessionRow]) {
    for r in rows {
        let s = SessionRef {
            runtime_id: r.runtime_session_id.clone(),
            external_id: r.external_session_id.clone(),
            file: None,
            ended_at: r.ended_at,
        };
        r.undelivered_notes = crate::notes::never_shown(op, &NotesOf::Session(s), None).ok().map(|n| n.len() as u64);
    }
}

fn count(n: Option<u64>) -> String {
    n.map(|n| n.to_string()).unwrap_or_else(|| "-".into())
}

fn print_table(rows: &[SessionRow], ids: &[String], wide: bool) -> Result<()> {
    let now = Timestamp::now();
    let aliases = rows.iter().any(|r| r.alias.is_some());
    let mut header =
        vec!["ID", "AGENT", "KIND", "STARTED", "LAST ACTIVITY", "STATE", "TOOLS", "MODEL", "APPROVALS", "UNDELIVERED"];
    if aliases {
        header.push("ALIAS");
    }
    header.push("TITLE");
    let table: Vec<Vec<String>> = rows
        .iter()
        .zip(ids)
        .map(|(r, id)| {
            let mut row = vec![
                output::safe_line(id),
                clip(r.agent_name.as_deref().unwrap_or("-"), 24),
                r.kind.clone().or(r.agent_kind.as_ref().map(|k| k.to_string())).unwrap_or_else(|| "-".into()),
                ago(r.started_at, now),
                ago(r.last_activity_at, now),
                r.state.clone(),
                count(r.tool_calls),
                count(r.model_calls),
                count(r.pending_approvals),
                count(r.undelivered_notes),
            ];
            if aliases {
                row.push(clip(r.alias.as_deref().unwrap_or("-"), 24));
            }
            row.push(clip(&r.label, if wide { 120 } else { 60 }));
            row
        })
        .collect();
    output::print_table(&header, &table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::Side;
    use crate::operator::memory::Memory;
    use preloop_shared::config::{Config, Env};
    use preloop_shared::operator::ReceiptState;
    use std::sync::Arc;

    fn ops(mem: Memory) -> Ops {
        let home = std::env::temp_dir().join("preloop-sessions-unit-no-home");
        let config = Config::load_from(&Env::of(&[("PRELOOP_HOME", &home.to_string_lossy())]), None);
        Ops::with_operator(config, Arc::new(mem))
    }

    #[test]
    fn sessions_list_most_recently_active_first() {
        let mem = Memory::new(Side::Server)
            .session("old", "r-old", 300)
            .session("new", "r-new", 5)
            .session("mid", "r-mid", 60);
        mem.end("mid");
        let ops = ops(mem);
        let ids = |f: &SessionFilter| rows(&ops, f).unwrap().into_iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(&SessionFilter::default()), ["new", "mid", "old"]);
        assert_eq!(ids(&SessionFilter { active: true, ..SessionFilter::default() }), ["new", "old"]);
    }

    /// #33 part 3: each row counts the notes its session never showed, in
    /// both modes (undeliverable and never carried; not pending, not shown).
    #[test]
    fn each_row_counts_its_undelivered_notes_in_both_modes() {
        for mode in [Side::Local, Side::Server] {
            let mem = Memory::new(mode)
                .session("a", "r-a", 10)
                .session("b", "r-b", 20)
                .note("00000000000000a1", "a", ReceiptState::Pending, 5)
                .note("00000000000000a2", "a", ReceiptState::Pending, 5)
                .note("00000000000000a3", "a", ReceiptState::Delivered, 5)
                .note("00000000000000a4", "b", ReceiptState::Pending, 5)
                .undeliverable("00000000000000a1", "session_ended", 1)
                .never_carried("00000000000000a3");
            mem.end("a");
            let ops = ops(mem);
            let mut shown = rows(&ops, &SessionFilter::default()).unwrap();
            count_undelivered(ops.op.as_ref(), &mut shown);
            let counts: Vec<(&str, Option<u64>)> = shown.iter().map(|r| (r.id.as_str(), r.undelivered_notes)).collect();
            assert_eq!(counts, [("a", Some(2)), ("b", Some(0))], "{mode:?}");
            let v = serde_json::to_value(&shown[0]).unwrap();
            assert_eq!(v["undelivered_notes"], serde_json::json!(2), "{mode:?}: the --json field");
        }
    }
}
