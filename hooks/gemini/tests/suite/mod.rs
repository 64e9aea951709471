mod golden;
mod local_mode;
mod server_mode;
mod shared;
