//! `preloop-copilot-post-tool-use`: the Copilot CLI postToolUse hook.
fn main() {
    preloop_copilot::main(preloop_copilot::Event::PostToolUse)
}
