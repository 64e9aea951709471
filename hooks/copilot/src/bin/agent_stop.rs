//! `preloop-copilot-agent-stop`: the Copilot CLI agentStop hook.
#![cfg_attr(not(test), no_main)]
preloop_shared::hook_main!(preloop_copilot::main(preloop_copilot::Event::AgentStop));
