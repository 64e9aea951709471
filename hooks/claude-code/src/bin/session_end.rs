//! `preloop-claude-code-session-end`: the Claude Code SessionEnd hook.
fn main() {
    preloop_claude_code::main(preloop_claude_code::Event::SessionEnd)
}
