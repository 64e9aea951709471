//! What `doctor` reports: the [`Report`] and every state and finding in it
//! (`doctor --json`'s shape, schemas/preloop-hooks/doctor.schema.json).
//! Plain types that [`super::collect`], [`super::judge`] and
//! [`super::print`](mod@super::print) share; they depend on this file, never
//! on `mod.rs`, which only runs the three steps.

use crate::dialect::TrustState;
use crate::error::Exit;
use preloop_shared::Harness;
use preloop_shared::registry::Evidence;
use serde::{Serialize, Serializer};

/// The version of `doctor --json`'s shape (schemas/preloop-hooks/doctor.schema.json).
pub const SCHEMA_VERSION: u32 = 1;

/// The harness version our adapter was proven against (None: documented only).
pub fn proven_version(h: Harness) -> Option<&'static str> {
    let d = h.def();
    (d.evidence == Evidence::RealBinary).then_some(d.version)
}

/// One thing wrong (or worth knowing), with the one fix.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Finding {
    /// What is wrong, one line.
    pub what: String,
    /// What to do, one line that works as written (empty: nothing to do).
    pub fix: String,
}

impl Finding {
    pub fn new(what: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding { what: what.into(), fix: fix.into() }
    }
    pub fn line(&self) -> String {
        if self.fix.is_empty() { self.what.clone() } else { format!("{} (fix: {})", self.what, self.fix) }
    }
}

/// What a finding is, which decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// An installation or configuration problem (exit 6).
    Install,
    /// A server problem (exit 7).
    Server,
    /// Worth knowing; still healthy.
    Warning,
}

/// Where an entry's program stands against the binary we install.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgramState {
    /// The binary in the hook dir.
    Ok,
    Missing,
    NotExecutable,
    /// Elsewhere, the same bytes as ours.
    ElsewhereIdentical,
    /// Elsewhere, another build.
    ElsewhereDiffers,
    /// Elsewhere, and no binary of ours in the hook dir to compare with.
    NotBuiltHere,
}

impl ProgramState {
    pub fn as_str(self) -> &'static str {
        match self {
            ProgramState::Ok => "ok",
            ProgramState::Missing => "missing",
            ProgramState::NotExecutable => "not_executable",
            ProgramState::ElsewhereIdentical => "elsewhere_identical",
            ProgramState::ElsewhereDiffers => "elsewhere_differs",
            ProgramState::NotBuiltHere => "not_built_here",
        }
    }
    /// The harness cannot run it.
    pub fn broken(self) -> bool {
        matches!(self, ProgramState::Missing | ProgramState::NotExecutable)
    }
}

/// Whether a harness config could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigState {
    Ok,
    Missing,
    /// It does not parse (the reason).
    Unparsable(String),
}

impl Serialize for ConfigState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ConfigState::Ok => s.serialize_str("ok"),
            ConfigState::Missing => s.serialize_str("missing"),
            ConfigState::Unparsable(e) => s.serialize_str(&format!("does not parse: {e}")),
        }
    }
}

/// What answers at the server URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthState {
    Preloop,
    /// A Preloop server reporting a problem.
    Unhealthy,
    NotPreloop,
    Unreachable,
    #[default]
    Unchecked,
}

impl HealthState {
    /// For people.
    pub fn describe(self) -> &'static str {
        match self {
            HealthState::Preloop => "a Preloop server",
            HealthState::Unhealthy => "a Preloop server reporting a problem",
            HealthState::NotPreloop => "answers, NOT a Preloop server",
            HealthState::Unreachable => "UNREACHABLE",
            HealthState::Unchecked => "unchecked",
        }
    }
    /// A Preloop server answered, so the tokens can be checked.
    pub fn answers(self) -> bool {
        matches!(self, HealthState::Preloop | HealthState::Unhealthy)
    }
}

/// What the server said of a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum TokenState {
    #[serde(rename = "accepted")]
    Accepted,
    #[serde(rename = "rejected")]
    Rejected,
    #[serde(rename = "unchecked")]
    Unchecked,
    #[default]
    #[serde(rename = "not configured")]
    NotConfigured,
}

impl std::fmt::Display for TokenState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TokenState::Accepted => "accepted",
            TokenState::Rejected => "rejected",
            TokenState::Unchecked => "unchecked",
            TokenState::NotConfigured => "not configured",
        })
    }
}

