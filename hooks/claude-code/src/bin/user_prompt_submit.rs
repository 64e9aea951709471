//! `preloop-claude-code-user-prompt-submit`: the Claude Code UserPromptSubmit hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_claude_code::main(preloop_claude_code::Event::UserPromptSubmit));
