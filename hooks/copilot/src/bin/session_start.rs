//! `preloop-copilot-session-start`: the Copilot CLI sessionStart hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_copilot::main(preloop_copilot::Event::SessionStart));