/// Where the hooks or the operator commands send notes: the hooks' own
/// mode type (`unknown` for the hooks only).
pub use preloop_shared::backend::HookMode;

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct EntryReport {
    pub event: String,
    pub binary: String,
    pub present: bool,
    pub command: Option<String>,
    pub program: Option<ProgramState>,
    pub timeout: Option<u64>,
    pub expected_timeout: u64,
    /// Codex: trusted, untrusted, modified.
    pub trust: Option<TrustState>,
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct ScopeReport {
    pub scope: String,
    pub config: String,
    pub config_state: ConfigState,
    pub hooks_present: usize,
    pub hooks_expected: usize,
    pub entries: Vec<EntryReport>,
    /// Codex: where the trust states come from.
    pub trust_source: Option<String>,
    /// Project scope: whether the harness loads this folder's config
    /// (None: cannot tell, or not applicable).
    pub folder_trusted: Option<bool>,
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct HarnessReport {
    /// Written as its slug (`claude-code`).
    #[serde(serialize_with = "slug")]
    pub harness: Harness,
    pub name: String,
    /// Its program is on PATH.
    pub installed: bool,
    pub program: Option<String>,
    pub version: Option<String>,
    pub proven_version: Option<String>,
    /// Our hooks over all scopes.
    pub hooks_present: usize,
    pub hooks_expected: usize,
    /// The user scope, then the project scope when it holds a config.
    pub scopes: Vec<ScopeReport>,
}

#[derive(Debug, Serialize, Default, Clone, PartialEq)]
pub struct ServerReport {
    /// A URL is configured (for the hooks or the operator commands).
    pub configured: bool,
    pub url: Option<String>,
    /// Where the URL comes from.
    pub url_from: Option<String>,
    pub health: HealthState,
    /// Kept for the old shape: whether anything answered.
    pub reachable: Option<bool>,
    pub runtime_token: TokenState,
    pub runtime_token_from: Option<String>,
    pub user_token: TokenState,
    pub user_token_from: Option<String>,
    pub detail: Vec<String>,
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Modes {
    /// What the hooks on this machine use.
    pub hooks: HookMode,
    pub hooks_why: String,
    /// What notes/sessions commands use: server or local.
    pub operator: HookMode,
    pub operator_why: String,
}

#[derive(Debug, Serialize, Default, Clone, PartialEq)]
pub struct StateReport {
    pub sessions_live: usize,
    pub sessions_ended: usize,
    pub run_states: usize,
    pub spooled_notes: usize,
    pub sessions_with_spool: Vec<String>,
    pub owed_acks: usize,
    pub inbox_pending: Option<usize>,
    /// Sessions that ended in the last day with notes the server recorded
    /// delivered at the claim that no output carried (docs/guarantees.md,
    /// "Once, per path"): the one receipt that over-reports.
    pub uncarried: Vec<Uncarried>,
}

/// One ended session's notes that were recorded delivered but never carried.
#[derive(Debug, Serialize, Default, Clone, PartialEq)]
pub struct Uncarried {
    /// The harness's session id.
    pub session: String,
    pub note_ids: Vec<String>,
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Report {
    /// The shape's version ([`SCHEMA_VERSION`]).
    pub schema: u32,
    pub healthy: bool,
    pub exit_code: u8,
    /// The exit code's name (`ok`, `not_installed`, ...).
    pub exit: &'static str,
    /// The hooks' mode; `modes` says why.
    pub mode: HookMode,
    pub modes: Modes,
    pub preloop_home: String,
    /// Where the binaries are.
    pub bin_dir: String,
    /// Where our entries should point (the bin dir, or its stable copy).
    pub hook_dir: String,
    pub harnesses: Vec<HarnessReport>,
    pub server: ServerReport,
    pub state: StateReport,
    pub last_errors: Vec<String>,
    pub limits: Vec<String>,
    pub problems: Vec<Finding>,
    pub warnings: Vec<Finding>,
    /// What is worth saying but is no warning (shown with `--verbose`).
    #[serde(skip)]
    pub info: Vec<String>,
    /// The exit code `exit_code` and `exit` spell.
    #[serde(skip)]
    pub outcome: Exit,
}

/// A harness in `doctor --json`: its slug, as on the command line.
fn slug<S: Serializer>(h: &Harness, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(h.slug())
}

#[cfg(test)]
mod tests {
    //! The typed states serialise to exactly the strings doctor.schema.json allows.
    use super::*;
    use serde_json::Value;

    const SCHEMA: &str = include_str!("../../../schemas/preloop-hooks/doctor.schema.json");

    fn allowed(pointer: &str) -> Vec<String> {
        let v: Value = serde_json::from_str(SCHEMA).unwrap_or_default();
        v.pointer(pointer)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default()
    }

    fn names<T: Serialize>(all: &[T]) -> Vec<String> {
        all.iter()
            .map(|x| serde_json::to_value(x).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default())
            .collect()
    }

    /// Every variant, in a match the compiler keeps complete.
    fn programs() -> Vec<ProgramState> {
        use ProgramState::*;
        let all = [Ok, Missing, NotExecutable, ElsewhereIdentical, ElsewhereDiffers, NotBuiltHere];
        for p in all {
            match p {
                Ok | Missing | NotExecutable | ElsewhereIdentical | ElsewhereDiffers | NotBuiltHere => {}
            }
        }
        all.to_vec()
    }

    #[test]
    fn typed_states_serialise_to_the_schemas_strings() {
        let programs = programs();
        assert_eq!(names(&programs), allowed("/$defs/entry/properties/program/enum"));
        assert!(programs.iter().all(|p| names(&[*p])[0] == p.as_str()));
        let trust = [TrustState::Trusted, TrustState::Untrusted, TrustState::Modified];
        for t in trust {
            match t {
                TrustState::Trusted | TrustState::Untrusted | TrustState::Modified => {}
            }
            assert_eq!(TrustState::parse(t.as_str()), t);
        }
        assert_eq!(names(&trust), allowed("/$defs/entry/properties/trust/enum"));
        let health = [
            HealthState::Preloop,
            HealthState::Unhealthy,
            HealthState::NotPreloop,
            HealthState::Unreachable,
            HealthState::Unchecked,
        ];
        assert_eq!(names(&health), allowed("/$defs/server/properties/health/enum"));
        let tokens = [TokenState::Accepted, TokenState::Rejected, TokenState::Unchecked, TokenState::NotConfigured];
        assert_eq!(names(&tokens), allowed("/$defs/server/properties/runtime_token/enum"));
        assert!(tokens.iter().all(|t| names(&[*t])[0] == t.to_string()));
        let modes = [HookMode::Server, HookMode::Local, HookMode::Unknown];
        assert_eq!(names(&modes), allowed("/properties/mode/enum"));
        assert!(modes.iter().all(|m| names(&[*m])[0] == m.to_string()));
        assert_eq!(
            names(&[ConfigState::Ok, ConfigState::Missing, ConfigState::Unparsable("line 1".into())]),
            ["ok", "missing", "does not parse: line 1"]
        );
    }
}
