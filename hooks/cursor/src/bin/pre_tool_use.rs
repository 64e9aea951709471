//! `preloop-cursor-pre-tool-use`: the Cursor preToolUse hook.
fn main() {
    preloop_cursor::main(preloop_cursor::Event::PreToolUse)
}
