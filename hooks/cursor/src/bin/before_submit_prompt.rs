//! `preloop-cursor-before-submit-prompt`: the Cursor beforeSubmitPrompt hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_cursor::main(preloop_cursor::Event::BeforeSubmitPrompt));
