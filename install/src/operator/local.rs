//! [`Operator`] over the local inbox (`preloop_shared::local::LocalInbox`)
//! and this machine's session files: local mode, no server URL configured.

use super::{NewNote, NotesOf, Operator, Pace, Sent, SessionNow, SessionRef, Side, Socket, To};
use crate::output::safe_line;
use preloop_shared::config::Config;
use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{
    ActivityItem, Author, Receipt, ReceiptState, SendRequest, SessionFilter, SessionRow, Target,
};
use preloop_shared::session;
use preloop_shared::time::Timestamp;
use preloop_shared::{Error, Result};
use std::collections::BTreeSet;
use std::time::Duration;

pub struct Local {
    inbox: LocalInbox,
    config: Config,
}

impl Local {
    pub fn new(config: Config) -> Local {
        Local { inbox: LocalInbox::new(&config.home, config.settings.note_ttl_secs), config }
    }
}

/// The author of a local note: `--from`, else the login name.
fn author(from: Option<&str>) -> Author {
    let display = from
        .map(str::to_string)
        .or_else(|| std::env::var("USER").ok())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "local operator".into());
    Author { display: Some(display), auth_method: Some("local".into()), ..Author::default() }
}

impl Operator for Local {
    fn mode(&self) -> Side {
        Side::Local
    }

    fn mode_note(&self) -> Option<String> {
        if let Some((_, origin)) = &self.config.user_token {
            return Some(format!(
                "local mode: a user token is stored ({origin}) but no server URL is configured, so this uses the local inbox (for server mode: `preloop-hooks login --user --url URL`)"
            ));
        }
        let server_runs = session::all_session_files(&self.config.home)
            .iter()
            .filter(|f| f.mode == Side::Server.hooks() && f.ended_at.is_none())
            .count();
        (server_runs > 0).then(|| {
            format!(
                "local mode (no server URL configured), but {} on this machine {} against a server: notes sent here go to the local inbox, which {} not read (`preloop-hooks login --user --url URL`)",
                preloop_shared::words::count(server_runs, "live session"),
                preloop_shared::words::noun_for(server_runs, "runs", "run"),
                preloop_shared::words::noun_for(server_runs, "it does", "they do"),
            )
        })
    }

    fn pace(&self) -> Pace {
        Pace { poll: Duration::from_millis(500), end_check: Duration::from_secs(2), settle: Duration::from_millis(300) }
    }

    fn author_from_flag(&self) -> bool {
        true
    }

    fn check(&self, to: &To) -> Result<()> {
        match to {
            To::Agent { .. } => Err(Error::Usage(
                "--agent needs server mode (`preloop-hooks login --user --url URL`); on the local inbox use --session, --alias, --children or --next".into(),
            )),
            _ => Ok(()),
        }
    }

    fn unknown_session_note(&self, id: &str) -> Option<String> {
        Some(format!(
            "no session {} has started on this machine yet; the note waits for it (the local inbox keeps notes for a session that has not started; a server refuses a session it does not know)",
            safe_line(id)
        ))
    }

    fn send(&self, to: &To, note: &NewNote) -> Result<Sent> {
        let (target, next_session) = match to {
            // A found session by its own id (the user may have typed a start of it).
            To::Session { id, found } => {
                (Target::Session(found.as_ref().map_or_else(|| id.clone(), |f| f.name().to_string())), false)
            }
            To::Alias(al) => (Target::Alias(al.clone()), false),
            To::Children { parent, all } => (Target::Children { parent: parent.runtime_id.clone(), all: *all }, false),
            To::Execution(e) => (Target::Execution(e.clone()), false),
            To::Next(h) => (Target::Harness(*h), true),
            To::HarnessCurrent(h) => (Target::Harness(*h), false),
            To::Agent { .. } => return Err(Error::Usage("--agent needs server mode".into())),
        };
        let receipts = self.inbox.send_all(&SendRequest {
            text: note.text.clone(),
            target,
            next_session,
            expires_in_secs: note.expires_in_secs.map(|s| s as i64),
            author: author(note.from.as_deref()),
        })?;
        // An alias names its session only once the inbox found it.
        let mut sent = Sent::default();
        if let (To::Alias(_), [r]) = (to, receipts.as_slice()) {
            sent.session = r.external_session_id.clone();
            sent.runtime_session_id = r.runtime_session_id.clone();
        }
        sent.receipts = receipts;
        Ok(sent)
    }

