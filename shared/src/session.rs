//! Per-session files.
//!
//! * `sessions/<harness session id>.json` — the public session file the seed
//!   describes (`runtime_session_id`, `started_at`, `agent_kind`, `cwd`), so a
//!   conductor can read the runtime id of a worker it spawned. In local mode it
//!   is also the inbox's session registry.
//! * `run/<harness session id>.json` — private hook state: the runtime id, the
//!   first-prompt flag, the Stop-rescue count, the spool and acks still owed.
//!   Changed only under `run/<id>.lock`, written by atomic rename.

use crate::backend::HookMode;
use crate::error::Result;
use crate::fsutil::{self, LockGuard};
use crate::registry::AgentKind;
use crate::render::NoteElement;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The public session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionFile {
    pub runtime_session_id: String,
    pub started_at: Timestamp,
    /// The harness's source id (`claude_code`, `codex_cli`, `cursor`, …), as
    /// the hooks wrote it; a word this build does not know is kept (and the
    /// file still read).
    pub agent_kind: AgentKind,
    #[serde(default)]
    pub cwd: Option<String>,
    /// The harness's own session id (the file name).
    pub external_session_id: String,
    /// `local` (embedded inbox) or `server` (the default of a file that
    /// names none).
    #[serde(default = "default_mode")]
    pub mode: HookMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_prompt_at: Option<Timestamp>,
    /// The harness's transcript file, when its payloads name one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_path: Option<String>,
    /// The Preloop flow execution the run belongs to (`PRELOOP_FLOW_EXECUTION_ID`
    /// at its start), for `notes send --execution` on the local inbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// The harness process the session's hooks serve, for lineage by
    /// process ancestry (`lineage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_process: Option<crate::process::HarnessProcess>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
    /// Server mode, written at the session's end: notes the server
    /// recorded `delivered` when a permission check claimed them (an
    /// immediate claim beyond the carrier's room, or inside a sub-agent)
    /// that no output of this session carried, because it ended first.
    /// Their receipts over-report; `notes status` and `doctor` say so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncarried_notes: Vec<String>,
}

impl SessionFile {
    /// A session just registered: its ids, who runs it, in which mode,
    /// since when; nothing else known yet.
    pub fn new(
        external_session_id: &str,
        runtime_session_id: &str,
        agent_kind: AgentKind,
        mode: HookMode,
        started_at: Timestamp,
    ) -> SessionFile {
        SessionFile {
            runtime_session_id: runtime_session_id.into(),
            started_at,
            agent_kind,
            cwd: None,
            external_session_id: external_session_id.into(),
            mode,
            alias: None,
            parent_session_id: None,
            title: None,
            last_prompt_at: None,
            transcript_path: None,
            execution_id: None,
            harness_process: None,
            ended_at: None,
            end_reason: None,
            uncarried_notes: Vec::new(),
        }
    }
}

fn default_mode() -> HookMode {
    HookMode::Server
}

pub fn sessions_dir(home: &Path) -> PathBuf {
    home.join("sessions")
}

pub fn session_file_path(home: &Path, session_id: &str) -> PathBuf {
    sessions_dir(home).join(format!("{}.json", fsutil::session_file_stem(session_id)))
}

pub fn read_session_file(home: &Path, session_id: &str) -> Result<Option<SessionFile>> {
    fsutil::read_json(&session_file_path(home, session_id))
}

/// Write the local inbox's own record of a session (synced: the inbox is
/// the record).
pub fn write_session_file(home: &Path, file: &SessionFile) -> Result<()> {
    fsutil::private_dir(&sessions_dir(home))?;
    fsutil::write_json(&session_file_path(home, &file.external_session_id), file)
}

