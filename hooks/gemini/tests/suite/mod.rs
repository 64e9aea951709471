mod golden;
mod local_mode;
mod send_note;
mod server_mode;
mod shared;
