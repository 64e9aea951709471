//! `preloop-cursor-session-start`: the Cursor sessionStart hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_cursor::main(preloop_cursor::Event::SessionStart));
