//! Lineage by process ancestry: which run started this one, where no
//! `PRELOOP_PARENT_SESSION_ID` arrived (docs/guarantees.md, "Lineage").
//!
//! Only Claude Code (`CLAUDE_ENV_FILE`) and Cursor (`env` on sessionStart)
//! let a hook export a variable to the commands the model runs. For the
//! other harnesses the parent is found the way a process tree shows it:
//!
//! * Each registration records the **harness process** the session's hooks
//!   serve (its pid, its start time and the machine's boot id, so a reused
//!   pid or another machine sharing `$PRELOOP_HOME` never matches) in the
//!   session file, and as an index entry `procs/<pid>-<start>` naming the
//!   session, so a lookup costs one failed `open` per ancestor rather than a
//!   read of every session file. SessionEnd removes the entry.
//! * A session's first registration, when no variable arrived, walks its own
//!   ancestors above its harness process (at most [`MAX_ANCESTORS`]) and
//!   takes the nearest one that is the harness process of a live session of
//!   ours (same `$PRELOOP_HOME`, files owned by us, not ended, same backend)
//!   as its parent. The parent is then sent and recorded exactly as an
//!   exported variable is (`parent_session_id`, write-once).
//!
//! The harness process of a hook is its nearest ancestor that is not a
//! shell (harnesses start hook commands directly or through `sh -c`).
//! Ancestors are read from Linux `/proc/<pid>/stat` (ppid is field 4, the
//! start time in clock ticks since boot field 22). The macOS counterpart
//! would be `proc_pidinfo(pid, PROC_PIDTBSDINFO)` (`pbi_ppid`,
//! `pbi_start_tvsec`/`pbi_start_tvusec`) or `sysctl(KERN_PROC_PID)`; it is
//! not implemented: elsewhere than Linux nothing is recorded and no parent
//! is found by ancestry.

use crate::backend::HookMode;
use crate::fsutil;
use crate::process::HarnessProcess;
use crate::session::{self, SessionFile};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Most ancestors a walk reads (a shell tool, a sandbox wrapper, a `nohup`,
/// the harness's own launcher take a handful; terminal, tmux and login
/// sessions a few more).
pub const MAX_ANCESTORS: usize = 32;

/// Programs that start a hook command without being the harness: shells
/// (`sh -c '<command>'`) and `timeout`, which stays the command's parent.
const WRAPPERS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "busybox", "timeout"];

/// One entry of the process table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: u32,
    pub comm: String,
    pub ppid: u32,
    pub start_time: u64,
}

/// Parse `/proc/<pid>/stat`: `pid (comm) state ppid ... starttime ...`.
/// The command name may hold spaces and parentheses, so the fields are
/// counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_ascii_whitespace().collect();
    // rest[0] is field 3 (state): field n is rest[n - 3].
    let ppid = rest.get(1)?.parse().ok()?;
    let start_time = rest.get(19)?.parse().ok()?;
    Some(ProcStat { pid, comm, ppid, start_time })
}

/// A process table: `/proc`, or a directory laid out like it (tests).
#[derive(Debug, Clone)]
pub struct Procs {
    root: PathBuf,
}

impl Procs {
    /// This machine's `/proc` (Linux only; elsewhere a table with no entries).
    pub fn system() -> Procs {
        Procs { root: PathBuf::from(if cfg!(target_os = "linux") { "/proc" } else { "/nonexistent-proc" }) }
    }

    pub fn at(root: impl Into<PathBuf>) -> Procs {
        Procs { root: root.into() }
    }

    pub fn stat(&self, pid: u32) -> Option<ProcStat> {
        let text = read_proc(&self.root.join(pid.to_string()).join("stat"))?;
        parse_stat(&text).filter(|s| s.pid == pid)
    }

    /// The kernel's boot id (`sys/kernel/random/boot_id`), if it has one.
    pub fn boot_id(&self) -> Option<String> {
        let text = read_proc(&self.root.join("sys/kernel/random/boot_id"))?;
        Some(text.trim().to_string()).filter(|t| !t.is_empty())
    }

    /// The ancestors of `pid`, its parent first: at most `max`, up to (not
    /// including) pid 1, and up to the first one `last` accepts. The walk
    /// stops at an entry it cannot read, and at one that started after its
    /// child (its pid was reused after the real parent exited).
    pub fn ancestors(&self, pid: u32, max: usize, last: impl Fn(&ProcStat) -> bool) -> Vec<ProcStat> {
        let mut out = Vec::new();
        let Some(mut child) = self.stat(pid) else { return out };
        while out.len() < max && child.ppid > 1 {
            let Some(parent) = self.stat(child.ppid) else { break };
            if parent.start_time > child.start_time {
                break;
            }
            out.push(parent.clone());
            if last(&parent) {
                break;
            }
            child = parent;
        }
        out
    }
}

