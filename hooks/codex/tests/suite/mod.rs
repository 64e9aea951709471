mod golden;
mod local_mode;
mod regressions;
mod server_mode;
