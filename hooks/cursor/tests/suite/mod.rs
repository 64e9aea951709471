mod golden;
mod local;
mod regressions;
mod server;