/// Where a hook stands in the process tree: its ancestors (parent first)
/// and which of them is the harness process it serves.
#[derive(Debug, Clone)]
pub struct Ancestry {
    pub ancestors: Vec<ProcStat>,
    /// Index of the harness process in `ancestors`.
    pub harness: Option<usize>,
    pub boot_id: Option<String>,
}

impl Ancestry {
    /// Read the ancestry of `pid`: only up to its harness process unless
    /// `full` (the walk for a parent reads the rest).
    pub fn of(procs: &Procs, pid: u32, full: bool) -> Ancestry {
        let ancestors = procs.ancestors(pid, MAX_ANCESTORS, |a| !full && !is_wrapper(&a.comm));
        let harness = ancestors.iter().position(|a| !is_wrapper(&a.comm));
        Ancestry { ancestors, harness, boot_id: procs.boot_id() }
    }

    /// This hook's own ancestry (`full`: for a parent lookup).
    pub fn here(full: bool) -> Ancestry {
        Ancestry::of(&Procs::system(), std::process::id(), full)
    }

    fn process(&self, s: &ProcStat) -> HarnessProcess {
        HarnessProcess { pid: s.pid, start_time: s.start_time, boot_id: self.boot_id.clone() }
    }

    /// The harness process this hook serves, if it could be told.
    pub fn harness_process(&self) -> Option<HarnessProcess> {
        self.harness.map(|i| self.process(&self.ancestors[i]))
    }

    /// The processes above the harness, nearest first: where a parent run
    /// can be. (A session in the same process is not a child: a harness
    /// that starts a new session in place, like Claude Code's `/clear`, is
    /// not spawning a worker.)
    pub fn above_harness(&self) -> impl Iterator<Item = HarnessProcess> + '_ {
        let from = self.harness.map_or(0, |i| i + 1);
        self.ancestors[from.min(self.ancestors.len())..].iter().map(|s| self.process(s))
    }
}

fn is_wrapper(comm: &str) -> bool {
    // A login shell shows as `-bash`.
    WRAPPERS.contains(&comm.trim_start_matches('-'))
}

fn procs_dir(home: &Path) -> PathBuf {
    home.join("procs")
}

fn index_path(home: &Path, p: &HarnessProcess) -> PathBuf {
    procs_dir(home).join(format!("{}-{}", p.pid, p.start_time))
}

/// Past this many index entries, a new one first drops the entries of
/// processes that are gone (harnesses killed before their SessionEnd).
const PRUNE_AT: usize = 64;

/// Record that `session_id` is served by harness process `p` (its index
/// entry). Unchanged entries are not rewritten.
pub fn record(home: &Path, p: &HarnessProcess, session_id: &str) -> crate::Result<()> {
    let path = index_path(home, p);
    match read_owned(&path) {
        Some(id) if id == session_id => return Ok(()),
        Some(_) => {}
        None => prune(home, &Procs::system()),
    }
    fsutil::private_dir(&procs_dir(home))?;
    fsutil::write_atomic_unsynced(&path, session_id.as_bytes())
}

/// Drop index entries whose process is gone, once there are more than
/// [`PRUNE_AT`].
fn prune(home: &Path, procs: &Procs) {
    let dir = procs_dir(home);
    let names = fsutil::list_names(&dir);
    if names.len() <= PRUNE_AT {
        return;
    }
    for name in names {
        let Some((pid, start)) = name.split_once('-') else { continue };
        let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else { continue };
        if procs.stat(pid).is_none_or(|s| s.start_time != start) {
            let _ = std::fs::remove_file(dir.join(&name));
        }
    }
}

/// SessionEnd: drop the index entry of the session's harness process.
pub fn forget_session(home: &Path, session_id: &str) {
    if let Ok(Some(f)) = session::read_session_file(home, session_id)
        && let Some(p) = &f.harness_process
    {
        forget(home, p, session_id);
    }
}

/// Drop the index entry of `p` if it still names `session_id` (SessionEnd).
pub fn forget(home: &Path, p: &HarnessProcess, session_id: &str) {
    let path = index_path(home, p);
    if read_owned(&path).as_deref() == Some(session_id) {
        let _ = std::fs::remove_file(path);
    }
}

