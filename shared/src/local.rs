//! The embedded default: a file-backed inbox under `$PRELOOP_HOME/inbox` with
//! the server's note semantics (docs/contracts/preloop-server.md §4.3, §4.4, §4.6, §8), so one machine
//! works with no infrastructure.
//!
//! Layout (0700 directories, 0600 files, every write an atomic rename):
//!
//! ```text
//! inbox/lock                                   one lock for every state change
//! inbox/notes/<note id>.json                   the note record (its receipt)
//! inbox/queue/session/<session>/<t>-<id>       pending, addressed to a session
//! inbox/queue/harness/<harness>/<t>-<id>       pending, for a harness's current or next session
//! inbox/claimed/<session>/<id>                 claimed with deferral, awaiting ack
//! inbox/sent/session/<session>.json            the notes sent to a session in the last hour
//! inbox/sent/harness/<harness>.json            the same for a harness target (the rate limit)
//! sessions/<session>.json                      the session registry (public session files)
//! ```
//!
//! `<t>` is the creation time in microseconds, zero-padded, so a directory
//! listing sorted by name is oldest first. A claim reads only the two queue
//! directories that can hold notes for the claiming session, so its cost
//! does not grow with the number of notes stored for other sessions. With both
//! empty it returns without taking the lock. Every transition happens under
//! `inbox/lock`, so two hooks never claim the same note.

use crate::AgentKind;
use crate::backend::{Backend, Claimed, Fits, PermissionAnswer};
use crate::error::{Error, Result};
use crate::fsutil::{self, LockGuard};
use crate::operator::{
    Author, MAX_CHILDREN, NOTE_RATE_LIMIT_PER_HOUR, RATE_LIMIT_DETAIL, Receipt, ReceiptState, SendRequest,
    SessionFilter, SessionRow, Target,
};
use crate::registry::{SERVER_PROMPT_EVENTS, ServerClaim};
use crate::render::{self, NoteElement};
use crate::session::{self, SessionFile};
use crate::time::Timestamp;
use crate::wire::*;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most notes one claim returns (the server's limit).
pub const CLAIM_LIMIT: usize = 5;
/// The longest note body, in characters (the server's limit).
pub const MAX_NOTE_CHARS: usize = 4096;
const LOCK_WAIT: Duration = Duration::from_secs(5);
/// The rate limit's rolling window (the server's: notes created at or after
/// an hour ago count).
const RATE_WINDOW_SECS: i64 = 3600;

/// Whom a local note is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Addressee {
    /// One harness session (by its harness session id).
    Session { session_id: String },
    /// The current or next session of a harness (`next_session`: only one
    /// started after the note).
    Harness { harness: String },
}

/// A stored note (`inbox/notes/<id>.json`): whom it is for, and its
/// receipt, which `notes status --json` prints as it is. The harness
/// session that claimed it (or that it was addressed to) is the receipt's
/// `external_session_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "StoredNote")]
pub struct NoteRecord {
    pub to: Addressee,
    #[serde(flatten)]
    pub receipt: Receipt,
}

/// A note file as it reads: one this build wrote, or one written before the
/// record was its receipt (the claiming session under `session_id`, no
/// `harness`). `created_at` and `expires_at` are required, as they always
/// were: a file without them is no note.
#[derive(Deserialize)]
struct StoredNote {
    to: Addressee,
    #[serde(default)]
    session_id: Option<String>,
    created_at: Timestamp,
    expires_at: Timestamp,
    #[serde(flatten)]
    receipt: Receipt,
}

impl From<StoredNote> for NoteRecord {
    fn from(s: StoredNote) -> NoteRecord {
        let mut receipt = s.receipt;
        receipt.created_at = Some(s.created_at);
        receipt.expires_at = Some(s.expires_at);
        if receipt.external_session_id.is_none() {
            receipt.external_session_id = s.session_id;
        }
        if let Addressee::Harness { harness } = &s.to {
            receipt.harness.get_or_insert_with(|| harness.clone());
        }
        NoteRecord { to: s.to, receipt }
    }
}

impl NoteRecord {
    pub fn element(&self) -> NoteElement {
        let r = &self.receipt;
        render::render_element(
            &r.note_id,
            r.author.display.as_deref().unwrap_or(""),
            r.author.auth_method.as_deref().unwrap_or(""),
            self.created_at(),
            &r.text,
        )
    }

