mod golden;
mod plugin;
mod shared;
