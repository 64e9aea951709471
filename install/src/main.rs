//! `preloop-hooks` and every hook command: see [`preloop_hooks::multicall`].
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_hooks::multicall::main);