    /// When it was sent (every note file has it, [`StoredNote`]).
    fn created_at(&self) -> Timestamp {
        self.receipt.created_at.unwrap_or(Timestamp(0))
    }

    fn is_past_expiry(&self, now: Timestamp) -> bool {
        matches!(self.receipt.state, ReceiptState::Pending | ReceiptState::Claimed)
            && self.receipt.expires_at.is_some_and(|e| e <= now)
    }

    /// The claiming session (or the one it was addressed to).
    fn session_id(&self) -> Option<&str> {
        self.receipt.external_session_id.as_deref()
    }
}

/// One note in a target's rate window (`inbox/sent/...`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Sent {
    at: Timestamp,
    /// The sender ([`sender_of`]).
    by: String,
    note_id: String,
}

/// Who counts as one sender for the rate limit: the agent or user id when
/// the author has one, else the name it sends under (`--from`, `$USER`).
fn sender_of(a: &Author) -> String {
    match (&a.agent_id, &a.user_id) {
        (Some(agent), _) => format!("agent:{agent}"),
        (None, Some(user)) => format!("user:{user}"),
        (None, None) => format!("name:{}", a.display.as_deref().unwrap_or("")),
    }
}

pub struct LocalInbox {
    home: PathBuf,
    dir: PathBuf,
    default_ttl_secs: i64,
    rate_limit: Option<usize>,
}

impl LocalInbox {
    /// The inbox under `home`, with the server's send rate limit
    /// ([`NOTE_RATE_LIMIT_PER_HOUR`]).
    pub fn new(home: &Path, default_ttl_secs: i64) -> LocalInbox {
        LocalInbox {
            home: home.to_path_buf(),
            dir: home.join("inbox"),
            default_ttl_secs,
            rate_limit: Some(NOTE_RATE_LIMIT_PER_HOUR),
        }
    }

    /// Another send rate limit per sender, target and hour; `None` for none
    /// (benchmarks and load tests that send hundreds of notes to one
    /// session, as they switch the fake server's off). The CLI never does.
    pub fn with_rate_limit(mut self, limit: Option<usize>) -> LocalInbox {
        self.rate_limit = limit;
        self
    }

    fn note_path(&self, id: &str) -> PathBuf {
        self.dir.join("notes").join(format!("{}.json", fsutil::session_file_stem(id)))
    }
    fn session_queue(&self, session_id: &str) -> PathBuf {
        self.dir.join("queue/session").join(fsutil::session_file_stem(session_id))
    }
    fn harness_queue(&self, harness: &str) -> PathBuf {
        self.dir.join("queue/harness").join(fsutil::session_file_stem(harness))
    }
    fn claimed_dir(&self, session_id: &str) -> PathBuf {
        self.dir.join("claimed").join(fsutil::session_file_stem(session_id))
    }
    /// The rate window of a target: a session, or a harness (which stands
    /// in for the server's managed agent: one machine has none).
    fn sent_path(&self, to: &Addressee) -> PathBuf {
        let (kind, key) = match to {
            Addressee::Session { session_id } => ("session", session_id),
            Addressee::Harness { harness } => ("harness", harness),
        };
        self.dir.join("sent").join(kind).join(format!("{}.json", fsutil::session_file_stem(key)))
    }

    /// Create `dir` (under the home) refusing a symlink at every level
    /// from the home down: `fsutil::private_dir` checks only the last one,
    /// and a planted `inbox` or `inbox/queue` link would otherwise be
    /// written through.
    fn private(&self, dir: &Path) -> Result<()> {
        let rel = dir.strip_prefix(&self.home).unwrap_or(dir);
        let mut p = self.home.clone();
        for c in rel.components() {
            p.push(c);
            fsutil::private_dir(&p)?;
        }
        Ok(())
    }

    fn lock(&self) -> Result<LockGuard> {
        self.private(&self.dir)?;
        fsutil::lock(&self.dir.join("lock"), LOCK_WAIT)
    }

    fn read_note(&self, id: &str) -> Result<Option<NoteRecord>> {
        fsutil::read_json(&self.note_path(id))
    }

    fn write_note(&self, note: &NoteRecord) -> Result<()> {
        self.private(&self.dir.join("notes"))?;
        fsutil::write_json(&self.note_path(&note.receipt.note_id), note)
    }

    fn queue_entry_name(note: &NoteRecord) -> String {
        format!("{:020}-{}", note.created_at().0.max(0), note.receipt.note_id)
    }