/// A small regular file of ours, as text (no symlinks, nothing another
/// user owns).
fn read_owned(path: &Path) -> Option<String> {
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path).ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() || meta.uid() != fsutil::euid() || meta.len() > 4096 {
        return None;
    }
    // Through `Take`, into room for the size just read: `File`'s own
    // `read_to_string` asks for the size again (`statx` + `lseek`).
    let mut text = String::with_capacity(meta.len() as usize + 1);
    io::Read::read_to_string(&mut io::Read::take(f, 4096), &mut text).ok()?;
    Some(text)
}

/// A `/proc` file, as text: read into 1 KiB of room (a `stat` line is a
/// few hundred bytes), two `read`s. `std::fs::read_to_string` asks for the
/// size (`statx`; `/proc` says 0) and then reads in 32-byte steps that grow
/// from there: six `read`s for one `stat` line. Round six.
fn read_proc(path: &Path) -> Option<String> {
    let f = std::fs::File::open(path).ok()?;
    let mut text = String::with_capacity(1024);
    io::Read::read_to_string(&mut io::Read::take(f, 1 << 20), &mut text).ok()?;
    Some(text)
}

/// The live session of ours whose harness process is `p`: its index entry
/// names it, its session file (ours, not ended, of `mode`) records `p`.
pub fn session_of(home: &Path, p: &HarnessProcess, mode: HookMode) -> Option<SessionFile> {
    let id = read_owned(&index_path(home, p))?;
    let path = session::session_file_path(home, &id);
    let owned = std::fs::symlink_metadata(&path).is_ok_and(|m| m.uid() == fsutil::euid());
    let file = session::read_session_file(home, &id).ok().flatten().filter(|_| owned)?;
    (file.ended_at.is_none() && file.mode == mode && file.harness_process.as_ref() == Some(p)).then_some(file)
}

/// The parent run of a session by ancestry: the nearest process above the
/// hook's harness that serves a live session of ours, other than `own`
/// (this session's runtime id, when it has one). Returns the parent's
/// runtime session id and the process it was found through.
pub fn find_parent(
    home: &Path,
    ancestry: &Ancestry,
    mode: HookMode,
    own: Option<&str>,
) -> Option<(String, HarnessProcess)> {
    ancestry.above_harness().find_map(|p| {
        session_of(home, &p, mode).map(|f| f.runtime_session_id).filter(|id| Some(id.as_str()) != own).map(|id| (id, p))
    })
}

