//! Environment variables a dependency reads behind our back, made harmless
//! before anything can read them (docs/guarantees.md, "A repository cannot
//! move the gate", which lists every variable we know of and what we do).
//!
//! A repository can set the hooks' environment (a Gemini CLI `.env`, a
//! Claude Code `env` block). Most variables that matter we simply never
//! consult: no HTTP client of ours takes a proxy from the environment
//! ([`crate::http::ProxyUrl`]), the TLS roots are compiled in
//! (`webpki-roots`: `SSL_CERT_FILE`/`SSL_CERT_DIR` are read by nothing), no
//! rustls configuration logs keys (`SSLKEYLOGFILE` is read only by rustls's
//! `KeyLogFile`, which we never install). What remains is glibc's:
//!
//! - its resolver reads [`RESOLVER_VARS`] when a host name is looked up:
//!   `HOSTALIASES` names a file that maps a dot-less host name (`preloop`,
//!   `localhost`-style service names) to any other, `LOCALDOMAIN` replaces
//!   the search domains (`preloop` → `preloop.attacker.example`), and
//!   `RES_OPTIONS` changes `ndots` and the like. They are removed from the
//!   process environment first thing in `main` ([`harden`]), before any
//!   thread exists and before the first lookup;
//! - a static glibc build reads `LD_LIBRARY_PATH` during its own start-up,
//!   before `main`, as the search path of the NSS modules it dlopens for a
//!   lookup that reaches a module not built in (`mdns4_minimal`, `resolve`,
//!   `myhostname` in many `/etc/nsswitch.conf`): a repository's directory
//!   there would run its code inside the gate. Removing it in `main` is too
//!   late, so [`harden`] executes the same program again without it (once:
//!   the second start finds nothing to remove).

/// glibc resolver variables (`resolv/res_init.c`, `resolv/res_hconf.c`,
/// `resolv/res_query.c`): removed at start-up.
pub const RESOLVER_VARS: &[&str] = &[
    "HOSTALIASES",
    "LOCALDOMAIN",
    "RES_OPTIONS",
    "RESOLV_HOST_CONF",
    "RESOLV_MULTI",
    "RESOLV_REORDER",
    "RESOLV_SPOOF_CHECK",
    "RESOLV_ADD_TRIM",
    "RESOLV_OVERRIDE_TRIM",
];

/// Variables a static glibc consumes before `main` and that can load code:
/// the program is executed again without them.
pub const STARTUP_VARS: &[&str] = &["LD_LIBRARY_PATH"];

/// Remove [`RESOLVER_VARS`] from the environment and, in a static build,
/// start the program again without [`STARTUP_VARS`] when one is set.
///
/// # Safety
/// Call first thing in the C `main`, before any thread is started and
/// before anything reads the environment; `argv` must be the C runtime's
/// own, NULL-terminated.
pub unsafe fn harden(argv: *const *const core::ffi::c_char) {
    for var in RESOLVER_VARS {
        if std::env::var_os(var).is_some() {
            // SAFETY: the caller guarantees a single thread.
            unsafe { std::env::remove_var(var) };
        }
    }
    let startup: Vec<&str> = STARTUP_VARS.iter().copied().filter(|v| std::env::var_os(v).is_some()).collect();
    if startup.is_empty() {
        return;
    }
    for var in &startup {
        // SAFETY: as above.
        unsafe { std::env::remove_var(var) };
    }
    if cfg!(target_feature = "crt-static") && !argv.is_null() {
        // SAFETY: `argv` is the C runtime's NULL-terminated vector and the
        // path a literal; `execv` returns only when it failed, and then
        // this process goes on without the variables (which its own
        // dlopen search path may still hold).
        unsafe { libc::execv(c"/proc/self/exe".as_ptr(), argv) };
    }
}