    fn queue_dir_for(&self, note: &NoteRecord) -> PathBuf {
        match &note.to {
            Addressee::Session { session_id } => self.session_queue(session_id),
            Addressee::Harness { harness } => self.harness_queue(harness),
        }
    }

    fn unqueue(&self, note: &NoteRecord) {
        let _ = std::fs::remove_file(self.queue_dir_for(note).join(Self::queue_entry_name(note)));
    }

    /// Expire a past-expiry pending/claimed note (lazy expiry, §8). Returns
    /// whether it changed. Call with the lock held.
    fn expire_if_due(&self, note: &mut NoteRecord, now: Timestamp) -> Result<bool> {
        if !note.is_past_expiry(now) {
            return Ok(false);
        }
        let was_claimed = note.receipt.state == ReceiptState::Claimed;
        note.receipt.state = ReceiptState::Expired;
        note.receipt.expired_at = Some(now);
        self.write_note(note)?;
        self.unqueue(note);
        if was_claimed && let Some(s) = note.session_id() {
            let _ = std::fs::remove_file(self.claimed_dir(s).join(&note.receipt.note_id));
        }
        Ok(true)
    }

    // ----- operator side ---------------------------------------------------

    /// Send a note (`preloop-hooks notes send`); for a `children` target
    /// with `all`, the first of the notes (see [`LocalInbox::send_all`]).
    pub fn send(&self, req: &SendRequest) -> Result<Receipt> {
        self.send_all(req)?.into_iter().next().ok_or_else(|| Error::NotFound("no note was sent".into()))
    }

