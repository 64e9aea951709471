//! The process's arguments, as the C runtime handed them to `main`.
//!
//! The executable starts without std's runtime (`#![no_main]`, see
//! [`crate::hook_main`]), so std never sees `argc`/`argv` through its own
//! start-up. On Linux with glibc std still finds them (glibc passes them to
//! the functions in `.init_array`, which std registers), but on other C
//! libraries (musl, the BSDs' and macOS's libc) `std::env::args` would be
//! empty: the detached SessionEnd worker would not recognise itself and the
//! CLI would see no command. So `main` captures them here first
//! ([`capture`]) and everything reads them through [`args_os`].

use std::ffi::{CStr, OsString, c_char, c_int};
use std::os::unix::ffi::OsStringExt;
use std::sync::OnceLock;

static ARGS: OnceLock<Vec<OsString>> = OnceLock::new();
/// The arguments as a hook role chosen on the command line sees them
/// ([`force_arg0`]).
static FORCED: OnceLock<Vec<OsString>> = OnceLock::new();

/// Run as the command `name` from here on, with the arguments after
/// `skip` (rustup's `RUSTUP_FORCE_ARG0`): `preloop-hooks hook
/// preloop-pi-tool-call` is then the hook `preloop-pi-tool-call`, for
/// [`invoked_name`] and [`arg_os`] alike (so a detached worker it starts
/// is started under that name too). Only the first call counts.
pub fn force_arg0(name: OsString, skip: usize) {
    let mut v = vec![name];
    v.extend(args_os().into_iter().skip(skip));
    let _ = FORCED.set(v);
}

/// Keep `argv` for [`args_os`]. Called once, first thing in `main`.
///
/// # Safety
/// `argv` must point to `argc` valid NUL-terminated strings (null pointers
/// are skipped), as the C runtime's `main` receives them.
pub unsafe fn capture(argc: c_int, argv: *const *const c_char) {
    let mut out = Vec::new();
    if !argv.is_null() {
        for i in 0..usize::try_from(argc).unwrap_or(0) {
            // SAFETY: the caller guarantees `argc` entries.
            let p = unsafe { *argv.add(i) };
            if p.is_null() {
                break;
            }
            // SAFETY: each entry is a NUL-terminated string (caller).
            out.push(OsString::from_vec(unsafe { CStr::from_ptr(p) }.to_bytes().to_vec()));
        }
    }
    let _ = ARGS.set(out);
}

/// The arguments, `argv[0]` first: the captured ones, else std's (a test
/// binary, or a build with std's own `main`).
pub fn args_os() -> Vec<OsString> {
    if let Some(f) = FORCED.get() {
        return f.clone();
    }
    match ARGS.get() {
        Some(a) => a.clone(),
        None => std::env::args_os().collect(),
    }
}

/// The argument at `i`, if there is one.
pub fn arg_os(i: usize) -> Option<OsString> {
    if let Some(f) = FORCED.get() {
        return f.get(i).cloned();
    }
    match ARGS.get() {
        Some(a) => a.get(i).cloned(),
        None => std::env::args_os().nth(i),
    }
}

/// The name the executable was started as: the last path component of
/// `argv[0]` (`preloop-claude-code-stop` for `/home/u/.local/bin/preloop-claude-code-stop`).
pub fn invoked_name() -> Option<OsString> {
    let argv0 = arg_os(0)?;
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(argv0.as_os_str());
    let base = bytes.rsplit(|b| *b == b'/').next().unwrap_or(bytes);
    Some(OsString::from_vec(base.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    #[test]
    fn capture_reads_argv_and_stops_at_null() {
        let a = CString::new("/x/bin/preloop-codex-stop").unwrap();
        let b = CString::new("--flag").unwrap();
        let argv = [a.as_ptr(), b.as_ptr(), std::ptr::null()];
        // SAFETY: three entries, the last null.
        unsafe { capture(3, argv.as_ptr()) };
        let got = ARGS.get().cloned().unwrap_or_default();
        assert_eq!(got, vec![OsString::from("/x/bin/preloop-codex-stop"), OsString::from("--flag")]);
        assert_eq!(invoked_name(), Some(OsString::from("preloop-codex-stop")));
        assert_eq!(arg_os(1), Some(OsString::from("--flag")));
    }
}