/// The run a command was started from (the operator CLI run by a
/// conductor's shell tool, with no `PRELOOP_PARENT_SESSION_ID`): the
/// nearest of its ancestors that serves a live session of ours.
pub fn enclosing_session(home: &Path, mode: HookMode) -> Option<SessionFile> {
    let procs = Procs::system();
    let ancestors = procs.ancestors(std::process::id(), MAX_ANCESTORS, |_| false);
    let boot_id = procs.boot_id();
    ancestors.iter().find_map(|s| {
        session_of(home, &HarnessProcess { pid: s.pid, start_time: s.start_time, boot_id: boot_id.clone() }, mode)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;

    /// A temporary directory, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tempdir() -> TempDir {
        let d = std::env::temp_dir().join(format!("preloop-lineage-test-{}", fsutil::note_id()));
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    /// A fake `/proc`: (pid, comm, ppid, start time).
    fn fake_proc(dir: &Path, table: &[(u32, &str, u32, u64)]) -> Procs {
        for (pid, comm, ppid, start) in table {
            let d = dir.join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            // Fields 3..=22 after the comm; 22 is the start time.
            let mut fields = vec!["S".to_string(), ppid.to_string()];
            fields.extend((5..22).map(|n| n.to_string()));
            fields.push(start.to_string());
            fields.extend(["1000".to_string(), "2000".to_string()]);
            std::fs::write(d.join("stat"), format!("{pid} ({comm}) {}\n", fields.join(" "))).unwrap();
        }
        std::fs::create_dir_all(dir.join("sys/kernel/random")).unwrap();
        std::fs::write(dir.join("sys/kernel/random/boot_id"), "boot-1\n").unwrap();
        Procs::at(dir)
    }

    /// Round six: `/proc` files are read into 1 KiB of room; a longer one
    /// (a `stat` line with a long command name, past the room) is still
    /// read whole, and the real `/proc` parses.
    #[test]
    fn proc_files_are_read_whole_past_their_room() {
        let dir = tempdir();
        let procs = fake_proc(dir.path(), &[(7, "x".repeat(1500).as_str(), 1, 99)]);
        let s = procs.stat(7).expect("a stat line longer than 1 KiB");
        assert_eq!((s.ppid, s.start_time), (1, 99));
        assert_eq!(procs.boot_id().as_deref(), Some("boot-1"));
        let me = Procs::system().stat(std::process::id()).expect("this process's stat");
        assert_eq!(me.pid, std::process::id());
        std::fs::write(dir.path().join("rec"), "a".repeat(4096)).unwrap();
        assert_eq!(read_owned(&dir.path().join("rec")).map(|t| t.len()), Some(4096));
        std::fs::write(dir.path().join("rec"), "a".repeat(4097)).unwrap();
        assert_eq!(read_owned(&dir.path().join("rec")), None, "over 4 KiB: not ours");
    }

    fn session(home: &Path, id: &str, runtime: &str, hp: Option<HarnessProcess>, mode: HookMode) {
        let f = SessionFile {
            harness_process: hp.clone(),
            ..SessionFile::new(id, runtime, crate::AgentKind::of(crate::Harness::Codex), mode, Timestamp::now())
        };
        session::write_session_file(home, &f).unwrap();
        if let Some(p) = hp {
            record(home, &p, id).unwrap();
        }
    }

    fn hp(pid: u32, start: u64) -> HarnessProcess {
        HarnessProcess { pid, start_time: start, boot_id: Some("boot-1".into()) }
    }

    // The tree of a Codex conductor whose shell tool started `claude -p`:
    // node codex.js (100) > codex (110) > bash (120) > claude (130) > sh (140) > hook (150)
    const TREE: &[(u32, &str, u32, u64)] = &[
        (90, "tmux: server", 1, 5),
        (95, "bash", 90, 6),
        (100, "node", 95, 10),
        (110, "codex", 100, 11),
        (120, "bash", 110, 20),
        (130, "claude", 120, 21),
        (140, "sh", 130, 30),
        (150, "preloop-claude-", 140, 31),
    ];

    #[test]
    fn parses_a_stat_line_whose_name_holds_spaces_and_parens() {
        let s =
            parse_stat("4242 (a (b) c) S 17 4242 4242 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 987654 10 20\n").unwrap();
        assert_eq!(s, ProcStat { pid: 4242, comm: "a (b) c".into(), ppid: 17, start_time: 987654 });
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("12 (x) S 1"), None);
    }

    #[test]
    fn the_harness_is_the_nearest_ancestor_that_is_not_a_shell() {
        let dir = tempdir();
        let procs = fake_proc(dir.path(), TREE);
        let a = Ancestry::of(&procs, 150, false);
        assert_eq!(a.harness_process(), Some(hp(130, 21)));
        // Only up to the harness: not the whole tree.
        assert_eq!(a.ancestors.iter().map(|s| s.pid).collect::<Vec<_>>(), vec![140, 130]);
        let a = Ancestry::of(&procs, 150, true);
        assert_eq!(a.ancestors.iter().map(|s| s.pid).collect::<Vec<_>>(), vec![140, 130, 120, 110, 100, 95, 90]);
        assert_eq!(a.above_harness().map(|p| p.pid).collect::<Vec<_>>(), vec![120, 110, 100, 95, 90]);
    }

    #[test]
    fn finds_the_nearest_live_session_above_its_own_harness() {
        let dir = tempdir();
        let procs = fake_proc(&dir.path().join("proc"), TREE);
        let home = dir.path().join("home");
        session(&home, "conductor", "11111111-1111-4111-8111-111111111111", Some(hp(110, 11)), HookMode::Local);
        // A session of the terminal's shell further up does not win over the nearer one.
        session(&home, "outer", "22222222-2222-4222-8222-222222222222", Some(hp(95, 6)), HookMode::Local);
        let a = Ancestry::of(&procs, 150, true);
        let (parent, via) = find_parent(&home, &a, HookMode::Local, None).unwrap();
        assert_eq!(parent, "11111111-1111-4111-8111-111111111111");
        assert_eq!(via.pid, 110);
        // Never its own parent; another backend's session is not ours to name.
        assert_eq!(
            find_parent(&home, &a, HookMode::Local, Some(&parent)).unwrap().0,
            "22222222-2222-4222-8222-222222222222"
        );
        assert_eq!(find_parent(&home, &a, HookMode::Server, None), None);
    }

    #[test]
    fn a_session_of_its_own_harness_process_is_not_its_parent() {
        let dir = tempdir();
        let procs = fake_proc(&dir.path().join("proc"), TREE);
        let home = dir.path().join("home");
        session(&home, "same-process", "33333333-3333-4333-8333-333333333333", Some(hp(130, 21)), HookMode::Local);
        assert_eq!(find_parent(&home, &Ancestry::of(&procs, 150, true), HookMode::Local, None), None);
    }

    #[test]
    fn a_reused_pid_an_ended_session_or_another_boot_never_match() {
        let dir = tempdir();
        let procs = fake_proc(&dir.path().join("proc"), TREE);
        let home = dir.path().join("home");
        let a = Ancestry::of(&procs, 150, true);
        // Same pid, another start time: the conductor's process is gone, its pid reused.
        session(&home, "gone", "44444444-4444-4444-8444-444444444444", Some(hp(110, 3)), HookMode::Local);
        assert_eq!(find_parent(&home, &a, HookMode::Local, None), None);
        // Another machine sharing the home (another boot id).
        let other = HarnessProcess { boot_id: Some("boot-2".into()), ..hp(110, 11) };
        session(&home, "elsewhere", "55555555-5555-4555-8555-555555555555", Some(other), HookMode::Local);
        assert_eq!(find_parent(&home, &a, HookMode::Local, None), None);
        // The live conductor, then ended.
        session(&home, "conductor", "11111111-1111-4111-8111-111111111111", Some(hp(110, 11)), HookMode::Local);
        assert!(find_parent(&home, &a, HookMode::Local, None).is_some());
        let mut f = session::read_session_file(&home, "conductor").unwrap().unwrap();
        f.ended_at = Some(Timestamp::now());
        session::write_session_file(&home, &f).unwrap();
        assert_eq!(find_parent(&home, &a, HookMode::Local, None), None);
    }

    #[test]
    fn the_walk_is_bounded_and_stops_at_a_parent_younger_than_its_child() {
        let dir = tempdir();
        // A chain of 100 shells.
        let table: Vec<(u32, &str, u32, u64)> = (2..102).map(|pid| (pid, "bash", pid - 1, pid as u64)).collect();
        let procs = fake_proc(dir.path(), &table);
        assert_eq!(procs.ancestors(101, MAX_ANCESTORS, |_| false).len(), MAX_ANCESTORS);
        // The child outlived its parent and the pid went to a newer process.
        let dir = tempdir();
        let procs = fake_proc(dir.path(), &[(10, "codex", 1, 500), (20, "claude", 10, 100)]);
        assert!(procs.ancestors(20, MAX_ANCESTORS, |_| false).is_empty());
    }

    #[test]
    fn forget_drops_only_its_own_entry() {
        let dir = tempdir();
        let home = dir.path();
        record(home, &hp(7, 70), "a").unwrap();
        forget(home, &hp(7, 70), "b");
        assert_eq!(read_owned(&index_path(home, &hp(7, 70))).as_deref(), Some("a"));
        forget(home, &hp(7, 70), "a");
        assert!(!index_path(home, &hp(7, 70)).exists());
    }

    #[test]
    fn prunes_the_entries_of_processes_that_are_gone() {
        let dir = tempdir();
        let procs = fake_proc(&dir.path().join("proc"), &[(10, "codex", 1, 100)]);
        let home = dir.path().join("home");
        for pid in 1000..1000 + PRUNE_AT as u32 {
            record(&home, &hp(pid, 1), "gone").unwrap();
        }
        record(&home, &hp(10, 100), "live").unwrap();
        prune(&home, &procs);
        assert_eq!(fsutil::list_names(&procs_dir(&home)), vec!["10-100".to_string()]);
    }

    /// The real process table: this test process's own ancestry is read,
    /// and a child process finds this process as an ancestor.
    #[cfg(target_os = "linux")]
    #[test]
    fn reads_the_real_process_table() {
        let procs = Procs::system();
        let me = procs.stat(std::process::id()).unwrap();
        assert!(me.start_time > 0);
        assert!(procs.boot_id().is_some());
        let out = std::process::Command::new("sh").arg("-c").arg("cat /proc/$$/stat").output().unwrap();
        let child = parse_stat(&String::from_utf8_lossy(&out.stdout)).unwrap();
        assert_eq!(child.ppid, std::process::id());
        assert!(child.start_time >= me.start_time);
    }
}
