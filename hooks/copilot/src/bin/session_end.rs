//! `preloop-copilot-session-end`: the Copilot CLI sessionEnd hook.
fn main() {
    preloop_copilot::main(preloop_copilot::Event::SessionEnd)
}
