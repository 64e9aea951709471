//! `preloop-hooks`, the operator CLI: install the hooks into Claude Code,
//! Codex and Cursor, check the setup, log in, send and track operator notes,
//! and a demo. The binary is a thin wrapper around [`cli::main`].

pub mod attach;
pub mod cli;
pub mod codex_trust;
pub mod demo;
pub mod doctor;
pub mod edit;
pub mod install;
pub mod login;
pub mod notes;
pub mod ops;
pub mod output;
pub mod probe;
pub mod server_op;
pub mod sessions;
pub mod table;
pub mod term;
pub mod transcript;
pub mod util;
