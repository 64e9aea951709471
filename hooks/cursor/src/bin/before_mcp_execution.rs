//! `preloop-cursor-before-mcp-execution`: the Cursor beforeMCPExecution hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_cursor::main(preloop_cursor::Event::BeforeMcpExecution));
