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

/// The project's own config file.
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

#[derive(Debug, Clone)]
pub struct Config {
    pub home: PathBuf,
    pub server: Option<ServerConfig>,
    /// The operator's user credential, when configured (CLI only).
    pub user_token: Option<Secret>,
    pub settings: Settings,
    /// Problems met while loading (an unreadable config file, ...), for the
    /// log and `doctor`; loading itself never fails.
    pub warnings: Vec<String>,
}

impl Config {
    /// Load the configuration for `harness` (None: the CLI, any harness).
    pub fn load(harness: Option<Harness>) -> Config {
        Self::load_from(&Env::process(), harness)
    }

    pub fn load_from(env: &Env, harness: Option<Harness>) -> Config {
        let home = preloop_home(env);
        let mut warnings = Vec::new();
        let file_path = home.join("config.json");
        let file: ConfigFile = match fsutil::read_json::<ConfigFile>(&file_path) {
            Ok(f) => f.unwrap_or_default(),
            Err(e) => {
                warnings.push(format!("ignoring {}: {e}", file_path.display()));
                ConfigFile::default()
            }
        };
        let mut settings = file.settings.clone();
        apply_env_settings(env, &mut settings, &mut warnings);

        let server = match (env.get("PRELOOP_URL"), env.get("PRELOOP_TOKEN")) {
            (Some(url), Some(token)) if !url.is_empty() && !token.is_empty() => {
                Some(ServerConfig { url: normalize_url(&url), token: Secret::new(token), origin: Origin::Env })
            }
            _ => None,
        }
        .or_else(|| match (&file.url, &file.token) {
            (Some(url), Some(token)) if !url.is_empty() && !token.expose().is_empty() => Some(ServerConfig {
                url: normalize_url(url),
                token: token.clone(),
                origin: Origin::ConfigFile(file_path.clone()),
            }),
            _ => None,
        })
        .or_else(|| onboarding(&home, harness, &mut warnings));

        let user_token = env.get("PRELOOP_USER_TOKEN").filter(|t| !t.is_empty()).map(Secret::new).or(file.user_token);
        Config { home, server, user_token, settings, warnings }
    }

    pub fn is_local(&self) -> bool {
        self.server.is_none()
    }

    pub fn log_dir(&self) -> PathBuf {
        self.home.join("log")
    }
}

/// A view of the environment (tests pass their own).
#[derive(Debug, Clone, Default)]
pub struct Env(pub Vec<(String, String)>);

impl Env {
    pub fn process() -> Env {
        Env(std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect())
    }
    pub fn get(&self, key: &str) -> Option<String> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }
}

pub fn preloop_home(env: &Env) -> PathBuf {
    if let Some(h) = env.get("PRELOOP_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    let home = env
        .get("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf()))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    home.join(".preloop")
}

/// `https://x/api/v1/` → `https://x`.
pub fn normalize_url(url: &str) -> String {
    let mut u = url.trim().trim_end_matches('/').to_string();
    if let Some(stripped) = u.strip_suffix("/api/v1") {
        u = stripped.to_string();
    }
    u
}

fn onboarding(home: &Path, harness: Option<Harness>, warnings: &mut Vec<String>) -> Option<ServerConfig> {
    let dir = home.join("agents");
    let mut names = fsutil::list_names(&dir);
    names.sort();
    for name in names {
        let path = dir.join(&name).join("permission_hook.json");
        let file: OnboardingFile = match fsutil::read_json(&path) {
            Ok(Some(f)) => f,
            Ok(None) => continue,
            Err(e) => {
                warnings.push(format!("ignoring {}: {e}", path.display()));
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

fn apply_env_settings(env: &Env, s: &mut Settings, warnings: &mut Vec<String>) {
    let mut num = |key: &str, slot: &mut u64| {
        if let Some(v) = env.get(key) {
            match v.trim().parse() {
                Ok(n) => *slot = n,
                Err(_) => warnings.push(format!("ignoring {key}={v:?}: not a number")),
            }
        }
    };
    num("PRELOOP_CONNECT_TIMEOUT_MS", &mut s.connect_timeout_ms);
    num("PRELOOP_CALL_TIMEOUT_MS", &mut s.call_timeout_ms);
    num("PRELOOP_PERMISSION_TIMEOUT_SECS", &mut s.permission_timeout_secs);
    num("PRELOOP_SESSION_END_BUDGET_MS", &mut s.session_end_budget_ms);
    num("PRELOOP_WATCH_MAX_SECS", &mut s.watch_max_secs);
    num("PRELOOP_WATCH_POLL_MS", &mut s.watch_poll_ms);
    num("PRELOOP_WATCH_SERVER_POLL_MS", &mut s.watch_server_poll_ms);
    num("PRELOOP_WATCH_SERVER_POLL_MAX_MS", &mut s.watch_server_poll_max_ms);
    if let Some(v) = env.get("PRELOOP_WATCH") {
        match v.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "on" | "yes" => s.watch = true,
            "0" | "false" | "off" | "no" => s.watch = false,
            _ => warnings.push(format!("ignoring PRELOOP_WATCH={v:?}: expected on or off")),
        }
    }
    let mut policy = |key: &str, slot: &mut FailPolicy| {
        if let Some(v) = env.get(key) {
            match v.trim() {
                "open" => *slot = FailPolicy::Open,
                "deny" => *slot = FailPolicy::Deny,
                _ => warnings.push(format!("ignoring {key}={v:?}: expected open or deny")),
            }
        }
    };
    policy("PRELOOP_PRE_TOOL_USE_ON_ERROR", &mut s.pre_tool_use_on_error);
    policy("PRELOOP_PERMISSION_REQUEST_ON_ERROR", &mut s.permission_request_on_error);
    if let Some(v) = env.get("PRELOOP_STOP_RESCUE_CAP") {
        match v.trim().parse() {
            Ok(n) => s.stop_rescue_cap = n,
            Err(_) => warnings.push(format!("ignoring PRELOOP_STOP_RESCUE_CAP={v:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        Env(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
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
