//! `preloop-copilot-user-prompt-submitted`: the Copilot CLI userPromptSubmitted hook.
fn main() {
    preloop_copilot::main(preloop_copilot::Event::UserPromptSubmitted)
}
