//! `login` / `logout`: the server URL and tokens in `$PRELOOP_HOME/config.json`
//! (mode 0600). A token is read from stdin (when piped) or a prompt that
//! does not echo; never from the command line, never printed or logged.
//!
//! Two logins: the hooks on an agent's machine need the URL and the agent's
//! runtime token (`login --url URL`, `agt_…`); the operator commands (notes,
//! sessions) need the URL and a user token (`login --user --url URL`, a
//! personal API key or JWT). Either stores the URL.
//!
//! Both refuse to run on a configuration the hooks would not trust (a
//! `PRELOOP_HOME` or `config.json` another user owns or can write, a
//! `config.json` that does not parse): fix that first.

use crate::probe::{self, Health, TokenCheck};
use crate::util;
use preloop_shared::config::{Config, Env, Secret, normalize_url, preloop_home};
use preloop_shared::{Error, Result, fsutil};
use serde_json::{Map, Value};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct LoginArgs {
    pub url: Option<String>,
    /// Store a user token (personal API key or JWT) instead of the runtime token.
    pub user: bool,
    pub no_verify: bool,
}

fn config_path(env: &Env) -> PathBuf {
    preloop_home(env, None).join("config.json")
}

/// Refuse when the configuration has a problem: one line, the first
/// problem with its fix (and how many more `doctor` lists).
pub fn refuse_on_problems(config: &Config) -> Result<()> {
    match config.problems.first() {
        None => Ok(()),
        Some(p) => Err(Error::Config(format!(
            "{} (fix: {}); nothing was changed{}",
            p.what,
            p.fix,
            match config.problems.len() {
                1 => String::new(),
                n => format!(" ({} more: preloop-hooks doctor)", n - 1),
            }
        ))),
    }
}

/// The file to rewrite: `config.json`, or the target of a symlinked one
/// (dotfile managers make them; the link stays).
fn write_target(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// `path` as every message shows it (`~/.preloop/config.json`).
fn shown(path: &Path) -> String {
    util::tilde(&Env::process(), path)
}

fn read_config(path: &Path) -> Result<Map<String, Value>> {
    match fsutil::read_owned_json_value(path) {
        Ok(None) => Ok(Map::new()),
        Ok(Some(Value::Object(m))) => Ok(m),
        Ok(Some(_)) => Err(Error::Config(format!("{} is not a JSON object (fix or remove it)", shown(path)))),
        Err(e) => Err(Error::Config(format!("{}: {e} (fix or remove it)", shown(path)))),
    }
}

fn write_config(path: &Path, m: &Map<String, Value>) -> Result<()> {
    let target = write_target(path);
    if let Some(dir) = target.parent() {
        fsutil::private_dir(dir)?;
    }
    let mut bytes = serde_json::to_vec_pretty(&Value::Object(m.clone()))
        .map_err(|e| Error::io("encode config", std::io::Error::other(e)))?;
    bytes.push(b'\n');
    fsutil::write_atomic(&target, &bytes)
}

/// What kind of credential a token looks like (docs/contracts/preloop-server.md §2.1).
pub fn token_kind(t: &str) -> &'static str {
    if t.starts_with("agt_") || t.starts_with("flow_") {
        "runtime"
    } else if t.contains('.') || (t.len() == 40 && t.bytes().all(|b| b.is_ascii_alphanumeric())) {
        "user"
    } else {
        "unknown"
    }
}

fn read_token(prompt: &str) -> Result<String> {
    let raw = if std::io::stdin().is_terminal() {
        rpassword::prompt_password(prompt)
            .map_err(|e| Error::Usage(format!("could not read the token from the terminal: {}", fsutil::io_text(&e))))?
    } else {
        util::read_stdin("the token")?
    };
    let t = raw.trim().to_string();
    if t.is_empty() {
        return Err(Error::Usage("no token given (pipe it on stdin or type it at the prompt)".into()));
    }
    if t.chars().any(char::is_whitespace) {
        return Err(Error::Usage("a token has no spaces or line breaks; give exactly one token".into()));
    }
    Ok(t)
}

