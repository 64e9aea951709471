//! OpenCode killed with no `dispose` of its own (SIGKILL, a crash): the idle
//! watcher of a session, finding its parent gone, ends that session as the
//! dispose hook would have, so a note still pending becomes `undeliverable`
//! (issue 32). A session already ended is left as it is.

use crate::common::*;
use preloop_opencode::Event;
use preloop_shared::Harness;
use preloop_shared::config::{Config, Env};
use preloop_shared::registry::def_of;
use preloop_shared::session::read_session_file;
use preloop_shared::watch::{PARENT_GONE, end_orphaned};
use preloop_testkit::support::unique_session;

fn config(home: &Home) -> Config {
    let dir = home.path().to_string_lossy().to_string();
    let env = Env::of(&[("PRELOOP_HOME", &dir), ("HOME", &dir)]).with_account_home(Some(home.path().to_path_buf()));
    Config::load_from(&env, Some(Harness::OpenCode))
}

#[test]
fn a_watcher_whose_opencode_is_gone_ends_its_live_session() {
    let home = Home::new("oc-orphan");
    let s = unique_session("orphan");
    home.run(Event::SessionCreated, &OpenCode::fixture_for("session.created.json", &s));
    let id = home.send(&s, "MARK-never-read");
    let why = end_orphaned(&config(&home), def_of(Event::Dispose), &s);
    assert_eq!(why, format!("{PARENT_GONE}: session ended"));
    let f = read_session_file(home.path(), &s).unwrap().unwrap();
    assert!(f.ended_at.is_some(), "{f:?}");
    assert_eq!(home.state(&id), "undeliverable");
    // Already ended (OpenCode's dispose, or our signal handling, ran first): nothing more.
    assert_eq!(end_orphaned(&config(&home), def_of(Event::Dispose), &s), PARENT_GONE);
    // Never registered: nothing to end.
    assert_eq!(end_orphaned(&config(&home), def_of(Event::Dispose), &unique_session("none")), PARENT_GONE);
}
