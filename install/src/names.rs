//! The executable's own names, below every module that needs them (the
//! CLI, `install`, `demo`, Pi's dialect and [`crate::multicall`], which
//! dispatches on them).

/// The CLI's own name; also any name that starts with it
/// (`preloop-hooks-0.1.0`, `preloop-hooks.real`).
pub const CLI_NAME: &str = "preloop-hooks";

/// The CLI's argument that selects a hook role: `preloop-hooks hook <name>`.
pub const HOOK_ARG: &str = "hook";
