//! `preloop-codex-user-prompt-submit`: the Codex CLI UserPromptSubmit hook.
fn main() {
    preloop_codex::main(preloop_codex::Event::UserPromptSubmit)
}
