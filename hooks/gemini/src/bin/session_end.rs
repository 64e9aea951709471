//! `preloop-gemini-session-end`: the Gemini CLI SessionEnd hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_gemini::main(preloop_gemini::Event::SessionEnd));
