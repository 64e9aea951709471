//! `preloop-claude-code-pre-tool-use`: the Claude Code PreToolUse hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_claude_code::main(preloop_claude_code::Event::PreToolUse));
