mod engine;
mod local_inbox;
mod units;
