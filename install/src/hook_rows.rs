//! What we install, derived from the registry (`preloop_shared::registry`):
//! per harness, each event we hook, the binary that handles it, and the
//! harness timeout its role needs.

use preloop_shared::Harness;
use preloop_shared::config::Settings;
pub use preloop_shared::registry::{HookDef, Role, TimeoutUnit};

/// Our hooks for one harness, in registry order.
pub fn hooks_for(harness: Harness) -> impl Iterator<Item = &'static HookDef> {
    harness.hooks()
}

/// The `timeout` to write for a hook, in its harness's unit (Gemini:
/// milliseconds; everyone else: seconds).
pub fn timeout_value(def: &HookDef, s: &Settings) -> u64 {
    let secs = timeout_secs(def, s);
    match def.harness().def().timeout_unit {
        TimeoutUnit::Seconds => secs,
        TimeoutUnit::Millis => secs * 1000,
    }
}

/// The unit of [`timeout_value`], for people.
pub fn timeout_unit(h: Harness) -> &'static str {
    match h.def().timeout_unit {
        TimeoutUnit::Seconds => "s",
        TimeoutUnit::Millis => "ms",
    }
}

/// Codex clamps a SessionEnd timeout to 3 s; we use the same everywhere.
pub const END_TIMEOUT_SECS: u64 = 3;
/// Headroom past our own permission budget (process start, the session
/// registration and note calls around the permission check).
pub const PERMISSION_HEADROOM_SECS: u64 = 30;

/// The harness timeout (seconds) for a hook, from the settings the hooks
/// themselves use.
pub fn timeout_secs(def: &HookDef, s: &Settings) -> u64 {
    match def.role {
        // 310 s (server approval wait 300 s + 2 s, rounded up) + 30 s = 340 s by default.
        Role::Permission => s.permission_timeout_secs + PERMISSION_HEADROOM_SECS,
        // Up to three calls (session-start, pending, ack) of call_timeout_ms
        // each, plus 5 s, rounded up to 5 s: 20 s by default.
        Role::Lifecycle => {
            let secs = (3 * s.call_timeout_ms).div_ceil(1000) + 5;
            secs.div_ceil(5) * 5
        }
        // A harness that kills SessionEnd early (Claude Code, Codex) gets 3 s
        // (Codex clamps to it; the server calls run in a detached worker).
        // One that waits for it (Cursor, Gemini, Copilot) runs the calls
        // in-process with the ordinary call timeouts: as long as a
        // lifecycle hook, so the harness never cuts `session-end` short.
        Role::End if def.harness().def().session_end_kill_ms.is_some() => END_TIMEOUT_SECS,
        Role::End => {
            let secs = (3 * s.call_timeout_ms).div_ceil(1000) + 5;
            secs.div_ceil(5) * 5
        }
        // The watcher's own lifetime bound plus a minute: it always leaves by itself first.
        Role::Watch => s.watch_max_secs + 60,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for d in preloop_shared::registry::HOOKS {
            assert!(d.binary.starts_with(&format!("preloop-{}-", d.harness().slug())), "{d:?}");
            if let Some(known) = crate::dialect::of(d.harness()).known_events() {
                assert!(known.contains(&d.on), "{} is not an event {} knows", d.on, d.harness().name());
            }
        }
        // Every row belongs to exactly one harness's table.
        let per_harness: usize = Harness::all().map(|h| hooks_for(h).count()).sum();
        assert_eq!(per_harness, preloop_shared::registry::HOOKS.len());
        let gemini_end = hooks_for(Harness::Gemini).find(|d| d.role == Role::End).unwrap();
        // Gemini awaits SessionEnd: the ordinary lifecycle budget, in milliseconds.
        assert_eq!(timeout_value(gemini_end, &Settings::default()), 20_000, "Gemini counts milliseconds");
    }

    #[test]
    fn permission_hooks_outlast_the_server_wait() {
        let s = Settings::default();
        for d in preloop_shared::registry::HOOKS {
            let t = timeout_secs(d, &s);
            match d.role {
                Role::Permission => assert!(t > s.permission_timeout_secs + 10 && t < 600, "{t}"),
                Role::Lifecycle => assert!(t * 1000 > 3 * s.call_timeout_ms && t <= 30, "{t}"),
                Role::End if d.harness().def().session_end_kill_ms.is_some() => {
                    assert!(t * 1000 > s.session_end_budget_ms && t <= 3)
                }
                Role::End => assert!(t * 1000 > 3 * s.call_timeout_ms && t <= 30, "{t}"),
                Role::Watch => assert!(t > s.watch_max_secs),
            }
        }
    }
}
