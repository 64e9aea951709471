//! `preloop-cursor-before-mcp-execution`: the Cursor beforeMCPExecution hook.
fn main() {
    preloop_cursor::main(preloop_cursor::Event::BeforeMcpExecution)
}
