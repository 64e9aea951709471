//! `preloop-claude-code-stop`: the Claude Code Stop hook.
fn main() {
    preloop_claude_code::main(preloop_claude_code::Event::Stop)
}
