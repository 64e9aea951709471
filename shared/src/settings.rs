//! Every key `config.json` may hold, as one row each ([`SETTINGS`]): its
//! name, the environment variable that may set it and what a configuration
//! that names the server lets that variable do, its parser, its doc line.
//! The key list, `config.json`'s parser and the environment pass
//! ([`crate::config`]), the README's settings table and
//! `schemas/preloop-hooks/config.schema.json` are all made from the rows; a
//! test holds the README and the schema to them (`PRELOOP_BLESS=1` rewrites
//! both), as the registry's tests hold its tables.

use crate::http::ProxyUrl;
use crate::redact::Secret;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a hook does when the server cannot answer a permission check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailPolicy {
    /// Give no decision: the harness's own permission flow decides.
    Open,
    /// Deny the tool call with a reason that names the failure.
    Deny,
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

/// Tunables, with the defaults documented in the README (each one a row of
/// [`SETTINGS`]).
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
    /// Claude Code, Pi and OpenCode: run the background watcher that wakes
    /// an idle session when a note arrives (`preloop-claude-code-watch`,
    /// `preloop-pi-watch`, `preloop-opencode-watch`).
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
    /// Server mode: the longest poll interval, milliseconds (within the
    /// first [`crate::watch::ACTIVE_WINDOW`] of a watch, at most
    /// [`crate::watch::ACTIVE_MAX`]).
    pub watch_server_poll_max_ms: u64,
    /// The HTTP(S) proxy every call to the server goes through: `proxy` in
    /// `config.json` only. None is ever taken from the environment
    /// (docs/guarantees.md, "A repository cannot move the gate").
    #[serde(skip)]
    pub proxy: Option<ProxyUrl>,
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
            proxy: None,
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
    /// In `~/.preloop/config.json` only: let the environment
    /// (`PRELOOP_HOME`, `PRELOOP_URL`, `PRELOOP_TOKEN`, the gate settings)
    /// override the server this file names (docs/guarantees.md).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_env_override: bool,
    #[serde(flatten)]
    pub settings: Settings,
}

