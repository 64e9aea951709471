pub mod render;
pub mod time;
