//! What the Copilot hook tests share: the 1.0.102 captures (camelCase and
//! PascalCase dialects) and our output schemas, the built binaries, and
//! running them the way Copilot CLI does (stdout parsed as one JSON object;
//! exit 0, or Copilot ignores the JSON and preToolUse denies). The generic
//! pieces (homes, runs, blocks, the shared scenarios) are
//! `preloop_testkit`'s.

pub use preloop_testkit::hooks::Hooks;
pub use preloop_testkit::support::{Home, context_of, ids_in, unique_session};
use serde_json::Value;

preloop_testkit::hooks! {
    /// Copilot CLI 1.0.102's hooks, for `preloop_testkit::hooks`.
    pub Copilot(CopilotHome) = preloop_copilot, "copilot-cli-1.0.102";

    /// A camelCase capture with its session id replaced (each test gets its
    /// own session); a sub-agent's capture gets `session` as its parent.
    fn fixture_for(name: &str, session: &str) -> Value {
        let mut v = fixture(&format!("camel/{name}"));
        let key = if v.get("parentAgentId").is_some() { "parentAgentId" } else { "sessionId" };
        v[key] = Value::String(session.to_string());
        v
    }
}

/// A capture, by its path under the fixtures (`camel/...`, `pascal/...`).
pub fn fixture(name: &str) -> Value {
    preloop_testkit::support::fixture(Copilot::FIXTURES, name)
}

/// A camelCase capture as a fresh session ([`Hooks::fixture_for`]).
pub fn fixture_for(name: &str, session: &str) -> Value {
    Copilot::fixture_for(name, session)
}
