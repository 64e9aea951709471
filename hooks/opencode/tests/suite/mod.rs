mod golden;
mod plugin;
mod send_note;
mod shared;
