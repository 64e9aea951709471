//! Test support for preloop-hooks.
//!
//! [`FakeServer`] is a faithful loopback fake of the Preloop server's hook
//! and operator-note routes (PyPI `preloop` 0.17.1, contract in
//! `docs/contracts/preloop-server.md`), with fault injection, a
//! request log and test controls, usable from Rust and, through the
//! `preloop-fake-server` binary and its `/_fake/` routes, from anything that
//! speaks HTTP. [`client`] is a tiny blocking HTTP client for tests.

pub mod client;
pub mod commands;
pub mod fake_server;
pub mod golden;
pub mod hooks;
mod http;
mod ids;
pub mod memory_backend;
pub mod proxy;
mod routes;
mod shared_state;
mod state;
pub mod stub_server;
pub mod support;
mod validate;

pub use fake_server::{AccountHandle, AgentHandle, FakeServer, FaultAction, FaultSpec, RecordedRequest, UserHandle};

use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{Author, SendRequest, Target};

/// Send a note through the local inbox as the tests' operator ("Olive
/// Operator", auth `jwt`, default expiry) and return its id: the one way
/// every test crate queues a local note.
pub fn send_local_note(inbox: &LocalInbox, target: Target, text: &str) -> String {
    let req = SendRequest {
        text: text.to_string(),
        target,
        next_session: false,
        expires_in_secs: None,
        author: Author { display: Some("Olive Operator".into()), auth_method: Some("jwt".into()), ..Author::default() },
    };
    inbox.send(&req).unwrap_or_else(|e| panic!("send a local note: {e}")).note_id
}
