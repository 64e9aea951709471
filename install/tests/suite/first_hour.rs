//! The operator's first hour (issue 30; newcomer 4, P1, P5-P10, P14, P15),
//! through the real CLI: every `sessions list` filter selects what its
//! column shows in both modes, README's two logins are enough for
//! `notes send --next`, `login` never saves a URL it could not check, and
//! the messages a newcomer met say what is true.

use crate::common::*;
use preloop_shared::backend::Backend;
use preloop_shared::wire::{SessionEndRequest, SessionStartRequest};
use preloop_testkit::{FakeServer, client};
use serde_json::{Value, json};

/// `sessions list --all --json` with `args`: the rows.
fn rows(w: &World, args: &[&str]) -> Vec<Value> {
    let mut a = vec!["sessions", "list", "--all", "--json"];
    a.extend_from_slice(args);
    w.json(&a)["sessions"].as_array().unwrap().clone()
}

fn ids(rows: &[Value]) -> Vec<String> {
    let mut v: Vec<String> = rows.iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    v.sort();
    v
}

/// The filter `args` lists exactly the rows whose columns `shows` accepts,
/// and selects some but not all of them (so the check means something).
fn selects_what_it_shows(w: &World, args: &[&str], shows: impl Fn(&Value) -> bool) {
    let all = rows(w, &[]);
    let want = ids(&all.iter().filter(|r| shows(r)).cloned().collect::<Vec<_>>());
    let got = ids(&rows(w, args));
    assert_eq!(got, want, "{args:?}: the filter and the column disagree; every row: {all:#?}");
    assert!(!want.is_empty() && want.len() < all.len(), "{args:?} selects {want:?} of {}: not a test", all.len());
}

fn str_of<'a>(r: &'a Value, k: &str) -> Option<&'a str> {
    r[k].as_str()
}

// ----- P1: server mode ------------------------------------------------------

fn hook(s: &FakeServer, token: &str, route: &str, body: Value) -> Value {
    let r = client::post_json(&format!("{}/agents/{route}", s.api_base()), Some(token), &body).unwrap();
    assert!(r.status < 300, "{route}: {} {}", r.status, r.text());
    if r.status == 204 { Value::Null } else { r.json() }
}

/// A run registered by the hooks of `source` with `token`: its runtime id.
fn run(s: &FakeServer, token: &str, ext: &str, source: &str, extra: Value) -> String {
    let mut b = json!({"session_id": ext, "source": source, "cwd": format!("/w/{ext}")});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    hook(s, token, "session-start", b)["runtime_session_id"].as_str().unwrap().to_string()
}

#[test]
fn p1_server_every_filter_selects_what_its_column_shows() {
    let s = FakeServer::start();
    let w = World::server("fh-p1-srv", &s);
    let t = s.runtime_token();
    // README's setup: one runtime token on this machine (a `claude_code`
    // agent) runs every harness; each registers its run with its own source.
    let cond = run(&s, &t, "cc", "claude_code", json!({}));
    run(&s, &t, "cx", "codex_cli", json!({"parent_session_id": cond, "alias": "worker"}));
    run(&s, &t, "gm", "gemini_cli", json!({"parent_session_id": cond}));
    run(&s, &t, "gone", "copilot_cli", json!({}));
    hook(&s, &t, "session-end", json!({"external_session_id": "gone", "reason": "exit"}));
    let other = s.add_agent("Release worker");
    run(&s, &other.runtime_token, "rw", "codex_cli", json!({}));

    let all = rows(&w, &[]);
    let kind = |id: &str| all.iter().find(|r| r["id"] == id).unwrap()["kind"].clone();
    assert_eq!((kind("cx"), kind("gm"), kind("gone")), (json!("codex"), json!("gemini"), json!("copilot")));

    for k in ["codex", "gemini", "copilot", "claude-code"] {
        selects_what_it_shows(&w, &["--kind", k], |r| str_of(r, "kind") == Some(k));
    }
    let cx = ids(&rows(&w, &["--kind", "codex"]));
    assert_eq!(cx, ["cx", "rw"], "Codex runs of a claude_code agent are codex runs (P1)");
    selects_what_it_shows(&w, &["--agent", "Release worker"], |r| str_of(r, "agent_name") == Some("Release worker"));
    selects_what_it_shows(&w, &["--agent", &s.agent_id()], |r| str_of(r, "agent_id") == Some(&s.agent_id()));
    selects_what_it_shows(&w, &["--active"], |r| r["state"] != "ended");
    selects_what_it_shows(&w, &["--parent", "cc"], |r| str_of(r, "parent_session_id") == Some(&cond));
    selects_what_it_shows(&w, &["--alias", "worker"], |r| str_of(r, "alias") == Some("worker"));
    selects_what_it_shows(&w, &["--kind", "codex", "--active", "--agent", "Release worker"], |r| {
        str_of(r, "kind") == Some("codex") && r["state"] != "ended" && str_of(r, "agent_name") == Some("Release worker")
    });
    // --since by LAST ACTIVITY or STARTED: every run here is recent.
    assert_eq!(ids(&rows(&w, &["--since", "1h"])), ids(&all));
    // The managed agent's kind is never sent as the session's kind.
    let sent: Vec<String> =
        s.requests().into_iter().filter(|r| r.path == "/api/v1/runtime-sessions").map(|r| r.query).collect();
    assert!(sent.iter().all(|q| !q.contains("agent_kind")), "{sent:?}");
}

