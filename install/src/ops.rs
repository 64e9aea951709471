//! Where the operator commands (`notes`, `sessions`) go, and the rules both
//! modes share: a configuration with problems is refused, the mode is named
//! on stderr whenever it could surprise, and a session is found by its
//! harness session id or its runtime id in either mode.

use crate::server_op::ServerOperator;
use preloop_shared::config::{Config, Origin};
use preloop_shared::flow::is_uuid;
use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{Receipt, RuntimeSessionItem};
use preloop_shared::session::{self, SessionFile};
use preloop_shared::time::Timestamp;
use preloop_shared::{Error, Harness, Result};
use std::collections::HashMap;

pub enum Backend {
    Local(LocalInbox),
    Server(ServerOperator),
}

pub struct Ops {
    pub config: Config,
    pub backend: Backend,
}

/// A session as both modes know it.
#[derive(Debug, Clone)]
pub struct SessionRef {
    pub runtime_id: String,
    pub external_id: Option<String>,
    /// This machine's session file, when the hooks ran here.
    pub file: Option<SessionFile>,
    /// The server's view (server mode).
    pub server: Option<RuntimeSessionItem>,
    pub ended_at: Option<Timestamp>,
}

impl SessionRef {
    /// How to name it to a person: the harness id, else the runtime id.
    pub fn name(&self) -> &str {
        self.external_id.as_deref().unwrap_or(&self.runtime_id)
    }
}

impl Ops {
    /// The configuration, refused when it has problems (one line each, with
    /// its fix), and the backend it selects.
    pub fn load() -> Result<Ops> {
        let config = Config::load(None);
        refuse_problems(&config)?;
        let backend = match ServerOperator::from_config(&config)? {
            Some(s) => Backend::Server(s),
            None => Backend::Local(LocalInbox::new(&config.home, config.settings.note_ttl_secs)),
        };
        let ops = Ops { config, backend };
        if let Some(note) = ops.mode_note() {
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
            crate::errln!(
                "preloop-hooks: no user token for {}: showing the sessions on this machine only (for the whole account: `preloop-hooks login --user`, or set PRELOOP_USER_TOKEN)",
                config.url.as_ref().map(|(u, _)| u.as_str()).unwrap_or("the server")
            );
            let backend = Backend::Local(LocalInbox::new(&config.home, config.settings.note_ttl_secs));
            return Ok(Ops { config, backend });
        }
        Ops::load()
    }

    pub fn is_local(&self) -> bool {
        matches!(self.backend, Backend::Local(_))
    }

    pub fn mode(&self) -> &'static str {
        if self.is_local() { "local" } else { "server" }
    }

    /// A sentence naming the mode and why, when it could surprise.
    pub fn mode_note(&self) -> Option<String> {
        match &self.backend {
            Backend::Local(_) => {
                if let Some((_, origin)) = &self.config.user_token {
                    return Some(format!(
                        "local mode: a user token is stored ({origin}) but no server URL is configured, so this uses the local inbox (for server mode: `preloop-hooks login --user --url URL`)"
                    ));
                }
                let server_runs = session::all_session_files(&self.config.home)
                    .iter()
                    .filter(|f| f.mode == "server" && f.ended_at.is_none())
                    .count();
                (server_runs > 0).then(|| {
                    format!(
                        "local mode (no server URL configured), but {server_runs} live session(s) on this machine run against a server: notes sent here go to the local inbox, which they do not read (`preloop-hooks login --user --url URL`)"
                    )
                })
            }
            Backend::Server(s) => match self.config.url.as_ref().map(|(_, o)| o) {
                Some(Origin::Onboarding(p)) => {
                    Some(format!("server mode: {} (the URL comes from {})", s.base, p.display()))
                }
                _ => None,
            },
        }
    }

    /// This machine's session files by runtime id.
    pub fn files_by_runtime(&self) -> HashMap<String, SessionFile> {
        session::all_session_files(&self.config.home).into_iter().map(|f| (f.runtime_session_id.clone(), f)).collect()
    }

    /// A session file by harness id or runtime id.
    pub fn local_file(&self, id: &str) -> Option<SessionFile> {
        if let Ok(Some(f)) = session::read_session_file(&self.config.home, id) {
            return Some(f);
        }
        session::all_session_files(&self.config.home).into_iter().find(|s| s.runtime_session_id == id)
    }

    /// Find a session by its harness session id or its runtime id: on the
    /// server (across the account) in server mode, in the session files on
    /// the local inbox. `Ok(None)` when nobody knows it.
    pub fn find_session(&self, id: &str) -> Result<Option<SessionRef>> {
        let file = self.local_file(id);
        match &self.backend {
            Backend::Local(_) => Ok(file.map(|f| SessionRef {
                runtime_id: f.runtime_session_id.clone(),
                external_id: Some(f.external_session_id.clone()),
                ended_at: f.ended_at,
                server: None,
                file: Some(f),
            })),
            Backend::Server(s) => {
                // A file written by server-mode hooks names the runtime id the server knows.
                let candidates: Vec<String> = file
                    .iter()
                    .filter(|f| f.mode == "server")
                    .map(|f| f.runtime_session_id.clone())
                    .chain(is_uuid(id).then(|| id.to_string()))
                    .collect();
                for rid in candidates {
                    match s.runtime_session(&rid) {
                        Ok(item) => return Ok(Some(self.server_ref(item))),
                        Err(Error::NotFound(_)) => {}
                        Err(e) => return Err(e),
                    }
                }
                let page = s.runtime_sessions(&[("query", id.to_string()), ("limit", "100".into())])?;
                let mut hits: Vec<RuntimeSessionItem> =
                    page.items.into_iter().filter(|i| i.external_session_id().as_deref() == Some(id)).collect();
                if hits.len() > 1 {
                    let ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
                    return Err(Error::Usage(format!(
                        "{} sessions in this account carry the harness id {id} (runtime ids {}): name one by its runtime id",
                        hits.len(),
                        ids.join(", ")
                    )));
                }
                Ok(hits.pop().map(|item| self.server_ref(item)))
            }
        }
    }

    fn server_ref(&self, item: RuntimeSessionItem) -> SessionRef {
        let file = self.files_by_runtime().remove(&item.id);
        SessionRef {
            runtime_id: item.id.clone(),
            external_id: item.external_session_id().or_else(|| file.as_ref().map(|f| f.external_session_id.clone())),
            ended_at: item.ended_at,
            file,
            server: Some(item),
        }
    }

    /// Fill what a receipt from the server leaves out and this machine
    /// knows: the harness session id and harness of its session.
    pub fn fill(&self, receipts: &mut [Receipt]) {
        if self.is_local() {
            return;
        }
        let files = self.files_by_runtime();
        for r in receipts {
            if let Some(f) = r.runtime_session_id.as_ref().and_then(|rid| files.get(rid)) {
                r.external_session_id.get_or_insert_with(|| f.external_session_id.clone());
                if r.harness.is_none() {
                    r.harness = Harness::from_source(&f.agent_kind).map(|h| h.slug().to_string());
                }
            }
        }
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