    /// Send a note to every session the target names: one for most targets,
    /// one per live child for `children` with `all` (at most 20, newest first).
    pub fn send_all(&self, req: &SendRequest) -> Result<Vec<Receipt>> {
        let chars = req.text.chars().count();
        if req.text.trim().is_empty() || chars > MAX_NOTE_CHARS {
            return Err(Error::Usage(if req.text.trim().is_empty() {
                "the note is empty or only whitespace".to_string()
            } else {
                format!("a note is 1-{MAX_NOTE_CHARS} characters; this one has {chars}")
            }));
        }
        let ttl = req.expires_in_secs.unwrap_or(self.default_ttl_secs);
        if !(60..=604_800).contains(&ttl) {
            return Err(Error::Usage("expiry must be between 60 seconds and 7 days".into()));
        }
        let to_file = |f: SessionFile| {
            (
                Addressee::Session { session_id: f.external_session_id.clone() },
                Some(f.external_session_id),
                Some(f.runtime_session_id),
            )
        };
        let addressees: Vec<(Addressee, Option<String>, Option<String>)> = match &req.target {
            Target::Session(id) => match self.resolve_session(id) {
                Some(f) => vec![to_file(f)],
                // Not started yet on this machine: the note waits for it.
                None => vec![(Addressee::Session { session_id: id.clone() }, Some(id.clone()), None)],
            },
            Target::Alias(alias) => {
                let mut found: Vec<SessionFile> =
                    self.live_sessions().into_iter().filter(|s| s.alias.as_deref() == Some(alias.as_str())).collect();
                if found.len() > 1 {
                    let ids: Vec<&str> = found.iter().map(|s| s.external_session_id.as_str()).collect();
                    return Err(Error::Usage(format!(
                        "the alias {alias:?} names {} ({}): use --session",
                        crate::words::count(ids.len(), "live session"),
                        ids.join(", ")
                    )));
                }
                let f =
                    found.pop().ok_or_else(|| Error::NotFound(format!("no live session has the alias {alias:?}")))?;
                vec![to_file(f)]
            }
            Target::RuntimeSession(rid) => {
                let f = session::find_by_runtime_id(&self.home, rid);
                vec![to_file(f.ok_or_else(|| Error::NotFound(format!("no session has the runtime id {rid}")))?)]
            }
            Target::Harness(h) => vec![(Addressee::Harness { harness: h.slug().to_string() }, None, None)],
            Target::Children { parent, all } => {
                let p = self
                    .resolve_session(parent)
                    .ok_or_else(|| Error::NotFound(format!("parent session {parent} not found on this machine")))?;
                let mut kids = self.live_children(&p.runtime_session_id);
                if kids.is_empty() {
                    return Err(Error::NotFound(crate::operator::no_live_children(&p.external_session_id)));
                }
                if !all {
                    kids.truncate(1);
                }
                kids.into_iter().map(to_file).collect()
            }
            Target::Execution(e) => {
                let f = self.execution_sessions(e).into_iter().find(|f| f.ended_at.is_none()).ok_or_else(|| {
                    Error::NotFound(format!(
                        "no live session on this machine recorded execution {e} (PRELOOP_FLOW_EXECUTION_ID at its start)"
                    ))
                })?;
                vec![to_file(f)]
            }
        };
        if req.next_session && !addressees.iter().all(|(a, _, _)| matches!(a, Addressee::Harness { .. })) {
            return Err(Error::Usage("--next-session needs a harness target (--next HARNESS)".into()));
        }
        // One lock over the count and the writes, so two senders cannot
        // both take the last place in a window. Every target is checked
        // before any note is written: a `children all` send is refused
        // whole, as the server's transaction is.
        let _g = self.lock()?;
        let sender = sender_of(&req.author);
        let since = Timestamp::now().add_secs(-RATE_WINDOW_SECS);
        let mut windows = Vec::with_capacity(addressees.len());
        for (to, _, _) in &addressees {
            let Some(limit) = self.rate_limit else { break };
            let path = self.sent_path(to);
            // An unreadable window counts as empty and is rewritten below:
            // a damaged file must not stop every send to the target.
            let mut window: Vec<Sent> = fsutil::read_json(&path).ok().flatten().unwrap_or_default();
            window.retain(|s| s.at >= since);
            if window.iter().filter(|s| s.by == sender).count() >= limit {
                return Err(Error::Refused(crate::operator::rate_limited(RATE_LIMIT_DETAIL)));
            }
            windows.push((path, window));
        }
        let mut windows = windows.into_iter();
        let mut out = Vec::with_capacity(addressees.len());
        for (to, session_id, runtime_session_id) in addressees {
            let now = Timestamp::now();
            let note = NoteRecord {
                receipt: Receipt {
                    text: req.text.clone(),
                    runtime_session_id,
                    external_session_id: session_id,
                    harness: match &to {
                        Addressee::Harness { harness } => Some(harness.clone()),
                        Addressee::Session { .. } => None,
                    },
                    next_session: req.next_session,
                    author: req.author.clone(),
                    created_at: Some(now),
                    expires_at: Some(now.add_secs(ttl)),
                    ..Receipt::new(&fsutil::note_id(), ReceiptState::Pending)
                },
                to,
            };
            // Counted before it exists: a failure in between costs a place
            // in the window, never lets a note past the limit.
            if let Some((path, mut window)) = windows.next() {
                window.push(Sent { at: note.created_at(), by: sender.clone(), note_id: note.receipt.note_id.clone() });
                self.private(path.parent().unwrap_or(&self.dir))?;
                fsutil::write_json(&path, &window)?;
            }
            // Record first, queue entry second: a claimer that sees the entry
            // always finds the record.
            self.write_note(&note)?;
            let q = self.queue_dir_for(&note);
            self.private(&q)?;
            fsutil::write_atomic(&q.join(Self::queue_entry_name(&note)), b"")?;
            out.push(note.receipt);
        }
        Ok(out)
    }

    /// A session on this machine by its harness session id or its runtime id.
    pub fn resolve_session(&self, id: &str) -> Option<SessionFile> {
        if let Ok(Some(f)) = session::read_session_file(&self.home, id) {
            return Some(f);
        }
        session::find_by_runtime_id(&self.home, id)
    }

