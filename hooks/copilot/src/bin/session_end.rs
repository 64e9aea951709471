//! `preloop-copilot-session-end`: the Copilot CLI sessionEnd hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_copilot::main(preloop_copilot::Event::SessionEnd));
