//! `preloop-gemini-session-start`: the Gemini CLI SessionStart hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_gemini::main(preloop_gemini::Event::SessionStart));