    /// The live sessions a session spawned (its runtime id), newest first,
    /// at most [`MAX_CHILDREN`].
    pub fn live_children(&self, parent_runtime_id: &str) -> Vec<SessionFile> {
        let mut kids: Vec<SessionFile> = self
            .live_sessions()
            .into_iter()
            .filter(|s| s.parent_session_id.as_deref() == Some(parent_runtime_id))
            .collect();
        kids.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(b.external_session_id.cmp(&a.external_session_id)));
        kids.truncate(MAX_CHILDREN);
        kids
    }

    /// The sessions that recorded a flow execution id (`execution_id` in
    /// their session file), newest first.
    pub fn execution_sessions(&self, execution_id: &str) -> Vec<SessionFile> {
        let mut v: Vec<SessionFile> = session::all_session_files(&self.home)
            .into_iter()
            .filter(|f| execution_of(&self.home, &f.external_session_id).as_deref() == Some(execution_id))
            .collect();
        v.sort_by_key(|f| std::cmp::Reverse(f.started_at));
        v
    }

    /// Read one receipt, expiring it first if it is past its expiry.
    pub fn status(&self, note_id: &str) -> Result<Receipt> {
        let note = self.read_note(note_id)?.ok_or_else(|| Error::NotFound(format!("note {note_id} not found")))?;
        if note.is_past_expiry(Timestamp::now()) {
            let _g = self.lock()?;
            if let Some(mut n) = self.read_note(note_id)? {
                self.expire_if_due(&mut n, Timestamp::now())?;
                return Ok(n.receipt);
            }
        }
        Ok(note.receipt)
    }

    /// Every note, newest first, expiring stale ones first.
    pub fn list(&self) -> Result<Vec<Receipt>> {
        let dir = self.dir.join("notes");
        let now = Timestamp::now();
        let mut notes: Vec<NoteRecord> = fsutil::list_names(&dir)
            .into_iter()
            .filter(|n| n.ends_with(".json"))
            .filter_map(|n| fsutil::read_json::<NoteRecord>(&dir.join(n)).ok().flatten())
            .collect();
        if notes.iter().any(|n| n.is_past_expiry(now)) {
            let _g = self.lock()?;
            for n in notes.iter_mut().filter(|n| n.is_past_expiry(now)) {
                if let Some(mut fresh) = self.read_note(&n.receipt.note_id)? {
                    self.expire_if_due(&mut fresh, now)?;
                    *n = fresh;
                }
            }
        }
        notes.sort_by(|a, b| b.created_at().cmp(&a.created_at()).then(b.receipt.note_id.cmp(&a.receipt.note_id)));
        Ok(notes.into_iter().map(|n| n.receipt).collect())
    }

    /// Withdraw a pending note. Any other state is returned unchanged, as the
    /// server does.
    pub fn cancel(&self, note_id: &str) -> Result<Receipt> {
        let _g = self.lock()?;
        let mut note = self.read_note(note_id)?.ok_or_else(|| Error::NotFound(format!("note {note_id} not found")))?;
        let now = Timestamp::now();
        if !self.expire_if_due(&mut note, now)? && note.receipt.state == ReceiptState::Pending {
            note.receipt.state = ReceiptState::Cancelled;
            note.receipt.cancelled_at = Some(now);
            self.write_note(&note)?;
            self.unqueue(&note);
        }
        Ok(note.receipt)
    }

    fn live_sessions(&self) -> Vec<SessionFile> {
        session::all_session_files(&self.home).into_iter().filter(|s| s.ended_at.is_none()).collect()
    }

    /// Every session, most recently active first.
    pub fn sessions(&self) -> Vec<SessionRow> {
        self.sessions_filtered(&SessionFilter::default())
    }

    /// The sessions `filter` selects, most recently active first, with the
    /// last hook activity and the tool calls from the hook log.
    pub fn sessions_filtered(&self, filter: &SessionFilter) -> Vec<SessionRow> {
        let activity = hook_activity(&self.home);
        let now = Timestamp::now();
        // The parent by its runtime id, as rows name it; then the one
        // predicate of both modes, over what the columns show.
        let mut filter = filter.clone();
        filter.parent =
            filter.parent.take().map(|p| self.resolve_session(&p).map(|f| f.runtime_session_id).unwrap_or(p));
        let mut rows: Vec<SessionRow> = session::all_session_files(&self.home)
            .into_iter()
            .map(|f| {
                let act = activity.get(&f.external_session_id);
                let mut row = SessionRow::from_file(&f, act.map(|a| a.last), now);
                row.tool_calls = Some(act.map(|a| a.tool_calls).unwrap_or(0));
                row.execution_id = execution_of(&self.home, &f.external_session_id);
                row
            })
            .filter(|r| filter.admits(r))
            .collect();
        SessionRow::sort_most_recent_first(&mut rows);
        rows
    }

    // ----- hook side -------------------------------------------------------

    /// Claim up to [`CLAIM_LIMIT`] notes, oldest first; with `fits`, stop at
    /// the first note the caller's output could not show with those before
    /// it (it stays pending for a hook that can carry it).
    fn claim(
        &self,
        session_id: &str,
        event: DeliveryEvent,
        defer: bool,
        fits: Option<Fits<'_>>,
    ) -> Result<Option<Claimed>> {
        let sq = self.session_queue(session_id);
        let file = session::read_session_file(&self.home, session_id)?;
        let harness_dir = file.as_ref().and_then(|f| f.agent_kind.harness()).map(|h| self.harness_queue(h.slug()));
        let candidates = |dirs: &[&PathBuf]| -> Vec<(String, PathBuf)> {
            let mut v: Vec<(String, PathBuf)> = dirs
                .iter()
                .flat_map(|d| fsutil::list_names(d).into_iter().map(move |n| (n, d.to_path_buf())))
                .collect();
            v.sort();
            v
        };
        let dirs: Vec<&PathBuf> = std::iter::once(&sq).chain(harness_dir.as_ref()).collect();
        // Fast path: nothing queued, no lock.
        if candidates(&dirs).is_empty() {
            return Ok(None);
        }
        let _g = self.lock()?;
        // Re-read under the lock: the session may have ended meanwhile.
        let Some(file) = session::read_session_file(&self.home, session_id)? else { return Ok(None) };
        if file.ended_at.is_some() {
            return Ok(None); // §4.3: an ended session claims nothing.
        }
        let now = Timestamp::now();
        let mut claimed = Vec::new();
        for (name, dir) in candidates(&dirs) {
            if claimed.len() >= CLAIM_LIMIT {
                break;
            }
            let Some((_, id)) = name.split_once('-') else { continue };
            let entry = dir.join(&name);
            let Some(mut note) = self.read_note(id)? else {
                let _ = std::fs::remove_file(&entry);
                continue;
            };
            if note.receipt.state != ReceiptState::Pending {
                let _ = std::fs::remove_file(&entry); // stale entry
                continue;
            }
            if self.expire_if_due(&mut note, now)? {
                continue;
            }
            if note.receipt.next_session && file.started_at <= note.created_at() {
                continue; // §4.3: only a session started after the note.
            }
            if let Some(fits) = fits {
                let mut trial = claimed.clone();
                trial.push(note.element());
                if !fits(&trial) {
                    break; // Oldest first: nothing younger jumps ahead of it.
                }
            }
            let r = &mut note.receipt;
            r.state = if defer { ReceiptState::Claimed } else { ReceiptState::Delivered };
            r.external_session_id = Some(session_id.to_string());
            r.runtime_session_id = Some(file.runtime_session_id.clone());
            r.claimed_at = Some(now);
            r.delivery_channel = Some("hook".into());
            r.delivery_event = Some(event.as_str().into());
            if !defer {
                r.delivered_at = Some(now);
            }
            if defer {
                let cd = self.claimed_dir(session_id);
                self.private(&cd)?;
                // Before the note's synced write, whose journal commit then
                // carries the marker too: one sync for both.
                fsutil::create_marker(&cd.join(&note.receipt.note_id))?;
            }
            self.write_note(&note)?;
            let _ = std::fs::remove_file(&entry);
            claimed.push(note.element());
        }
        Ok(if claimed.is_empty() { None } else { Some(Claimed { notes: claimed, deferred: defer }) })
    }
}

