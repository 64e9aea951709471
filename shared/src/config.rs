//! Where we are and whom we talk to.
//!
//! Server mode when a URL and a runtime token are found, in this order:
//! 1. the environment: `PRELOOP_URL` + `PRELOOP_TOKEN`;
//! 2. the project's own file `$PRELOOP_HOME/config.json` (`url`, `token`);
//! 3. Preloop's onboarding files `$PRELOOP_HOME/agents/*/permission_hook.json`
//!    (`base_url`, `token`, `source`) whose `source` matches the harness.
//!
//! Otherwise local mode (the embedded inbox under `$PRELOOP_HOME/inbox`).
//! `PRELOOP_HOME` (default `~/.preloop`, absolute) relocates everything.
//! Settings (timeouts, fail policies) come from `config.json` and can be
//! overridden per variable in the environment.
//!
//! A repository can set the hooks' environment (a project's `.env` in
//! Gemini, a `.claude/settings.json` `env` block), so when the user's own
//! `~/.preloop/config.json` names a server, step 1, `PRELOOP_HOME` and the
//! environment's looser gate settings are ignored unless that file says
//! `allow_env_override` (docs/guarantees.md, "A repository cannot move the
//! gate").

use crate::Harness;
use crate::fsutil;
use crate::settings::{self, FromEnv, SETTINGS};
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

