//! `login` / `logout`: the server URL and tokens in `$PRELOOP_HOME/config.json`
//! (mode 0600). A token is read from stdin (when piped) or a prompt that
//! does not echo; never from the command line, never printed or logged.

use crate::server_op::{self, ServerOperator};
use crate::util;
use preloop_shared::config::{Env, Secret, normalize_url, preloop_home};
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
    preloop_home(env).join("config.json")
}

fn read_config(path: &Path) -> Result<Map<String, Value>> {
    match fsutil::read_json::<Value>(path) {
        Ok(None) => Ok(Map::new()),
        Ok(Some(Value::Object(m))) => Ok(m),
        Ok(Some(_)) => Err(Error::Config(format!("{} is not a JSON object; fix or remove it", path.display()))),
        Err(e) => Err(Error::Config(format!("{e}; fix or remove it"))),
    }
}

fn write_config(path: &Path, m: &Map<String, Value>) -> Result<()> {
    if let Some(dir) = path.parent() {
        fsutil::private_dir(dir)?;
    }
    let mut bytes = serde_json::to_vec_pretty(&Value::Object(m.clone()))
        .map_err(|e| Error::io("encode config", std::io::Error::other(e)))?;
    bytes.push(b'\n');
    fsutil::write_atomic(path, &bytes)
}

/// What kind of credential a token looks like (contract §2.1).
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
        rpassword::prompt_password(prompt).map_err(|e| Error::io("read the token from the terminal", e))?
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

pub fn login(a: LoginArgs) -> Result<()> {
    let env = Env::process();
    let path = config_path(&env);
    let mut cfg = read_config(&path)?;
    let url = match a.url.as_deref().or(cfg.get("url").and_then(Value::as_str)) {
        Some(u) => normalize_url(u),
        None => {
            return Err(Error::Usage(
                "--url URL is required (the Preloop server, e.g. https://preloop.example.com)".into(),
            ));
        }
    };
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(Error::Usage(format!("{url:?} is not an http(s) URL")));
    }
    if url.starts_with("http://") && !is_loopback(&url) {
        eprintln!("warning: {url} is plain http: the token would cross the network unencrypted");
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
                "that is a runtime token (agt_/flow_); `login --user` takes a personal API key or a JWT".into(),
            ));
        }
        (false, "user") => {
            return Err(Error::Usage("that looks like a user token (personal API key or JWT); the hooks need the agent's runtime token (agt_…). Store a user token with `login --user`".into()));
        }
        _ => {}
    }
    let secret = Secret::new(token);
    if !a.no_verify {
        let check = if a.user {
            ServerOperator::new(&url, secret.clone(), Duration::from_secs(3), Duration::from_secs(10)).probe()
        } else {
            server_op::probe_runtime(&url, &secret, Duration::from_secs(10))
        };
        match check {
            Ok(()) => eprintln!("the server accepted the {}", if a.user { "user token" } else { "runtime token" }),
            Err(e @ Error::Unreachable { .. }) => {
                eprintln!("warning: could not check the token ({e}); saving it anyway")
            }
            Err(e) => return Err(Error::Refused(format!("not saved: {e}"))),
        }
    }
    cfg.insert("url".into(), Value::String(url.clone()));
    cfg.insert(key.into(), Value::String(secret.expose().to_string()));
    write_config(&path, &cfg)?;
    println!(
        "saved {} {} for {url} in {} (mode 0600)",
        if a.user { "user token" } else { "runtime token" },
        secret.hint(),
        util::tilde(&env, &path)
    );
    if env.get("PRELOOP_URL").is_some() || env.get("PRELOOP_TOKEN").is_some() {
        eprintln!("note: PRELOOP_URL/PRELOOP_TOKEN are set in this environment and take precedence over the file");
    }
    Ok(())
}

fn is_loopback(url: &str) -> bool {
    let host = url.split("://").nth(1).unwrap_or("").split(['/', ':']).next().unwrap_or("");
    matches!(host, "localhost" | "127.0.0.1" | "[") || host.starts_with("127.") || url.contains("://[::1]")
}

pub fn logout(user_only: bool) -> Result<()> {
    let env = Env::process();
    let path = config_path(&env);
    let mut cfg = read_config(&path)?;
    let keys: &[&str] = if user_only { &["user_token"] } else { &["url", "token", "user_token"] };
    let removed: Vec<&str> = keys.iter().copied().filter(|k| cfg.shift_remove(*k).is_some()).collect();
    if removed.is_empty() {
        println!("nothing to remove in {}", util::tilde(&env, &path));
        return Ok(());
    }
    write_config(&path, &cfg)?;
    println!("removed {} from {}", removed.join(", "), util::tilde(&env, &path));
    if !user_only {
        println!(
            "the hooks now use the local inbox (unless PRELOOP_URL/PRELOOP_TOKEN or a Preloop onboarding file configure a server)"
        );
    }
    Ok(())
}
