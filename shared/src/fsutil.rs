//! Private files: 0700 directories, 0600 files written by atomic rename,
//! advisory locks with a deadline, and safe file names for session ids.

use crate::error::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Create `dir` and its missing parents with mode 0700 (whatever the umask),
/// and tighten `dir` itself to 0700 if it exists with looser bits. Refuses a
/// symlink in place of the directory.
pub fn private_dir(dir: &Path) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(Error::io(
                format!("refusing symlinked directory {}", dir.display()),
                io::Error::from(io::ErrorKind::InvalidInput),
            ));
        }
        Ok(m) if m.is_dir() => {
            if m.permissions().mode() & 0o077 != 0 {
                fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                    .map_err(|e| Error::io(format!("chmod {}", dir.display()), e))?;
            }
            return Ok(());
        }
        _ => {}
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    // `mode` is filtered by the umask; make it exact.
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::io(format!("chmod {}", dir.display()), e))
}

/// Write `bytes` to `path` atomically: a 0600 temporary file in the same
/// directory, fsync'd, then renamed over the target.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_as(path, bytes, true)
}

/// [`write_atomic`] without the `fdatasync`: atomic for every reader and
/// against a crash of the process, not against a power cut (the file may
/// then hold its previous content, or nothing on a file system that does
/// not order a rename after the data). Only for a file that mirrors a
/// record kept elsewhere (the server's) or whose loss costs no note (a
/// session state of counters alone), where the sync would cost a hook
/// 0.3-4 ms for nothing.
pub fn write_atomic_unsynced(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_as(path, bytes, false)
}

fn write_atomic_as(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.{}.{}.tmp", std::process::id(), unique_suffix()));
    let result = (|| -> io::Result<()> {
        let mut f = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        f.write_all(bytes)?;
        if sync {
            f.sync_data()?;
        }
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(format!("write {}", path.display()), e));
    }
    Ok(())
}

/// Create the empty file `path` (0600, not through a symlink) if it does not
/// exist: a marker whose existence is its content. No temporary file and no
/// sync: creating an empty file is atomic, and a temporary file's
/// `fdatasync` never made the rename that followed it durable anyway (that
/// takes a sync of the directory). Created just before the caller's synced
/// record of what it marks, it goes to disk with that record's journal
/// commit on ext4.
pub fn create_marker(path: &Path) -> Result<()> {
    create_private().open(path).map(drop).map_err(|e| Error::io(format!("create {}", path.display()), e))
}

/// Open for writing, created 0600 if missing, never truncated, never through
/// a symlink, never blocking on a fifo planted in its place.
fn create_private() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.write(true).create(true).truncate(false).mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    o
}

/// Serialize `value` as JSON and write it atomically.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    write_atomic(path, &encode_json(path, value)?)
}

/// [`write_json`] through [`write_atomic_unsynced`] (see there for when).
pub fn write_json_unsynced<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    write_atomic_unsynced(path, &encode_json(path, value)?)
}

fn encode_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(value).map_err(|e| Error::io(format!("encode {}", path.display()), io::Error::other(e)))
}

/// Read a JSON file; `Ok(None)` if it does not exist. A file that is not a
/// regular file (a symlink planted in our directory, a fifo) is refused.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    let bytes = match read_regular(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("read {}", path.display()), e)),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::io(format!("parse {}", path.display()), io::Error::new(io::ErrorKind::InvalidData, e)))
}

fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    // O_NONBLOCK: opening a fifo planted in our place must not hang the hook
    // (it is refused just below); regular files ignore the flag.
    let f = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not a regular file"));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    // Through `Take`: `File`'s own `read_to_end` asks for the size again
    // (one more `statx` per file; docs/performance.md, "Round five").
    io::Read::read_to_end(&mut io::Read::take(f, u64::MAX), &mut buf)?;
    Ok(buf)
}

/// Why a file or directory is not trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustError {
    /// Owned by another user (the uid).
    Owner(u32),
    /// Group- or world-writable (the mode).
    Writable(u32),
    NotADirectory,
    NotARegularFile,
    Io(String),
}