pub use crate::redact::Secret;
pub use crate::settings::{ConfigFile, FailPolicy, Settings, parse_switch, parse_switch_str};

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
    /// Things `doctor` warns about that change nothing and that the hooks do
    /// not repeat on every log line: proxy variables set in the environment
    /// (never used), an account with no `/etc/passwd` line.
    pub notices: Vec<Problem>,
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
        let mut problems = Vec::new();
        let mut warnings = Vec::new();

        // The user's own configuration, under the real home: whether it
        // names a server decides what the environment may still change
        // (docs/guarantees.md, "A repository cannot move the gate"). The
        // account's home (its passwd entry) is asked first when `HOME`
        // points elsewhere: a repository can set `HOME` through a harness
        // (Claude Code's project `env` block), so a server named there is
        // not given up for whatever the moved `HOME` holds.
        let env_user_dir = default_home(env);
        let show = Show(user_home(env));
        let account_home = env.account_home();
        // Red-team 4, P3: an account with no passwd line and no ancestor to
        // anchor on. A `HOME` at or inside the working directory is the
        // checkout's: nothing in it decides; the gates follow their fail
        // policy (docs/guarantees.md).
        if account_home.is_none()
            && let Some(h) = env.get("HOME").filter(|h| h.starts_with('/'))
            && inside_cwd(Path::new(&h))
        {
            return Config {
                home: env_user_dir,
                server: None,
                url: None,
                user_token: None,
                settings: Settings::default(),
                warnings: Vec::new(),
                notices: Vec::new(),
                problems: vec![Problem {
                    what: format!(
                        "HOME={h} is inside the working directory and this account has no /etc/passwd line, so nothing shows it is the user's: refused"
                    ),
                    fix: "give the account an /etc/passwd line, or start the harness with HOME outside the project"
                        .to_string(),
                }],
                mode_unknown: true,
            };
        }
        let mut user_view = UserView::read(env_user_dir.clone(), harness, &show);
        // Cheapest first: the usual case (HOME is the account's home) costs
        // the passwd read and a path comparison, no canonicalisation.
        if let Some(account_dir) = account_home.map(|h| h.join(".preloop"))
            && account_dir != env_user_dir
            && account_dir.exists()
            && !same_dir(&account_dir, &env_user_dir)
        {
            let account = UserView::read(account_dir, harness, &show);
            if account.pin != Pin::Open {
                warnings.push(format!(
                    "HOME={} in the environment ignored for the Preloop configuration: {}",
                    env_user_dir.parent().unwrap_or(&env_user_dir).display(),
                    account.pin.reason(&show.path(&account.dir))
                ));
                user_view = account;
            }
        }
        let UserView { dir: user_home_dir, files: user, onboarding: user_onboarding, pin } = user_view;

        let mut home = user_home_dir.clone();
        let mut refused_home = false;
        if let Some(h) = env.get("PRELOOP_HOME").filter(|h| !h.is_empty()) {
            let asked = PathBuf::from(&h);
            if !asked.is_absolute() {
                problems.push(Problem {
                    what: format!("PRELOOP_HOME={h:?} is not an absolute path: refused"),
                    fix: "set PRELOOP_HOME to an absolute path, or unset it for ~/.preloop".to_string(),
                });
                refused_home = true;
            } else if pin != Pin::Open && !same_dir(&asked, &user_home_dir) {
                warnings.push(format!(
                    "PRELOOP_HOME={} in the environment ignored: {}",
                    show.path(&asked),
                    pin.reason(&show.path(&user_home_dir))
                ));
            } else {
                home = asked;
            }
        }

        let file_path = home.join("config.json");
        let at_user_home = home == user_home_dir;
        let here = if at_user_home { user } else { HomeFiles::read(&home, &show) };
        problems.extend(here.problems.iter().cloned());
        let home_ok = here.home_ok;
        let mut unusable_source = here.unusable || refused_home;
        let file = here.file.clone();
        let mut with_env = file.clone();
        apply_env_settings(env, &mut with_env, &mut problems, (pin != Pin::Open).then_some(&mut warnings));
        let settings = with_env.settings;

        let env_url = env.get("PRELOOP_URL").filter(|u| !u.trim().is_empty());
        let env_token = env.get("PRELOOP_TOKEN").filter(|t| !t.is_empty());
        let file_server = || here.server().map(|s| ServerConfig { origin: Origin::ConfigFile(file_path.clone()), ..s });
        let server = if pin == Pin::Open {
            match (&env_url, &env_token) {
                (Some(url), Some(token)) => Some(ServerConfig {
                    url: normalize_url(url),
                    token: Secret::new(token.clone()),
                    origin: Origin::Env,
                }),
                _ => None,
            }
        } else {
            None
        }
        .or_else(file_server)
        .or_else(|| match (&user_onboarding, at_user_home) {
            (Some((s, found, unusable)), true) => {
                problems.extend(found.iter().cloned());
                unusable_source |= *unusable;
                s.clone()
            }
            _ if home_ok && here.exists => onboarding(&home, harness, &show, &mut problems, &mut unusable_source),
            _ => None,
        });
        if pin != Pin::Open {
            let differs = |var: &str, differs: bool| {
                differs.then(|| format!("{var} in the environment ignored: {}", pin.reason(&show.path(&user_home_dir))))
            };
            let pinned_url = server.as_ref().map(|s| s.url.as_str());
            let pinned_token = server.as_ref().map(|s| s.token.expose());
            warnings.extend(differs(
                "PRELOOP_URL",
                env_url.as_deref().is_some_and(|u| Some(normalize_url(u).as_str()) != pinned_url),
            ));
            warnings.extend(differs("PRELOOP_TOKEN", env_token.as_deref().is_some_and(|t| Some(t) != pinned_token)));
        }
        let env_url = if pin == Pin::Open { env_url } else { None };

        let user_token = env
            .get("PRELOOP_USER_TOKEN")
            .filter(|t| !t.is_empty())
            .map(|t| (Secret::new(t), TokenOrigin::Env))
            .or_else(|| file.user_token.clone().map(|t| (t, TokenOrigin::ConfigFile(file_path.clone()))));
        // The operator side is pinned as the hooks are (red-team 4, P4): a
        // `url` in config.json, or the user token it holds, keeps
        // `PRELOOP_URL` from the environment from choosing where that token
        // goes, unless the file says `allow_env_override`.
        let file_url = file.url.as_ref().filter(|u| !u.trim().is_empty()).map(|u| normalize_url(u));
        let token_from_file = matches!(user_token, Some((_, TokenOrigin::ConfigFile(_))));
        let operator_env_ok = file.allow_env_override || (file_url.is_none() && !token_from_file);
        if !operator_env_ok
            && harness.is_none()
            && let Some(u) = &env_url
            && Some(normalize_url(u)) != file_url
        {
            let why = match &file_url {
                Some(_) => format!("{} names the server", show.path(&file_path)),
                None => format!("the user token in {} goes only to a server it names", show.path(&file_path)),
            };
            warnings.push(format!(
                "PRELOOP_URL in the environment ignored for operator commands: {why} (set \"allow_env_override\": true in it to allow this)"
            ));
        }
        let url = env_url
            .clone()
            .filter(|_| operator_env_ok)
            .map(|u| (normalize_url(&u), Origin::Env))
            .or_else(|| file_url.map(|u| (u, Origin::ConfigFile(file_path.clone()))))
            .or_else(|| {
                server
                    .as_ref()
                    .filter(|s| operator_env_ok || s.origin != Origin::Env)
                    .map(|s| (s.url.clone(), s.origin.clone()))
            });
        // Proxy variables are never used (the `proxy` key is); one that is
        // set is worth a word in `doctor` (red-team 4, P1).
        let mut notices: Vec<Problem> = crate::http::PROXY_VARS
            .iter()
            .filter(|v| env.get(v).is_some_and(|x| !x.is_empty()))
            .map(|v| Problem {
                what: format!(
                    "{v} is set in the environment and ignored: preloop-hooks never takes a proxy from the environment"
                ),
                fix: format!(
                    "to reach the server through a proxy, set \"proxy\" in {}; otherwise nothing to do",
                    show.path(&file_path)
                ),
            })
            .collect();
        if !env.has_passwd_entry() {
            notices.push(Problem {
                what: "this account has no /etc/passwd line: a HOME set by a repository is checked against the HOME your session started with (docs/guarantees.md)".to_string(),
                fix: "give the account an /etc/passwd line (useradd, or the container's image) so the account's home is known".to_string(),
            });
        }
        if pin == Pin::Open && env_url.is_some() != env_token.is_some() && server.is_some() {
            warnings.push("only one of PRELOOP_URL and PRELOOP_TOKEN is set in the environment".to_string());
        }
        let mode_unknown = server.is_none() && unusable_source;
        Config { home, server, url, user_token, settings, warnings, notices, problems, mode_unknown }
    }

    pub fn is_local(&self) -> bool {
        self.server.is_none()
    }

    pub fn log_dir(&self) -> PathBuf {
        self.home.join("log")
    }
}

/// The fix for a config or onboarding file we refused: for one others can
/// write, the permission fix (removing it would lose its tokens); else
/// `otherwise`.
fn file_fix(shown: &str, e: &fsutil::TrustError, otherwise: String) -> String {
    match e {
        fsutil::TrustError::Writable(_) => format!("chmod 600 {shown}"),
        _ => otherwise,
    }
}

fn home_fix(home: &str, e: &fsutil::TrustError) -> String {
    match e {
        fsutil::TrustError::NotADirectory => {
            format!("move {home} away or point PRELOOP_HOME at a directory")
        }
        fsutil::TrustError::Writable(_) => format!("chmod 700 {home}"),
        fsutil::TrustError::Owner(_) => {
            "point PRELOOP_HOME at a directory you own (unset it for ~/.preloop)".to_string()
        }
        fsutil::TrustError::Io(_) | fsutil::TrustError::NotARegularFile => {
            format!("check {home} (ls -ld), then run `preloop-hooks doctor`")
        }
    }
}

