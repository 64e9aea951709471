//! `preloop-copilot-pre-tool-use`: the Copilot CLI preToolUse hook.
fn main() {
    preloop_copilot::main(preloop_copilot::Event::PreToolUse)
}
