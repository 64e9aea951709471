//! What the Pi hook tests share: our extension's payloads (built from the
//! Pi 0.73.1 captures, `fixtures/pi-0.73.1/`), our answer schemas, and
//! running the hook commands the way the extension does (a payload line,
//! an answer line, `applied`). The generic pieces are `preloop_testkit`'s.

pub use preloop_testkit::hooks::Hooks;
pub use preloop_testkit::support::Home;
use serde_json::Value;

preloop_testkit::hooks! {
    /// Pi 0.73.1's hooks through our extension, for `preloop_testkit::hooks`.
    pub Pi(PiHome) = preloop_pi, "pi-0.73.1";
    const PLUGIN: bool = true;
    /// The hooks Pi's events run: not the idle watcher (`preloop_pi::watch`,
    /// a loop of its own with its own tests).
    fn events() -> Vec<preloop_pi::Event> {
        preloop_pi::Event::ALL.into_iter().filter(|e| *e != preloop_pi::Event::Watch).collect()
    }
}

/// A payload, by its path under the fixtures.
pub fn fixture(name: &str) -> Value {
    preloop_testkit::support::fixture(Pi::FIXTURES, name)
}
