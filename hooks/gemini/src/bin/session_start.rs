//! `preloop-gemini-session-start`: the Gemini CLI SessionStart hook.
fn main() {
    preloop_gemini::main(preloop_gemini::Event::SessionStart)
}