/// Write the server-mode mirror of a session the server holds the record
/// of (`sessions list`, `--execution` on this machine): atomic, not synced,
/// since a power cut can only cost a copy (an `fdatasync` here cost a
/// SessionStart or SessionEnd 0.3-4 ms, docs/performance.md).
pub fn write_session_mirror(home: &Path, file: &SessionFile) -> Result<()> {
    fsutil::private_dir(&sessions_dir(home))?;
    fsutil::write_json_unsynced(&session_file_path(home, &file.external_session_id), file)
}

/// Beside `sessions/`, not in it: whoever lists `sessions/` sees session
/// files only.
fn runtime_index_dir(home: &Path) -> PathBuf {
    home.join("index").join("by-runtime")
}

fn runtime_index_path(home: &Path, runtime_id: &str) -> PathBuf {
    runtime_index_dir(home).join(format!("{}.json", fsutil::session_file_stem(runtime_id)))
}

/// Record which harness session a runtime id names
/// (`index/by-runtime/<runtime id>.json`), so [`find_by_runtime_id`]
/// reads one file instead of every session file. Unsynced: a lost entry
/// only costs a scan.
pub fn index_runtime_id(home: &Path, file: &SessionFile) -> Result<()> {
    fsutil::private_dir(&home.join("index"))?;
    fsutil::private_dir(&runtime_index_dir(home))?;
    let body = serde_json::to_vec(&file.external_session_id).unwrap_or_default();
    fsutil::write_atomic_unsynced(&runtime_index_path(home, &file.runtime_session_id), &body)
}

/// The session file whose runtime id is `runtime_id`: through the index
/// when it has the entry, else by reading every session file (sessions
/// made before the index, or whose entry was lost).
pub fn find_by_runtime_id(home: &Path, runtime_id: &str) -> Option<SessionFile> {
    if let Ok(Some(external)) = fsutil::read_json::<String>(&runtime_index_path(home, runtime_id))
        && let Ok(Some(f)) = read_session_file(home, &external)
        && f.runtime_session_id == runtime_id
    {
        return Some(f);
    }
    all_session_files(home).into_iter().find(|s| s.runtime_session_id == runtime_id)
}

/// Every session file, in no particular order (unreadable ones skipped).
pub fn all_session_files(home: &Path) -> Vec<SessionFile> {
    let dir = sessions_dir(home);
    fsutil::list_names(&dir)
        .into_iter()
        .filter(|n| n.ends_with(".json"))
        .filter_map(|n| fsutil::read_json::<SessionFile>(&dir.join(n)).ok().flatten())
        .collect()
}

/// The harness session on this machine whose end left `note_id` uncarried
/// although the server recorded it `delivered` ([`SessionFile::uncarried_notes`]).
pub fn uncarried_by(home: &Path, note_id: &str) -> Option<String> {
    all_session_files(home)
        .into_iter()
        .find(|f| f.uncarried_notes.iter().any(|n| n == note_id))
        .map(|f| f.external_session_id)
}

/// A note held for a later carrying hook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpoolEntry {
    pub note: NoteElement,
    /// Claimed with deferral: ack after it is carried, or `spool_dropped`.
    pub deferred: bool,
    pub spooled_at: Timestamp,
}

/// Acks that could not be sent yet (the server was down after the output
/// was written); retried by the next hook of the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwedAck {
    pub note_ids: Vec<String>,
    pub dropped: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunState {
    pub runtime_session_id: Option<String>,
    pub first_prompt_registered: bool,
    pub stop_rescues: u32,
    pub spool: Vec<SpoolEntry>,
    pub owed_acks: Vec<OwedAck>,
}

impl RunState {
    /// Whether the state keeps a note or an ack that exists nowhere else
    /// once this hook is gone: spooled notes, acks still owed to the server.
    pub fn holds_notes(&self) -> bool {
        !self.spool.is_empty() || !self.owed_acks.is_empty()
    }
}

/// Where one session's private state lives.
#[derive(Debug, Clone)]
pub struct RunFiles {
    pub dir: PathBuf,
    pub state: PathBuf,
    pub lock: PathBuf,
    /// A detached SessionEnd worker still ending the session
    /// (`shared/src/detach.rs`).
    pub ending: PathBuf,
}

