//! `preloop-cursor-before-submit-prompt`: the Cursor beforeSubmitPrompt hook.
fn main() {
    preloop_cursor::main(preloop_cursor::Event::BeforeSubmitPrompt)
}
