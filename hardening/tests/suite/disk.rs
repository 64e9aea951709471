//! Disk faults: a read-only PRELOOP_HOME (a read-only bind mount in a
//! private mount namespace: the tests run as root, which ignores permission
//! bits; without one the test fails rather than skips), a file where the home should be, a home that does not exist yet,
//! a run state (spool) replaced by garbage, and symlinks planted in place of
//! our files and directories. Every hook answers (exit 0, a valid and
//! neutral output where nothing can work), nothing is written through a
//! symlink (the targets are byte-for-byte unchanged and their directories
//! gain no file), and no note is acked that no output carried.

use crate::common::*;
use preloop_shared::Harness;
use preloop_shared::operator::ReceiptState;
use preloop_testkit::FakeServer;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Run every hook of every harness once for `session` with a custom command
/// wrapper; returns the outputs.
fn every_hook(home: &Home, session: &str, wrap: &dyn Fn(&Hook) -> Command) -> Vec<(String, Option<Value>)> {
    let mut outs = Vec::new();
    for h in hooks() {
        let mut cmd = wrap(&h);
        home.prepare(&mut cmd, &[]);
        let r = run_cmd(
            cmd,
            serde_json::to_string(&h.payload(session)).unwrap().as_bytes(),
            std::time::Duration::from_secs(30),
        );
        r.assert_ok(&h);
        let out = Checker::new(&h).check(&r.stdout).unwrap_or_else(|e| panic!("{}: {e}", h.name()));
        outs.push((h.name(), out));
    }
    outs
}

fn plain(h: &Hook) -> Command {
    Command::new(bin(h))
}

fn assert_neutral(outs: &[(String, Option<Value>)]) {
    let hooks = hooks();
    for (name, out) in outs {
        let h = hooks.iter().find(|h| &h.name() == name).unwrap();
        assert_eq!(out, &neutral_of(h), "{name} must answer neutrally");
    }
}

fn assert_fail_policy(outs: &[(String, Option<Value>)]) {
    let hooks = hooks();
    for (name, out) in outs {
        let h = hooks.iter().find(|h| &h.name() == name).unwrap();
        match h.kind {
            Kind::Tool { fail_closed: true, .. } => assert!(is_deny(out), "{name} must deny (fail-closed): {out:?}"),
            _ => assert_eq!(out, &neutral_of(h), "{name} must answer neutrally"),
        }
    }
}

/// Whether `unshare -m` + a read-only bind mount works here.
fn can_bind_ro() -> bool {
    let d = temp_path("probe");
    std::fs::create_dir_all(&d).unwrap();
    let ok = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            "mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro \"$0\" && ! touch \"$0/x\" 2>/dev/null",
        ])
        .arg(&d)
        .status()
        .is_ok_and(|s| s.success());
    let _ = std::fs::remove_dir_all(&d);
    ok
}

/// Fail, loudly, where a read-only bind mount is impossible: these tests
/// must not pass by skipping (CI runs them as root).
fn require_bind_ro() {
    assert!(
        can_bind_ro(),
        "a read-only bind mount is needed (unshare -m and mount, as root); run the hardening suite as root"
    );
}

fn read_only(home: &Path) -> impl Fn(&Hook) -> Command + '_ {
    move |h: &Hook| {
        let mut c = Command::new("unshare");
        c.args(["-m", "sh", "-c", "mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro \"$0\" && exec \"$1\""])
            .arg(home)
            .arg(bin(h));
        c
    }
}

#[test]
fn read_only_home_local() {
    require_bind_ro();
    let home = Home::new("ro-local");
    let session = unique_session("ro");
    // A live session with a pending note, then the home turns read-only.
    home.hook(&hook(Harness::ClaudeCode, "SessionStart"), &session);
    let id = home.send(&session, "cannot be claimed on a read-only disk");
    let before = snapshot(&home.dir);
    let outs = every_hook(&home, &session, &read_only(&home.dir));
    assert_neutral(&outs);
    assert_eq!(snapshot(&home.dir), before, "nothing changed on the read-only home");
    assert_eq!(home.receipt(&id).state, ReceiptState::Pending, "the note waits for a writable hook");
    // Writable again: the note is carried.
    let (out, _) = home.hook(&hook(Harness::ClaudeCode, "UserPromptSubmit"), &session);
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id.clone()]);
    assert_eq!(home.receipt(&id).state, ReceiptState::Delivered);
}

