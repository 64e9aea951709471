mod golden;
mod plugin;
mod lineage;
mod send_note;
mod shared;
