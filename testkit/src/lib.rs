//! Test support for preloop-hooks.
//!
//! [`FakeServer`] is a faithful loopback fake of the Preloop server's hook
//! and operator-note routes (PyPI `preloop` 0.17.1, contract in
//! `/work/shared/contracts/preloop-hook-api.md`), with fault injection, a
//! request log and test controls, usable from Rust and, through the
//! `preloop-fake-server` binary and its `/_fake/` routes, from anything that
//! speaks HTTP. [`client`] is a tiny blocking HTTP client for tests.

pub mod client;
pub mod fake_server;
mod http;
mod ids;
mod routes;
mod state;
mod validate;

pub use fake_server::{AccountHandle, AgentHandle, FakeServer, FaultAction, FaultSpec, RecordedRequest, UserHandle};
