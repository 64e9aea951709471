//! `preloop-cursor-pre-tool-use`: the Cursor preToolUse hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_cursor::main(preloop_cursor::Event::PreToolUse));