/// What the environment may do to a key (docs/guarantees.md, "A repository
/// cannot move the gate").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromEnv {
    /// `config.json` only: no variable is ever read for it.
    Never,
    /// The server selection of [`crate::config::Config::load_from`] reads
    /// this variable itself (it may not replace a server the user's own
    /// configuration names); the generic pass leaves it alone.
    Server(&'static str),
    /// Taken from this variable, also when the user's own configuration
    /// names the server: it does not touch the gate.
    Taken(&'static str),
    /// Taken from this variable unless the user's own configuration names
    /// the server; then a different value is ignored with a warning (a tiny
    /// timeout would fail every check).
    UnlessPinned(&'static str),
    /// A fail policy: taken from this variable, but when the user's own
    /// configuration names the server only towards `deny`.
    TightenOnly(&'static str),
}

impl FromEnv {
    /// The variable, if any.
    pub fn var(self) -> Option<&'static str> {
        match self {
            FromEnv::Never => None,
            FromEnv::Server(v) | FromEnv::Taken(v) | FromEnv::UnlessPinned(v) | FromEnv::TightenOnly(v) => Some(v),
        }
    }
}

/// Where a key's value lives in a [`ConfigFile`], and so how it parses.
pub enum Slot<'a> {
    Text(&'a mut Option<String>),
    Secret(&'a mut Option<Secret>),
    Switch(&'a mut bool),
    U64(&'a mut u64),
    U32(&'a mut u32),
    I64(&'a mut i64),
    Policy(&'a mut FailPolicy),
    Proxy(&'a mut Option<ProxyUrl>),
}

/// Which part of the README documents a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// The server and its credentials (`login`, and the prose around the
    /// settings table).
    Server,
    /// A row of the README's settings table.
    Tunable,
}

/// One key of `config.json`.
pub struct Setting {
    pub key: &'static str,
    pub from_env: FromEnv,
    /// What a bad value in `config.json` is told it should be.
    pub expected: &'static str,
    /// The least value the schema allows (numbers).
    pub min: u64,
    /// What it does: the README's line and the schema's description.
    pub doc: &'static str,
    pub section: Section,
    slot: fn(&mut ConfigFile) -> Slot<'_>,
}

/// A value a key refused: what it expected, and the value to show (None:
/// the one given).
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub expected: String,
    pub shown: Option<Value>,
}

impl Refused {
    fn expected(e: &str) -> Refused {
        Refused { expected: e.to_string(), shown: None }
    }
}

impl Setting {
    /// Set this key in `f` from its `config.json` value.
    pub fn from_json(&self, f: &mut ConfigFile, v: &Value) -> Result<(), Refused> {
        let fail = || Err(Refused::expected(self.expected));
        let text = || v.as_str().map(str::to_string);
        match (self.slot)(f) {
            Slot::Text(s) => match text() {
                Some(t) => *s = Some(t),
                None => return fail(),
            },
            Slot::Secret(s) => match text() {
                Some(t) => *s = Some(Secret::new(t)),
                None => return fail(),
            },
            Slot::Switch(s) => match parse_switch(v) {
                Some(b) => *s = b,
                None => return fail(),
            },
            Slot::U64(s) => return num_into(v, s).ok_or_else(|| Refused::expected(self.expected)),
            Slot::U32(s) => return num_into(v, s).ok_or_else(|| Refused::expected(self.expected)),
            Slot::I64(s) => return num_into(v, s).ok_or_else(|| Refused::expected(self.expected)),
            Slot::Policy(s) => match v.as_str().and_then(FailPolicy::parse) {
                Some(p) => *s = p,
                None => return fail(),
            },
            Slot::Proxy(s) => match v {
                Value::Null => *s = None,
                Value::String(p) if p.trim().is_empty() => *s = None,
                Value::String(p) => match ProxyUrl::parse(p) {
                    Ok(p) => *s = Some(p),
                    Err(expected) => {
                        return Err(Refused {
                            expected,
                            shown: Some(Value::String(crate::redact::redact_url_credentials(p).into_owned())),
                        });
                    }
                },
                _ => return fail(),
            },
        }
        Ok(())
    }

    /// Set this key in `f` from its environment variable's value; `Err`
    /// names what it should be. Keys the environment never sets, and the
    /// server's ([`FromEnv::Server`]), are not set here.
    pub fn from_env(&self, f: &mut ConfigFile, v: &str) -> Result<(), &'static str> {
        fn num<T: std::str::FromStr>(slot: &mut T, v: &str) -> Result<(), &'static str> {
            *slot = v.trim().parse().map_err(|_| "a number")?;
            Ok(())
        }
        match (self.slot)(f) {
            Slot::U64(s) => num(s, v),
            Slot::U32(s) => num(s, v),
            Slot::I64(s) => num(s, v),
            Slot::Switch(s) => {
                *s = parse_switch_str(v).ok_or("on or off")?;
                Ok(())
            }
            Slot::Policy(s) => {
                *s = FailPolicy::parse(v).ok_or("open or deny")?;
                Ok(())
            }
            Slot::Text(_) | Slot::Secret(_) | Slot::Proxy(_) => Ok(()),
        }
    }

    /// The fail policy this key holds in `f`, if it is one.
    pub fn policy(&self, f: &ConfigFile) -> Option<FailPolicy> {
        match (self.slot)(&mut f.clone()) {
            Slot::Policy(p) => Some(*p),
            _ => None,
        }
    }

    /// The default, as the README shows it.
    pub fn default_shown(&self) -> String {
        match (self.slot)(&mut ConfigFile::default()) {
            Slot::U64(n) => n.to_string(),
            Slot::U32(n) => n.to_string(),
            Slot::I64(n) => n.to_string(),
            Slot::Switch(b) => format!("`{b}`"),
            Slot::Policy(p) => format!("`{}`", if *p == FailPolicy::Open { "open" } else { "deny" }),
            Slot::Text(_) | Slot::Secret(_) | Slot::Proxy(_) => "none".to_string(),
        }
    }

    /// Its property in the config schema (without the description).
    fn schema_type(&self) -> Vec<(&'static str, Value)> {
        let int = || vec![("type", Value::from("integer")), ("minimum", Value::from(self.min))];
        match (self.slot)(&mut ConfigFile::default()) {
            Slot::Text(_) | Slot::Secret(_) => vec![("type", Value::from("string"))],
            Slot::Switch(_) => vec![("type", Value::from("boolean"))],
            Slot::U64(_) | Slot::U32(_) | Slot::I64(_) => int(),
            Slot::Policy(_) => vec![("enum", serde_json::json!(["open", "deny"]))],
            Slot::Proxy(_) => vec![("type", serde_json::json!(["string", "null"]))],
        }
    }
}

/// The base every row below overrides (a tunable number, environment-free).
const ROW: Setting = Setting {
    key: "",
    from_env: FromEnv::Never,
    expected: "a number",
    min: 0,
    doc: "",
    section: Section::Tunable,
    slot: |f| Slot::U64(&mut f.settings.connect_timeout_ms),
};

/// Every key `config.json` may hold, in the order the README and the schema
/// list them.
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "url",
        from_env: FromEnv::Server("PRELOOP_URL"),
        expected: "a URL string",
        doc: "The Preloop server's base URL (with or without /api/v1).",
        section: Section::Server,
        slot: |f| Slot::Text(&mut f.url),
        ..ROW
    },
    Setting {
        key: "token",
        from_env: FromEnv::Server("PRELOOP_TOKEN"),
        expected: "a token string",
        doc: "Runtime bearer token (agt_... or flow_...) for the hook routes.",
        section: Section::Server,
        slot: |f| Slot::Secret(&mut f.token),
        ..ROW
    },
    Setting {
        key: "user_token",
        from_env: FromEnv::Server("PRELOOP_USER_TOKEN"),
        expected: "a token string",
        doc: "A user credential (personal API key or JWT) for the operator commands.",
        section: Section::Server,
        slot: |f| Slot::Secret(&mut f.user_token),
        ..ROW
    },
    Setting {
        key: "allow_env_override",
        expected: "true/false",
        doc: "In ~/.preloop/config.json only: let the environment (PRELOOP_HOME, PRELOOP_URL, PRELOOP_TOKEN, the gate settings) override the server this file names.",
        section: Section::Server,
        slot: |f| Slot::Switch(&mut f.allow_env_override),
        ..ROW
    },
    Setting {
        key: "connect_timeout_ms",
        from_env: FromEnv::UnlessPinned("PRELOOP_CONNECT_TIMEOUT_MS"),
        doc: "TCP/TLS connect",
        slot: |f| Slot::U64(&mut f.settings.connect_timeout_ms),
        ..ROW
    },
    Setting {
        key: "call_timeout_ms",
        from_env: FromEnv::Taken("PRELOOP_CALL_TIMEOUT_MS"),
        doc: "notes and lifecycle calls",
        slot: |f| Slot::U64(&mut f.settings.call_timeout_ms),
        ..ROW
    },
    Setting {
        key: "permission_timeout_secs",
        from_env: FromEnv::UnlessPinned("PRELOOP_PERMISSION_TIMEOUT_SECS"),
        doc: "a permission check; outlasts the server's approval wait (300 s + 2 s)",
        slot: |f| Slot::U64(&mut f.settings.permission_timeout_secs),
        ..ROW
    },
    Setting {
        key: "session_end_budget_ms",
        from_env: FromEnv::Taken("PRELOOP_SESSION_END_BUDGET_MS"),
        doc: "everything SessionEnd does (Claude cancels at ~1.5 s, Codex at ~1 s)",
        slot: |f| Slot::U64(&mut f.settings.session_end_budget_ms),
        ..ROW
    },
    Setting {
        key: "pre_tool_use_on_error",
        from_env: FromEnv::TightenOnly("PRELOOP_PRE_TOOL_USE_ON_ERROR"),
        expected: "\"open\" or \"deny\"",
        doc: "PreToolUse when the server cannot answer: `open` (no decision) or `deny`",
        slot: |f| Slot::Policy(&mut f.settings.pre_tool_use_on_error),
        ..ROW
    },
    Setting {
        key: "permission_request_on_error",
        from_env: FromEnv::TightenOnly("PRELOOP_PERMISSION_REQUEST_ON_ERROR"),
        expected: "\"open\" or \"deny\"",
        doc: "Codex PermissionRequest, Cursor before* when the server cannot answer",
        slot: |f| Slot::Policy(&mut f.settings.permission_request_on_error),
        ..ROW
    },
    Setting {
        key: "stop_rescue_cap",
        from_env: FromEnv::Taken("PRELOOP_STOP_RESCUE_CAP"),
        doc: "Stop continuations per session",
        slot: |f| Slot::U32(&mut f.settings.stop_rescue_cap),
        ..ROW
    },
    Setting {
        key: "note_ttl_secs",
        from_env: FromEnv::Taken("PRELOOP_NOTE_TTL_SECS"),
        min: 60,
        doc: "local-inbox note lifetime",
        slot: |f| Slot::I64(&mut f.settings.note_ttl_secs),
        ..ROW
    },
    Setting {
        key: "log_max_bytes",
        from_env: FromEnv::Taken("PRELOOP_LOG_MAX_BYTES"),
        doc: "the hook log rotates past this",
        slot: |f| Slot::U64(&mut f.settings.log_max_bytes),
        ..ROW
    },
    Setting {
        key: "watch",
        from_env: FromEnv::Taken("PRELOOP_WATCH"),
        expected: "true/false or \"on\"/\"off\"",
        doc: "Claude Code, Pi and OpenCode: run the idle-wake watcher (`on`/`off`)",
        slot: |f| Slot::Switch(&mut f.settings.watch),
        ..ROW
    },
    Setting {
        key: "watch_max_secs",
        from_env: FromEnv::Taken("PRELOOP_WATCH_MAX_SECS"),
        doc: "longest life of one watcher (its hook `timeout` must be longer)",
        slot: |f| Slot::U64(&mut f.settings.watch_max_secs),
        ..ROW
    },
    Setting {
        key: "watch_poll_ms",
        from_env: FromEnv::Taken("PRELOOP_WATCH_POLL_MS"),
        doc: "local inbox: how often the watcher looks (also how soon it notices its session or Claude is gone)",
        slot: |f| Slot::U64(&mut f.settings.watch_poll_ms),
        ..ROW
    },
    Setting {
        key: "watch_server_poll_ms",
        from_env: FromEnv::Taken("PRELOOP_WATCH_SERVER_POLL_MS"),
        doc: "server: the watcher's first poll interval, doubled after every empty poll…",
        slot: |f| Slot::U64(&mut f.settings.watch_server_poll_ms),
        ..ROW
    },
    Setting {
        key: "watch_server_poll_max_ms",
        from_env: FromEnv::Taken("PRELOOP_WATCH_SERVER_POLL_MAX_MS"),
        doc: "…up to this (in the first 10 minutes of a watch, 10 s at most)",
        slot: |f| Slot::U64(&mut f.settings.watch_server_poll_max_ms),
        ..ROW
    },
    Setting {
        key: "proxy",
        expected: "an http:// or https:// proxy URL",
        doc: "an `http://` or `https://` proxy every call to the server goes through. Proxy variables (`HTTPS_PROXY`, `ALL_PROXY`, ... in any case) are never used: a repository can set them (docs/guarantees.md); `doctor` warns when one is set",
        slot: |f| Slot::Proxy(&mut f.settings.proxy),
        ..ROW
    },
];

/// The row of `key`.
pub fn by_key(key: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.key == key)
}

/// Every key `config.json` may hold, comma-separated (the fix of an
/// unknown key).
pub fn known_keys() -> String {
    SETTINGS.iter().map(|s| s.key).collect::<Vec<_>>().join(", ")
}

/// A number, or a string holding one; `None` if neither (or out of range).
fn num_into<T: std::str::FromStr + TryFrom<i64> + TryFrom<u64>>(v: &Value, slot: &mut T) -> Option<()> {
    let n: Option<T> = match v {
        Value::Number(n) => {
            n.as_u64().and_then(|u| T::try_from(u).ok()).or_else(|| n.as_i64().and_then(|i| T::try_from(i).ok()))
        }
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    *slot = n?;
    Some(())
}

/// A switch: a boolean, or the words the README documents.
pub fn parse_switch(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => parse_switch_str(s),
        Value::Number(n) => match n.as_u64() {
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

/// The README's settings table.
pub fn markdown_settings() -> String {
    let mut out = String::from(
        "| setting (`config.json` / env) | default | when `~/.preloop/config.json` names a server, the variable is | what |\n|---|---|---|---|\n",
    );
    for s in SETTINGS.iter().filter(|s| s.section == Section::Tunable) {
        let (name, pinned) = match s.from_env {
            FromEnv::Never => (format!("`{}` (config.json only)", s.key), "never read"),
            FromEnv::Taken(v) => (format!("`{}` / `{v}`", s.key), "taken"),
            FromEnv::UnlessPinned(v) => (format!("`{}` / `{v}`", s.key), "ignored"),
            FromEnv::TightenOnly(v) => (format!("`{}` / `{v}`", s.key), "taken for `deny` only"),
            FromEnv::Server(v) => (format!("`{}` / `{v}`", s.key), "ignored"),
        };
        out.push_str(&format!("| {name} | {} | {pinned} | {} |\n", s.default_shown(), s.doc));
    }
    out
}

/// `schemas/preloop-hooks/config.schema.json`, as its text.
pub fn config_schema() -> String {
    let mut props = String::new();
    for (i, s) in SETTINGS.iter().enumerate() {
        let mut fields = s.schema_type();
        fields.push(("description", Value::from(s.doc)));
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("      \"{k}\": {}", pretty(v, 6))).collect();
        let comma = if i + 1 < SETTINGS.len() { "," } else { "" };
        props.push_str(&format!("    \"{}\": {{\n{}\n    }}{comma}\n", s.key, body.join(",\n")));
    }
    format!(
        "{{\n  \"$schema\": \"https://json-schema.org/draft/2020-12/schema\",\n  \"$id\": \"https://preloop.ai/schemas/preloop-hooks/config.schema.json\",\n  \"title\": \"$PRELOOP_HOME/config.json\",\n  \"description\": \"The project's own configuration (0600), made from shared/src/settings.rs. url + token select server mode; every setting has a default (README).\",\n  \"type\": \"object\",\n  \"properties\": {{\n{props}  }},\n  \"additionalProperties\": false\n}}\n"
    )
}

/// A JSON value pretty-printed as serde_json does, its inner lines indented
/// by `indent` more.
fn pretty(v: &Value, indent: usize) -> String {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    text.replace('\n', &format!("\n{}", " ".repeat(indent)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row's slot is its own field, named as its key (serde's name).
    #[test]
    fn each_row_is_its_field() {
        let mut keys: Vec<&str> = SETTINGS.iter().map(|s| s.key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), SETTINGS.len(), "a key has two rows");
        let defaults = serde_json::to_value(ConfigFile {
            url: Some(String::new()),
            token: Some(Secret::new("")),
            user_token: Some(Secret::new("")),
            allow_env_override: true,
            settings: Settings::default(),
        })
        .unwrap();
        for s in SETTINGS {
            let mut f = ConfigFile::default();
            // A value of the row's kind lands in the field serde names so.
            let probe = match (s.slot)(&mut f) {
                Slot::Text(_) | Slot::Secret(_) => Value::from("x"),
                Slot::Switch(b) => Value::Bool(!*b),
                Slot::U64(_) | Slot::U32(_) | Slot::I64(_) => Value::from(4242),
                Slot::Policy(p) => Value::from(if *p == FailPolicy::Open { "deny" } else { "open" }),
                Slot::Proxy(_) => Value::from("http://127.0.0.1:3128"),
            };
            s.from_json(&mut f, &probe).unwrap();
            if s.key == "proxy" {
                assert!(f.settings.proxy.is_some());
                continue;
            }
            assert!(defaults.get(s.key).is_some(), "{} is not a field of ConfigFile", s.key);
            let got = serde_json::to_value(&f).unwrap();
            assert_eq!(got.get(s.key), Some(&probe), "{} does not set its own field", s.key);
        }
    }

    /// The README's settings table and the config schema are the rows'
    /// (PRELOOP_BLESS=1 rewrites them).
    #[test]
    fn readme_and_schema_follow_the_settings() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let bless = crate::blessing();
        let path = root.join("README.md");
        let text = std::fs::read_to_string(&path).unwrap();
        let begin = "<!-- settings begin (generated from shared/src/settings.rs) -->\n";
        let end = "<!-- settings end -->";
        let (Some(b), Some(e)) = (text.find(begin), text.find(end)) else { panic!("README.md has no settings block") };
        let table = markdown_settings();
        if text[b + begin.len()..e] != table {
            assert!(
                bless,
                "README.md: the settings table is not shared/src/settings.rs's (PRELOOP_BLESS=1 rewrites it)"
            );
            std::fs::write(&path, format!("{}{table}{}", &text[..b + begin.len()], &text[e..])).unwrap();
        }
        let path = root.join("schemas/preloop-hooks/config.schema.json");
        let schema = config_schema();
        serde_json::from_str::<Value>(&schema).expect("the generated schema is JSON");
        if std::fs::read_to_string(&path).unwrap() != schema {
            assert!(bless, "{}: not shared/src/settings.rs's (PRELOOP_BLESS=1 rewrites it)", path.display());
            std::fs::write(&path, schema).unwrap();
        }
    }
}
