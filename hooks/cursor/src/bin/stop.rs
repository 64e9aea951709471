//! `preloop-cursor-stop`: the Cursor stop hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_cursor::main(preloop_cursor::Event::Stop));