impl Backend for LocalInbox {
    fn mode(&self) -> crate::backend::HookMode {
        crate::backend::HookMode::Local
    }

    fn session_start(&self, req: &SessionStartRequest) -> Result<SessionStartResponse> {
        let _g = self.lock()?;
        let now = Timestamp::now();
        let existing = session::read_session_file(&self.home, &req.session_id)?;
        let created = existing.is_none();
        let mut file = match existing {
            Some(f) => f,
            None => SessionFile::new(
                &req.session_id,
                &fsutil::uuid_v4(),
                AgentKind::from(req.source.as_deref().unwrap_or_default()),
                crate::backend::HookMode::Local,
                now,
            ),
        };
        let before = file.clone();
        if file.ended_at.is_some() {
            // Reopen (§4.1): same id, started now; its pending notes are claimable again.
            file.ended_at = None;
            file.end_reason = None;
            file.started_at = now;
        }
        if file.cwd.is_none() {
            file.cwd = req.cwd.as_ref().map(|c| c.chars().take(1024).collect());
        }
        if file.parent_session_id.is_none() {
            // Write-once; only a runtime id this machine knows.
            if let Some(p) = req.parent_session_id.as_ref().filter(|p| !p.is_empty())
                && session::find_by_runtime_id(&self.home, p).is_some()
            {
                file.parent_session_id = Some(p.clone());
            }
        }
        if file.alias.is_none()
            && let Some(a) = req.alias.as_deref().map(sanitize_alias).filter(|a| !a.is_empty())
        {
            file.alias = Some(self.unique_alias(&a, &file));
        }
        if file.execution_id.is_none() {
            // The hook's own environment (`PRELOOP_FLOW_EXECUTION_ID`): the
            // server learns it on permission-check, not at session-start.
            file.execution_id = crate::config::execution_id();
        }
        if let Some(t) = req.transcript_path.as_ref().filter(|t| !t.is_empty())
            && file.transcript_path.as_ref() != Some(t)
        {
            file.transcript_path = Some(t.clone());
        }
        if let Some(p) = req.harness_process.as_ref()
            && file.harness_process.as_ref() != Some(p)
        {
            file.harness_process = Some(p.clone());
        }
        if file.title.is_none() {
            file.title = req.first_prompt.as_deref().map(title_of).filter(|t| !t.is_empty());
        }
        if req.hook_event_name.as_deref().is_some_and(|e| SERVER_PROMPT_EVENTS.contains(&e)) {
            file.last_prompt_at = Some(now);
        }
        // A new session is written even when its first payload names
        // nothing else (Cursor with no folder open sends no cwd).
        if created || file != before {
            session::write_session_file(&self.home, &file)?;
        }
        if created {
            // Best effort: without the entry a lookup by runtime id scans.
            let _ = session::index_runtime_id(&self.home, &file);
        }
        Ok(SessionStartResponse {
            runtime_session_id: file.runtime_session_id.clone(),
            parent_session_id: file.parent_session_id.clone(),
            started_at: Some(file.started_at.to_iso_z()),
            created: Some(created),
            alias: file.alias.clone(),
        })
    }

