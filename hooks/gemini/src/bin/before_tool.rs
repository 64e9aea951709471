//! `preloop-gemini-before-tool`: the Gemini CLI BeforeTool hook.
fn main() {
    preloop_gemini::main(preloop_gemini::Event::BeforeTool)
}
