//! `preloop-gemini-before-agent`: the Gemini CLI BeforeAgent hook.
fn main() {
    preloop_gemini::main(preloop_gemini::Event::BeforeAgent)
}
