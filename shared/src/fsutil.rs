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
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.{}.{}.tmp", std::process::id(), unique_suffix()));
    let result = (|| -> io::Result<()> {
        let mut f = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        f.write_all(bytes)?;
        f.sync_data()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(format!("write {}", path.display()), e));
    }
    Ok(())
}

/// Serialize `value` as JSON and write it atomically.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(value)
        .map_err(|e| Error::io(format!("encode {}", path.display()), io::Error::other(e)))?;
    write_atomic(path, &bytes)
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
    let f = OpenOptions::new().read(true).custom_flags(libc_o_nofollow()).open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not a regular file"));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    io::Read::read_to_end(&mut { f }, &mut buf)?;
    Ok(buf)
}

/// `O_NOFOLLOW` on Linux and the BSDs/macOS.
const fn libc_o_nofollow() -> i32 {
    if cfg!(any(target_os = "linux", target_os = "android")) { 0o400000 } else { 0x0100 }
}

/// An exclusive advisory lock on a lock file, released on drop (and by the
/// OS if the process dies).
pub struct LockGuard {
    _file: File,
}

/// Take an exclusive lock on `path` (created 0600), waiting at most `wait`.
pub fn lock(path: &Path, wait: Duration) -> Result<LockGuard> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc_o_nofollow())
        .open(path)
        .map_err(|e| Error::io(format!("open lock {}", path.display()), e))?;
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_micros(200);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(LockGuard { _file: file }),
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

/// `count` random bytes from the OS.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    if let Ok(mut f) = File::open("/dev/urandom")
        && io::Read::read_exact(&mut f, &mut buf).is_ok()
    {
        return buf;
    }
    // Fallback: time, pid and a counter through FNV (never expected on Unix).
    let seed = format!("{:?}{}{}", std::time::SystemTime::now(), std::process::id(), unique_suffix());
    let mut h = fnv1a(seed.as_bytes());
    for b in buf.iter_mut() {
        h = h.wrapping_mul(0x100000001b3) ^ 0x9e37;
        *b = (h >> 32) as u8;
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

#[cfg(test)]
mod tests {
    use super::*;

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
