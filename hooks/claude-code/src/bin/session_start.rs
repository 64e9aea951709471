//! `preloop-claude-code-session-start`: the Claude Code SessionStart hook.
fn main() {
    preloop_claude_code::main(preloop_claude_code::Event::SessionStart)
}
