//! A process, as this machine's process table names it once. Recorded in a
//! session file (the harness process a session's hooks serve) and sent at
//! registration; the lineage module finds it by walking `/proc`. Below
//! both `session` and `lineage`, which each need the type.

use serde::{Deserialize, Serialize};

/// A process, as this machine's process table names it once: the pid,
/// its start time (clock ticks after boot) and the boot it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HarnessProcess {
    pub pid: u32,
    pub start_time: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}
