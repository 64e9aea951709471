//! `preloop-copilot-pre-tool-use`: the Copilot CLI preToolUse hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_copilot::main(preloop_copilot::Event::PreToolUse));