    fn receipt(&self, note_id: &str) -> Result<Receipt> {
        self.inbox.status(note_id)
    }

    fn cancel(&self, note_id: &str) -> Result<Receipt> {
        self.inbox.cancel(note_id)
    }

    fn notes(&self, of: &NotesOf, _state: Option<&ReceiptState>) -> Result<Vec<Receipt>> {
        let sessions: Option<BTreeSet<String>> = match of {
            NotesOf::Agent(_) => {
                return Err(Error::Usage(
                    "--agent needs server mode; on the local inbox list by --session, --alias, --children, --execution or --all"
                        .into(),
                ));
            }
            NotesOf::All => None,
            NotesOf::Session(s) => Some([s.name().to_string()].into()),
            NotesOf::NotStarted(id) => Some([id.clone()].into()),
            NotesOf::Alias(al) => Some(
                self.inbox
                    .sessions()
                    .into_iter()
                    .filter(|r| r.alias.as_deref() == Some(al.as_str()))
                    .filter_map(|r| r.external_session_id)
                    .collect(),
            ),
            NotesOf::Children { parent, latest } => {
                let mut kids: Vec<SessionRow> = self
                    .inbox
                    .sessions()
                    .into_iter()
                    .filter(|r| r.parent_session_id.as_deref() == Some(parent.runtime_id.as_str()))
                    .collect();
                kids.sort_by_key(|r| std::cmp::Reverse(r.started_at));
                if *latest {
                    kids.truncate(1);
                }
                Some(kids.into_iter().filter_map(|r| r.external_session_id).collect())
            }
            NotesOf::Execution(e) => {
                Some(self.inbox.execution_sessions(e).into_iter().map(|f| f.external_session_id).collect())
            }
        };
        let all = self.inbox.list()?;
        Ok(match sessions {
            None => all,
            Some(set) => {
                all.into_iter().filter(|n| n.external_session_id.as_ref().is_some_and(|s| set.contains(s))).collect()
            }
        })
    }

    fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRow>> {
        if filter.agent.is_some() {
            return Err(Error::Usage(
                "--agent needs server mode (`preloop-hooks login --user --url URL`): the local inbox has no managed agents"
                    .into(),
            ));
        }
        Ok(self.inbox.sessions_filtered(filter))
    }

    fn agent_id(&self, _id_or_name: &str) -> Result<String> {
        Err(Error::Usage(
            "--agent needs server mode (`preloop-hooks login --user --url URL`): the local inbox has no managed agents"
                .into(),
        ))
    }

    fn find_session(&self, id: &str) -> Result<Option<SessionRef>> {
        Ok(super::local_file(&self.config.home, id).map(SessionRef::of_file))
    }

    fn session_ended(&self, note: &Receipt) -> Option<Timestamp> {
        let s = note.external_session_id.as_deref()?;
        self.inbox.resolve_session(s).and_then(|f| f.ended_at)
    }

    fn session_now(&self, s: &SessionRef) -> Result<SessionNow> {
        Ok(SessionNow {
            ended_at: self.inbox.resolve_session(s.name()).and_then(|f| f.ended_at),
            pending_approvals: None,
        })
    }

    fn timeline(&self, _s: &SessionRef, _limit: u32) -> Result<Vec<ActivityItem>> {
        // The local inbox keeps no timeline: attach follows the transcript.
        Ok(Vec::new())
    }

    fn socket(&self, _s: &SessionRef) -> Option<Socket> {
        None
    }
}
