//! Regression tests for the findings of red-team report 2 and mission audit
//! 2 that a Codex hook shows (issue 12). Each one reproduces the finding's
//! own steps and failed on b6fdd07, the commit before the fixes.

use crate::common::*;
use preloop_codex::Event;
use preloop_testkit::FakeServer;
use preloop_testkit::stub_server::StubServer;
use preloop_testkit::support::{INTRUDER_UID, chown, is_deny, run_with_open_stdin, temp_path};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

/// A payload of `event` for `session` whose `tool_input` JSON text is given as is.
fn tool_payload(event: Event, session: &str, tool_input: &str) -> String {
    format!(
        r#"{{"session_id":"{session}","turn_id":"t1","transcript_path":"/tmp/t.jsonl","cwd":"/tmp","hook_event_name":"{}","model":"mock-model","permission_mode":"default","tool_name":"Bash","tool_input":{tool_input},"tool_use_id":"call_1"}}"#,
        event.name()
    )
}

/// H1: Codex PreToolUse and PermissionRequest check a tool input that
/// `serde_json` alone refuses (a lone surrogate escape, 130 levels of
/// nesting), and the server's deny holds under either fail policy.
#[test]
fn h1_an_unparseable_tool_input_is_still_checked_and_the_deny_holds() {
    let deny = StubServer::deny_all();
    let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
    let inputs = [
        ("lone surrogate", r#"{"command":"rm -rf /srv/prod # \ud800"}"#.to_string()),
        ("130-deep nesting", format!(r#"{{"command":"rm -rf /srv/prod","o":{deep}}}"#)),
    ];
    for policy in ["open", "deny"] {
        let home = Home::server("h1", &deny.url(), "agt_probe")
            .with_env("PRELOOP_PRE_TOOL_USE_ON_ERROR", policy)
            .with_env("PRELOOP_PERMISSION_REQUEST_ON_ERROR", policy);
        for event in [Event::PreToolUse, Event::PermissionRequest] {
            for (what, input) in &inputs {
                let before = deny.count("permission-check");
                let r = home.run_raw(event, tool_payload(event, "h1", input).as_bytes());
                r.assert_exit_0(event.name());
                let out = check_stdout(event, &r.out());
                assert_eq!(deny.count("permission-check"), before + 1, "{}: {what}: the check was made", event.name());
                assert!(is_deny(&out), "{} ({policy}): {what}: the server's deny holds, got {out:?}", event.name());
            }
        }
        assert!(!home.log().contains("outcome=neutral"), "{}", home.log());
    }
}

/// H1: a payload no parser can use, on a gate in server mode: the fail
/// policy answers (PermissionRequest's default is deny), never the neutral
/// "no decision".
#[test]
fn h1_an_unusable_gate_payload_follows_the_fail_policy() {
    let deny = StubServer::deny_all();
    let bad: [&[u8]; 3] =
        [br#"{"session_id":"u","hook_event_name":"PermissionRequest","tool_input":{"command":"rm"#, b"[]", b"\xff"];
    let home = Home::server("h1-unusable", &deny.url(), "agt_probe");
    for b in bad {
        let r = home.run_raw(Event::PermissionRequest, b);
        r.assert_exit_0("PermissionRequest");
        assert!(is_deny(&check_stdout(Event::PermissionRequest, &r.out())), "{:?}", String::from_utf8_lossy(b));
    }
    let home = home.with_env("PRELOOP_PRE_TOOL_USE_ON_ERROR", "deny");
    for b in bad {
        let r = home.run_raw(Event::PreToolUse, b);
        r.assert_exit_0("PreToolUse");
        assert!(is_deny(&check_stdout(Event::PreToolUse, &r.out())), "{:?}", String::from_utf8_lossy(b));
    }
}

/// M1: one bad value in config.json costs that key, not the server; a file
/// that does not parse makes the mode unknown (gates follow their fail
/// policy); a symlinked config is followed. Never local mode.
#[test]
fn m1_a_config_with_a_bad_value_keeps_server_mode_and_a_broken_one_is_not_local() {
    let deny = StubServer::deny_all();
    let good = json!({"url": deny.url(), "token": "agt_c"});
    let with = |k: &str, v: Value| {
        let mut c = good.clone();
        c[k] = v;
        c.to_string()
    };
    let cases: Vec<(&str, String, bool)> = vec![
        ("stop_rescue_cap as a string", with("stop_rescue_cap", json!("3")), true),
        ("watch as a word", with("watch", json!("off")), true),
        ("an unknown type for one key", with("call_timeout_ms", json!([1])), true),
        ("symlink", good.to_string(), true),
        ("trailing comma", format!(r#"{{"url":"{}","token":"agt_c",}}"#, deny.url()), false),
    ];
    for (what, text, server_known) in cases {
        let home = Home::new("m1");
        let path = home.dir.join("config.json");
        if what == "symlink" {
            let target = temp_path("m1-real-config");
            std::fs::write(&target, &text).unwrap();
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::symlink(&target, &path).unwrap();
        } else {
            std::fs::write(&path, &text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let before = deny.count("permission-check");
        let (out, _) = home.run(Event::PermissionRequest, &fixture_for("PermissionRequest.json", "m1"));
        assert!(is_deny(&out), "{what}: the gate denies (the server's deny, or fail-closed): {out:?}");
        let checked = deny.count("permission-check") - before;
        assert_eq!(checked, usize::from(server_known), "{what}: permission checks made");
        let (out, _) = home.run(Event::PreToolUse, &fixture_for("PreToolUse.json", "m1"));
        assert_eq!(is_deny(&out), server_known, "{what}: PreToolUse asks the server when it is known: {out:?}");
        let log = home.log();
        assert!(!log.contains("mode=local"), "{what}: never local mode: {log}");
        if !server_known {
            assert!(log.contains("mode=unknown"), "{what}: {log}");
        }
    }
}

/// M2: a config.json or an onboarding file another user owns, or that
/// others can write, and a home others can write, are refused: their
/// server never hears from the hooks, and the gates follow their fail
/// policy instead of falling back to local mode.
#[test]
fn m2_foreign_or_writable_config_files_and_homes_are_refused() {
    let planted = StubServer::deny_all();
    let config = json!({"url": planted.url(), "token": "agt_attacker"}).to_string();
    let onboarding = json!({"base_url": planted.url(), "token": "agt_attacker", "source": "codex_cli"}).to_string();
    type Plant = fn(&Home, &str, &str);
    let cases: [(&str, Plant); 5] = [
        ("config.json owned by another user", |h, c, _| {
            let p = h.dir.join("config.json");
            std::fs::write(&p, c).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
            chown(&p, INTRUDER_UID);
        }),
        ("config.json writable by the group", |h, c, _| {
            let p = h.dir.join("config.json");
            std::fs::write(&p, c).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o664)).unwrap();
        }),
        ("permission_hook.json owned by another user", |h, _, o| {
            let p = h.dir.join("agents/a/permission_hook.json");
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, o).unwrap();
            chown(&p, INTRUDER_UID);
        }),
        ("permission_hook.json writable by everyone", |h, _, o| {
            let p = h.dir.join("agents/a/permission_hook.json");
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, o).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        }),
        ("a world-writable PRELOOP_HOME", |h, c, _| {
            std::fs::write(h.dir.join("config.json"), c).unwrap();
            std::fs::set_permissions(&h.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        }),
    ];
    for (what, plant) in cases {
        let home = Home::new("m2");
        plant(&home, &config, &onboarding);
        let (out, _) = home.run(Event::PermissionRequest, &fixture_for("PermissionRequest.json", "m2"));
        assert!(is_deny(&out), "{what}: PermissionRequest fails closed: {out:?}");
        for event in [Event::SessionStart, Event::PreToolUse, Event::Stop, Event::SessionEnd] {
            let name = format!("{}.json", event.name());
            home.run(event, &fixture_for(&name, "m2"));
        }
        assert_eq!(planted.requests().len(), 0, "{what}: the planted server heard from the hooks");
        let log = home.log();
        assert!(log.contains("refused") && !log.contains("mode=local"), "{what}: {log}");
    }
}

fn send(server: &FakeServer, session: &str, text: &str) -> String {
    server.send_note(json!({"external_session_id": session, "text": text}))["note_id"].as_str().unwrap().to_string()
}

/// Every block's note ids, each note's final (state, reason), and the ids in sending order.
type Lived = (Vec<Vec<String>>, BTreeMap<String, (String, Option<String>)>, Vec<String>);

/// Live a Codex session against the fake: a PermissionRequest spools `n`
/// notes (deferred claims), `m` more are sent, then carrying hooks run
/// until nothing is left, then the session ends. Returns every block the
/// hooks printed and each note's final receipt (state, reason).
fn spool_then_carry(tag: &str, n: usize, m: usize, text: &dyn Fn(usize) -> String) -> Lived {
    let server = FakeServer::start();
    server.set_native_tool_approvals(&server.agent_id(), true);
    server.set_rate_limit(None);
    let home = Home::server(tag, &server.url(), &server.runtime_token()).with_env("PRELOOP_SESSION_END_DETACH", "0");
    let session = unique_session(tag);
    home.run(Event::SessionStart, &fixture_for("SessionStart.json", &session));
    let mut ids: Vec<String> = (0..n).map(|i| send(&server, &session, &text(i))).collect();
    let (out, _) = home.run(Event::PermissionRequest, &fixture_for("PermissionRequest.json", &session));
    assert!(!is_deny(&out));
    ids.extend((n..n + m).map(|i| send(&server, &session, &text(i))));
    let mut blocks = Vec::new();
    for event in [Event::PreToolUse, Event::PreToolUse, Event::UserPromptSubmit, Event::PreToolUse, Event::PreToolUse] {
        let name = format!("{}.json", event.name());
        let (out, _) = home.run(event, &fixture_for(&name, &session));
        if let Some(c) = context_of(&out) {
            blocks.push(ids_in(&c));
        }
    }
    home.run(Event::SessionEnd, &fixture_for("SessionEnd.json", &session));
    let receipts = ids
        .iter()
        .map(|id| {
            let r = server.receipt(id);
            (
                id.clone(),
                (r["state"].as_str().unwrap().to_string(), r["undeliverable_reason"].as_str().map(str::to_string)),
            )
        })
        .collect();
    (blocks, receipts, ids)
}

/// R1 (mission audit 2, section d item 1): five ~3,900-character notes
/// spooled by PermissionRequest, five more claimed immediately by a
/// PreToolUse: the spool never gives up a note the server already recorded
/// delivered. Every note ends delivered iff an output carried it, else
/// undeliverable; none is carried twice.
#[test]
fn r1_spool_overflow_never_drops_a_note_the_server_recorded_delivered() {
    let (blocks, receipts, ids) = spool_then_carry("r1", 5, 5, &|i| format!("{i} {}", "x".repeat(3900)));
    let carried: Vec<&String> = blocks.iter().flatten().collect();
    for id in &ids {
        let times = carried.iter().filter(|c| **c == id).count();
        assert!(times <= 1, "{id} carried {times} times");
        let (state, why) = &receipts[id];
        if state == "delivered" {
            assert_eq!(times, 1, "{id} is receipted delivered but no output carried it: {blocks:?}");
        } else {
            assert_eq!(times, 0);
            assert_eq!(state, "undeliverable", "{id}: {state} {why:?}");
        }
    }
}

/// Contract §6.1: a block holds 1 to 5 notes, even when the spool and a new
/// claim together hold more (the audit saw `count="10"`), and every note
/// still goes out, once.
#[test]
fn a_block_never_holds_more_than_five_notes() {
    let (blocks, receipts, ids) = spool_then_carry("cap", 5, 5, &|i| format!("short note {i}"));
    for b in &blocks {
        assert!((1..=5).contains(&b.len()), "a block of {} notes: {blocks:?}", b.len());
    }
    let carried: Vec<&String> = blocks.iter().flatten().collect();
    for id in &ids {
        assert_eq!(carried.iter().filter(|c| **c == id).count(), 1, "{id}: {blocks:?}");
        assert_eq!(receipts[id].0, "delivered");
    }
}

/// L2: the SessionEnd front end (which hands off to a detached worker in
/// server mode) does not wait forever for a stdin that never closes.
#[test]
fn l2_session_end_with_a_stdin_that_never_closes_is_bounded() {
    let server = FakeServer::start();
    for home in [Home::new("l2-local"), Home::server("l2-server", &server.url(), &server.runtime_token())] {
        for event in [Event::SessionEnd, Event::PermissionRequest] {
            let r = run_with_open_stdin(home.command(&bin(event), &[]), Duration::from_secs(30));
            r.assert_exit_0(event.name());
            assert!(r.elapsed < Duration::from_secs(9), "{}: {:?}", event.name(), r.elapsed);
        }
        let log = home.log();
        assert!(log.lines().count() >= 2 && log.contains("stdin"), "{log}");
    }
}
