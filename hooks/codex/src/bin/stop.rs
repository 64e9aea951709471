//! `preloop-codex-stop`: the Codex CLI Stop hook.
fn main() {
    preloop_codex::main(preloop_codex::Event::Stop)
}
