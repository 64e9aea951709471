//! Where the operator commands (`notes`, `sessions`) go, and the rules both
//! modes share: a configuration with problems is refused, the mode is named
//! on stderr whenever it could surprise, and the [`Operator`] the
//! configuration selects (the local inbox, or a server with a user token).

use crate::human_api::HumanApi;
use crate::operator::{self, Operator, Side};
use preloop_shared::config::Config;
use preloop_shared::session::SessionFile;
use preloop_shared::{Error, Result};
use std::sync::Arc;

/// The configuration and the operator it selects.
pub struct Ops {
    pub config: Config,
    pub op: Arc<dyn Operator>,
}

impl Ops {
    /// The configuration, refused when it has problems (one line each, with
    /// its fix), and the operator it selects.
    pub fn load() -> Result<Ops> {
        let config = Config::load(None);
        refuse_problems(&config)?;
        say_warnings(&config);
        let ops = match HumanApi::from_config(&config)? {
            Some(api) => Ops::with_operator(config.clone(), Arc::new(operator::server::Server::new(api, config))),
            None => Ops::local(config),
        };
        if let Some(note) = ops.op.mode_note() {
            crate::errln!("preloop-hooks: {note}");
        }
        Ok(ops)
    }

    /// For `sessions list`: with a server URL but no user token, the
    /// session files on this machine (which server-mode hooks write) are
    /// still listed, and stderr says so.
    pub fn load_for_listing() -> Result<Ops> {
        let config = Config::load(None);
        refuse_problems(&config)?;
        if config.url.is_some() && config.user_token.is_none() {
            say_warnings(&config);
            crate::errln!(
                "preloop-hooks: no user token for {}: showing the sessions on this machine only (for the whole account: `preloop-hooks login --user`, or set PRELOOP_USER_TOKEN)",
                config.url.as_ref().map(|(u, _)| u.as_str()).unwrap_or("the server")
            );
            return Ok(Ops::local(config));
        }
        Ops::load()
    }

    fn local(config: Config) -> Ops {
        Ops::with_operator(config.clone(), Arc::new(operator::local::Local::new(config)))
    }

    /// These commands against any operator (the unit tests' in-memory one).
    pub fn with_operator(config: Config, op: Arc<dyn Operator>) -> Ops {
        Ops { config, op }
    }

    pub fn mode(&self) -> Side {
        self.op.mode()
    }

    /// A session file on this machine by harness id or runtime id.
    pub fn local_file(&self, id: &str) -> Option<SessionFile> {
        operator::local_file(&self.config.home, id)
    }
}

/// What the configuration ignored (an environment variable its own file
/// overrides: `PRELOOP_URL` when config.json names the server, red-team 4
/// P4), one line each on stderr: the operator is never routed silently.
fn say_warnings(config: &Config) {
    for w in &config.warnings {
        crate::errln!("preloop-hooks: warning: {}", preloop_shared::log::escape_line(w));
    }
}

/// Operator commands refuse to run on a configuration with problems: a
/// file that does not parse or holds a bad value, a home another user could
/// write. One line per problem, with its fix.
pub fn refuse_problems(config: &Config) -> Result<()> {
    if config.problems.is_empty() {
        return Ok(());
    }
    for p in &config.problems {
        crate::errln!("preloop-hooks: {} ({})", p.what, p.fix);
    }
    let (has, they) = match config.problems.len() {
        1 => ("a problem".to_string(), "it is"),
        n => (format!("{n} problems"), "they are"),
    };
    Err(Error::Config(format!(
        "the configuration has {has}, listed above; notes and sessions refuse to run until {they} fixed (check with `preloop-hooks doctor`)"
    )))
}
