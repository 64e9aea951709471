//! `preloop-codex-user-prompt-submit`: the Codex CLI UserPromptSubmit hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_codex::main(preloop_codex::Event::UserPromptSubmit));
