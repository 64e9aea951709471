//! The operator commands against the local inbox, through the real CLI:
//! stdin input, the one-target rule, `--json` shapes, `--wait` exit codes,
//! cancel, sessions; plus install --dry-run, doctor and the demo.

use crate::common::*;
use preloop_shared::backend::Backend;
use preloop_shared::local::LocalInbox;
use preloop_shared::operator::ReceiptState;
use preloop_shared::wire::{DeliveryEvent, PendingRequest, SessionEndRequest, SessionStartRequest};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

struct Env {
    _t: TempDir,
    root: std::path::PathBuf,
    home: std::path::PathBuf,
}

impl Env {
    fn new(tag: &str) -> Env {
        let t = TempDir::new(tag);
        let root = t.path().to_path_buf();
        let home = root.join("preloop");
        Env { _t: t, root, home }
    }
    fn cmd(&self, args: &[&str]) -> Command {
        operator_cmd(&self.root, &self.home, args)
    }
    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        run_with_stdin(self.cmd(args), stdin)
    }
    fn json(&self, args: &[&str]) -> Value {
        json_of(args, &self.run(args, None))
    }
    fn inbox(&self) -> LocalInbox {
        LocalInbox::new(&self.home, 86_400)
    }
    fn start(&self, session: &str) {
        self.inbox()
            .session_start(&SessionStartRequest {
                session_id: session.into(),
                source: Some("claude_code".into()),
                cwd: Some("/work/demo".into()),
                parent_session_id: None,
                alias: Some("worker".into()),
                first_prompt: None,
                hook_event_name: Some("SessionStart".into()),
                transcript_path: None,
                harness_process: None,
            })
            .unwrap();
    }
}

#[test]
fn send_reads_stdin_and_prints_id_and_target() {
    let e = Env::new("stdin");
    e.start("s-1");
    let out = e.run(&["notes", "send", "--session", "s-1", "--json"], Some("Two things:\n1. eu-west-1\n2. no tests\n"));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["schema", "note_id", "target", "notes"], "--json prints the note id and target only: {v}");
    assert_eq!(v["schema"], 1);
    assert_eq!(v["target"]["session"], "s-1");
    assert_eq!(v["target"]["kind"], "session");
    let id = v["note_id"].as_str().unwrap();
    let r = e.json(&["notes", "status", id, "--json"]);
    assert_eq!(r["text"], "Two things:\n1. eu-west-1\n2. no tests", "one trailing newline dropped, the rest kept");
    assert_eq!(r["state"], "pending");
    for f in ["note_id", "state", "delivery_event", "undeliverable_reason"] {
        assert!(r.get(f).is_some(), "status --json has {f}: {r}");
    }
    // Human output: the id and where it goes.
    let out = e.run(&["notes", "send", "--alias", "worker", "Use staging."], None);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("pending for session s-1"));
}

#[test]
fn exactly_one_target_is_enforced_before_anything_happens() {
    let e = Env::new("targets");
    for args in [
        vec!["notes", "send", "text"],
        vec!["notes", "send", "--session", "a", "--alias", "b", "text"],
        vec!["notes", "send", "--next", "codex", "--session", "a", "text"],
    ] {
        let out = e.run(&args, Some("from stdin"));
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
    }
    let out = e.run(&["notes", "send", "--agent", "0b0d", "x"], None);
    assert_eq!(code(&out), 2, "--agent needs server mode: {}", stderr(&out));
    let out = e.run(&["notes", "send", "--next", "vim", "x"], None);
    assert_eq!(code(&out), 2);
    assert!(
        !e.home.join("inbox/notes").exists() || std::fs::read_dir(e.home.join("inbox/notes")).unwrap().next().is_none(),
        "no note was written"
    );
}

