//! `preloop-codex-permission-request`: the Codex CLI PermissionRequest hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_codex::main(preloop_codex::Event::PermissionRequest));
