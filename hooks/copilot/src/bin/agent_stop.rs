//! `preloop-copilot-agent-stop`: the Copilot CLI agentStop hook.
fn main() {
    preloop_copilot::main(preloop_copilot::Event::AgentStop)
}
