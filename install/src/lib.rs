//! `preloop-hooks`: the one executable. Started as `preloop-hooks` it is the
//! operator CLI (install the hooks into Claude Code, Codex, Cursor, Gemini
//! CLI and Copilot CLI, check the setup, log in, send and track operator
//! notes, find and watch sessions, a demo); started under a hook's name it
//! is that hook ([`multicall`]). The binary is a thin wrapper around
//! [`multicall::main`].

// Shipped code never panics on a value it did not check: an `unwrap` or
// `expect` outside tests is refused, and each true invariant is allowed by
// name where it is (docs/adding-a-harness.md, "Code rules").
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

/// The adapter crates, one per registry block, re-exported for the suites
/// that run a hook in-process (the hardening suite) so they name no adapter
/// crate of their own.
pub mod adapters {
    macro_rules! adapters {
        ($($h:ident $krate:ident $module:ident),+) => {
            $(pub use $krate;)+
        };
    }
    preloop_shared::for_each_harness!(adapters);
}
pub mod attach;
pub mod cli;
pub mod codex_trust;
pub mod context;
pub mod demo;
pub mod dialect;
pub mod doctor;
pub mod edit;
pub mod error;
pub mod hook_rows;
pub mod human_api;
pub mod install;
pub mod links;
pub mod login;
pub mod multicall;
pub mod names;
pub mod notes;
pub mod operator;
pub mod ops;
pub mod output;
pub mod probe;
pub mod sessions;
pub mod term;
pub mod transcript;
pub mod util;