impl RunFiles {
    pub fn new(home: &Path, session_id: &str) -> RunFiles {
        let dir = home.join("run");
        let stem = fsutil::session_file_stem(session_id);
        RunFiles {
            state: dir.join(format!("{stem}.json")),
            lock: dir.join(format!("{stem}.lock")),
            ending: dir.join(format!("{stem}.ending")),
            dir,
        }
    }

    /// Read the state without the lock (writes are atomic renames, so a
    /// reader sees an old or a new state, never a torn one). A corrupt file
    /// reads as empty state; the error is returned for the log.
    pub fn read(&self) -> (RunState, Option<crate::error::Error>) {
        match fsutil::read_json::<RunState>(&self.state) {
            Ok(s) => (s.unwrap_or_default(), None),
            Err(e) => (RunState::default(), Some(e)),
        }
    }

    pub fn lock(&self, wait: Duration) -> Result<LockGuard> {
        fsutil::private_dir(&self.dir)?;
        fsutil::lock(&self.lock, wait)
    }

    /// Write the state (call with the lock held): atomically always, and
    /// with an `fdatasync` only when it [holds notes](RunState::holds_notes).
    /// A state of counters and ids alone (the Stop rescue count, the runtime
    /// session id) is rebuilt or merely loosened by losing it in a power cut
    /// (one more rescue, a re-registration), so it does not pay the 0.3-0.5
    /// ms sync on every with-note Stop (docs/performance.md). A write that
    /// empties the spool is unsynced too: the notes it took are in the
    /// output this hook writes next, which a power cut loses as well.
    pub fn write(&self, state: &RunState) -> Result<()> {
        fsutil::private_dir(&self.dir)?;
        if state.holds_notes() {
            fsutil::write_json(&self.state, state)
        } else {
            fsutil::write_json_unsynced(&self.state, state)
        }
    }

    /// Forget the session's private state (SessionEnd): the state, then the
    /// lock file, both while holding the lock, so no hook still writing the
    /// state loses its write to the removal, and one that waited for the
    /// lock locks a new file ([`fsutil::lock`]) rather than one it shares
    /// with a later locker. When the lock cannot be had in time, the state
    /// goes and the lock file stays.
    pub fn remove(&self, wait: Duration) {
        let guard = self.lock(wait).ok();
        let _ = std::fs::remove_file(&self.state);
        if guard.is_some() {
            let _ = std::fs::remove_file(&self.lock);
        }
    }
}

#[cfg(test)]
mod runtime_index_tests {
    use super::*;

