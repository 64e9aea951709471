//! `preloop-gemini-after-agent`: the Gemini CLI AfterAgent hook.
fn main() {
    preloop_gemini::main(preloop_gemini::Event::AfterAgent)
}
