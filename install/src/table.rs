//! The one table of what we install: per harness, each event we hook, the
//! binary that handles it and the role that sets its timeout.
//!
//! | harness | event | binary | role |
//! |---|---|---|---|
//! | Claude Code | SessionStart | preloop-claude-code-session-start | lifecycle |
//! | Claude Code | UserPromptSubmit | preloop-claude-code-user-prompt-submit | lifecycle |
//! | Claude Code | PreToolUse | preloop-claude-code-pre-tool-use | permission |
//! | Claude Code | Stop | preloop-claude-code-stop | lifecycle |
//! | Claude Code | SessionEnd | preloop-claude-code-session-end | end |
//! | Claude Code | SessionStart, Stop | preloop-claude-code-watch | watch (async, asyncRewake) |
//! | Codex | SessionStart | preloop-codex-session-start | lifecycle |
//! | Codex | UserPromptSubmit | preloop-codex-user-prompt-submit | lifecycle |
//! | Codex | PreToolUse | preloop-codex-pre-tool-use | permission |
//! | Codex | PermissionRequest | preloop-codex-permission-request | permission |
//! | Codex | Stop | preloop-codex-stop | lifecycle |
//! | Codex | SessionEnd | preloop-codex-session-end | end |
//! | Cursor | sessionStart | preloop-cursor-session-start | lifecycle |
//! | Cursor | beforeSubmitPrompt | preloop-cursor-before-submit-prompt | lifecycle |
//! | Cursor | beforeShellExecution | preloop-cursor-before-shell-execution | permission |
//! | Cursor | beforeMCPExecution | preloop-cursor-before-mcp-execution | permission |
//! | Cursor | preToolUse | preloop-cursor-pre-tool-use | permission |
//! | Cursor | stop | preloop-cursor-stop | lifecycle |
//! | Cursor | sessionEnd | preloop-cursor-session-end | end |

use preloop_shared::Harness;
use preloop_shared::config::Settings;

/// What a hook does, which decides how long a harness may let it run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// May wait for a human's approval on the server: its harness timeout
    /// must outlast our own permission budget, so our hook always answers
    /// (and logs) before the harness could kill it and fail open silently.
    Permission,
    /// Session start, prompt, stop: a few short calls.
    Lifecycle,
    /// Session end: Codex caps it at 3 s, Claude Code cancels it after
    /// ~1.5 s unless a timeout is set.
    End,
    /// Claude Code's idle-wake watcher: runs in the background (`async`,
    /// `asyncRewake`) for up to `watch_max_secs`, and wakes the session by
    /// exiting 2 with the note block.
    Watch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookDef {
    pub harness: Harness,
    /// The harness's own event name, as written in its config.
    pub event: &'static str,
    /// Our binary's file name.
    pub binary: &'static str,
    pub role: Role,
}

const fn h(harness: Harness, event: &'static str, binary: &'static str, role: Role) -> HookDef {
    HookDef { harness, event, binary, role }
}

use Harness::{ClaudeCode as CC, Codex as CX, Cursor as CU};
use Role::{End, Lifecycle, Permission, Watch};

pub const HOOKS: &[HookDef] = &[
    h(CC, "SessionStart", "preloop-claude-code-session-start", Lifecycle),
    h(CC, "UserPromptSubmit", "preloop-claude-code-user-prompt-submit", Lifecycle),
    h(CC, "PreToolUse", "preloop-claude-code-pre-tool-use", Permission),
    h(CC, "Stop", "preloop-claude-code-stop", Lifecycle),
    h(CC, "SessionEnd", "preloop-claude-code-session-end", End),
    h(CC, "SessionStart", "preloop-claude-code-watch", Watch),
    h(CC, "Stop", "preloop-claude-code-watch", Watch),
    h(CX, "SessionStart", "preloop-codex-session-start", Lifecycle),
    h(CX, "UserPromptSubmit", "preloop-codex-user-prompt-submit", Lifecycle),
    h(CX, "PreToolUse", "preloop-codex-pre-tool-use", Permission),
    h(CX, "PermissionRequest", "preloop-codex-permission-request", Permission),
    h(CX, "Stop", "preloop-codex-stop", Lifecycle),
    h(CX, "SessionEnd", "preloop-codex-session-end", End),
    h(CU, "sessionStart", "preloop-cursor-session-start", Lifecycle),
    h(CU, "beforeSubmitPrompt", "preloop-cursor-before-submit-prompt", Lifecycle),
    h(CU, "beforeShellExecution", "preloop-cursor-before-shell-execution", Permission),
    h(CU, "beforeMCPExecution", "preloop-cursor-before-mcp-execution", Permission),
    h(CU, "preToolUse", "preloop-cursor-pre-tool-use", Permission),
    h(CU, "stop", "preloop-cursor-stop", Lifecycle),
    h(CU, "sessionEnd", "preloop-cursor-session-end", End),
];

