//! `preloop-codex-stop`: the Codex CLI Stop hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_codex::main(preloop_codex::Event::Stop));