impl std::fmt::Display for TrustError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrustError::Owner(uid) => write!(f, "owned by another user (uid {uid}); refused"),
            TrustError::Writable(mode) => write!(f, "writable by other users (mode {:o}); refused", mode & 0o7777),
            TrustError::NotADirectory => f.write_str("not a directory"),
            TrustError::NotARegularFile => f.write_str("not a regular file"),
            TrustError::Io(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for TrustError {}

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn trusted(meta: &fs::Metadata) -> std::result::Result<(), TrustError> {
    use std::os::unix::fs::MetadataExt;
    if meta.uid() != euid() {
        return Err(TrustError::Owner(meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(TrustError::Writable(meta.mode()));
    }
    Ok(())
}

/// `PRELOOP_HOME`, the way ssh treats `~/.ssh`: if it exists, it must be a
/// directory owned by us that no one else can write to. One we own that
/// others can read is tightened to 0700. A home that does not exist yet is
/// fine (it is created 0700 on first use).
pub fn check_owned_dir(dir: &Path) -> std::result::Result<(), TrustError> {
    owned_dir_exists(dir).map(|_| ())
}

/// [`check_owned_dir`], and whether the directory exists: where it does
/// not, nothing in it can be read (a caller skips the look-ups).
pub fn owned_dir_exists(dir: &Path) -> std::result::Result<bool, TrustError> {
    let meta = match fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(TrustError::Io(e.to_string())),
    };
    if !meta.is_dir() {
        return Err(TrustError::NotADirectory);
    }
    trusted(&meta)?;
    if meta.permissions().mode() & 0o077 != 0 {
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    }
    Ok(true)
}

/// Read a JSON file that configures us (`config.json`, an onboarding file):
/// `Ok(None)` if it does not exist; an error if it cannot be read, is not
/// JSON, or could have been written by another user (owned by someone else,
/// or group/world-writable). A symlink is followed (dotfile managers make
/// them) and its target must pass the same checks.
pub fn read_owned_json_value(path: &Path) -> std::result::Result<Option<serde_json::Value>, TrustError> {
    let f = match OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path) {
        Ok(f) => f,
        // A link that points nowhere is a config someone meant to have.
        Err(e) if e.kind() == io::ErrorKind::NotFound && fs::symlink_metadata(path).is_ok() => {
            return Err(TrustError::Io("a symlink to a file that does not exist".into()));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(TrustError::Io(io_text(&e))),
    };
    let meta = f.metadata().map_err(|e| TrustError::Io(io_text(&e)))?;
    if !meta.is_file() {
        return Err(TrustError::NotARegularFile);
    }
    trusted(&meta)?;
    let mut buf = Vec::with_capacity(meta.len() as usize);
    io::Read::read_to_end(&mut { f }, &mut buf).map_err(|e| TrustError::Io(io_text(&e)))?;
    serde_json::from_slice(&buf).map(Some).map_err(|e| TrustError::Io(format!("not valid JSON: {e}")))
}

/// Whether a file we keep a secret in can be read by others.
pub fn readable_by_others(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o044 != 0)
}

/// An OS error as one short sentence, without Rust's `(os error N)`.
pub fn io_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// An exclusive advisory lock on a lock file, released on drop (and by the
/// OS if the process dies).
pub struct LockGuard {
    _file: File,
}

/// Take an exclusive lock on `path` (created 0600), waiting at most `wait`.
/// The lock is on the file `path` names once it is held: a holder may
/// unlink it ([`crate::session::RunFiles::remove`]), and whoever waited on
/// the unlinked file opens `path` again rather than holding a lock that no
/// longer excludes anyone.
pub fn lock(path: &Path, wait: Duration) -> Result<LockGuard> {
    use std::os::unix::fs::MetadataExt;
    let open =
        || create_private().read(true).open(path).map_err(|e| Error::io(format!("open lock {}", path.display()), e));
    let mut file = open()?;
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_micros(200);
    loop {
        match file.try_lock() {
            Ok(()) => {
                let held = file.metadata().map_err(|e| Error::io(format!("lock {}", path.display()), e))?;
                let named = fs::symlink_metadata(path).ok();
                if named.is_some_and(|n| (n.dev(), n.ino()) == (held.dev(), held.ino())) {
                    return Ok(LockGuard { _file: file });
                }
                // Unlinked (or replaced) while we waited: lock what it names now.
                if Instant::now() >= deadline {
                    return Err(Error::Busy(format!("lock {} was removed while we waited", path.display())));
                }
                file = open()?;
            }
            Err(fs::TryLockError::WouldBlock) => {
                if Instant::now() >= deadline {
                    return Err(Error::Busy(format!("lock {} still held after {:?}", path.display(), wait)));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(10));
            }
            Err(fs::TryLockError::Error(e)) => return Err(Error::io(format!("lock {}", path.display()), e)),
        }
    }
}

/// A file name for a harness session id. Ids the server accepts
/// (`[A-Za-z0-9_.:-]`, 1-200 chars) map to themselves unless they could be
/// mistaken for a relative path component; anything else maps to a stable
/// hash so no id can escape our directories.
pub fn session_file_stem(session_id: &str) -> String {
    let plain = !session_id.is_empty()
        && session_id.len() <= 200
        && !session_id.starts_with('.')
        && session_id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
    if plain { session_id.to_string() } else { format!("~{:016x}", fnv1a(session_id.as_bytes())) }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

fn unique_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// `N` random bytes from the OS.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    if getrandom::fill(&mut buf).is_err() {
        // Never expected on Unix; ids then still differ per process and call.
        let seed = format!("{:?}{}{}", std::time::SystemTime::now(), std::process::id(), unique_suffix());
        let mut h = fnv1a(seed.as_bytes());
        for b in buf.iter_mut() {
            h = h.wrapping_mul(0x100000001b3) ^ 0x9e37;
            *b = (h >> 32) as u8;
        }
    }
    buf
}

