//! `preloop-claude-code-user-prompt-submit`: the Claude Code UserPromptSubmit hook.
fn main() {
    preloop_claude_code::main(preloop_claude_code::Event::UserPromptSubmit)
}
