//! `preloop-codex-session-end`: the Codex CLI SessionEnd hook.
fn main() {
    preloop_codex::main(preloop_codex::Event::SessionEnd)
}
