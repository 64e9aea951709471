mod golden;
mod local_mode;
mod receipts;
mod regressions;
mod server_mode;
mod watch;
mod written_files;
