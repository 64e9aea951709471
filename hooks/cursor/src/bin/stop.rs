//! `preloop-cursor-stop`: the Cursor stop hook.
fn main() {
    preloop_cursor::main(preloop_cursor::Event::Stop)
}