#[test]
fn next_and_hidden_harness_targets() {
    let e = Env::new("next");
    let v = e.json(&["notes", "send", "--next", "claude-code", "--json", "Run the checks."]);
    assert_eq!((v["target"]["kind"].as_str(), v["target"]["harness"].as_str()), (Some("next"), Some("claude-code")));
    assert_eq!(v["target"]["next_session"], true);
    // The older spelling still works.
    let v = e.json(&["notes", "send", "--harness", "claude-code", "--next-session", "--json", "Again."]);
    assert_eq!(v["target"]["next_session"], true);
    let v = e.json(&["notes", "send", "--harness", "codex", "--json", "Current or next."]);
    assert_eq!(v["target"]["next_session"], false);
}

fn send_wait(e: &Env, session: &str, wait: &str) -> std::process::Child {
    spawn_waiting(e.cmd(&["notes", "send", "--session", session, "--wait", wait, "--json", "wait for me"]))
}

/// The pending note's id, once it is queued: the inbox writes a note's
/// record before its queue entry, and a claim or a SessionEnd between the
/// two finds the queue empty.
fn pending_id(e: &Env) -> String {
    preloop_testkit::support::wait_for(Duration::from_secs(5), "a queued pending note", || {
        let id = e.inbox().list().unwrap().into_iter().find(|n| n.state == ReceiptState::Pending).map(|n| n.note_id)?;
        let queued = std::fs::read_dir(e.home.join("inbox/queue/session"))
            .ok()?
            .flatten()
            .filter_map(|d| std::fs::read_dir(d.path()).ok())
            .flatten()
            .flatten()
            .any(|q| q.file_name().to_string_lossy().ends_with(&id));
        queued.then_some(id)
    })
}

#[test]
fn wait_exit_codes() {
    // 0: delivered while waiting.
    let e = Env::new("wait0");
    e.start("s-ok");
    let child = send_wait(&e, "s-ok", "20s");
    let id = pending_id(&e);
    let claimed = e
        .inbox()
        .pull(&PendingRequest {
            channel: "hook",
            event: DeliveryEvent::PreToolUse,
            defer_delivery: false,
            session_id: "s-ok".into(),
        })
        .unwrap();
    assert!(claimed.is_some());
    let r = waited(child, 0);
    assert_eq!(
        (r["note_id"].as_str(), r["state"].as_str(), r["delivery_event"].as_str()),
        (Some(id.as_str()), Some("delivered"), Some("pre_tool_use"))
    );

    // 3: the session ends first.
    let e = Env::new("wait3");
    e.start("s-end");
    let child = send_wait(&e, "s-end", "20s");
    pending_id(&e);
    e.inbox().session_end(&SessionEndRequest { external_session_id: "s-end".into(), reason: "other".into() }).unwrap();
    let r = waited(child, 3);
    assert_eq!(
        (r["state"].as_str(), r["undeliverable_reason"].as_str()),
        (Some("undeliverable"), Some("session_ended"))
    );

    // 4: nobody takes it in time.
    let e = Env::new("wait4");
    e.start("s-idle");
    waited(send_wait(&e, "s-idle", "1s"), 4);

    // Bad durations are usage errors.
    let out = e.run(&["notes", "send", "--session", "x", "--wait", "soon", "t"], None);
    assert_eq!(code(&out), 2);
}