/// What the user's own configuration (`~/.preloop`, under the real home)
/// leaves the environment (docs/guarantees.md, "A repository cannot move the
/// gate").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pin {
    /// It names no server, or it says `allow_env_override`: the
    /// environment may choose the home and the server.
    Open,
    /// It names a server: the environment may not move the home, swap the
    /// server or loosen how a gate fails.
    Server,
    /// It exists but cannot be read or trusted: whether it names a server
    /// is unknown, so the environment may not replace it either.
    Unknown,
}

impl Pin {
    /// Why, for the user's own home as messages show it (`~/.preloop`).
    fn reason(self, user_home: &str) -> String {
        match self {
            Pin::Server => format!(
                "{user_home} names the server (set \"allow_env_override\": true in its config.json to allow this)"
            ),
            _ => format!("{user_home} cannot be used, so it may name a server (see problems)"),
        }
    }
}

/// The user's own configuration in one `~/.preloop`: its files, the
/// onboarding files when it names no server itself, and what it leaves the
/// environment.
struct UserView {
    dir: PathBuf,
    files: HomeFiles,
    /// (server, problems, unusable) from the onboarding files, read only
    /// when `config.json` names no server.
    onboarding: Option<(Option<ServerConfig>, Vec<Problem>, bool)>,
    pin: Pin,
}

impl UserView {
    fn read(dir: PathBuf, harness: Option<Harness>, show: &Show) -> UserView {
        let files = HomeFiles::read(&dir, show);
        let server = if files.home_ok { files.server() } else { None };
        let onboarding = match &server {
            Some(_) => None,
            None if files.home_ok && files.exists => {
                let mut unusable = false;
                let mut found = Vec::new();
                let s = onboarding(&dir, harness, show, &mut found, &mut unusable);
                Some((s, found, unusable))
            }
            None => None,
        };
        let pins = server.is_some() || onboarding.as_ref().is_some_and(|(s, _, _)| s.is_some());
        let unusable = files.unusable || onboarding.as_ref().is_some_and(|(_, _, u)| *u);
        let pin = if files.file.allow_env_override && !unusable {
            Pin::Open
        } else if pins {
            Pin::Server
        } else if unusable {
            Pin::Unknown
        } else {
            Pin::Open
        };
        UserView { dir, files, onboarding, pin }
    }
}

/// One home's `config.json`, read and checked.
struct HomeFiles {
    home_ok: bool,
    /// The home directory exists (nothing is read in one that does not).
    exists: bool,
    file: ConfigFile,
    /// A source that may name a server could not be used.
    unusable: bool,
    problems: Vec<Problem>,
    path: PathBuf,
}

impl HomeFiles {
    fn read(home: &Path, show: &Show) -> HomeFiles {
        let path = home.join("config.json");
        let (shown_home, shown) = (show.path(home), show.path(&path));
        let mut problems = Vec::new();
        let mut file = ConfigFile::default();
        let mut unusable = false;
        let (home_ok, exists) = match fsutil::owned_dir_exists(home) {
            Ok(exists) => (true, exists),
            Err(e) => {
                problems
                    .push(Problem { what: format!("PRELOOP_HOME {shown_home}: {e}"), fix: home_fix(&shown_home, &e) });
                (false, false)
            }
        };
        // A home that does not exist holds no file: no look-ups inside it
        // (round six: three failing system calls per missing home).
        if home_ok && exists {
            match fsutil::read_owned_json_value(&path) {
                Ok(None) => {}
                Ok(Some(v)) => {
                    // Not an object: nothing in it can be read, so nothing
                    // is known about the server either.
                    unusable |= !v.is_object();
                    file = config_from_value(&shown, &v, &mut problems);
                }
                Err(e) => {
                    unusable = true;
                    problems.push(Problem {
                        what: format!("{shown}: {e}"),
                        fix: file_fix(&shown, &e, format!("fix or remove {shown}, then run `preloop-hooks doctor`")),
                    });
                }
            }
        } else if !home_ok {
            unusable = true;
        }
        HomeFiles { home_ok, exists, file, unusable, problems, path }
    }

    /// The server `config.json` names (`url` + `token`), if any.
    fn server(&self) -> Option<ServerConfig> {
        match (&self.file.url, &self.file.token) {
            (Some(url), Some(token)) if !url.trim().is_empty() && !token.expose().is_empty() => Some(ServerConfig {
                url: normalize_url(url),
                token: token.clone(),
                origin: Origin::ConfigFile(self.path.clone()),
            }),
            _ => None,
        }
    }
}

/// Whether two absolute paths name the same directory (either may not
/// exist yet).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a.components().eq(b.components()),
    }
}

/// A config file key by key ([`SETTINGS`]): one bad value costs that key
/// (its default is used, and it is a problem), never the URL and tokens.
/// `path` is the file as messages show it.
///
/// A problem says what is wrong and how to fix it, not what happens
/// meanwhile: that depends on who reads it (a hook uses the key's default,
/// the operator commands refuse to run), and each of them says so itself.
fn config_from_value(path: &str, v: &serde_json::Value, problems: &mut Vec<Problem>) -> ConfigFile {
    let mut f = ConfigFile::default();
    let Some(obj) = v.as_object() else {
        problems.push(Problem { what: format!("{path}: not a JSON object"), fix: format!("fix or remove {path}") });
        return f;
    };
    for (key, value) in obj {
        let Some(setting) = settings::by_key(key) else {
            problems.push(Problem {
                what: format!("{path}: unknown key {key:?}"),
                fix: format!("remove it (known keys: {})", settings::known_keys()),
            });
            continue;
        };
        if let Err(refused) = setting.from_json(&mut f, value) {
            let shown = match refused.shown.as_ref().unwrap_or(value) {
                serde_json::Value::String(s) => format!("{:?}", s.chars().take(40).collect::<String>()),
                other => other.to_string().chars().take(40).collect(),
            };
            problems.push(Problem {
                what: format!("{path}: {key} is {shown}, expected {}", refused.expected),
                fix: format!("edit {key} in {path}"),
            });
        }
    }
    f
}

