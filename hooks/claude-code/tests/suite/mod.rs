mod golden;
mod local_mode;
mod receipts;
mod regressions;
mod send_note;
mod server_mode;
mod watch;
mod written_files;
