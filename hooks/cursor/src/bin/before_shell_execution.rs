//! `preloop-cursor-before-shell-execution`: the Cursor beforeShellExecution hook.
fn main() {
    preloop_cursor::main(preloop_cursor::Event::BeforeShellExecution)
}
