//! `preloop-claude-code-watch`: the background watcher that wakes an idle
//! Claude Code session when a note arrives (an `async` + `asyncRewake` hook
//! on Stop and SessionStart).
fn main() {
    preloop_claude_code::watch::main()
}
