//! `preloop-codex-pre-tool-use`: the Codex CLI PreToolUse hook.
fn main() {
    preloop_codex::main(preloop_codex::Event::PreToolUse)
}