/// The variables that name a run's flow execution, in the order they are
/// read: `PRELOOP_FLOW_EXECUTION_ID` is the one Preloop 0.17.1 documents
/// and its flow sidecar sets; `PRELOOP_EXECUTION_ID` is the name these hooks
/// read before, kept as an alias.
pub const EXECUTION_ID_VARS: [&str; 2] = ["PRELOOP_FLOW_EXECUTION_ID", "PRELOOP_EXECUTION_ID"];

/// The flow execution a run belongs to ([`EXECUTION_ID_VARS`]), if it is
/// one the server can take (1-64 characters). Reads those variables only,
/// not a copy of the whole environment.
pub fn execution_id() -> Option<String> {
    execution_id_in(&Env::process())
}

/// [`execution_id`] from a given environment: the first variable of
/// [`EXECUTION_ID_VARS`] that is set and not blank decides.
pub fn execution_id_in(env: &Env) -> Option<String> {
    let value =
        EXECUTION_ID_VARS.iter().filter_map(|k| env.get(k)).map(|e| e.trim().to_string()).find(|e| !e.is_empty())?;
    (value.chars().count() <= 64).then_some(value)
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
    /// `None`: the account's home is read from `/etc/passwd`
    /// ([`account_home`]); tests fix it with [`Env::with_account_home`].
    account_home: Option<Option<PathBuf>>,
}

impl Default for Env {
    /// No variables at all.
    fn default() -> Env {
        Env { fixed: Some(Vec::new()), account_home: None }
    }
}

impl Env {
    /// The process's environment, read on demand.
    pub fn process() -> Env {
        Env { fixed: None, account_home: None }
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
        Env { fixed: Some(vars), account_home: None }
    }
    /// The same environment for an account whose passwd home is `home`
    /// (tests: the real `/etc/passwd` names the tester's home).
    pub fn with_account_home(mut self, home: Option<PathBuf>) -> Env {
        self.account_home = Some(home);
        self
    }
    /// The account's home: its `/etc/passwd` entry, whatever `HOME` says.
    pub fn account_home(&self) -> Option<PathBuf> {
        match &self.account_home {
            Some(fixed) => fixed.clone(),
            None => account_home(),
        }
    }
    /// Whether the account has an `/etc/passwd` line (a fixed account home
    /// counts as one).
    pub fn has_passwd_entry(&self) -> bool {
        match &self.account_home {
            Some(fixed) => fixed.is_some(),
            None => passwd_entry_home().is_some(),
        }
    }
    /// A fixed copy of this environment without `keys`.
    pub fn without(&self, keys: &[&str]) -> Env {
        let vars = match &self.fixed {
            Some(vars) => vars.clone(),
            None => {
                std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect()
            }
        };
        Env {
            account_home: self.account_home.clone(),
            ..Env::fixed(vars.into_iter().filter(|(k, _)| !keys.contains(&k.as_str())).collect())
        }
    }
}

/// The user's home directory: `$HOME` when set and absolute, else our
/// entry in `/etc/passwd`. The hooks and the installer resolve it the same
/// way.
///
/// `/etc/passwd` is read directly, not through `getpwuid`: in the static
/// glibc build `getpwuid` goes through NSS, which loads the system's modules
/// (`libnss_systemd`, `libnss_compat`) with their shared libc into the static
/// executable, and that crashes it (SIGSEGV) for a uid `/etc/passwd` does not
/// list, as in a container run under an arbitrary uid (docs/performance.md,
/// "Static linking"). A user known only to LDAP or sssd gets no home here
/// when `HOME` is unset (then `/tmp/.preloop`, [`default_home`]).
pub fn user_home(env: &Env) -> Option<PathBuf> {
    env.get("HOME").filter(|h| h.starts_with('/')).map(PathBuf::from).or_else(|| env.account_home())
}

/// The home directory of this account, whatever `HOME` says: its
/// `/etc/passwd` line ([`passwd_entry_home`]), else, for an account with no
/// line there (sssd, LDAP, a container's uid), the `HOME` its session
/// started with ([`login_home`]). A repository can set `HOME` for the hooks
/// (red-team 4, P3); it can set neither.
pub fn account_home() -> Option<PathBuf> {
    passwd_entry_home().or_else(login_home)
}

/// The home directory of this account in `/etc/passwd` (read without NSS:
/// the static build loads no NSS module). Read once per process: a hook asks
/// for it when it places its home and again when it checks the account
/// (the uid and the file do not change under a process that lives for
/// milliseconds).
pub fn passwd_entry_home() -> Option<PathBuf> {
    static ONCE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    ONCE.get_or_init(read_passwd_entry_home).clone()
}

fn read_passwd_entry_home() -> Option<PathBuf> {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    // The hardening suite hands the executable another passwd file; only
    // builds with the test-only `fault-injection` feature read the variable.
    #[cfg(feature = "fault-injection")]
    if let Some(p) = std::env::var_os("PRELOOP_TEST_PASSWD") {
        return passwd_home(&std::fs::read_to_string(p).ok()?, uid);
    }
    passwd_home(&std::fs::read_to_string("/etc/passwd").ok()?, uid)
}