    fn permission_check(
        &self,
        req: &PermissionCheckRequest,
        _claim: ServerClaim,
        can_carry: bool,
    ) -> Result<PermissionAnswer> {
        // No central policy on one machine: never decide, so the harness's
        // own permission flow stays in charge. Claim only what this hook can
        // carry, deferred, so it is acked once written.
        let note = if can_carry { self.claim(&req.session_id, DeliveryEvent::PreToolUse, true, None)? } else { None };
        Ok(PermissionAnswer { decision: None, reason: String::new(), timed_out: false, note })
    }

    fn pull(&self, req: &PendingRequest) -> Result<Option<Claimed>> {
        self.claim(&req.session_id, req.event, req.defer_delivery, None)
    }

    fn pull_fitting(&self, req: &PendingRequest, fits: Fits<'_>) -> Result<Option<Claimed>> {
        self.claim(&req.session_id, req.event, req.defer_delivery, Some(fits))
    }

    fn ack(&self, req: &AckRequest) -> Result<()> {
        if req.note_ids.is_empty() {
            return Ok(());
        }
        let _g = self.lock()?;
        let now = Timestamp::now();
        for id in &req.note_ids {
            let Some(mut note) = self.read_note(id)? else { continue };
            if self.expire_if_due(&mut note, now)? {
                continue;
            }
            // §4.4: only a claimed note of this very session moves.
            if note.receipt.state != ReceiptState::Claimed || note.session_id() != Some(req.session_id.as_str()) {
                continue;
            }
            let r = &mut note.receipt;
            match req.undeliverable_reason {
                None => {
                    r.state = ReceiptState::Delivered;
                    r.delivered_at = Some(now);
                }
                Some(reason) => {
                    r.state = ReceiptState::Undeliverable;
                    r.undeliverable_at = Some(now);
                    r.undeliverable_reason = Some(reason.as_str().into());
                }
            }
            self.write_note(&note)?;
            let _ = std::fs::remove_file(self.claimed_dir(&req.session_id).join(id));
        }
        Ok(())
    }

    fn session_event(&self, _req: &SessionEventRequest) -> Result<()> {
        Ok(())
    }

