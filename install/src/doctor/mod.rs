//! `doctor`: is everything in place, and what applies here.
//!
//! Checks: the configuration (`$PRELOOP_HOME`, `config.json`, onboarding
//! files: readable, ours, not writable by others), which mode the hooks and
//! the operator commands use and why; each harness (installed? version?),
//! our entries in its config in both scopes, Codex trust per hook, folder
//! trust for project scope, whether each entry's program is the binary we
//! install (or an identical copy), the hook timeouts and Cursor's
//! `loop_limit`; for a server whether it answers, is a Preloop server and
//! accepts the tokens (cheap authenticated calls); the spool and session
//! state, the last errors in the hook log, and (with `--verbose`) the known
//! limits.
//!
//! In three steps: [`collect`] reads the machine (files, programs, the
//! server) into plain [`collect::Facts`]; [`judge`] turns them into the
//! [`Report`] and its findings without touching anything (unit-tested on
//! constructed facts); [`print`](mod@print) renders it. What differs per harness is its
//! dialect's ([`crate::dialect`]).
//! The report's types, which all three share, live in `model.rs`
//! (re-exported here), so none of the steps depends on this file.
//!
//! One problem is one line with one fix that works as written. Exit codes:
//! 0 healthy (warnings allowed); 5 our hooks are installed in no harness;
//! 6 an installation or configuration problem; 7 a server problem. With
//! several, the first in that order wins (5, 6, 7).

pub mod collect;
pub mod judge;
mod model;
pub mod print;

use crate::context::Ctx;
use crate::error::Exit;
use preloop_shared::config::Config;

pub use crate::dialect::TrustState;
pub use model::{
    ConfigState, EntryReport, Finding, HarnessReport, HealthState, HookMode, Modes, ProgramState, Report,
    SCHEMA_VERSION, ScopeReport, ServerReport, Severity, StateReport, TokenState, Uncarried, proven_version,
};

pub fn run(ctx: &Ctx, config: &Config, json: bool, deep_codex: bool, verbose: bool) -> Exit {
    let facts = collect::collect(ctx, config, deep_codex);
    let report = judge::judge(ctx, config, &facts);
    if json {
        crate::util::print_json(&report);
    } else {
        print::human(ctx, &report, verbose);
    }
    report.outcome
}