/// An http(s) URL, or a usage error that echoes the input exactly and
/// suggests the likely intent.
pub fn check_url(input: &str) -> Result<String> {
    let raw = input.trim();
    let lower = raw.to_ascii_lowercase();
    let has_scheme = lower.starts_with("https://") || lower.starts_with("http://");
    let rest = raw.split_once("://").map(|(_, r)| r).unwrap_or(raw);
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if has_scheme && !host.is_empty() && !host.starts_with(':') && !host.contains(char::is_whitespace) {
        return Ok(normalize_url(raw));
    }
    let hint = if !has_scheme && !raw.contains("://") && !raw.is_empty() && !raw.contains(char::is_whitespace) {
        let scheme = if raw.starts_with("localhost") || raw.starts_with("127.") || raw.starts_with("[::1]") {
            "http"
        } else {
            "https"
        };
        format!(" (did you mean --url {scheme}://{raw}?)")
    } else {
        " (e.g. --url https://preloop.example.com)".to_string()
    };
    Err(Error::Usage(format!("--url {input:?} is not an http(s) URL with a host{hint}")))
}

pub fn login(a: LoginArgs) -> Result<()> {
    let env = Env::process();
    refuse_on_problems(&Config::load(None))?;
    let path = config_path(&env);
    let mut cfg = read_config(&path)?;
    let url = match a.url.as_deref() {
        Some(u) => check_url(u)?,
        None => match cfg.get("url").and_then(Value::as_str) {
            Some(u) => check_url(u)?,
            None => {
                return Err(Error::Usage(
                    "--url URL is required (the Preloop server, e.g. https://preloop.example.com)".into(),
                ));
            }
        },
    };
    if url.starts_with("http://") && !is_loopback(&url) {
        crate::errln!("preloop-hooks: warning: {url} is plain http: the token would cross the network unencrypted");
    }
    let (key, kind_word) = if a.user {
        ("user_token", "user token (personal API key or JWT)")
    } else {
        ("token", "runtime token (agt_…)")
    };
    let token = read_token(&format!("Preloop {kind_word} for {url} (input hidden): "))?;
    match (a.user, token_kind(&token)) {
        (true, "runtime") => {
            return Err(Error::Usage(
                "that is a runtime token (agt_/flow_), which the hooks use; `login --user` takes a personal API key or a JWT".into(),
            ));
        }
        (false, "user") => {
            return Err(Error::Usage("that looks like a user token (personal API key or JWT); the hooks need the agent's runtime token (agt_…). Store a user token with `login --user`".into()));
        }
        _ => {}
    }
    let secret = Secret::new(token);
    let what = if a.user { "user token" } else { "runtime token" };
    if !a.no_verify {
        let proxy = Config::load(None).settings.proxy;
        let health = probe::health(&url, Duration::from_secs(5), proxy.as_ref());
        match &health {
            Health::NotPreloop(why) => {
                return Err(Error::Refused(format!(
                    "not saved: {url} answers but is not a Preloop server ({why}); check the URL (the server's base URL), or pass --no-verify"
                )));
            }
            // Never a URL that could not be checked (newcomer 4, P6): every
            // later command would fail on it.
            Health::Unreachable(why) => return Err(unverified(&url, what, why)),
            Health::Preloop | Health::Unhealthy(_) => {
                let check = if a.user {
                    probe::user_token(&url, &secret, Duration::from_secs(10), proxy.as_ref())
                } else {
                    probe::runtime_token(&url, &secret, Duration::from_secs(10), proxy.as_ref())
                };
                match check {
                    TokenCheck::Accepted => crate::errln!("the server accepted the {what}"),
                    TokenCheck::Rejected(why) => {
                        return Err(Error::Refused(format!(
                            "not saved: the server at {url} rejected this {what} ({why}); {}",
                            if a.user {
                                "use a valid personal API key or JWT of your Preloop account"
                            } else {
                                "use the runtime token (agt_…) of the agent this machine runs"
                            }
                        )));
                    }
                    TokenCheck::Unknown(why) => return Err(unverified(&url, what, &why)),
                }
            }
        }
    }
    cfg.insert("url".into(), Value::String(url.clone()));
    cfg.insert(key.into(), Value::String(secret.expose().to_string()));
    write_config(&path, &cfg)?;
    crate::outln!("saved the {what} {} and the URL {url} in {} (mode 0600)", secret.hint(), util::tilde(&env, &path));
    if !a.user && (env.get("PRELOOP_URL").is_some() || env.get("PRELOOP_TOKEN").is_some()) {
        crate::errln!(
            "preloop-hooks: note: PRELOOP_URL/PRELOOP_TOKEN are set in this environment and take precedence over the file"
        );
    }
    if a.user && env.get("PRELOOP_USER_TOKEN").is_some() {
        crate::errln!(
            "preloop-hooks: note: PRELOOP_USER_TOKEN is set in this environment and takes precedence over the file"
        );
    }
    Ok(())
}