#[test]
fn list_status_cancel_and_sessions() {
    let e = Env::new("list");
    e.start("s-a");
    std::thread::sleep(Duration::from_millis(20));
    e.start("s-b");
    let a = e.json(&["notes", "send", "--session", "s-a", "--json", "for a"])["note_id"].as_str().unwrap().to_string();
    let b = e.json(&["notes", "send", "--session", "s-b", "--json", "for b"])["note_id"].as_str().unwrap().to_string();
    let l = e.json(&["notes", "list", "--session", "s-a", "--json"]);
    assert_eq!(l["total"], 1);
    assert_eq!(l["notes"][0]["note_id"], a.as_str());
    let l = e.json(&["notes", "list", "--all", "--json", "--state", "pending"]);
    assert_eq!(l["total"], 2);
    assert_eq!(l["schema"], 1);
    // No target: a usage error naming the targets, as in server mode.
    let out = e.run(&["notes", "list"], None);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("--session ID") && stderr(&out).contains("--all"), "{}", stderr(&out));
    // Human list: an aligned table.
    let out = e.run(&["notes", "list", "--all"], None);
    let text = String::from_utf8_lossy(&out.stdout);
    let header = text.lines().next().unwrap();
    assert!(header.starts_with("ID") && header.contains("STATE"), "{text}");
    let col = header.find("STATE").unwrap();
    assert!(text.lines().skip(1).all(|l| l[col..].starts_with("pending")), "{text}");

    let out = e.run(&["notes", "cancel", &b], None);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(e.json(&["notes", "status", &b, "--json"])["state"], "cancelled");
    let out = e.run(&["notes", "cancel", &b], None);
    assert_eq!(code(&out), 1, "a note already cancelled is not cancelled again");
    assert!(stderr(&out).contains("already cancelled"), "{}", stderr(&out));
    e.inbox()
        .pull(&PendingRequest {
            channel: "hook",
            event: DeliveryEvent::Stop,
            defer_delivery: false,
            session_id: "s-a".into(),
        })
        .unwrap();
    let out = e.run(&["notes", "cancel", &a], None);
    assert_eq!(code(&out), 1, "a delivered note cannot be cancelled");
    assert!(stderr(&out).contains("is delivered; only a pending note"), "{}", stderr(&out));
    let out = e.run(&["notes", "status", "ffffffffffffffff"], None);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("not found"));

    let s = e.json(&["sessions", "list", "--json"]);
    assert_eq!(s["total"], 2);
    assert_eq!(s["sessions"][0]["external_session_id"], "s-b", "most recently active first");
    assert_eq!(s["sessions"][0]["id"], "s-b");
    assert_eq!(s["sessions"][0]["kind"], "claude-code");
    assert_eq!(s["schema"], 1);
    assert_eq!(s["sessions"][0]["state"], "live");
    assert!(s["sessions"][0]["last_activity_at"].is_string());
    e.inbox().session_end(&SessionEndRequest { external_session_id: "s-a".into(), reason: "other".into() }).unwrap();
    let out = e.run(&["sessions", "list", "--active", "-o", "id"], None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "s-b\n");
    let out = e.run(&["sessions", "list"], None);
    let text = String::from_utf8_lossy(&out.stdout);
    for col in ["ID", "AGENT", "KIND", "STARTED", "LAST ACTIVITY", "STATE", "TOOLS", "MODEL", "APPROVALS", "TITLE"] {
        assert!(text.lines().next().unwrap().contains(col), "{text}");
    }
    assert!(text.contains("ended") && text.contains("claude-code demo"), "{text}");
}

#[test]
fn every_command_has_help_with_examples() {
    let e = Env::new("help");
    for args in [
        vec!["install", "--help"],
        vec!["uninstall", "--help"],
        vec!["doctor", "--help"],
        vec!["login", "--help"],
        vec!["logout", "--help"],
        vec!["notes", "send", "--help"],
        vec!["notes", "list", "--help"],
        vec!["notes", "status", "--help"],
        vec!["notes", "cancel", "--help"],
        vec!["sessions", "list", "--help"],
        vec!["demo", "--help"],
    ] {
        let out = e.run(&args, None);
        assert_eq!(code(&out), 0);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Example"), "{args:?} --help has examples:\n{text}");
    }
}

fn claude_settings(root: &Path) -> std::path::PathBuf {
    root.join("home/.claude/settings.json")
}