/// The `HOME` of the oldest ancestor process of this uid whose environment
/// we can read, as it was when that process started (`/proc/<pid>/environ`
/// never changes afterwards): the login's, or the container's. A harness
/// applies a repository's variables (a Gemini `.env`, a Claude Code `env`
/// block) to the hooks it starts, never to its own ancestors. This process
/// itself is not asked (its `HOME` is the one in question). `None` without
/// `/proc`, or when the parent is another uid.
pub fn login_home() -> Option<PathBuf> {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let mut pid = parent_pid("self")?;
    let mut found = None;
    for _ in 0..128 {
        if pid == 0 || proc_real_uid(pid) != Some(uid) {
            break;
        }
        if let Some(h) = std::fs::read(format!("/proc/{pid}/environ")).ok().as_deref().and_then(home_in_environ) {
            found = Some(h);
        }
        if pid == 1 {
            break;
        }
        match parent_pid(&pid.to_string()) {
            Some(p) => pid = p,
            None => break,
        }
    }
    found
}

/// The parent of `/proc/<pid>` (`self` for this process).
fn parent_pid(pid: &str) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

fn proc_real_uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().next()?.parse().ok()
}

/// `HOME` in a NUL-separated environment block, when absolute.
fn home_in_environ(block: &[u8]) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    block
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"HOME="))
        .filter(|h| h.starts_with(b"/"))
        .map(|h| PathBuf::from(std::ffi::OsStr::from_bytes(h)))
}

/// Whether `home` is the working directory or inside it (a checkout's).
fn inside_cwd(home: &Path) -> bool {
    let Ok(cwd) = std::env::current_dir() else { return false };
    let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    cwd != Path::new("/") && home.starts_with(&cwd)
}

/// The home directory of `uid` in a passwd file's text (`name:pw:uid:gid:gecos:home:shell`).
pub fn passwd_home(passwd: &str, uid: u32) -> Option<PathBuf> {
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 7 && f[2].parse::<u32>().ok() == Some(uid) && f[5].starts_with('/')).then(|| PathBuf::from(f[5]))
    })
}

/// Where the hooks keep their files for `harness`: [`Config::home`] (it
/// reads the user's own configuration to know whether `PRELOOP_HOME` may
/// move it).
pub fn preloop_home(env: &Env, harness: Option<Harness>) -> PathBuf {
    Config::load_from(env, harness).home
}

/// The user's own home, `~/.preloop`, whatever `PRELOOP_HOME` says. Where
/// the hooks actually keep their files is [`Config::home`]: the environment
/// may move it only as docs/guarantees.md allows.
pub fn default_home(env: &Env) -> PathBuf {
    user_home(env).unwrap_or_else(|| PathBuf::from("/tmp")).join(".preloop")
}

/// `~/x` for a path under `home`, else the path (display only: the CLI
/// shows every path under the user's home this way).
pub fn tilde_in(home: &Path, p: &Path) -> String {
    match p.strip_prefix(home) {
        Ok(rest) if home != Path::new("/") && !home.as_os_str().is_empty() => {
            if rest.as_os_str().is_empty() {
                "~".to_string()
            } else {
                format!("~/{}", rest.display())
            }
        }
        _ => p.display().to_string(),
    }
}

/// How the configuration's messages show a path: under the user's home
/// (when known) as `~/…`.
struct Show(Option<PathBuf>);

