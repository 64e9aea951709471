//! `preloop-hooks`, the operator CLI: install the hooks into Claude Code,
//! Codex and Cursor, check the setup, log in, send and track operator notes,
//! and a demo. The binary is a thin wrapper around [`cli::main`].

pub mod cli;
pub mod codex_trust;
pub mod demo;
pub mod doctor;
pub mod edit;
pub mod install;
pub mod login;
pub mod notes;
pub mod server_op;
pub mod table;
pub mod util;