/// Every event name Cursor documents for `hooks.json` (contract
/// cursor-hooks.md). One unknown key voids the whole file in some CLI builds,
/// so we never write a name outside this list.
pub const CURSOR_KNOWN_EVENTS: &[&str] = &[
    "sessionStart",
    "sessionEnd",
    "beforeSubmitPrompt",
    "beforeShellExecution",
    "afterShellExecution",
    "beforeMCPExecution",
    "afterMCPExecution",
    "beforeReadFile",
    "afterFileEdit",
    "beforeTabFileRead",
    "afterTabFileEdit",
    "preToolUse",
    "postToolUse",
    "postToolUseFailure",
    "subagentStart",
    "subagentStop",
    "preCompact",
    "stop",
    "afterAgentResponse",
    "afterAgentThought",
];

/// Our hooks for one harness, in table order.
pub fn hooks_for(harness: Harness) -> impl Iterator<Item = &'static HookDef> {
    HOOKS.iter().filter(move |d| d.harness == harness)
}

/// Whether `file_name` is one of our binaries for `harness`.
pub fn is_our_binary(harness: Harness, file_name: &str) -> bool {
    hooks_for(harness).any(|d| d.binary == file_name)
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
        Role::End => END_TIMEOUT_SECS,
        // The watcher's own lifetime bound plus a minute: it always leaves by itself first.
        Role::Watch => s.watch_max_secs + 60,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for d in HOOKS {
            assert!(d.binary.starts_with(&format!("preloop-{}-", d.harness.slug())), "{d:?}");
            if d.harness == Harness::Cursor {
                assert!(CURSOR_KNOWN_EVENTS.contains(&d.event), "{} is not a Cursor event", d.event);
            }
        }
        assert_eq!(hooks_for(Harness::ClaudeCode).count(), 7);
        assert_eq!(hooks_for(Harness::Codex).count(), 6);
        assert_eq!(hooks_for(Harness::Cursor).count(), 7);
    }

    #[test]
    fn permission_hooks_outlast_the_server_wait() {
        let s = Settings::default();
        for d in HOOKS {
            let t = timeout_secs(d, &s);
            match d.role {
                Role::Permission => assert!(t > s.permission_timeout_secs + 10 && t < 600, "{t}"),
                Role::Lifecycle => assert!(t * 1000 > 3 * s.call_timeout_ms && t <= 30, "{t}"),
                Role::End => assert!(t * 1000 > s.session_end_budget_ms && t <= 3),
                Role::Watch => assert!(t > s.watch_max_secs),
            }
        }
    }

    #[test]
    fn claude_table_matches_the_adapter() {
        // The Claude Code adapter's own event/binary names (hooks/claude-code).
        let adapter = [
            ("SessionStart", "preloop-claude-code-session-start"),
            ("UserPromptSubmit", "preloop-claude-code-user-prompt-submit"),
            ("PreToolUse", "preloop-claude-code-pre-tool-use"),
            ("Stop", "preloop-claude-code-stop"),
            ("SessionEnd", "preloop-claude-code-session-end"),
            ("SessionStart", "preloop-claude-code-watch"),
            ("Stop", "preloop-claude-code-watch"),
        ];
        let ours: Vec<_> = hooks_for(Harness::ClaudeCode).map(|d| (d.event, d.binary)).collect();
        assert_eq!(ours, adapter);
    }
}