impl Show {
    fn path(&self, p: &Path) -> String {
        match &self.0 {
            Some(home) => tilde_in(home, p),
            None => p.display().to_string(),
        }
    }
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
    show: &Show,
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
                    what: format!("{}: {e}", show.path(&path)),
                    fix: file_fix(
                        &show.path(&path),
                        &e,
                        format!("fix or remove {} (re-run `preloop agents onboard`)", show.path(&path)),
                    ),
                });
                continue;
            }
        };
        let file: OnboardingFile = match serde_json::from_value(value) {
            Ok(f) => f,
            Err(e) => {
                *unusable = true;
                problems.push(Problem {
                    what: format!("{}: {e}", show.path(&path)),
                    fix: format!("fix or remove {} (re-run `preloop agents onboard`)", show.path(&path)),
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

/// The environment's settings over `f` ([`SETTINGS`], each row's
/// [`FromEnv`]). With `pinned` (the user's own configuration names the
/// server), a gate may not be loosened from the environment: a fail policy
/// may only become `deny` ([`FromEnv::TightenOnly`]), and the connect and
/// permission timeouts are not taken ([`FromEnv::UnlessPinned`]: a tiny one
/// would make every check fail); each refusal is one warning.
fn apply_env_settings(
    env: &Env,
    f: &mut ConfigFile,
    problems: &mut Vec<Problem>,
    mut pinned: Option<&mut Vec<String>>,
) {
    for row in SETTINGS {
        let var = match row.from_env {
            FromEnv::Taken(v) | FromEnv::UnlessPinned(v) | FromEnv::TightenOnly(v) => v,
            FromEnv::Never | FromEnv::Server(_) => continue,
        };
        let Some(v) = env.get(var) else { continue };
        let mut next = f.clone();
        if let Err(expected) = row.from_env(&mut next, &v) {
            problems.push(Problem {
                what: format!("{var}={v:?} in the environment: expected {expected}"),
                fix: format!("unset {var} or set it to {expected}"),
            });
            continue;
        }
        let ignored = match (&pinned, row.from_env) {
            (Some(_), FromEnv::UnlessPinned(_)) => (next.settings != f.settings).then(|| var.to_string()),
            (Some(_), FromEnv::TightenOnly(_)) => (row.policy(&next) == Some(FailPolicy::Open)
                && row.policy(f) == Some(FailPolicy::Deny))
            .then(|| format!("{var}=open")),
            _ => None,
        };
        match (ignored, pinned.as_deref_mut()) {
            (Some(what), Some(w)) => {
                w.push(format!("{what} in the environment ignored: the user's own configuration names the server"))
            }
            _ => *f = next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The environment pass over the settings rows keeps the gate's rules:
    /// with a server the user's own file names, a fail policy only tightens
    /// and the two timeouts are not taken (one warning each); what does not
    /// touch the gate is taken; a bad value is a problem; `proxy` and the
    /// server keys are never read here. Without a pin, everything is taken.
    #[test]
    fn the_environment_pass_keeps_the_gate_rules() {
        let mut file = ConfigFile::default();
        file.settings.pre_tool_use_on_error = FailPolicy::Deny;
        file.settings.permission_request_on_error = FailPolicy::Open;
        let env = Env::of(&[
            ("PRELOOP_PRE_TOOL_USE_ON_ERROR", "open"),
            ("PRELOOP_PERMISSION_REQUEST_ON_ERROR", "deny"),
            ("PRELOOP_CONNECT_TIMEOUT_MS", "1"),
            ("PRELOOP_PERMISSION_TIMEOUT_SECS", "310"),
            ("PRELOOP_WATCH", "off"),
            ("PRELOOP_NOTE_TTL_SECS", "120"),
            ("PRELOOP_LOG_MAX_BYTES", "lots"),
            ("PRELOOP_PROXY", "http://127.0.0.1:9"),
            ("PRELOOP_URL", "http://127.0.0.1:9"),
        ]);
        let (mut problems, mut warnings) = (Vec::new(), Vec::new());
        let mut pinned = file.clone();
        apply_env_settings(&env, &mut pinned, &mut problems, Some(&mut warnings));
        let s = &pinned.settings;
        assert_eq!(s.pre_tool_use_on_error, FailPolicy::Deny, "open may not loosen a pinned deny");
        assert_eq!(s.permission_request_on_error, FailPolicy::Deny, "deny tightens");
        assert_eq!(s.connect_timeout_ms, 1500, "a pinned connect timeout is not taken");
        assert_eq!(s.permission_timeout_secs, 310);
        assert!(!s.watch);
        assert_eq!(s.note_ttl_secs, 120);
        assert_eq!(s.log_max_bytes, 1 << 20);
        assert_eq!(s.proxy, None, "no proxy from the environment");
        assert_eq!(pinned.url, None);
        assert_eq!(
            warnings,
            [
                "PRELOOP_CONNECT_TIMEOUT_MS in the environment ignored: the user's own configuration names the server",
                "PRELOOP_PRE_TOOL_USE_ON_ERROR=open in the environment ignored: the user's own configuration names the server",
            ],
            "an equal value is no override"
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].what, "PRELOOP_LOG_MAX_BYTES=\"lots\" in the environment: expected a number");
        assert_eq!(problems[0].fix, "unset PRELOOP_LOG_MAX_BYTES or set it to a number");

        let (mut problems, mut open) = (Vec::new(), file.clone());
        apply_env_settings(&env, &mut open, &mut problems, None);
        assert_eq!(open.settings.pre_tool_use_on_error, FailPolicy::Open, "unpinned, the environment chooses");
        assert_eq!(open.settings.connect_timeout_ms, 1);
        assert_eq!(open.settings.proxy, None);
    }

    /// The unknown-key fix names every key, in the table's order (the list
    /// CONFIG_KEYS held before the table).
    #[test]
    fn an_unknown_key_names_every_key() {
        let mut problems = Vec::new();
        config_from_value("c.json", &serde_json::json!({"colour": 1, "watch": "sometimes"}), &mut problems);
        assert_eq!(problems[0].what, "c.json: unknown key \"colour\"");
        assert_eq!(
            problems[0].fix,
            "remove it (known keys: url, token, user_token, allow_env_override, connect_timeout_ms, call_timeout_ms, permission_timeout_secs, session_end_budget_ms, pre_tool_use_on_error, permission_request_on_error, stop_rescue_cap, note_ttl_secs, log_max_bytes, watch, watch_max_secs, watch_poll_ms, watch_server_poll_ms, watch_server_poll_max_ms, proxy)"
        );
        assert_eq!(problems[1].what, "c.json: watch is \"sometimes\", expected true/false or \"on\"/\"off\"");
        let mut problems = Vec::new();
        config_from_value("c.json", &serde_json::json!({"proxy": "socks5://u:pw@h:1"}), &mut problems);
        assert!(!problems[0].what.contains("pw"), "{}", problems[0].what);
    }

    /// The home without NSS (the static build's `getpwuid` crashed in a
    /// container under a uid /etc/passwd does not list).
    #[test]
    fn the_home_comes_from_passwd_without_nss() {
        let pw = "root:x:0:0:root:/root:/bin/bash\n# comment\nbad line\nu:x:1000:1000:U,,,:/home/u:/bin/sh\nrel:x:7:7::home:/bin/sh\n";
        assert_eq!(passwd_home(pw, 1000), Some(PathBuf::from("/home/u")));
        assert_eq!(passwd_home(pw, 0), Some(PathBuf::from("/root")));
        assert_eq!(passwd_home(pw, 4242), None, "a uid not listed: no home, no crash");
        assert_eq!(passwd_home(pw, 7), None, "a relative home is not one");
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
        // HOME names a directory without .preloop: no user configuration
        // pins the server, so the environment chooses (a CI setup).
        let env = |pairs: &[(&str, &str)]| {
            let mut v = vec![("HOME", home)];
            v.extend_from_slice(pairs);
            Env::of(&v)
        };
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

    /// A scratch real home with `~/.preloop/config.json` holding `config`
    /// (None: no `.preloop` at all), and a second, absolute home a
    /// repository could point at, holding its own server.
    struct Homes {
        root: PathBuf,
    }

    impl Homes {
        fn new(config: Option<&str>) -> Homes {
            let root = std::env::temp_dir().join(format!("preloop-config-pin-{}", fsutil::note_id()));
            fsutil::private_dir(&root.join("elsewhere")).unwrap();
            fsutil::write_atomic(&root.join("elsewhere/config.json"), br#"{"url":"http://repo:9","token":"agt_repo"}"#)
                .unwrap();
            std::fs::create_dir_all(root.join("home")).unwrap();
            if let Some(c) = config {
                fsutil::private_dir(&root.join("home/.preloop")).unwrap();
                fsutil::write_atomic(&root.join("home/.preloop/config.json"), c.as_bytes()).unwrap();
            }
            Homes { root }
        }
        fn load(&self, pairs: &[(&str, &str)]) -> Config {
            let home = self.root.join("home");
            let mut v = vec![("HOME", home.to_str().unwrap())];
            v.extend_from_slice(pairs);
            Config::load_from(&Env::of(&v).with_account_home(Some(home.clone())), Some(Harness::Gemini))
        }
        fn elsewhere(&self) -> String {
            self.root.join("elsewhere").to_str().unwrap().to_string()
        }
        fn user_home(&self) -> PathBuf {
            self.root.join("home/.preloop")
        }
    }

    impl Drop for Homes {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }

    const USER_SERVER: &str = r#"{"url":"http://user:1","token":"agt_user","pre_tool_use_on_error":"deny"}"#;

    #[test]
    fn n2_the_environment_cannot_move_a_server_the_user_configured() {
        let h = Homes::new(Some(USER_SERVER));
        let elsewhere = h.elsewhere();
        let attempts: &[(&str, &[(&str, &str)])] = &[
            ("a relative PRELOOP_HOME", &[("PRELOOP_HOME", ".preloop-dev")]),
            ("an absolute PRELOOP_HOME elsewhere", &[("PRELOOP_HOME", &elsewhere)]),
            ("another server", &[("PRELOOP_URL", "http://repo:9"), ("PRELOOP_TOKEN", "agt_repo")]),
            ("another token", &[("PRELOOP_TOKEN", "agt_repo")]),
            ("fail open", &[("PRELOOP_PRE_TOOL_USE_ON_ERROR", "open"), ("PRELOOP_PERMISSION_TIMEOUT_SECS", "0")]),
            ("fast fail", &[("PRELOOP_CONNECT_TIMEOUT_MS", "1")]),
        ];
        for (what, pairs) in attempts {
            let c = h.load(pairs);
            let s = c.server.as_ref().unwrap_or_else(|| panic!("{what}: the user's server is gone"));
            assert_eq!((s.url.as_str(), s.token.expose()), ("http://user:1", "agt_user"), "{what}");
            assert_eq!(c.home, h.user_home(), "{what}");
            assert_eq!(c.url.as_ref().map(|u| u.0.as_str()), Some("http://user:1"), "{what}");
            assert!(!c.mode_unknown, "{what}");
            assert_eq!(c.settings.pre_tool_use_on_error, FailPolicy::Deny, "{what}");
            assert_eq!(c.settings.permission_timeout_secs, 310, "{what}");
            assert_eq!(c.settings.connect_timeout_ms, 1500, "{what}");
            let said = format!("{:?} {:?}", c.warnings, c.problems);
            assert!(said.contains("ignored") || said.contains("refused"), "{what}: nothing says so: {said}");
        }
        // Tightening is still taken, and settings that do not touch the gate.
        let c = h.load(&[("PRELOOP_PERMISSION_REQUEST_ON_ERROR", "deny"), ("PRELOOP_STOP_RESCUE_CAP", "1")]);
        assert_eq!(c.settings.stop_rescue_cap, 1);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        // The same values as the file's are no override.
        let c = h.load(&[("PRELOOP_URL", "http://user:1/api/v1/"), ("PRELOOP_TOKEN", "agt_user")]);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let user_home = h.user_home();
        let c = h.load(&[("PRELOOP_HOME", user_home.to_str().unwrap())]);
        assert!(c.warnings.is_empty() && c.problems.is_empty(), "{:?} {:?}", c.warnings, c.problems);
    }

    #[test]
    fn n2_a_moved_home_does_not_hide_the_accounts_server() {
        // The account's passwd home names a server; a repository sets HOME
        // (Claude Code's project `env` block can) to a directory with its own
        // `.preloop`, or to one with none.
        let h = Homes::new(Some(USER_SERVER));
        let moved = h.root.join("moved");
        fsutil::private_dir(&moved.join(".preloop")).unwrap();
        fsutil::write_atomic(&moved.join(".preloop/config.json"), br#"{"url":"http://repo:9","token":"agt_repo"}"#)
            .unwrap();
        let empty = h.root.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        for home in [&moved, &empty] {
            let env = Env::of(&[("HOME", home.to_str().unwrap()), ("PRELOOP_URL", "http://repo:9")])
                .with_account_home(Some(h.root.join("home")));
            let c = Config::load_from(&env, Some(Harness::ClaudeCode));
            let s =
                c.server.as_ref().unwrap_or_else(|| panic!("HOME={}: the account's server is gone", home.display()));
            assert_eq!((s.url.as_str(), s.token.expose()), ("http://user:1", "agt_user"));
            assert_eq!(c.home, h.user_home());
            assert_eq!(c.settings.pre_tool_use_on_error, FailPolicy::Deny);
            assert!(c.warnings.iter().any(|w| w.starts_with("HOME=") && w.contains("ignored")), "{:?}", c.warnings);
        }
        // The account opted in, or names no server: the moved HOME decides
        // (a sandboxed HOME in tests, a container's HOME).
        for account in [r#"{"url":"http://user:1","token":"agt_user","allow_env_override":true}"#, "{}"] {
            fsutil::write_atomic(&h.user_home().join("config.json"), account.as_bytes()).unwrap();
            let env = Env::of(&[("HOME", moved.to_str().unwrap())]).with_account_home(Some(h.root.join("home")));
            let c = Config::load_from(&env, Some(Harness::ClaudeCode));
            assert_eq!(c.server.as_ref().map(|s| s.url.as_str()), Some("http://repo:9"), "{account}");
            assert!(c.warnings.is_empty(), "{account}: {:?}", c.warnings);
        }
        // An account home the passwd entry names but which has no `.preloop`.
        let env = Env::of(&[("HOME", moved.to_str().unwrap())]).with_account_home(Some(h.root.join("nowhere")));
        assert_eq!(Config::load_from(&env, None).server.map(|s| s.url), Some("http://repo:9".to_string()));
    }

    #[test]
    fn n2_the_user_can_opt_in_to_environment_overrides() {
        let h = Homes::new(Some(r#"{"url":"http://user:1","token":"agt_user","allow_env_override":true}"#));
        let c = h.load(&[("PRELOOP_URL", "http://repo:9"), ("PRELOOP_TOKEN", "agt_repo")]);
        assert_eq!(c.server.as_ref().unwrap().origin, Origin::Env);
        let c = h.load(&[("PRELOOP_HOME", &h.elsewhere())]);
        assert_eq!(c.server.as_ref().unwrap().url, "http://repo:9");
        // Never a relative home: refused, a problem.
        let c = h.load(&[("PRELOOP_HOME", "rel")]);
        assert!(c.problems.iter().any(|p| p.what.contains("not an absolute path")), "{:?}", c.problems);
        assert_eq!(c.home, h.user_home());
    }

    #[test]
    fn n2_without_a_user_server_the_environment_decides_but_never_a_relative_home() {
        // CI: no ~/.preloop at all, the server only in the environment.
        let h = Homes::new(None);
        let c = h.load(&[("PRELOOP_URL", "http://ci:1"), ("PRELOOP_TOKEN", "agt_ci")]);
        assert_eq!(c.server.as_ref().map(|s| (&s.origin, s.url.as_str())), Some((&Origin::Env, "http://ci:1")));
        let c = h.load(&[("PRELOOP_HOME", &h.elsewhere())]);
        assert_eq!(c.server.as_ref().unwrap().url, "http://repo:9");
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        // A relative home is refused: not local mode, the gates' fail policy.
        let c = h.load(&[("PRELOOP_HOME", ".preloop-dev")]);
        assert!(c.server.is_none() && c.mode_unknown, "a relative PRELOOP_HOME must not mean local mode");
        assert!(!c.problems.is_empty());
        // A user config with settings but no server pins nothing either.
        let h = Homes::new(Some(r#"{"stop_rescue_cap":2}"#));
        let c = h.load(&[("PRELOOP_URL", "http://ci:1"), ("PRELOOP_TOKEN", "agt_ci")]);
        assert_eq!(c.server.as_ref().unwrap().origin, Origin::Env);
    }

    #[test]
    fn n2_a_user_config_that_cannot_be_used_is_not_replaced_by_the_environment() {
        use std::os::unix::fs::PermissionsExt;
        let h = Homes::new(Some(USER_SERVER));
        let cfg = h.user_home().join("config.json");
        std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o666)).unwrap();
        let c = h.load(&[("PRELOOP_URL", "http://repo:9"), ("PRELOOP_TOKEN", "agt_repo")]);
        assert!(c.server.is_none() && c.mode_unknown, "{:?}", c.server);
        let c = h.load(&[("PRELOOP_HOME", &h.elsewhere())]);
        assert!(c.server.is_none() && c.mode_unknown && c.home == h.user_home());
    }

    /// newcomer-ux-3 N10: a bad setting is one fact and its fix, with the
    /// path as the rest of the CLI shows it. It does not say "using the
    /// default" (the operator commands refuse to run on it; the hooks' use
    /// of the default is theirs to say), and every path under the home is `~/…`.
    #[test]
    fn n10_a_bad_setting_says_what_and_how_to_fix_it_with_tilde_paths() {
        let h = Homes::new(Some(r#"{"watch":"maybe"}"#));
        let c = h.load(&[("PRELOOP_WATCH", "sometimes")]);
        let said: Vec<(&str, &str)> = c.problems.iter().map(|p| (p.what.as_str(), p.fix.as_str())).collect();
        assert_eq!(
            said,
            [
                (
                    r#"~/.preloop/config.json: watch is "maybe", expected true/false or "on"/"off""#,
                    "edit watch in ~/.preloop/config.json"
                ),
                (
                    r#"PRELOOP_WATCH="sometimes" in the environment: expected on or off"#,
                    "unset PRELOOP_WATCH or set it to on or off"
                ),
            ]
        );
        assert!(c.settings.watch, "the hooks still use the default");

        // The home itself, refused, and the environment's home, ignored.
        let h = Homes::new(Some(USER_SERVER));
        std::fs::set_permissions(h.user_home(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        let c = h.load(&[]);
        let said = format!("{:?} {:?}", c.problems, c.warnings);
        assert!(said.contains("PRELOOP_HOME ~/.preloop: ") && said.contains("chmod 700 ~/.preloop"), "{said}");
        assert!(!said.contains(h.root.to_str().unwrap()), "{said}");
    }
}
