//! `preloop-copilot-user-prompt-submitted`: the Copilot CLI userPromptSubmitted hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_copilot::main(preloop_copilot::Event::UserPromptSubmitted));