// ----- P1: local mode ---------------------------------------------------------

fn start_local(w: &World, id: &str, source: &str, parent: Option<&str>, alias: Option<&str>) -> String {
    w.inbox()
        .session_start(&SessionStartRequest {
            session_id: id.into(),
            source: Some(source.into()),
            cwd: Some(format!("/work/{id}")),
            parent_session_id: parent.map(str::to_string),
            alias: alias.map(str::to_string),
            first_prompt: None,
            hook_event_name: Some("SessionStart".into()),
            transcript_path: None,
            harness_process: None,
        })
        .unwrap()
        .runtime_session_id
}

#[test]
fn p1_local_every_filter_selects_what_its_column_shows() {
    let w = World::local("fh-p1-local");
    let cond = start_local(&w, "cc", "claude_code", None, None);
    start_local(&w, "cx", "codex_cli", Some(&cond), Some("worker"));
    start_local(&w, "gm", "gemini_cli", Some(&cond), None);
    start_local(&w, "old", "claude_code", None, None);
    w.inbox().session_end(&SessionEndRequest { external_session_id: "gm".into(), reason: "exit".into() }).unwrap();
    // A run that started 3 hours ago and did nothing since.
    let f = w.home.join("sessions/old.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    v["started_at"] = json!(preloop_shared::time::Timestamp::now().add_secs(-3 * 3600).to_iso_z());
    std::fs::write(&f, v.to_string()).unwrap();

    for k in ["codex", "gemini", "claude-code"] {
        selects_what_it_shows(&w, &["--kind", k], |r| str_of(r, "kind") == Some(k));
    }
    selects_what_it_shows(&w, &["--active"], |r| r["state"] != "ended");
    selects_what_it_shows(&w, &["--parent", "cc"], |r| str_of(r, "parent_session_id") == Some(&cond));
    selects_what_it_shows(&w, &["--alias", "worker"], |r| str_of(r, "alias") == Some("worker"));
    let hour_ago = preloop_shared::time::Timestamp::now().add_secs(-3600);
    selects_what_it_shows(&w, &["--since", "1h"], |r| {
        ["last_activity_at", "started_at"]
            .iter()
            .filter_map(|k| r[*k].as_str().and_then(preloop_shared::time::Timestamp::parse))
            .any(|t| t >= hour_ago)
    });
    // --agent is a server's: the local inbox says so rather than list nothing.
    let out = w.run(&["sessions", "list", "--agent", "x"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
}

// ----- P9: the column of approvals is named for them ---------------------------

#[test]
fn p9_the_approvals_column_is_named_approvals() {
    let w = World::local("fh-p9");
    start_local(&w, "cc", "claude_code", None, None);
    let out = w.run(&["sessions", "list"]);
    let head = stdout(&out).lines().next().unwrap_or_default().to_string();
    assert!(head.contains("APPROVALS") && !head.contains("PENDING"), "{head}");
}

// ----- P5: --next after README's two logins ------------------------------------

/// A world logged in as README says: `login --user`, then `login`, no
/// variable and no onboarding file.
fn logged_in(tag: &str, s: &FakeServer) -> World {
    let w = World::local(tag);
    for (args, token) in
        [(vec!["login", "--user", "--url"], s.user_token()), (vec!["login", "--url"], s.runtime_token())]
    {
        let mut a = args.clone();
        let url = s.url();
        a.push(&url);
        let out = w.run_env(&a, &[], Some(&token));
        assert_eq!(code(&out), 0, "{a:?}: {}", stderr(&out));
    }
    w
}

#[test]
fn p5_notes_send_next_works_after_the_two_logins() {
    let s = FakeServer::start();
    let w = logged_in("fh-p5", &s);
    // The account's only agent is the one this machine runs.
    let v = w.json(&["notes", "send", "--next", "claude-code", "--json", "Run the checks first."]);
    assert_eq!(v["target"]["agent_id"], s.agent_id().as_str(), "{v}");
    // Two agents, no run here yet: which one is not known; the error gives
    // the exact command and the variable.
    let other = s.add_agent("Release worker");
    let out = w.run(&["notes", "send", "--next", "codex", "x"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("--agent") && err.contains("--next-session") && err.contains("PRELOOP_AGENT_ID"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // After a run of this machine's hooks (any harness), its agent.
    let rid = run(&s, &s.runtime_token(), "cx-1", "codex_cli", json!({}));
    std::fs::create_dir_all(w.home.join("sessions")).unwrap();
    std::fs::write(
        w.home.join("sessions/cx-1.json"),
        json!({"runtime_session_id": rid, "started_at": preloop_shared::time::Timestamp::now().to_iso_z(),
               "agent_kind": "codex_cli", "external_session_id": "cx-1", "mode": "server"})
        .to_string(),
    )
    .unwrap();
    for h in ["codex", "claude-code"] {
        let v = w.json(&["notes", "send", "--next", h, "--json", "next run"]);
        assert_eq!(v["target"]["agent_id"], s.agent_id().as_str(), "{h}: {v}");
        assert_ne!(v["target"]["agent_id"], other.agent_id.as_str());
    }
}

// ----- P6: login saves only what it checked ------------------------------------

#[test]
fn p6_login_never_saves_a_url_it_could_not_check() {
    let s = FakeServer::start();
    let w = World::local("fh-p6");
    let config = w.home.join("config.json");
    let port = s.port();
    // https:// against a server that speaks plain HTTP: one line that says so.
    let https = format!("https://127.0.0.1:{port}");
    let out = w.run_env(&["login", "--user", "--url", &https], &[], Some(&s.user_token()));
    let err = stderr(&out);
    assert_ne!(code(&out), 0, "{err}");
    assert!(
        err.contains(&format!(
            "the server at 127.0.0.1:{port} answers plain HTTP: did you mean --url http://127.0.0.1:{port}?"
        )),
        "{err}"
    );
    assert!(!err.to_lowercase().contains("corrupt") && !err.contains("saving it anyway"), "{err}");
    assert!(!config.exists(), "nothing saved");
    // Nothing listens: refused, with --no-verify named.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://127.0.0.1:{}", dead.local_addr().unwrap().port());
    drop(dead);
    let out = w.run_env(&["login", "--user", "--url", &dead_url], &[], Some(&s.user_token()));
    let err = stderr(&out);
    assert_ne!(code(&out), 0, "{err}");
    assert!(err.contains("not saved") && err.contains("--no-verify"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!config.exists(), "nothing saved");
    // --no-verify saves without checking (a server not up yet).
    let out = w.run_env(&["login", "--user", "--url", &dead_url, "--no-verify"], &[], Some(&s.user_token()));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(read(&config).contains(&dead_url));
    // The right URL is checked and saved.
    let out = w.run_env(&["login", "--user", "--url", &s.url()], &[], Some(&s.user_token()));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("accepted"), "{}", stderr(&out));
}

// ----- P7, P8, P10, P14, P15: messages ------------------------------------------

#[test]
fn p7_a_three_character_session_id_gets_the_rule() {
    let s = FakeServer::start();
    let id = "9c6a639f-0000-4000-8000-000000000001";
    let local = World::local("fh-p7-local");
    start_local(&local, id, "claude_code", None, None);
    run(&s, &s.runtime_token(), id, "claude_code", json!({}));
    for w in [local, World::server("fh-p7-srv", &s)] {
        for args in [&["notes", "send", "--session", "9c6", "typo"][..], &["sessions", "attach", "9c6"]] {
            let out = w.run(args);
            let err = stderr(&out);
            assert_eq!(code(&out), 2, "{args:?}: {err}");
            assert!(err.contains("4 characters or more") && !err.contains("starts with it"), "{args:?}: {err}");
        }
    }
}

#[test]
fn p8_no_live_children_is_one_sentence_in_both_modes() {
    let s = FakeServer::start();
    let srv = World::server("fh-p8-srv", &s);
    run(&s, &s.runtime_token(), "cond", "claude_code", json!({}));
    let local = World::local("fh-p8-local");
    start_local(&local, "cond", "claude_code", None, None);
    for w in [&local, &srv] {
        let out = w.run(&["notes", "send", "--children", "all", "--parent", "cond", "late"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{err}");
        assert_eq!(
            err.trim_end(),
            "preloop-hooks: session cond has no live children (`preloop-hooks sessions list --parent cond` shows the runs it started)"
        );
    }
}

#[test]
fn p10_wait_names_the_typed_id() {
    let w = World::local("fh-p10");
    start_local(&w, "daa2b8c4-bb0a-48a5-aa16-f009f420d392", "claude_code", None, None);
    let out = w.run(&["notes", "send", "--session", "daa2b8c4", "--wait", "1s", "Deploy to eu-west-1."]);
    let err = stderr(&out);
    assert!(
        err.contains("sent to session daa2b8c4-bb0a-48a5-aa16-f009f420d392 (you typed daa2b8c4); waiting up to"),
        "{err}"
    );
}

#[test]
fn p14_errors_name_no_route_and_warnings_carry_the_prefix() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", dead.local_addr().unwrap().port());
    drop(dead);
    let w = World::local("fh-p14");
    for args in [&["notes", "send", "--session", "abcd1234", "hi"][..], &["sessions", "list"]] {
        let out = w.run_env(args, &[("PRELOOP_URL", &url), ("PRELOOP_USER_TOKEN", "x".repeat(40).as_str())], None);
        let err = stderr(&out);
        assert_ne!(code(&out), 0, "{err}");
        assert!(!err.contains("runtime-sessions") && !err.contains("operator-notes"), "{args:?}: {err}");
        assert!(err.contains("server unreachable"), "{err}");
    }
    // Every line login writes on stderr but the one that reports the check is the CLI's.
    let out = w.run_env(&["login", "--url", "http://preloop.invalid", "--no-verify"], &[], Some("agt_abc"));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for l in stderr(&out).lines() {
        assert!(l.starts_with("preloop-hooks: "), "{l}");
    }
}

#[test]
fn p15_a_bad_token_in_the_environment_gets_unset_it() {
    let s = FakeServer::start();
    let w = World::server("fh-p15", &s);
    let out = w.run_env(&["sessions", "list"], &[("PRELOOP_USER_TOKEN", "wrong")], None);
    let err = stderr(&out);
    assert_ne!(code(&out), 0, "{err}");
    assert!(err.contains("PRELOOP_USER_TOKEN") && err.contains("unset PRELOOP_USER_TOKEN"), "{err}");
    // A stored token that is bad gets the login fix, not the variable's.
    let stored = logged_in("fh-p15-stored", &s);
    let cfg = stored.home.join("config.json");
    let mut v: Value = serde_json::from_str(&read(&cfg)).unwrap();
    v["user_token"] = json!("A".repeat(40));
    std::fs::write(&cfg, v.to_string()).unwrap();
    let out = stored.run(&["sessions", "list"]);
    let err = stderr(&out);
    assert!(err.contains("login --user") && !err.contains("unset"), "{err}");
}
