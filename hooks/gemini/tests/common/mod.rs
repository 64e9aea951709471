//! What the Gemini hook tests share: the 0.61.0 captures and our output
//! schemas, the built binaries, and running them the way Gemini CLI does
//! (stdout parsed as one JSON object; stderr must stay empty, because
//! Gemini parses stderr when stdout is empty). The generic pieces (homes,
//! runs, blocks, the shared scenarios) are `preloop_testkit`'s.

pub use preloop_testkit::hooks::Hooks;
pub use preloop_testkit::support::{Home, context_of, ids_in, unique_session};
use serde_json::Value;

preloop_testkit::hooks! {
    /// Gemini CLI 0.61.0's hooks, for `preloop_testkit::hooks`.
    pub Gemini(GeminiHome) = preloop_gemini, "gemini-cli-0.61.0";
    const QUIET_STDERR: bool = true;
}

pub fn fixture(name: &str) -> Value {
    preloop_testkit::support::fixture(Gemini::FIXTURES, name)
}

/// A capture with its session id replaced (each test gets its own session).
pub fn fixture_for(name: &str, session: &str) -> Value {
    Gemini::fixture_for(name, session)
}
