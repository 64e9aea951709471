//! The preloop-hooks engine.
//!
//! Harness adapters (in `hooks/<harness>`) turn a hook's stdin into an
//! [`flow::Input`] and an [`flow::Outcome`] back into the JSON that event
//! accepts; everything in between lives here, once: configuration, the two
//! backends behind [`backend::Backend`] (the Preloop server and the local
//! inbox), the spool and session state, the note renderer, the hook log, and
//! the [`runner`] that makes every binary answer the harness no matter what.

// Shipped code never panics on a value it did not check: an `unwrap` or
// `expect` outside tests is refused, and each true invariant is allowed by
// name where it is (docs/adding-a-harness.md, "Code rules").
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod adapter;
pub mod args;
pub mod backend;
pub mod config;
pub mod detach;
pub mod ending;
pub mod entry;
pub mod envguard;
pub mod error;
pub mod flow;
pub mod fsutil;
pub mod http;
pub mod http_plain;
pub mod json;
pub mod lineage;
pub mod local;
pub mod log;
pub mod operator;
pub mod plugin;
pub mod process;
pub mod redact;
pub mod registry;
pub mod render;
pub mod runner;
pub mod scrub;
pub mod server;
pub mod session;
pub mod settings;
pub mod time;
pub mod watch;
pub mod wire;
pub mod words;

pub use error::{Error, Result};

pub use registry::{AgentKind, Harness, HarnessDef, HookDef};

/// Whether this test run rewrites the files a test generates
/// (`PRELOOP_BLESS` set and not `0`, as `preloop_testkit::golden::blessing`).
#[cfg(test)]
pub(crate) fn blessing() -> bool {
    std::env::var_os("PRELOOP_BLESS").is_some_and(|v| v != "0")
}

/// The C `main` of the executable, without std's runtime start-up: the
/// binary says `#![cfg_attr(not(test), no_main)]` and
/// `preloop_shared::hook_main!(my_crate::dispatch);`, where `dispatch` is a
/// `fn() -> i32` that reads the arguments through [`args`].
///
/// std's start-up costs a hook about a tenth of a millisecond (it parses
/// `/proc/self/maps` for the main thread's stack guard and installs signal
/// handlers; docs/performance.md, "Round two"). What of it a hook needs is
/// done here and in [`runner::prepare_process`]: fds 0-2 are made sure to be
/// open ([`fsutil::sanitize_standard_fds`]) before anything else, `argv` is
/// kept for [`args::args_os`] (std finds it on glibc only), SIGPIPE is
/// ignored, and the variables glibc would read behind our back are removed
/// ([`envguard::harden`]). `std::env::vars` and `std::process::exit` work as usual.
#[macro_export]
macro_rules! hook_main {
    ($run:path) => {
        // A test build of the binary keeps the test harness's `main`.
        #[cfg(not(test))]
        #[unsafe(no_mangle)]
        extern "C" fn main(argc: ::core::ffi::c_int, argv: *const *const ::core::ffi::c_char) -> ::core::ffi::c_int {
            $crate::fsutil::sanitize_standard_fds();
            // SAFETY: first thing in `main`, one thread, the C runtime's
            // own `argv` (docs/guarantees.md: the variables it removes).
            unsafe { $crate::envguard::harden(argv) };
            // SAFETY: `argc` and `argv` are the C runtime's own, valid for
            // the life of the process.
            unsafe { $crate::args::capture(argc, argv) };
            $run()
        }
    };
}

/// The fixed string values of harness outputs (`"PreToolUse"`, `"deny"`,
/// `"block"`...) as one-value enums, so an output type can hold no other
/// value: `preloop_shared::output_names! { Deny => "deny" }`. The calling
/// crate depends on serde (and, for its schema tests, schemars).
#[macro_export]
macro_rules! output_names {
    ($($(#[$m:meta])* $name:ident => $text:literal),* $(,)?) => {$(
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
        #[cfg_attr(test, derive(schemars::JsonSchema))]
        pub enum $name {
            #[serde(rename = $text)]
            $name,
        }
    )*};
}