    fn session_end(&self, req: &SessionEndRequest) -> Result<SessionEndResponse> {
        let _g = self.lock()?;
        let Some(mut file) = session::read_session_file(&self.home, &req.external_session_id)? else {
            return Ok(SessionEndResponse { runtime_session_id: None, marked: 0, marked_note_ids: Vec::new() }); // §4.6 no-op
        };
        let now = Timestamp::now();
        let mut marked = 0;
        let mut marked_note_ids = Vec::new();
        let sq = self.session_queue(&req.external_session_id);
        let cd = self.claimed_dir(&req.external_session_id);
        let ids: Vec<(PathBuf, String)> = fsutil::list_names(&sq)
            .into_iter()
            .filter_map(|n| n.split_once('-').map(|(_, id)| (sq.join(&n), id.to_string())))
            .chain(fsutil::list_names(&cd).into_iter().map(|id| (cd.join(&id), id)))
            .collect();
        for (entry, id) in ids {
            if let Some(mut note) = self.read_note(&id)?
                && !self.expire_if_due(&mut note, now)?
                && matches!(note.receipt.state, ReceiptState::Pending | ReceiptState::Claimed)
            {
                let r = &mut note.receipt;
                r.state = ReceiptState::Undeliverable;
                r.undeliverable_at = Some(now);
                r.undeliverable_reason = Some(UndeliverableReason::SessionEnded.as_str().into());
                r.external_session_id = Some(req.external_session_id.clone());
                r.runtime_session_id = Some(file.runtime_session_id.clone());
                self.write_note(&note)?;
                marked += 1;
                marked_note_ids.push(id);
            }
            let _ = std::fs::remove_file(entry);
        }
        if file.ended_at.is_none() {
            file.ended_at = Some(now);
            file.end_reason = Some(req.reason.clone());
            session::write_session_file(&self.home, &file)?;
        }
        Ok(SessionEndResponse { runtime_session_id: Some(file.runtime_session_id), marked, marked_note_ids })
    }
}

impl LocalInbox {
    fn unique_alias(&self, alias: &str, me: &SessionFile) -> String {
        let taken: Vec<String> = self
            .live_sessions()
            .into_iter()
            // Unique among every live session on this machine (the server
            // scopes an alias to its parent; one machine has one namespace,
            // so `notes send --alias` can never pick between two).
            .filter(|s| s.external_session_id != me.external_session_id)
            .filter_map(|s| s.alias)
            .collect();
        if !taken.iter().any(|t| t == alias) {
            return alias.to_string();
        }
        (2..).map(|n| format!("{alias}-{n}")).find(|c| !taken.contains(c)).unwrap_or_default()
    }
}

/// The server's alias rule: every char outside `[A-Za-z0-9._-]` becomes `-`,
/// cut to 64.
pub fn sanitize_alias(a: &str) -> String {
    a.trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .take(64)
        .collect()
}

/// A session's title from its first prompt, as the server makes it: one
/// line, credential-looking values masked, at most 120 characters
/// ([`crate::scrub::title_from_prompt`]). Empty for a blank prompt.
pub fn title_of(prompt: &str) -> String {
    crate::scrub::title_from_prompt(prompt).unwrap_or_default()
}

/// What the hook log says about one session: its last hook call and how
/// many tool calls its PreToolUse hooks saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookActivity {
    pub last: Timestamp,
    pub tool_calls: u64,
}

/// The hook log (`log/hooks.log` and its rotation), per harness session id,
/// read with [`crate::log::LogLine::parse`].
pub fn hook_activity(home: &Path) -> std::collections::HashMap<String, HookActivity> {
    let mut out: std::collections::HashMap<String, HookActivity> = std::collections::HashMap::new();
    for name in ["hooks.log.1", "hooks.log"] {
        let Ok(text) = std::fs::read_to_string(home.join("log").join(name)) else { continue };
        for line in text.lines() {
            let Some(entry) = crate::log::LogLine::parse(line) else { continue };
            let (t, event) = (entry.at, entry.event);
            let Some(sid) = entry.session() else { continue };
            let e = out.entry(sid.to_string()).or_insert(HookActivity { last: t, tool_calls: 0 });
            if t > e.last {
                e.last = t;
            }
            // One tool gate per tool call (the registry's, `is_tool_gate`).
            if crate::HookDef::logged(entry.harness, event).is_some_and(crate::HookDef::is_tool_gate) {
                e.tool_calls += 1;
            }
        }
    }
    out
}

/// The flow execution a session recorded at its start (`execution_id` in
/// its session file), if any.
pub fn execution_of(home: &Path, session_id: &str) -> Option<String> {
    let v: serde_json::Value = fsutil::read_json(&session::session_file_path(home, session_id)).ok().flatten()?;
    v.get("execution_id").and_then(serde_json::Value::as_str).filter(|s| !s.is_empty()).map(str::to_string)
}