/// A random UUID v4 string.
pub fn uuid_v4() -> String {
    let mut b = random_bytes::<16>();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// 16 lowercase hex characters, the shape of a Preloop note id.
pub fn note_id() -> String {
    hex(&random_bytes::<8>())
}

pub fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

/// List the file names in `dir` (empty if it does not exist).
pub fn list_names(dir: &Path) -> Vec<String> {
    match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect(),
        Err(_) => Vec::new(),
    }
}

pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// Standard output through write(2) on fd 1. Rust's `Stdout` reports a
/// write to a closed descriptor (`EBADF`) as success, which would make a
/// hook ack a note nothing carried; here it is an error.
#[derive(Debug, Default)]
pub struct StdoutFd;

impl StdoutFd {
    pub fn new() -> StdoutFd {
        StdoutFd
    }
}

impl Write for StdoutFd {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `buf` is a valid slice for the duration of the call.
            let n = unsafe { libc::write(1, buf.as_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Close every descriptor above 2 that this process inherited or opened.
///
/// Linux 5.9+: one `close_range` call; elsewhere (or when the kernel lacks
/// it) each descriptor listed in `/proc/self/fd` (Linux) or `/dev/fd`
/// (macOS, the BSDs) is closed.
pub fn close_fds_above_stdio() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: close_range on a range of descriptor numbers has no
        // memory effects; fds 0-2 stay.
        if unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) } == 0 {
            return;
        }
    }
    let dir = if Path::new("/proc/self/fd").is_dir() { "/proc/self/fd" } else { "/dev/fd" };
    // Collect first: closing while listing would close the listing's own fd.
    let fds: Vec<i32> = match fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).filter(|fd| *fd > 2).collect(),
        Err(_) => return,
    };
    for fd in fds {
        // SAFETY: closing a descriptor number; one that is already gone
        // (the listing's own) fails with EBADF, which is fine.
        unsafe { libc::close(fd) };
    }
}

/// Whether fd 1 is open for writing (a harness that closed it reads nothing).
///
/// A closed fd 1 is reopened as `/dev/null` before `main` (by Rust's
/// runtime, or by [`sanitize_standard_fds`] in the hook binaries), so stdout
/// on the null device counts as closed too: nothing would read what we
/// print there.
pub fn stdout_is_open() -> bool {
    // SAFETY: fcntl with F_GETFL on any descriptor number is harmless.
    let flags = unsafe { libc::fcntl(1, libc::F_GETFL) };
    if flags == -1 || (flags & libc::O_ACCMODE) == libc::O_RDONLY {
        return false;
    }
    !is_null_device(1)
}

/// Whether `fd` is the null device.
fn is_null_device(fd: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: stat is plain integers, for which all zeros is valid.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat only writes the stat buffer, valid for its size; a bad
    // descriptor number is an error return, not undefined behaviour.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return false;
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFCHR {
        return false;
    }
    fs::metadata("/dev/null").is_ok_and(|m| m.rdev() == st.st_rdev)
}

/// Read `fd` to its end, at most `max` bytes, within `deadline`. A stream
/// that is still open at the deadline is an error: a harness writes the
/// payload at once and closes it.
pub fn read_fd_with_deadline(fd: i32, max: usize, deadline: Duration) -> std::result::Result<Vec<u8>, String> {
    read_fd_until(fd, max, deadline, false)
}

/// Read one line from `fd` within `deadline` (at most `max` bytes): the
/// bytes up to the first `\n` (without it), or up to end of file. The
/// writer must send nothing after the line until it hears back (a plugin
/// shim's protocol, [`crate::plugin`]), so nothing past it is consumed.
pub fn read_line_with_deadline(fd: i32, max: usize, deadline: Duration) -> std::result::Result<Vec<u8>, String> {
    let mut buf = read_fd_until(fd, max, deadline, true)?;
    if let Some(i) = buf.iter().position(|b| *b == b'\n') {
        buf.truncate(i);
    }
    Ok(buf)
}