    /// `mode` is the enum, written as before: `local`/`server`; a file
    /// that names none is a server-mode one (older files), and a word this
    /// build does not know reads as `unknown` rather than losing the file.
    #[test]
    fn a_session_files_mode_reads_and_writes_as_its_word() {
        let f = file("e1", "r1");
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["mode"], "local");
        let mut old = v.clone();
        old.as_object_mut().unwrap().remove("mode");
        assert_eq!(serde_json::from_value::<SessionFile>(old).unwrap().mode, HookMode::Server);
        let mut odd = v;
        odd["mode"] = serde_json::json!("hybrid");
        assert_eq!(serde_json::from_value::<SessionFile>(odd).unwrap().mode, HookMode::Unknown);
    }

    /// `agent_kind` is [`AgentKind`], written as the word it was read as:
    /// each harness's source, an alias (`codex`) and a word this build does
    /// not know (a newer harness) come back byte for byte, and the unknown
    /// one still reads the file.
    #[test]
    fn a_session_files_agent_kind_reads_and_writes_as_its_word() {
        let words = crate::Harness::all().map(|h| h.source()).chain(["codex", "someday_cli", ""]);
        for word in words {
            let text = serde_json::to_string(&file("e1", "r1"))
                .unwrap()
                .replace(r#""agent_kind":"claude_code""#, &format!(r#""agent_kind":{}"#, serde_json::json!(word)));
            let read: SessionFile = serde_json::from_str(&text).unwrap();
            assert_eq!(read.agent_kind.as_str(), word);
            assert_eq!(serde_json::to_string(&read).unwrap(), text, "{word}");
            assert_eq!(read.agent_kind.harness(), crate::Harness::from_source(word), "{word}");
        }
        let codex: AgentKind = "codex".into();
        assert_eq!((codex.harness(), codex.as_str()), (Some(crate::Harness::Codex), "codex"));
        assert_eq!(AgentKind::from("someday_cli"), AgentKind::Other("someday_cli".into()));
    }

    /// `RunFiles::remove` unlinks the lock file while holding it: a hook
    /// that waited on the unlinked file must not hold it beside one that
    /// locked the new file at the same path (two holders, the state
    /// written by both), and once that one lets go it gets the lock.
    #[test]
    fn a_lock_file_removed_while_held_never_gives_two_holders() {
        let home = std::env::temp_dir().join(format!("preloop-run-lock-{}", fsutil::note_id()));
        fsutil::private_dir(&home).unwrap();
        let run = RunFiles::new(&home, "s");
        let first = run.lock(Duration::from_secs(1)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let home = home.clone();
            std::thread::spawn(move || {
                let g = RunFiles::new(&home, "s").lock(Duration::from_secs(10)).unwrap();
                tx.send(()).unwrap();
                drop(g);
            })
        };
        std::thread::sleep(Duration::from_millis(100)); // the waiter waits on the first file
        std::fs::remove_file(&run.lock).unwrap(); // as `remove` does, under the lock
        let newcomer = run.lock(Duration::ZERO).expect("the path names a new, free file");
        drop(first);
        assert!(
            rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "the waiter holds the unlinked file while the newcomer holds the new one"
        );
        drop(newcomer);
        rx.recv_timeout(Duration::from_secs(5)).expect("the waiter gets the lock once the newcomer lets go");
        waiter.join().unwrap();
        let _ = std::fs::remove_dir_all(&home);
    }

    fn file(external: &str, runtime: &str) -> SessionFile {
        SessionFile::new(
            external,
            runtime,
            AgentKind::of(crate::Harness::ClaudeCode),
            HookMode::Local,
            Timestamp::now(),
        )
    }

    #[test]
    fn a_runtime_id_is_found_through_the_index_and_without_it() {
        let home = std::env::temp_dir().join(format!("preloop-rt-index-{}", fsutil::note_id()));
        fsutil::private_dir(&home).unwrap();
        let (a, b) = (
            file("sess-a", "11111111-1111-4111-8111-111111111111"),
            file("sess-b", "22222222-2222-4222-8222-222222222222"),
        );
        for f in [&a, &b] {
            write_session_file(&home, f).unwrap();
        }
        index_runtime_id(&home, &a).unwrap();
        assert!(runtime_index_path(&home, &a.runtime_session_id).exists());
        assert_eq!(
            find_by_runtime_id(&home, &a.runtime_session_id).map(|f| f.external_session_id),
            Some("sess-a".into())
        );
        // No entry (a session from before the index): found by the scan.
        assert_eq!(
            find_by_runtime_id(&home, &b.runtime_session_id).map(|f| f.external_session_id),
            Some("sess-b".into())
        );
        // An entry that names another session is not believed.
        fsutil::write_atomic(&runtime_index_path(&home, &b.runtime_session_id), b"\"sess-a\"").unwrap();
        assert_eq!(
            find_by_runtime_id(&home, &b.runtime_session_id).map(|f| f.external_session_id),
            Some("sess-b".into())
        );
        assert!(find_by_runtime_id(&home, "33333333-3333-4333-8333-333333333333").is_none());
        let _ = std::fs::remove_dir_all(&home);
    }
}
