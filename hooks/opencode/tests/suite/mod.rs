mod golden;
mod lineage;
mod orphan;
mod plugin;
mod send_note;
mod shared;
