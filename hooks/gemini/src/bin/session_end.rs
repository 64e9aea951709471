//! `preloop-gemini-session-end`: the Gemini CLI SessionEnd hook.
fn main() {
    preloop_gemini::main(preloop_gemini::Event::SessionEnd)
}