/// The refusal of a login whose URL or token could not be checked: what
/// went wrong, and the flag that saves without checking.
fn unverified(url: &str, what: &str, why: &str) -> Error {
    Error::Refused(format!(
        "not saved: could not check the {what} at {url}: {why} (fix the URL; to save it without checking, as for a server not up yet, add --no-verify)"
    ))
}

fn is_loopback(url: &str) -> bool {
    let host = url.split("://").nth(1).unwrap_or("").split(['/', ':']).next().unwrap_or("");
    matches!(host, "localhost" | "127.0.0.1" | "[") || host.starts_with("127.") || url.contains("://[::1]")
}

pub fn logout(user_only: bool) -> Result<()> {
    let env = Env::process();
    refuse_on_problems(&Config::load(None))?;
    let path = config_path(&env);
    let mut cfg = read_config(&path)?;
    let keys: &[&str] = if user_only { &["user_token"] } else { &["url", "token", "user_token"] };
    let removed: Vec<&str> = keys.iter().copied().filter(|k| cfg.shift_remove(*k).is_some()).collect();
    if removed.is_empty() {
        crate::outln!("nothing to remove in {}", util::tilde(&env, &path));
    } else {
        write_config(&path, &cfg)?;
        crate::outln!("removed {} from {}", removed.join(", "), util::tilde(&env, &path));
        if !user_only {
            crate::outln!(
                "the hooks now use the local inbox (unless PRELOOP_URL/PRELOOP_TOKEN or a Preloop onboarding file configure a server)"
            );
        }
    }
    let set: Vec<&str> = ["PRELOOP_URL", "PRELOOP_TOKEN", "PRELOOP_USER_TOKEN"]
        .into_iter()
        .filter(|k| env.get(k).is_some_and(|v| !v.is_empty()))
        .filter(|k| !user_only || *k == "PRELOOP_USER_TOKEN")
        .collect();
    if !set.is_empty() {
        crate::errln!(
            "preloop-hooks: note: {} still set in this environment (unset it to stop using it)",
            set.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_echoed_exactly() {
        assert_eq!(check_url("https://x.example/api/v1/").unwrap(), "https://x.example");
        let e = check_url("127.0.0.1:8765").unwrap_err().to_string();
        assert!(e.contains("\"127.0.0.1:8765\"") && e.contains("did you mean --url http://127.0.0.1:8765"), "{e}");
        let e = check_url("http://").unwrap_err().to_string();
        assert!(e.contains("\"http://\""), "{e}");
        let e = check_url("preloop.example.com").unwrap_err().to_string();
        assert!(e.contains("https://preloop.example.com"), "{e}");
        assert!(check_url("ftp://x").is_err());
    }
}
