//! `preloop-codex-permission-request`: the Codex CLI PermissionRequest hook.
fn main() {
    preloop_codex::main(preloop_codex::Event::PermissionRequest)
}
