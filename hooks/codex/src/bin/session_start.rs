//! `preloop-codex-session-start`: the Codex CLI SessionStart hook.
fn main() {
    preloop_codex::main(preloop_codex::Event::SessionStart)
}
