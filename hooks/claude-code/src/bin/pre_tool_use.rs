//! `preloop-claude-code-pre-tool-use`: the Claude Code PreToolUse hook.
fn main() {
    preloop_claude_code::main(preloop_claude_code::Event::PreToolUse)
}