fn read_fd_until(fd: i32, max: usize, deadline: Duration, line: bool) -> std::result::Result<Vec<u8>, String> {
    let end = Instant::now() + deadline;
    // A hook payload is a few KiB: start small and read straight into the
    // buffer's spare room (no zero-filled staging chunk), doubling it as
    // needed.
    let mut buf: Vec<u8> = Vec::with_capacity(8 * 1024);
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io_text(&e));
        }
        if r == 0 {
            return Err(format!(
                "still open after {} ms (a payload is written at once and closed)",
                deadline.as_millis()
            ));
        }
        if pfd.revents & libc::POLLNVAL != 0 {
            return Err("closed".into());
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(buf.capacity());
        }
        // One byte past `max` is enough to know the payload is too large.
        let room = (buf.capacity() - buf.len()).min(max + 1 - buf.len().min(max));
        let spare = buf.spare_capacity_mut();
        // SAFETY: `spare` is writable memory of at least `room` bytes that
        // read(2) fills; only the `n` bytes it reports are then marked
        // initialised.
        let n = unsafe { libc::read(fd, spare.as_mut_ptr().cast(), room) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => continue,
                _ => return Err(io_text(&e)),
            }
        }
        if n == 0 {
            return Ok(buf);
        }
        let before = buf.len();
        // SAFETY: read(2) initialised the first `n` bytes of the spare room.
        unsafe { buf.set_len(before + n as usize) };
        if buf.len() > max {
            return Err(format!("larger than {max} bytes"));
        }
        if line && buf[before..].contains(&b'\n') {
            return Ok(buf);
        }
    }
}

/// Make sure fds 0, 1 and 2 are open, as std's runtime does before `main`
/// (the hook binaries start without it, `#![no_main]`): a closed one is
/// reopened on `/dev/null`, so no file the hook opens later can take fd 1
/// and receive the output meant for the harness. Aborts if that fails.
pub fn sanitize_standard_fds() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd { fd, events: 0, revents: 0 });
    // SAFETY: three valid pollfds; a zero timeout only reports state.
    while unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } == -1 {
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            // poll(2) unusable (as std allows for): ask each fd instead.
            _ => {
                for pfd in &mut fds {
                    // SAFETY: F_GETFD on a descriptor number is harmless.
                    let closed = unsafe { libc::fcntl(pfd.fd, libc::F_GETFD) } == -1
                        && io::Error::last_os_error().raw_os_error() == Some(libc::EBADF);
                    pfd.revents = if closed { libc::POLLNVAL } else { 0 };
                }
                break;
            }
        }
    }
    for pfd in fds {
        if pfd.revents & libc::POLLNVAL != 0 {
            // SAFETY: a NUL-terminated path; the lowest free descriptor is
            // the closed one we are filling.
            let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
            if fd != pfd.fd {
                std::process::abort();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round six: a home that does not exist (also behind a dangling
    /// link) is told apart from one that does, so nothing is looked up in it.
    #[test]
    fn a_missing_owned_dir_is_told_apart() {
        let d = std::env::temp_dir().join(format!("preloop-fsutil-test-{}", note_id()));
        fs::create_dir_all(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(owned_dir_exists(&d), Ok(true));
        assert_eq!(owned_dir_exists(&d.join("missing")), Ok(false));
        std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling")).unwrap();
        assert_eq!(owned_dir_exists(&d.join("dangling")), Ok(false));
        fs::write(d.join("file"), "").unwrap();
        assert!(owned_dir_exists(&d.join("file")).is_err());
        assert!(check_owned_dir(&d.join("missing")).is_ok());
        let _ = fs::remove_dir_all(&d);
    }

    /// In a forked child (raw syscalls only after the fork): with fd 1
    /// closed, a file opened after [`sanitize_standard_fds`] cannot be fd 1,
    /// and fd 1 is the null device.
    #[test]
    fn closed_standard_fds_are_reopened() {
        // SAFETY: the child only makes async-signal-safe calls (close,
        // poll, open, fstat, stat, _exit) before it exits.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0, "fork");
            if pid == 0 {
                libc::close(1);
                sanitize_standard_fds();
                let f = libc::open(c"/proc/self/exe".as_ptr(), libc::O_RDONLY);
                let (mut one, mut null): (libc::stat, libc::stat) = (std::mem::zeroed(), std::mem::zeroed());
                let ok = f > 2
                    && libc::fstat(1, &mut one) == 0
                    && libc::stat(c"/dev/null".as_ptr(), &mut null) == 0
                    && one.st_rdev == null.st_rdev
                    && one.st_mode & libc::S_IFMT == libc::S_IFCHR;
                libc::_exit(if ok { 0 } else { 1 });
            }
            let mut status = 0;
            assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status}");
        }
    }

    #[test]
    fn session_stems_cannot_escape() {
        assert_eq!(session_file_stem("3f1c-abc_1.2:x"), "3f1c-abc_1.2:x");
        for bad in ["..", ".", "../x", "a/b", "", "a\0b", "é"] {
            let s = session_file_stem(bad);
            assert!(s.starts_with('~') && !s.contains('/'), "{bad:?} -> {s}");
        }
    }

    #[test]
    fn ids_have_the_server_shapes() {
        let id = note_id();
        assert_eq!(id.len(), 16);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        let u = uuid_v4();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }
}
