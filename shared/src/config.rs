//! Where we are and whom we talk to.
//!
//! Server mode when a URL and a runtime token are found, in this order:
//! 1. the environment: `PRELOOP_URL` + `PRELOOP_TOKEN`;
//! 2. the project's own file `$PRELOOP_HOME/config.json` (`url`, `token`);
//! 3. Preloop's onboarding files `$PRELOOP_HOME/agents/*/permission_hook.json`
//!    (`base_url`, `token`, `source`) whose `source` matches the harness.
//!
//! Otherwise local mode (the embedded inbox under `$PRELOOP_HOME/inbox`).
//! `PRELOOP_HOME` (default `~/.preloop`) relocates everything.
//! Settings (timeouts, fail policies) come from `config.json` and can be
//! overridden per variable in the environment.

use crate::Harness;
use crate::fsutil;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// A bearer token. Never printed: `Debug` and `Display` redact it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }
    /// The token itself, for the Authorization header and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// A short, safe hint: the token kind prefix and length.
    pub fn hint(&self) -> String {
        let prefix = self.0.split('_').next().filter(|p| p.len() <= 5 && self.0.contains('_')).unwrap_or("");
        if prefix.is_empty() {
            format!("<{} chars>", self.0.len())
        } else {
            format!("{prefix}_… <{} chars>", self.0.len())
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Where the server settings came from (shown by `doctor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Env,
    ConfigFile(PathBuf),
    Onboarding(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Env => f.write_str("environment (PRELOOP_URL, PRELOOP_TOKEN)"),
            Origin::ConfigFile(p) => write!(f, "{}", p.display()),
            Origin::Onboarding(p) => write!(f, "{} (Preloop onboarding)", p.display()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Base URL without a trailing slash and without `/api/v1`.
    pub url: String,
    pub token: Secret,
    pub origin: Origin,
}

/// What a hook does when the server cannot answer a permission check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailPolicy {
    /// Give no decision: the harness's own permission flow decides.
    Open,
    /// Deny the tool call with a reason that names the failure.
    Deny,
}

/// Tunables, with the defaults documented in the README.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// TCP (and TLS) connect timeout for every call, milliseconds.
    pub connect_timeout_ms: u64,
    /// Whole-call budget of notes and lifecycle calls, milliseconds.
    pub call_timeout_ms: u64,
    /// Whole-call budget of a permission check, seconds. Must outlast the
    /// server's approval wait (workflow timeout 300 s + 2 s).
    pub permission_timeout_secs: u64,
    /// Budget of everything a SessionEnd hook does, milliseconds (Claude Code
    /// cancels it after ~1.5 s, Codex after ~1 s).
    pub session_end_budget_ms: u64,
    /// Claude Code / Codex PreToolUse when the server cannot be reached.
    pub pre_tool_use_on_error: FailPolicy,
    /// Codex PermissionRequest / Cursor before* hooks when the server cannot
    /// be reached (local mode never decides).
    pub permission_request_on_error: FailPolicy,
    /// Stop continuations spent on late notes per session.
    pub stop_rescue_cap: u32,
    /// Lifetime of a local-inbox note, seconds.
    pub note_ttl_secs: i64,
    /// The hook log is rotated past this size.
    pub log_max_bytes: u64,
    /// Claude Code: run the background watcher that wakes an idle session
    /// when a note arrives (`preloop-claude-code-watch`).
    pub watch: bool,
    /// Longest life of one watcher, seconds (the hook's `timeout` must be longer).
    pub watch_max_secs: u64,
    /// Local inbox: how often the watcher lists the session's queue
    /// directories, milliseconds (also how often it checks that its session
    /// and Claude are still there).
    pub watch_poll_ms: u64,
    /// Server mode: the watcher's first poll interval, milliseconds; doubled
    /// after every empty poll up to `watch_server_poll_max_ms`.
    pub watch_server_poll_ms: u64,
    /// Server mode: the longest poll interval, milliseconds.
    pub watch_server_poll_max_ms: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            connect_timeout_ms: 1500,
            call_timeout_ms: 4000,
            permission_timeout_secs: 310,
            session_end_budget_ms: 900,
            pre_tool_use_on_error: FailPolicy::Open,
            permission_request_on_error: FailPolicy::Deny,
            stop_rescue_cap: 3,
            note_ttl_secs: 86_400,
            log_max_bytes: 1 << 20,
            watch: true,
            watch_max_secs: 3600,
            watch_poll_ms: 1000,
            watch_server_poll_ms: 2000,
            watch_server_poll_max_ms: 30_000,
        }
    }
}

/// The project's own config file, as `login` writes it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfigFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    /// A user credential (personal API key or JWT) for the operator CLI.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_token: Option<Secret>,
    #[serde(flatten)]
    pub settings: Settings,
}

#[derive(Debug, Deserialize)]
struct OnboardingFile {
    base_url: Option<String>,
    token: Option<Secret>,
    source: Option<String>,
}

/// Where the operator's user token came from (for `doctor` and errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenOrigin {
    Env,
    ConfigFile(PathBuf),
}

impl fmt::Display for TokenOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenOrigin::Env => f.write_str("PRELOOP_USER_TOKEN in the environment"),
            TokenOrigin::ConfigFile(p) => write!(f, "{}", p.display()),
        }
    }
}

/// One thing wrong with the configuration, with its fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What is wrong, one line.
    pub what: String,
    /// What to do about it, one line that works as written.
    pub fix: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.what, self.fix)
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub home: PathBuf,
    /// The hooks' server: a URL and a runtime token.
    pub server: Option<ServerConfig>,
    /// The server URL alone (with or without a runtime token), for the
    /// operator CLI, which authenticates with the user token.
    pub url: Option<(String, Origin)>,
    /// The operator's user credential, when configured (CLI only).
    pub user_token: Option<(Secret, TokenOrigin)>,
    pub settings: Settings,
    /// Things to mention that change nothing (a setting overridden by the
    /// environment, ...), for the log and `doctor`.
    pub warnings: Vec<String>,
    /// Things that are wrong: a file that does not parse or holds a bad
    /// value, a file or directory another user could have written. `doctor`
    /// fails on them and the operator commands refuse to run.
    pub problems: Vec<Problem>,
    /// No server is configured, but a source that may name one could not be
    /// used (unreadable, untrusted): the mode is unknown, and hooks must not
    /// fall back to the local inbox (a gate answers by its fail policy).
    pub mode_unknown: bool,
}

impl Config {
    /// Load the configuration for `harness` (None: the CLI, any harness).
    pub fn load(harness: Option<Harness>) -> Config {
        Self::load_from(&Env::process(), harness)
    }

    pub fn load_from(env: &Env, harness: Option<Harness>) -> Config {
        let home = preloop_home(env);
        let mut problems = Vec::new();
        let mut warnings = Vec::new();
        let mut unusable_source = false;

        let home_ok = match fsutil::check_owned_dir(&home) {
            Ok(()) => true,
            Err(e) => {
                problems
                    .push(Problem { what: format!("PRELOOP_HOME {}: {e}", home.display()), fix: home_fix(&home, &e) });
                false
            }
        };

        let file_path = home.join("config.json");
        let mut file = ConfigFile::default();
        if home_ok {
            match fsutil::read_owned_json_value(&file_path) {
                Ok(None) => {}
                Ok(Some(v)) => {
                    // Not an object: nothing in it can be read, so nothing
                    // is known about the server either.
                    unusable_source |= !v.is_object();
                    file = config_from_value(&file_path, &v, &mut problems);
                }
                Err(e) => {
                    unusable_source = true;
                    problems.push(Problem {
                        what: format!("{}: {e}", file_path.display()),
                        fix: format!("fix or remove {}, then run `preloop-hooks doctor`", file_path.display()),
                    });
                }
            }
        } else {
            unusable_source = true;
        }
        let mut settings = file.settings.clone();
        apply_env_settings(env, &mut settings, &mut problems);

        let env_url = env.get("PRELOOP_URL").filter(|u| !u.trim().is_empty());
        let env_token = env.get("PRELOOP_TOKEN").filter(|t| !t.is_empty());
        let server = match (&env_url, &env_token) {
            (Some(url), Some(token)) => {
                Some(ServerConfig { url: normalize_url(url), token: Secret::new(token.clone()), origin: Origin::Env })
            }
            _ => None,
        }
        .or_else(|| match (&file.url, &file.token) {
            (Some(url), Some(token)) if !url.trim().is_empty() && !token.expose().is_empty() => Some(ServerConfig {
                url: normalize_url(url),
                token: token.clone(),
                origin: Origin::ConfigFile(file_path.clone()),
            }),
            _ => None,
        })
        .or_else(|| if home_ok { onboarding(&home, harness, &mut problems, &mut unusable_source) } else { None });

        let url = env_url
            .clone()
            .map(|u| (normalize_url(&u), Origin::Env))
            .or_else(|| {
                file.url
                    .as_ref()
                    .filter(|u| !u.trim().is_empty())
                    .map(|u| (normalize_url(u), Origin::ConfigFile(file_path.clone())))
            })
            .or_else(|| server.as_ref().map(|s| (s.url.clone(), s.origin.clone())));
        let user_token = env
            .get("PRELOOP_USER_TOKEN")
            .filter(|t| !t.is_empty())
            .map(|t| (Secret::new(t), TokenOrigin::Env))
            .or_else(|| file.user_token.clone().map(|t| (t, TokenOrigin::ConfigFile(file_path.clone()))));
        if env_url.is_some() != env_token.is_some() && server.is_some() {
            warnings.push("only one of PRELOOP_URL and PRELOOP_TOKEN is set in the environment".to_string());
        }
        let mode_unknown = server.is_none() && unusable_source;
        Config { home, server, url, user_token, settings, warnings, problems, mode_unknown }
    }

    pub fn is_local(&self) -> bool {
        self.server.is_none()
    }

    pub fn log_dir(&self) -> PathBuf {
        self.home.join("log")
    }

    /// The operator's user token, if any.
    pub fn user_secret(&self) -> Option<&Secret> {
        self.user_token.as_ref().map(|(t, _)| t)
    }
}

fn home_fix(home: &Path, e: &fsutil::TrustError) -> String {
    match e {
        fsutil::TrustError::NotADirectory => {
            format!("move {} away or point PRELOOP_HOME at a directory", home.display())
        }
        fsutil::TrustError::Writable(_) => format!("chmod 700 {}", home.display()),
        fsutil::TrustError::Owner(_) => {
            "point PRELOOP_HOME at a directory you own (unset it for ~/.preloop)".to_string()
        }
        fsutil::TrustError::Io(_) | fsutil::TrustError::NotARegularFile => {
            format!("check {} (ls -ld), then run `preloop-hooks doctor`", home.display())
        }
    }
}

/// Every key `config.json` may hold.
pub const CONFIG_KEYS: &[&str] = &[
    "url",
    "token",
    "user_token",
    "connect_timeout_ms",
    "call_timeout_ms",
    "permission_timeout_secs",
    "session_end_budget_ms",
    "pre_tool_use_on_error",
    "permission_request_on_error",
    "stop_rescue_cap",
    "note_ttl_secs",
    "log_max_bytes",
    "watch",
    "watch_max_secs",
    "watch_poll_ms",
    "watch_server_poll_ms",
    "watch_server_poll_max_ms",
];

/// A config file key by key: one bad value costs that key (its default is
/// used, and it is a problem), never the URL and tokens.
fn config_from_value(path: &Path, v: &serde_json::Value, problems: &mut Vec<Problem>) -> ConfigFile {
    let mut f = ConfigFile::default();
    let Some(obj) = v.as_object() else {
        problems.push(Problem {
            what: format!("{}: not a JSON object", path.display()),
            fix: format!("fix or remove {}", path.display()),
        });
        return f;
    };
    let mut bad = |key: &str, expected: &str, got: &serde_json::Value| {
        if expected == "no such key" {
            problems.push(Problem {
                what: format!("{}: unknown key {key:?}", path.display()),
                fix: format!("remove it (known keys: {})", CONFIG_KEYS.join(", ")),
            });
            return;
        }
        let shown = match got {
            serde_json::Value::String(s) => format!("{:?}", s.chars().take(40).collect::<String>()),
            other => other.to_string().chars().take(40).collect(),
        };
        problems.push(Problem {
            what: format!("{}: {key} is {shown}, expected {expected}; using the default", path.display()),
            fix: format!("edit {key} in {}", path.display()),
        });
    };
    for (key, value) in obj {
        let s = &mut f.settings;
        let as_str = || value.as_str().map(str::to_string);
        match key.as_str() {
            "url" => match as_str() {
                Some(u) => f.url = Some(u),
                None => bad(key, "a URL string", value),
            },
            "token" => match as_str() {
                Some(t) => f.token = Some(Secret::new(t)),
                None => bad(key, "a token string", value),
            },
            "user_token" => match as_str() {
                Some(t) => f.user_token = Some(Secret::new(t)),
                None => bad(key, "a token string", value),
            },
            "connect_timeout_ms" => {
                num_into(value, &mut s.connect_timeout_ms).unwrap_or_else(|| bad(key, "a number", value))
            }
            "call_timeout_ms" => num_into(value, &mut s.call_timeout_ms).unwrap_or_else(|| bad(key, "a number", value)),
            "permission_timeout_secs" => {
                num_into(value, &mut s.permission_timeout_secs).unwrap_or_else(|| bad(key, "a number", value))
            }
            "session_end_budget_ms" => {
                num_into(value, &mut s.session_end_budget_ms).unwrap_or_else(|| bad(key, "a number", value))
            }
            "stop_rescue_cap" => num_into(value, &mut s.stop_rescue_cap).unwrap_or_else(|| bad(key, "a number", value)),
            "note_ttl_secs" => num_into(value, &mut s.note_ttl_secs).unwrap_or_else(|| bad(key, "a number", value)),
            "log_max_bytes" => num_into(value, &mut s.log_max_bytes).unwrap_or_else(|| bad(key, "a number", value)),
            "watch_max_secs" => num_into(value, &mut s.watch_max_secs).unwrap_or_else(|| bad(key, "a number", value)),
            "watch_poll_ms" => num_into(value, &mut s.watch_poll_ms).unwrap_or_else(|| bad(key, "a number", value)),
            "watch_server_poll_ms" => {
                num_into(value, &mut s.watch_server_poll_ms).unwrap_or_else(|| bad(key, "a number", value))
            }
            "watch_server_poll_max_ms" => {
                num_into(value, &mut s.watch_server_poll_max_ms).unwrap_or_else(|| bad(key, "a number", value))
            }
            "watch" => match parse_switch(value) {
                Some(b) => s.watch = b,
                None => bad(key, "true/false or \"on\"/\"off\"", value),
            },
            "pre_tool_use_on_error" => match value.as_str().and_then(FailPolicy::parse) {
                Some(p) => s.pre_tool_use_on_error = p,
                None => bad(key, "\"open\" or \"deny\"", value),
            },
            "permission_request_on_error" => match value.as_str().and_then(FailPolicy::parse) {
                Some(p) => s.permission_request_on_error = p,
                None => bad(key, "\"open\" or \"deny\"", value),
            },
            other => bad(other, "no such key", &serde_json::Value::Null),
        }
    }
    f
}

/// A number, or a string holding one; `None` if neither (or out of range).
fn num_into<T: std::str::FromStr + TryFrom<i64> + TryFrom<u64>>(v: &serde_json::Value, slot: &mut T) -> Option<()> {
    let n: Option<T> = match v {
        serde_json::Value::Number(n) => {
            n.as_u64().and_then(|u| T::try_from(u).ok()).or_else(|| n.as_i64().and_then(|i| T::try_from(i).ok()))
        }
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    *slot = n?;
    Some(())
}

/// A switch: a boolean, or the words the README documents.
pub fn parse_switch(v: &serde_json::Value) -> Option<bool> {
    match v {
        serde_json::Value::Bool(b) => Some(*b),
        serde_json::Value::String(s) => parse_switch_str(s),
        serde_json::Value::Number(n) => match n.as_u64() {
            Some(1) => Some(true),
            Some(0) => Some(false),
            _ => None,
        },
        _ => None,
    }
}

pub fn parse_switch_str(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Some(true),
        "0" | "false" | "off" | "no" => Some(false),
        _ => None,
    }
}

impl FailPolicy {
    pub fn parse(s: &str) -> Option<FailPolicy> {
        match s.trim() {
            "open" => Some(FailPolicy::Open),
            "deny" => Some(FailPolicy::Deny),
            _ => None,
        }
    }
}

impl Settings {
    /// The fail policy a gate follows.
    pub fn fail_policy(&self, key: crate::registry::FailKey) -> FailPolicy {
        match key {
            crate::registry::FailKey::PreToolUse => self.pre_tool_use_on_error,
            crate::registry::FailKey::PermissionRequest => self.permission_request_on_error,
        }
    }
}

/// The environment a hook or command reads: the process's, looked up one
/// variable at a time when asked (a hook reads a handful of the harness's
/// 40-80 variables; copying them all cost it ~0.05 ms, docs/performance.md),
/// or a fixed set (tests, a configuration without some variables).
/// Variables that are not UTF-8 are absent either way.
#[derive(Debug, Clone)]
pub struct Env {
    /// `None`: the process's environment.
    fixed: Option<Vec<(String, String)>>,
}

impl Default for Env {
    /// No variables at all.
    fn default() -> Env {
        Env { fixed: Some(Vec::new()) }
    }
}

impl Env {
    /// The process's environment, read on demand.
    pub fn process() -> Env {
        Env { fixed: None }
    }
    pub fn get(&self, key: &str) -> Option<String> {
        match &self.fixed {
            None => std::env::var(key).ok(),
            Some(vars) => vars.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.clone()),
        }
    }
    /// Build one from pairs (tests).
    pub fn of(pairs: &[(&str, &str)]) -> Env {
        Env::fixed(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }
    /// Exactly these variables (a later pair wins over an earlier one).
    pub fn fixed(vars: Vec<(String, String)>) -> Env {
        Env { fixed: Some(vars) }
    }
    /// A fixed copy of this environment without `keys`.
    pub fn without(&self, keys: &[&str]) -> Env {
        let vars = match &self.fixed {
            Some(vars) => vars.clone(),
            None => {
                std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect()
            }
        };
        Env::fixed(vars.into_iter().filter(|(k, _)| !keys.contains(&k.as_str())).collect())
    }
}

/// The user's home directory: `$HOME` when set and absolute, else the
/// passwd entry. The hooks and the installer resolve it the same way.
pub fn user_home(env: &Env) -> Option<PathBuf> {
    env.get("HOME")
        .filter(|h| h.starts_with('/'))
        .map(PathBuf::from)
        .or_else(|| directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf()).filter(|p| p.is_absolute()))
}

pub fn preloop_home(env: &Env) -> PathBuf {
    if let Some(h) = env.get("PRELOOP_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    user_home(env).unwrap_or_else(|| PathBuf::from("/tmp")).join(".preloop")
}

/// `https://x/api/v1/` → `https://x`.
pub fn normalize_url(url: &str) -> String {
    let mut u = url.trim().trim_end_matches('/').to_string();
    if let Some(stripped) = u.strip_suffix("/api/v1") {
        u = stripped.to_string();
    }
    u
}

fn onboarding(
    home: &Path,
    harness: Option<Harness>,
    problems: &mut Vec<Problem>,
    unusable: &mut bool,
) -> Option<ServerConfig> {
    let dir = home.join("agents");
    let mut names = fsutil::list_names(&dir);
    names.sort();
    for name in names {
        let path = dir.join(&name).join("permission_hook.json");
        let value = match fsutil::read_owned_json_value(&path) {
            Ok(Some(v)) => v,
            Ok(None) => continue,
            Err(e) => {
                *unusable = true;
                problems.push(Problem {
                    what: format!("{}: {e}", path.display()),
                    fix: format!("fix or remove {} (re-run `preloop agents onboard`)", path.display()),
                });
                continue;
            }
        };
        let file: OnboardingFile = match serde_json::from_value(value) {
            Ok(f) => f,
            Err(e) => {
                *unusable = true;
                problems.push(Problem {
                    what: format!("{}: {e}", path.display()),
                    fix: format!("fix or remove {} (re-run `preloop agents onboard`)", path.display()),
                });
                continue;
            }
        };
        let matches = match (harness, file.source.as_deref()) {
            (None, _) => true,
            (Some(h), Some(src)) => h.accepts_source(src),
            (Some(_), None) => false,
        };
        if let (true, Some(url), Some(token)) = (matches, file.base_url, file.token)
            && !url.is_empty()
            && !token.expose().is_empty()
        {
            return Some(ServerConfig { url: normalize_url(&url), token, origin: Origin::Onboarding(path) });
        }
    }
    None
}

fn apply_env_settings(env: &Env, s: &mut Settings, problems: &mut Vec<Problem>) {
    let mut bad = |key: &str, v: &str, expected: &str| {
        problems.push(Problem {
            what: format!("{key}={v:?} in the environment: expected {expected}; using the default or config.json"),
            fix: format!("unset {key} or set it to {expected}"),
        });
    };
    macro_rules! num {
        ($key:literal, $slot:expr) => {
            if let Some(v) = env.get($key) {
                match v.trim().parse() {
                    Ok(n) => $slot = n,
                    Err(_) => bad($key, &v, "a number"),
                }
            }
        };
    }
    num!("PRELOOP_CONNECT_TIMEOUT_MS", s.connect_timeout_ms);
    num!("PRELOOP_CALL_TIMEOUT_MS", s.call_timeout_ms);
    num!("PRELOOP_PERMISSION_TIMEOUT_SECS", s.permission_timeout_secs);
    num!("PRELOOP_SESSION_END_BUDGET_MS", s.session_end_budget_ms);
    num!("PRELOOP_STOP_RESCUE_CAP", s.stop_rescue_cap);
    num!("PRELOOP_NOTE_TTL_SECS", s.note_ttl_secs);
    num!("PRELOOP_LOG_MAX_BYTES", s.log_max_bytes);
    num!("PRELOOP_WATCH_MAX_SECS", s.watch_max_secs);
    num!("PRELOOP_WATCH_POLL_MS", s.watch_poll_ms);
    num!("PRELOOP_WATCH_SERVER_POLL_MS", s.watch_server_poll_ms);
    num!("PRELOOP_WATCH_SERVER_POLL_MAX_MS", s.watch_server_poll_max_ms);
    if let Some(v) = env.get("PRELOOP_WATCH") {
        match parse_switch_str(&v) {
            Some(b) => s.watch = b,
            None => bad("PRELOOP_WATCH", &v, "on or off"),
        }
    }
    for (key, slot) in [
        ("PRELOOP_PRE_TOOL_USE_ON_ERROR", &mut s.pre_tool_use_on_error),
        ("PRELOOP_PERMISSION_REQUEST_ON_ERROR", &mut s.permission_request_on_error),
    ] {
        if let Some(v) = env.get(key) {
            match FailPolicy::parse(&v) {
                Some(p) => *slot = p,
                None => bad(key, &v, "open or deny"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        Env::of(pairs)
    }

    #[test]
    fn env_wins_then_file_then_onboarding() {
        let dir = std::env::temp_dir().join(format!("preloop-config-test-{}", fsutil::note_id()));
        let home = dir.to_str().unwrap();
        fsutil::private_dir(&dir.join("agents/a1")).unwrap();
        fsutil::write_atomic(
            &dir.join("agents/a1/permission_hook.json"),
            br#"{"base_url":"http://o:1/api/v1/","token":"agt_o","source":"codex_cli"}"#,
        )
        .unwrap();
        let c = Config::load_from(&env(&[("PRELOOP_HOME", home)]), Some(Harness::ClaudeCode));
        assert!(c.server.is_none(), "onboarding for another harness must not match");
        let c = Config::load_from(&env(&[("PRELOOP_HOME", home)]), Some(Harness::Codex));
        assert_eq!(c.server.as_ref().unwrap().url, "http://o:1");
        fsutil::write_atomic(&dir.join("config.json"), br#"{"url":"http://f:2","token":"agt_f","stop_rescue_cap":1}"#)
            .unwrap();
        let c = Config::load_from(&env(&[("PRELOOP_HOME", home)]), Some(Harness::Codex));
        assert_eq!(c.server.as_ref().unwrap().url, "http://f:2");
        assert_eq!(c.settings.stop_rescue_cap, 1);
        let c = Config::load_from(
            &env(&[("PRELOOP_HOME", home), ("PRELOOP_URL", "http://e:3"), ("PRELOOP_TOKEN", "agt_e")]),
            Some(Harness::Codex),
        );
        assert_eq!(c.server.as_ref().unwrap().origin, Origin::Env);
        assert!(!format!("{c:?}").contains("agt_e"), "tokens never appear in Debug output");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