#[test]
fn read_only_home_server() {
    require_bind_ro();
    let server = FakeServer::start();
    server.set_native_tool_approvals(&server.agent_id(), true);
    server.set_rate_limit(None);
    let home = server_home("ro-server", &server.url(), &server.runtime_token());
    let session = unique_session("ro");
    home.hook(&hook(Harness::Codex, "SessionStart"), &session);
    let ids: Vec<String> = (0..3)
        .map(|i| {
            server.send_note(json!({"external_session_id": session, "text": format!("n{i}")}))["note_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let outs = every_hook(&home, &session, &read_only(&home.dir));
    let carried: Vec<String> =
        outs.iter().flat_map(|(_, o)| context_of(o).map(|c| ids_in(&c)).unwrap_or_default()).collect();
    for id in &ids {
        let st = server.receipt(id)["state"].as_str().unwrap().to_string();
        let n = carried.iter().filter(|c| c == &id).count();
        assert!(n <= 1, "{id} carried {n} times");
        // A pull claims with deferral and acks after the write: delivered iff carried.
        // (A gate's claim cannot be spooled on a read-only disk: it is acked spool_dropped.)
        if st == "delivered" {
            assert_eq!(n, 1, "{id} is delivered but no output carried it");
        } else {
            assert_eq!(n, 0);
            assert!(matches!(st.as_str(), "undeliverable" | "claimed" | "pending"), "{id}: {st}");
        }
    }
}

/// Every file under `dir` with its bytes (symlinks as their target path).
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<(PathBuf, Vec<u8>)> = walk(dir)
        .into_iter()
        .map(|p| {
            let m = std::fs::symlink_metadata(&p).unwrap();
            let content = if m.file_type().is_symlink() {
                std::fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes()
            } else if m.is_file() {
                std::fs::read(&p).unwrap()
            } else {
                Vec::new()
            };
            (p, content)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn home_is_a_regular_file() {
    let base = Home::new("home-file");
    let file = base.dir.join("not-a-dir");
    std::fs::write(&file, b"precious").unwrap();
    let home = Home { dir: file.clone(), env: Vec::new() };
    let outs = every_hook(&home, &unique_session("file"), &plain);
    // An unusable PRELOOP_HOME is not "local mode": nothing is known about
    // the server, so a gate answers by its fail policy (deny where it is
    // fail-closed) and every other hook neutrally.
    assert_fail_policy(&outs);
    assert_eq!(std::fs::read(&file).unwrap(), b"precious");
    std::mem::forget(home); // base removes it
}

#[test]
fn home_does_not_exist_yet() {
    let base = Home::new("home-missing");
    let home = Home { dir: base.dir.join("a/b/preloop"), env: Vec::new() };
    let session = unique_session("missing");
    every_hook(&home, &session, &plain);
    let mode = std::fs::metadata(&home.dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "a home we create is private");
    assert!(home.log().lines().count() >= 18, "every hook logged");
    std::mem::forget(home);
}

#[test]
fn garbage_run_state_and_session_file() {
    for garbage in [&b"\x00\xffnot json"[..], b"{\"spool\": 7}", b"[]", b"", b"{\"spool\":[{\"note\":1}]}"] {
        let home = Home::new("garbage");
        let session = unique_session("garbage");
        home.hook(&hook(Harness::ClaudeCode, "SessionStart"), &session);
        let id = home.send(&session, "still delivered");
        std::fs::write(home.run_state_path(&session), garbage).unwrap();
        std::fs::write(home.dir.join("sessions").join(format!("{session}.json")), garbage).unwrap();
        let outs = every_hook(&home, &session, &plain);
        let carried: Vec<String> =
            outs.iter().flat_map(|(_, o)| context_of(o).map(|c| ids_in(&c)).unwrap_or_default()).collect();
        let st = home.receipt(&id).state;
        assert!(carried.iter().filter(|c| *c == &id).count() <= 1);
        assert_eq!(st == ReceiptState::Delivered, carried.contains(&id), "{garbage:?}: delivered iff carried ({st})");
        assert!(!home.log().contains("outcome=panic"));
    }
}

/// A directory outside every home, with one precious file.
struct Outside {
    dir: PathBuf,
    file: PathBuf,
}

impl Outside {
    fn new() -> Outside {
        let dir = temp_path("outside");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("precious.json");
        std::fs::write(&file, b"{\"precious\": true}\n").unwrap();
        Outside { dir, file }
    }
    fn unchanged(&self, what: &str) {
        assert_eq!(
            std::fs::read(&self.file).unwrap(),
            b"{\"precious\": true}\n",
            "{what}: a write went through a symlink"
        );
        let names: Vec<_> = std::fs::read_dir(&self.dir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names.len(), 1, "{what}: a file was created outside our directories: {names:?}");
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Plant a symlink at `rel` (under the home) to the outside file or dir, then
/// live a session that writes every kind of file, in local and server mode.
fn planted(rel: &dyn Fn(&str) -> String, to_dir: bool) {
    let server = FakeServer::start();
    server.set_native_tool_approvals(&server.agent_id(), true);
    server.set_rate_limit(None);
    for mode in ["local", "server"] {
        let outside = Outside::new();
        let home = if mode == "local" {
            Home::new("planted")
        } else {
            server_home("planted", &server.url(), &server.runtime_token())
        };
        let session = unique_session("planted");
        let link = home.dir.join(rel(&session));
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(if to_dir { &outside.dir } else { &outside.file }, &link).unwrap();
        let what = format!("{mode}: {}", rel(&session));
        let send = |text: &str| {
            if mode == "local" {
                // The operator side may refuse too (a planted session file).
                let _ = home.inbox().send(&preloop_shared::operator::SendRequest {
                    text: text.into(),
                    target: preloop_shared::operator::Target::Session(session.clone()),
                    next_session: false,
                    expires_in_secs: None,
                    author: Default::default(),
                });
            } else {
                let _ = server.try_send_note(json!({"external_session_id": session, "text": text}));
            }
        };
        // A session that registers, spools (server: a gate's claim), carries, stops and ends.
        let h = |e: &str| hook(Harness::Codex, e);
        let mut seq = vec![h("SessionStart")];
        seq.extend(hooks().into_iter().filter(|k| k.harness == Harness::ClaudeCode && k.kind != Kind::End));
        for ev in ["PermissionRequest", "UserPromptSubmit", "PermissionRequest", "PreToolUse", "Stop", "SessionEnd"] {
            seq.push(h(ev));
        }
        for (i, k) in seq.iter().enumerate() {
            if i % 2 == 0 {
                send(&format!("note {i}"));
            }
            let r = home.run(k, serde_json::to_string(&k.payload(&session)).unwrap().as_bytes());
            r.assert_ok(k);
            Checker::new(k).check(&r.stdout).unwrap_or_else(|e| panic!("{what}: {}: {e}", k.name()));
            outside.unchanged(&format!("{what} after {}", k.name()));
        }
    }
}

#[test]
fn symlinked_run_state_is_never_written_through() {
    planted(&|s| format!("run/{s}.json"), false);
}

#[test]
fn symlinked_run_lock_is_never_opened_through() {
    planted(&|s| format!("run/{s}.lock"), false);
}

#[test]
fn symlinked_run_dir_is_refused() {
    planted(&|_| "run".into(), true);
}

#[test]
fn symlinked_session_file_is_never_written_through() {
    planted(&|s| format!("sessions/{s}.json"), false);
}

#[test]
fn symlinked_sessions_dir_is_refused() {
    planted(&|_| "sessions".into(), true);
}

#[test]
fn symlinked_log_is_never_written_through() {
    planted(&|_| "log/hooks.log".into(), false);
    planted(&|_| "log".into(), true);
}

#[test]
fn symlinked_inbox_is_refused() {
    planted(&|_| "inbox".into(), true);
    planted(&|_| "inbox/lock".into(), false);
    planted(&|_| "inbox/queue".into(), true);
    planted(&|_| "inbox/claimed".into(), true);
    planted(&|_| "inbox/notes".into(), true);
}
