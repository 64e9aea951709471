//! `preloop-cursor-session-end`: the Cursor sessionEnd hook.
fn main() {
    preloop_cursor::main(preloop_cursor::Event::SessionEnd)
}
