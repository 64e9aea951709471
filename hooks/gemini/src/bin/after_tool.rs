//! `preloop-gemini-after-tool`: the Gemini CLI AfterTool hook.
fn main() {
    preloop_gemini::main(preloop_gemini::Event::AfterTool)
}
