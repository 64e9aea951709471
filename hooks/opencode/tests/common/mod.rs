//! What the OpenCode hook tests share: our plugin's payloads (built from
//! the OpenCode 1.18.33 captures, `fixtures/opencode-1.18.33/`), our answer
//! schemas, and running the hook commands the way the plugin does (a
//! payload line, an answer line, `applied`). The generic pieces are
//! `preloop_testkit`'s.

pub use preloop_testkit::hooks::Hooks;
pub use preloop_testkit::support::Home;
use serde_json::Value;

preloop_testkit::hooks! {
    /// OpenCode 1.18.33's hooks through our plugin, for `preloop_testkit::hooks`.
    pub OpenCode(OpenCodeHome) = preloop_opencode, "opencode-1.18.33";
    const PLUGIN: bool = true;
    /// The hooks OpenCode's events run: not the idle watcher
    /// (`preloop_opencode::watch`, a loop of its own with its own tests).
    fn events() -> Vec<preloop_opencode::Event> {
        preloop_opencode::Event::ALL.into_iter().filter(|e| *e != preloop_opencode::Event::Watch).collect()
    }
}

/// A payload or capture, by its path under the fixtures.
pub fn fixture(name: &str) -> Value {
    preloop_testkit::support::fixture(OpenCode::FIXTURES, name)
}
