//! `preloop-copilot-session-start`: the Copilot CLI sessionStart hook.
fn main() {
    preloop_copilot::main(preloop_copilot::Event::SessionStart)
}