#[test]
fn install_dry_run_writes_nothing_and_a_missing_executable_is_refused() {
    let e = Env::new("dry");
    let bin = fake_bin_dir(&e.root);
    let out = e.run(&["install", "--harness", "claude-code", "--dry-run", "--bin-dir", bin.to_str().unwrap()], None);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("+++ ~/.claude/settings.json (new)") && text.contains("preloop-claude-code-stop"), "{text}");
    assert!(!claude_settings(&e.root).exists(), "dry run wrote nothing");
    // A bin dir without the executable: refused, named, nothing written.
    let empty = e.root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = e.run(&["install", "--bin-dir", empty.to_str().unwrap()], None);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("no preloop-hooks executable in") && stderr(&out).contains("--bin-dir"),
        "{}",
        stderr(&out)
    );
    assert!(!claude_settings(&e.root).exists() && !e.root.join("home/.codex/hooks.json").exists());
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0, "no hook command was linked");
    // A corrupt file: refused, named, exit 1, untouched.
    write(&claude_settings(&e.root), "{\"hooks\": ");
    let out = e.run(&["install", "--harness", "claude-code", "--bin-dir", bin.to_str().unwrap()], None);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("settings.json") && stderr(&out).contains("line 1"), "{}", stderr(&out));
    assert_eq!(read(&claude_settings(&e.root)), "{\"hooks\": ");
    // D-9: refused before anything was placed: no hook command was linked.
    assert_eq!(std::fs::read_dir(&bin).unwrap().count(), 1, "only preloop-hooks is in the bin dir");
}

#[test]
fn doctor_exit_codes_local() {
    let e = Env::new("doctor");
    let bin = fake_bin_dir(&e.root);
    let out = e.run(&["doctor", "--json", "--no-codex-query", "--bin-dir", bin.to_str().unwrap()], None);
    assert_eq!(code(&out), 5, "nothing installed: {}", String::from_utf8_lossy(&out.stdout));
    let out = e.run(&["install", "--harness", "claude-code", "--bin-dir", bin.to_str().unwrap()], None);
    assert_eq!(code(&out), 0);
    let out = e.run(&["doctor", "--json", "--no-codex-query", "--bin-dir", bin.to_str().unwrap()], None);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(code(&out), 0, "{r:#}");
    assert_eq!(r["mode"], "local");
    assert_eq!(r["healthy"], true);
    assert!(r["limits"].as_array().unwrap().iter().any(|l| l.as_str().unwrap().contains("local mode")));
    // A binary that moved away: exit 6, named.
    std::fs::remove_file(bin.join("preloop-claude-code-stop")).unwrap();
    let out = e.run(&["doctor", "--bin-dir", bin.to_str().unwrap(), "--no-codex-query"], None);
    assert_eq!(code(&out), 6);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("preloop-claude-code-stop missing or not executable"), "{text}");
    // Errors from the hook log are shown.
    write(
        &e.home.join("log/hooks.log"),
        "2026-12-02T10:00:00Z claude-code Stop mode=local session=s1 outcome=neutral notes=- ms=3 error=\"io: boom\"\n",
    );
    let r: Value = serde_json::from_slice(
        &e.run(&["doctor", "--json", "--no-codex-query", "--bin-dir", bin.to_str().unwrap()], None).stdout,
    )
    .unwrap();
    assert!(r["last_errors"][0].as_str().unwrap().contains("boom"), "{r:#}");
}

#[test]
fn demo_runs_through_the_real_hooks_when_built() {
    // The demo runs this executable under each Claude Code hook's name: no
    // hook command needs to exist on disk.
    let e = Env::new("demo");
    // A --bin-dir without the executable is refused with the fix.
    let empty = e.root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = e.run(&["demo", "--bin-dir", empty.to_str().unwrap()], None);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("cargo build"), "{}", stderr(&out));
    let out = e.run(&["demo"], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code(&out), 0, "{text}\n{}", stderr(&out));
    for needle in [
        "SessionStart",
        "\"hookEventName\": \"PreToolUse\"",
        "<operator-notes count=\"1\"",
        "$ preloop-hooks notes status",
        "hook (pre_tool_use)",
        "hook (stop)",
        "session_ended",
        "$ preloop-hooks sessions list",
    ] {
        assert!(text.contains(needle), "demo output lacks {needle}:\n{text}");
    }
    // One sentence on what the product is for comes first; nothing is wider than 100 columns.
    assert!(text.starts_with("You are watching a coding agent work"), "{text}");
    for l in text.lines() {
        assert!(l.chars().count() <= 100, "wider than 100 columns: {l:?}");
    }
}
