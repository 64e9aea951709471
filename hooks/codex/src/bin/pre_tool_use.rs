//! `preloop-codex-pre-tool-use`: the Codex CLI PreToolUse hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_codex::main(preloop_codex::Event::PreToolUse));
