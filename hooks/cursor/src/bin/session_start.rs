//! `preloop-cursor-session-start`: the Cursor sessionStart hook.
fn main() {
    preloop_cursor::main(preloop_cursor::Event::SessionStart)
}
