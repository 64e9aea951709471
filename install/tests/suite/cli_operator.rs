//! Find, watch, steer, through the real CLI, in both modes: `sessions list`
//! with every filter, `notes send`/`notes list` to every target (a
//! conductor's children, an execution, an alias, runtime or harness ids),
//! `sessions attach` (socket, timeline, receipts, transcript, notes typed on
//! stdin), the `--json` outputs against their schemas, and the operator
//! review points (ended and unknown sessions, whitespace, durations, usage
//! errors with their values, redaction, HTML bodies, broken pipes, a broken
//! configuration, terminal-safe text).

use crate::common::*;
use preloop_shared::backend::Backend;
use preloop_shared::wire::{DeliveryEvent, PendingRequest, SessionEndRequest, SessionStartRequest};
use preloop_testkit::stub_server::{StubResponse, StubServer, json_u_escape};
use preloop_testkit::{FakeServer, FaultSpec, client};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::time::{Duration, Instant};

/// A local session started through the inbox (the hook side), returning its runtime id.
fn start_local(w: &World, id: &str, parent: Option<&str>, alias: Option<&str>, transcript: Option<&Path>) -> String {
    w.inbox()
        .session_start(&SessionStartRequest {
            session_id: id.into(),
            source: Some("claude_code".into()),
            cwd: Some(format!("/work/{id}")),
            parent_session_id: parent.map(str::to_string),
            alias: alias.map(str::to_string),
            first_prompt: None,
            hook_event_name: Some("SessionStart".into()),
            transcript_path: transcript.map(|p| p.display().to_string()),
            harness_process: None,
        })
        .unwrap()
        .runtime_session_id
}

fn pull(w: &World, id: &str) {
    w.inbox()
        .pull(&PendingRequest {
            channel: "hook",
            event: DeliveryEvent::PreToolUse,
            defer_delivery: false,
            session_id: id.into(),
        })
        .unwrap();
}

fn ids(v: &Value) -> Vec<String> {
    v["sessions"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn local_sessions_list_every_filter() {
    let w = World::local("op-list");
    let cond = start_local(&w, "cond", None, None, None);
    std::thread::sleep(Duration::from_millis(20));
    start_local(&w, "kid-a", Some(&cond), Some("worker-a"), None);
    std::thread::sleep(Duration::from_millis(20));
    start_local(&w, "kid-b", Some(&cond), None, None);
    // A Codex session, and an execution recorded in a session file.
    w.inbox()
        .session_start(&SessionStartRequest {
            session_id: "cx".into(),
            source: Some("codex_cli".into()),
            cwd: None,
            parent_session_id: None,
            alias: None,
            first_prompt: Some("Fix the parser".into()),
            hook_event_name: Some("UserPromptSubmit".into()),
            transcript_path: None,
            harness_process: None,
        })
        .unwrap();
    let f = w.home.join("sessions/kid-b.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    v["execution_id"] = json!("9f2b0000-0000-4000-8000-000000000001");
    std::fs::write(&f, v.to_string()).unwrap();
    w.inbox().session_end(&SessionEndRequest { external_session_id: "kid-a".into(), reason: "exit".into() }).unwrap();

    let all = w.json(&["sessions", "list", "--json"]);
    check_schema("sessions.schema.json", &all);
    assert_eq!(all["mode"], "local");
    assert_eq!(ids(&all).len(), 4);
    assert_eq!(ids(&all)[0], "kid-a", "most recently active first (its end is its latest activity)");
    let cx = all["sessions"].as_array().unwrap().iter().find(|s| s["id"] == "cx").unwrap();
    assert_eq!((cx["kind"].as_str(), cx["label"].as_str()), (Some("codex"), Some("Fix the parser")));
    let kid = all["sessions"].as_array().unwrap().iter().find(|s| s["id"] == "kid-b").unwrap();
    assert!(kid["label"].as_str().unwrap().starts_with("claude-code kid-b 20"), "untitled: kind cwd start: {kid}");

    let f = |args: &[&str]| {
        let mut a = vec!["sessions", "list", "--json"];
        a.extend_from_slice(args);
        let mut v = ids(&w.json(&a));
        v.sort();
        v
    };
    assert_eq!(f(&["--active"]), ["cond", "cx", "kid-b"]);
    assert_eq!(f(&["--kind", "codex"]), ["cx"]);
    assert_eq!(f(&["--parent", "cond"]), ["kid-a", "kid-b"], "by harness id");
    assert_eq!(f(&["--parent", &cond]), ["kid-a", "kid-b"], "by runtime id");
    assert_eq!(f(&["--alias", "worker-a"]), ["kid-a"]);
    assert_eq!(f(&["--execution", "9f2b0000-0000-4000-8000-000000000001"]), ["kid-b"]);
    assert_eq!(f(&["--since", "1h"]).len(), 4);
    // -o id: full ids, one per line; table: short ids, --wide: full.
    let out = w.run(&["sessions", "list", "--active", "--parent", "cond", "-o", "id"]);
    assert_eq!(stdout(&out), "kid-b\n");
    let out = w.run(&["sessions", "list", "--wide"]);
    let text = stdout(&out);
    assert!(text.lines().next().unwrap().starts_with("ID ") && text.contains("worker-a"), "{text}");
    // Usage errors name the valid values; --agent needs a server.
    let out = w.run(&["sessions", "list", "--kind", "vim"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("claude-code") && stderr(&out).contains("codex"), "{}", stderr(&out));
    let out = w.run(&["sessions", "list", "--agent", "x"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("needs server mode"), "{}", stderr(&out));
    let out = w.run(&["sessions", "list", "-o", "yaml"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("table") && stderr(&out).contains("json"), "{}", stderr(&out));
}

/// From inside the conductor's run (`PRELOOP_PARENT_SESSION_ID` names it),
/// `notes send --children all` reaches both of its children, `kid-a` and
/// `kid-b`. The `--json` answer.
fn send_to_both_children(w: &World, cond: &str) -> Value {
    let v = w
        .json_env(&["notes", "send", "--children", "all", "--json", "Wrap up"], &[("PRELOOP_PARENT_SESSION_ID", cond)]);
    check_schema("notes-send.schema.json", &v);
    let mut sent: Vec<&str> = v["notes"].as_array().unwrap().iter().map(|n| n["session"].as_str().unwrap()).collect();
    sent.sort();
    assert_eq!(sent, ["kid-a", "kid-b"], "{v}");
    v
}

#[test]
fn local_targets_children_execution_alias_and_ids() {
    let w = World::local("op-targets");
    let cond = start_local(&w, "cond", None, None, None);
    start_local(&w, "kid-a", Some(&cond), Some("worker"), None);
    std::thread::sleep(Duration::from_millis(20));
    let kid_b = start_local(&w, "kid-b", Some(&cond), None, None);
    let v = send_to_both_children(&w, &cond);
    assert_eq!(v["target"]["children"], "all");
    let v = w.json(&["notes", "send", "--children", "latest", "--parent", "cond", "--json", "Only the newest"]);
    assert_eq!(v["notes"][0]["session"], "kid-b", "latest = the newest live child");
    // Every live child gets it: both workers' notes are claimable by them.
    pull(&w, "kid-a");
    pull(&w, "kid-b");
    let l = w.json(&["notes", "list", "--children", "all", "--parent", "cond", "--json"]);
    check_schema("notes-list.schema.json", &l);
    assert_eq!(l["total"], 3);
    assert!(l["notes"].as_array().unwrap().iter().all(|n| n["state"] == "delivered"), "{l}");
    // No parent known: a usage error that says how.
    let out = w.run(&["notes", "send", "--children", "all", "x"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("PRELOOP_PARENT_SESSION_ID") && stderr(&out).contains("--parent"),
        "{}",
        stderr(&out)
    );
    // A session with no live children.
    let out = w.run(&["notes", "send", "--children", "all", "--parent", "kid-a", "x"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("no live children"), "{}", stderr(&out));
    // --session takes the runtime id too; --runtime-session still works.
    let v = w.json(&["notes", "send", "--session", &kid_b, "--json", "by runtime id"]);
    assert_eq!(v["target"]["session"], "kid-b");
    // An alias: the live session that holds it; unknown: refused in both modes.
    let v = w.json(&["notes", "send", "--alias", "worker", "--json", "by alias"]);
    assert_eq!(v["notes"][0]["session"], "kid-a");
    let out = w.run(&["notes", "send", "--alias", "nobody", "x"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("no live session has the alias"), "{}", stderr(&out));
    let out = w.run(&["notes", "send", "--alias", "bad alias!", "x"]);
    assert_eq!(code(&out), 2);
    // An execution recorded by a session.
    let f = w.home.join("sessions/kid-b.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    v["execution_id"] = json!("exec-1");
    std::fs::write(&f, v.to_string()).unwrap();
    let v = w.json(&["notes", "send", "--execution", "exec-1", "--json", "for the execution"]);
    assert_eq!(v["notes"][0]["session"], "kid-b");
    assert!(w.json(&["notes", "list", "--execution", "exec-1", "--json"])["total"].as_u64().unwrap() >= 1);
    let out = w.run(&["notes", "send", "--execution", "exec-2", "x"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("execution exec-2"), "{}", stderr(&out));
    // notes list by alias and by session (harness or runtime id).
    assert!(w.json(&["notes", "list", "--alias", "worker", "--json"])["total"].as_u64().unwrap() >= 2);
    assert_eq!(
        w.json(&["notes", "list", "--session", &kid_b, "--json"])["total"],
        w.json(&["notes", "list", "--session", "kid-b", "--json"])["total"]
    );
    // --agent is a server target: the message says so.
    let out = w.run(&["notes", "send", "--agent", "0b0d", "x"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("needs server mode"), "{}", stderr(&out));
}

#[test]
fn local_send_rules_ended_unknown_whitespace_durations_states() {
    let w = World::local("op-rules");
    start_local(&w, "done", None, None, None);
    w.inbox().session_end(&SessionEndRequest { external_session_id: "done".into(), reason: "exit".into() }).unwrap();
    // Ended: said before it is queued; --wait does not sit out its timeout.
    let t = Instant::now();
    let out = w.run(&["notes", "send", "--session", "done", "--wait", "5m", "late"]);
    assert!(t.elapsed() < Duration::from_secs(20), "waited {:?}", t.elapsed());
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("session done ended at"), "{err}");
    assert!(err.contains("still pending") && err.contains("preloop-hooks notes cancel"), "{err}");
    // Unknown: refused with one line, nothing queued (a typo, or an id cut
    // short, never waits for a session that cannot exist)...
    let notes_before = w.inbox().list().unwrap().len();
    let out = w.run(&["notes", "send", "--session", "typo", "--wait", "1s", "x"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "preloop-hooks: no session typo on this machine (no session id is or starts with it; `preloop-hooks sessions list` shows them)\n"
    );
    assert_eq!(w.inbox().list().unwrap().len(), notes_before, "nothing was queued");
    // ...unless the user says it has not started: then it is said, and kept for it.
    let full = "0d9fc67d-6d54-4639-a547-e6bdcde2c737";
    let out = w.run(&["notes", "send", "--session", full, "--not-started", "--wait", "1s", "x"]);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("no session {full} has started on this machine yet")), "{}", stderr(&out));
    assert!(stderr(&out).contains("still pending") && stderr(&out).contains("notes cancel"), "{}", stderr(&out));
    // Ctrl-C while waiting: the note stays pending, and stderr says how to cancel it.
    start_local(&w, "live", None, None, None);
    let child =
        w.cmd(&["notes", "send", "--session", "live", "--wait", "1m", "wait"]).stdin(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    // SAFETY: signalling the child we started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(stderr(&out).contains("Ctrl-C") && stderr(&out).contains("notes cancel"), "{}", stderr(&out));
    // SIGTERM (`timeout`, a supervisor) is named as what it was, not as Ctrl-C (N18).
    let child =
        w.cmd(&["notes", "send", "--session", "live", "--wait", "1m", "wait"]).stdin(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    // SAFETY: signalling the child we started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(stderr(&out).contains(", stopped waiting on SIGTERM (cancel: "), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Ctrl-C"), "{}", stderr(&out));
    // Whitespace-only and empty notes are refused, as too long ones are.
    for body in ["   ", "\n\t \n"] {
        let out = w.run_env(&["notes", "send", "--session", "done"], &[], Some(body));
        assert_eq!(code(&out), 2, "{body:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("only whitespace"), "{}", stderr(&out));
    }
    let out = w.run(&["notes", "send", "--session", "done", &"x".repeat(4097)]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("1-4096 characters"), "{}", stderr(&out));
    // Durations: compound and decimal ones work; bad ones are usage errors
    // with the valid forms; a huge one does not panic.
    for (d, want) in [("1h30m", 0), ("1.5h", 0), ("0", 2), ("-5s", 2), ("soon", 2), ("9223372036854775807s", 2)] {
        let out = w.run(&["notes", "send", "--session", "done", "--expires-in", d, "ok"]);
        assert_eq!(code(&out), want, "--expires-in {d}: {}", stderr(&out));
        if want == 2 {
            assert!(stderr(&out).contains("e.g. 90s, 15m, 2h"), "{d}: {}", stderr(&out));
        }
    }
    let out = w.run(&["notes", "send", "--session", "done", "--wait", "9223372036854775807s", "x"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("at most 7d"), "{}", stderr(&out));
    // --state takes the public states only.
    let out = w.run(&["notes", "list", "--all", "--state", "bogus"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("pending") && stderr(&out).contains("undeliverable"), "{}", stderr(&out));
    let out = w.run(&["notes", "status", "not-a-note"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    // notes send --help: hidden flags stay out of the usage line.
    let help = stdout(&w.run(&["notes", "send", "--help"]));
    let usage = help.lines().find(|l| l.starts_with("Usage:")).unwrap();
    assert!(!usage.contains("runtime-session") && !usage.contains("--harness"), "{usage}");
}

#[test]
fn note_text_never_drives_the_terminal() {
    let w = World::local("op-ansi");
    start_local(&w, "s", None, None, None);
    let v = w.json(&[
        "notes",
        "send",
        "--session",
        "s",
        "--from",
        "Mallory\u{1b}[2J",
        "--json",
        "ansi \u{1b}[2J\u{1b}[31mRED \u{202e}txt \u{9b}x",
    ]);
    let id = v["note_id"].as_str().unwrap().to_string();
    for args in [vec!["notes", "list", "--all"], vec!["notes", "status", &id]] {
        let out = w.run(&args);
        let text = stdout(&out);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202e}') && !text.contains('\u{9b}'),
            "{args:?}: {text:?}"
        );
        assert!(text.contains("\\e[2J"), "shown escaped: {text}");
    }
    // JSON keeps the text exactly.
    assert_eq!(w.json(&["notes", "status", &id, "--json"])["text"], "ansi \u{1b}[2J\u{1b}[31mRED \u{202e}txt \u{9b}x");
}

#[test]
fn a_closed_pipe_exits_quietly_and_a_broken_config_refuses() {
    let w = World::local("op-pipe");
    for i in 0..300 {
        start_local(&w, &format!("s-{i:03}"), None, None, None);
    }
    let mut child = w.cmd(&["sessions", "list", "--all", "-o", "id"]).stdin(Stdio::null()).spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 4];
    out.read_exact(&mut first).unwrap();
    drop(out);
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stderr(&o), "", "no panic message on a closed pipe");
    // A config.json that does not parse: notes and sessions refuse, with the fix.
    std::fs::write(w.home.join("config.json"), "{\"url\": ").unwrap();
    for args in [vec!["notes", "send", "--session", "s-001", "x"], vec!["sessions", "list"]] {
        let o = w.run(&args);
        assert_eq!(code(&o), 1, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("config.json") && stderr(&o).contains("refuse"), "{}", stderr(&o));
    }
    assert!(
        !w.home.join("inbox/notes").exists() || std::fs::read_dir(w.home.join("inbox/notes")).unwrap().count() == 0
    );
    // A user token stored without a URL: the mode is named.
    std::fs::write(
        w.home.join("config.json"),
        json!({"user_token": "abcdefghijklmnopqrstuvwxyz0123456789ABCD"}).to_string(),
    )
    .unwrap();
    let o = w.run(&["sessions", "list", "-o", "id"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("local mode") && stderr(&o).contains("no server URL"), "{}", stderr(&o));
}

/// Run `sessions attach` in the background with stdin piped.
fn attach(w: &World, id: &str, json: bool) -> Child {
    let mut args = vec!["sessions", "attach", id];
    if json {
        args.push("--json");
    }
    w.cmd(&args).spawn().unwrap()
}

fn wait_exit(child: &mut Child, secs: u64) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    None
}

fn events(out: &str) -> Vec<Value> {
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// Wait up to `secs` for an `attach --json` to exit once its session has
/// ended (closing its stdin then), and check its events: exit 0, every line
/// an event that passes the schema. Stdout, and the events.
fn attach_events(mut child: Child, stdin: ChildStdin, secs: u64) -> (String, Vec<Value>) {
    let status = wait_exit(&mut child, secs).expect("attach exits when the session ends");
    drop(stdin);
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(status.success(), "{out}");
    let ev = events(&out);
    for e in &ev {
        check_schema("attach-event.schema.json", e);
    }
    (out, ev)
}

#[test]
fn local_attach_shows_the_transcript_notes_and_the_end() {
    let w = World::local("op-attach");
    let transcript = w.root.join("transcript.jsonl");
    std::fs::write(
        &transcript,
        concat!(
            r#"{"type":"user","message":{"role":"user","content":"Fix the flaky test"},"timestamp":"2026-12-02T10:00:00Z"}"#,
            "\n"
        ),
    )
    .unwrap();
    start_local(&w, "watched", None, None, Some(&transcript));
    let mut child = attach(&w, "watched", true);
    let mut stdin = child.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let mut f = std::fs::OpenOptions::new().append(true).open(&transcript).unwrap();
    writeln!(f, r#"{{"type":"assistant","message":{{"id":"m1","content":[{{"type":"tool_use","name":"Bash","input":{{"command":"cargo test -p parser"}}}}]}}}}"#).unwrap();
    writeln!(stdin, "Use the staging database.").unwrap();
    stdin.flush().unwrap();
    // Wait for the note, then deliver it and end the session.
    let deadline = Instant::now() + Duration::from_secs(10);
    while w.inbox().list().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(700));
    pull(&w, "watched");
    std::thread::sleep(Duration::from_millis(900));
    w.inbox().session_end(&SessionEndRequest { external_session_id: "watched".into(), reason: "exit".into() }).unwrap();
    let (out, ev) = attach_events(child, stdin, 15);
    let has = |kind: &str, pred: &dyn Fn(&Value) -> bool| ev.iter().any(|e| e["kind"] == kind && pred(e));
    assert!(has("prompt", &|e| e["text"] == "Fix the flaky test"), "{out}");
    assert!(
        has("tool_call", &|e| e["tool"] == "Bash"
            && e["args"] == "cargo test -p parser"
            && e["source"] == "transcript"),
        "{out}"
    );
    assert!(has("model_call", &|_| true), "{out}");
    assert!(has("note_sent", &|e| e["text"] == "Use the staging database."), "{out}");
    assert!(has("note_state", &|e| e["state"] == "delivered"), "{out}");
    assert!(has("session_ended", &|_| true), "{out}");
    // Without a tty and without --json: one plain line per event.
    start_local(&w, "plain", None, None, None);
    let mut child = attach(&w, "plain", false);
    drop(child.stdin.take());
    std::thread::sleep(Duration::from_millis(700));
    w.inbox().session_end(&SessionEndRequest { external_session_id: "plain".into(), reason: "exit".into() }).unwrap();
    assert!(wait_exit(&mut child, 15).is_some_and(|s| s.success()));
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(out.lines().next().unwrap().contains("attached    plain (local mode"), "{out}");
    assert!(out.lines().last().unwrap().contains("ended"), "{out}");
    assert!(!out.contains('\u{1b}'), "no terminal codes on a pipe: {out:?}");
    // An unknown session is refused.
    let o = w.run(&["sessions", "attach", "nobody"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("no session nobody on this machine"), "{}", stderr(&o));
}

#[test]
fn tool_calls_are_counted_for_every_harness_and_unknown_model_calls_show_as_unknown() {
    // N14: Gemini CLI's tool gate is BeforeTool; a transcript we do not read is not "0 model calls".
    let w = World::local("op-counts");
    let gemini_transcript = w.root.join("gemini.json");
    std::fs::write(&gemini_transcript, "{\"sessionId\":\"g-1\",\"messages\":[]}\n").unwrap();
    start_local(&w, "g-1", None, None, Some(&gemini_transcript));
    start_local(&w, "c-1", None, None, None);
    let now = preloop_shared::time::Timestamp::now().to_iso_z();
    std::fs::create_dir_all(w.home.join("log")).unwrap();
    std::fs::write(
        w.home.join("log/hooks.log"),
        format!(
            "{now} gemini BeforeTool mode=local session=g-1 outcome=ok notes=0 ms=3\n\
             {now} gemini AfterTool mode=local session=g-1 outcome=ok notes=0 ms=3\n\
             {now} gemini BeforeTool mode=local session=g-1 outcome=ok notes=0 ms=3\n\
             {now} copilot preToolUse mode=local session=c-1 outcome=ok notes=0 ms=3\n\
             {now} pi tool_call mode=local session=c-1 outcome=ok notes=0 ms=3\n\
             {now} opencode tool.execute.before mode=local session=c-1 outcome=ok notes=0 ms=3\n\
             {now} cursor beforeShellExecution mode=local session=c-1 outcome=ok notes=0 ms=3\n\
             {now} codex PermissionRequest mode=local session=c-1 outcome=ok notes=0 ms=3\n"
        ),
    )
    .unwrap();
    let v = w.json(&["sessions", "list", "--json"]);
    let row = |id: &str| v["sessions"].as_array().unwrap().iter().find(|r| r["id"] == id).unwrap().clone();
    assert_eq!(row("g-1")["tool_calls"], 2, "{v}");
    // Pi's and OpenCode's tool gates count too (the registry's
    // `is_tool_gate`); a permission-request gate on top of one does not.
    assert_eq!(row("c-1")["tool_calls"], 3, "{v}");
    assert_eq!(row("g-1")["model_calls"], Value::Null, "{v}");
}

#[test]
fn sessions_list_shows_30_unless_told_and_says_what_it_left_out() {
    // N13: an account-wide list has a default limit and a way to ask for more.
    let w = World::local("op-limit");
    for n in 0..33 {
        start_local(&w, &format!("s-{n:02}"), None, None, None);
    }
    let out = w.run(&["sessions", "list", "-o", "id"]);
    assert_eq!((code(&out), stdout(&out).lines().count()), (0, 30), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "preloop-hooks: showing the 30 most recently active of 33 sessions (--limit N for more, --all for every one)\n"
    );
    let v = w.json(&["sessions", "list", "--limit", "5", "--json"]);
    assert_eq!((v["total"].as_u64(), v["sessions"].as_array().unwrap().len()), (Some(5), 5));
    check_schema("sessions.schema.json", &v);
    let out = w.run(&["sessions", "list", "--all", "-o", "id"]);
    assert_eq!((stdout(&out).lines().count(), stderr(&out)), (33, String::new()));
    assert_eq!(code(&w.run(&["sessions", "list", "--limit", "0"])), 2);
}

/// What `attach` shows, without its header: the events whose `kind` is not `attached`.
fn shown(ev: &[Value]) -> Vec<&Value> {
    ev.iter().filter(|e| e["kind"] != "attached").collect()
}

/// How many times an event says the session ended (ours, or the server's timeline item).
fn ends(ev: &[Value]) -> usize {
    ev.iter().filter(|e| e["kind"] == "session_ended" || e["tool"] == "session_ended").count()
}

#[test]
fn attach_shows_the_history_in_time_order_and_the_end_once() {
    // N17: the transcript and the inbox are read by two threads; their
    // history interleaves by time, not by which thread read first.
    let w = World::local("op-attach-order");
    let at = |secs: i64| preloop_shared::time::Timestamp::now().add_secs(secs).to_iso_z();
    let transcript = w.root.join("t.jsonl");
    std::fs::write(
        &transcript,
        format!(
            "{}\n{}\n",
            json!({"type": "user", "message": {"role": "user", "content": "do the thing"}, "timestamp": at(-60)}),
            json!({"type": "assistant", "timestamp": at(5), "message": {"id": "m1", "content": [
                {"type": "tool_use", "name": "Bash", "input": {"command": "echo later"}}]}}),
        ),
    )
    .unwrap();
    start_local(&w, "ordered", None, None, Some(&transcript));
    w.run(&["notes", "send", "--session", "ordered", "in between"]);
    w.inbox().session_end(&SessionEndRequest { external_session_id: "ordered".into(), reason: "exit".into() }).unwrap();
    let mut child = attach(&w, "ordered", true);
    let stdin = child.stdin.take().unwrap();
    let (out, ev) = attach_events(child, stdin, 15);
    let kinds: Vec<&str> = shown(&ev).iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds[..3], ["prompt", "note_sent", "model_call"], "{out}");
    let history: Vec<&Value> =
        shown(&ev).into_iter().filter(|e| e["kind"] != "session_ended" && e["kind"] != "note_undelivered").collect();
    let times: Vec<&str> = history.iter().map(|e| e["at"].as_str().unwrap()).collect();
    let mut sorted = times.clone();
    sorted.sort_by_key(|t| preloop_shared::time::Timestamp::parse(t));
    assert_eq!(times, sorted, "in time order: {out}");
    assert_eq!(ends(&ev), 1, "{out}");
    // The end comes last, then the note it never read (#33 part 3).
    let tail: Vec<&str> = ev[ev.len() - 2..].iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(tail, ["session_ended", "note_undelivered"], "{out}");
    assert_eq!(ev.last().unwrap()["text"], "in between", "{out}");
}

// ----- server mode (the loopback fake) ------------------------------------

fn hook(s: &FakeServer, route: &str, body: Value) -> Value {
    let r = client::post_json(&format!("{}/agents/{route}", s.api_base()), Some(&s.runtime_token()), &body).unwrap();
    assert!(r.status < 300, "{route}: {} {}", r.status, r.text());
    if r.status == 204 { Value::Null } else { r.json() }
}

fn start_server(s: &FakeServer, w: &World, ext: &str, parent: Option<&str>, alias: Option<&str>) -> String {
    let mut b = json!({"session_id": ext, "source": "claude_code", "cwd": format!("/w/{ext}")});
    if let Some(p) = parent {
        b["parent_session_id"] = json!(p);
    }
    if let Some(a) = alias {
        b["alias"] = json!(a);
    }
    let rid = hook(s, "session-start", b)["runtime_session_id"].as_str().unwrap().to_string();
    // The session file server-mode hooks write on the agent's machine.
    std::fs::create_dir_all(w.home.join("sessions")).unwrap();
    std::fs::write(
        w.home.join(format!("sessions/{ext}.json")),
        json!({"runtime_session_id": rid, "started_at": preloop_shared::time::Timestamp::now().to_iso_z(),
               "agent_kind": "claude_code", "external_session_id": ext, "mode": "server"})
        .to_string(),
    )
    .unwrap();
    rid
}

#[test]
fn server_sessions_list_filters_and_hide_the_identity_session() {
    let s = FakeServer::start();
    let w = World::server("op-srv-list", &s);
    let cond = start_server(&s, &w, "cond", None, None);
    let kid = start_server(&s, &w, "kid", Some(&cond), Some("worker"));
    hook(
        &s,
        "permission-check",
        json!({"tool_name": "Bash", "tool_input": {"command": "echo hi"}, "source": "claude_code", "session_id": "kid", "evaluation_phase": "pre_tool_use"}),
    );
    // A pull without a session id creates the agent's identity session (trap 23).
    hook(&s, "notes/pending", json!({"event": "pre_tool_use"}));
    start_server(&s, &w, "gone", None, None);
    hook(&s, "session-end", json!({"external_session_id": "gone", "reason": "exit"}));
    let all = w.json(&["sessions", "list", "--json"]);
    check_schema("sessions.schema.json", &all);
    let mut got = ids(&all);
    got.sort();
    assert_eq!(got, ["cond", "gone", "kid"], "the identity session is hidden: {all:#}");
    let row = |id: &str| all["sessions"].as_array().unwrap().iter().find(|r| r["id"] == id).unwrap().clone();
    assert_eq!(row("gone")["state"], "ended", "an ended run is never live");
    assert_eq!(row("kid")["tool_calls"], 1);
    // The server counts model calls through its gateway only: for a run seen
    // through hooks alone its 0 means "not counted", shown as unknown (N14).
    assert_eq!(row("kid")["model_calls"], Value::Null, "hook-only runs: model calls not counted");
    assert_eq!(row("kid")["runtime_session_id"], kid.as_str());
    s.clear_requests();
    let f = |args: &[&str]| {
        let mut a = vec!["sessions", "list", "--json"];
        a.extend_from_slice(args);
        let mut v = ids(&w.json(&a));
        v.sort();
        v
    };
    assert_eq!(f(&["--active"]), ["cond", "kid"]);
    assert_eq!(f(&["--parent", "cond"]), ["kid"]);
    assert_eq!(f(&["--alias", "worker"]), ["kid"]);
    assert_eq!(f(&["--agent", &s.agent_id()]).len(), 3);
    assert_eq!(f(&["--agent", "Nobody"]).len(), 0);
    assert_eq!(f(&["--kind", "claude-code"]).len(), 3);
    assert_eq!(f(&["--since", "1h"]).len(), 3);
    assert_eq!(f(&["--execution", "9f2b0000-0000-4000-8000-000000000001"]).len(), 0);
    // The filters went to the server as query parameters.
    let queries: Vec<String> =
        s.requests().into_iter().filter(|r| r.path == "/api/v1/runtime-sessions").map(|r| r.query).collect();
    for p in
        ["status=active", &format!("parent_session_id={cond}"), "alias=worker", "agent=Nobody", "flow_execution_id="]
    {
        assert!(queries.iter().any(|q| q.contains(p)), "{p} not sent: {queries:?}");
    }
    // --kind is the session's harness, which the server's agent_kind is not
    // (newcomer 4, P1): it is checked here, as is --since (LAST ACTIVITY or
    // STARTED) within the server's 30 days.
    assert!(queries.iter().all(|q| !q.contains("agent_kind") && !q.contains("start_date")), "{queries:?}");
    // Without a user token: this machine's session files, and stderr says why.
    let mut nt = World::server("op-srv-notoken", &s);
    nt.home = w.home.clone();
    nt.env.retain(|(k, _)| k != "PRELOOP_USER_TOKEN");
    let o = nt.run(&["sessions", "list", "-o", "id"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).lines().count() >= 3 && stderr(&o).contains("no user token"), "{}{}", stdout(&o), stderr(&o));
    // -o id prints ids that notes send --session takes, as written in the help.
    let out = w.run(&["sessions", "list", "--active", "-o", "id"]);
    for id in stdout(&out).lines() {
        let o = w.run(&["notes", "send", "--session", id, "through the pipe"]);
        assert_eq!(code(&o), 0, "{id}: {}", stderr(&o));
    }
}

#[test]
fn server_targets_children_alias_execution_and_warnings() {
    let s = FakeServer::start();
    let w = World::server("op-srv-targets", &s);
    let cond = start_server(&s, &w, "cond", None, None);
    start_server(&s, &w, "kid-a", Some(&cond), None);
    std::thread::sleep(Duration::from_millis(20));
    start_server(&s, &w, "kid-b", Some(&cond), Some("worker-b"));
    send_to_both_children(&w, &cond);
    let req =
        s.requests().into_iter().rev().find(|r| r.path == "/api/v1/operator-notes" && r.method == "POST").unwrap();
    let body = req.body.unwrap();
    assert_eq!((body["children"].as_str(), body["parent_session_id"].as_str()), (Some("all"), Some(cond.as_str())));
    assert_eq!(req.token_kind.as_deref(), Some("api_key"), "the operator route takes the user token");
    let v = w.json(&["notes", "send", "--children", "latest", "--parent", "cond", "--json", "newest"]);
    assert_eq!(v["notes"][0]["session"], "kid-b");
    let l = w.json_env(&["notes", "list", "--children", "all", "--json"], &[("PRELOOP_PARENT_SESSION_ID", &cond)]);
    check_schema("notes-list.schema.json", &l);
    assert_eq!(l["total"], 3);
    let v = w.json(&["notes", "send", "--alias", "worker-b", "--json", "by alias"]);
    assert_eq!(v["target"]["alias"], "worker-b");
    assert!(w.json(&["notes", "list", "--alias", "worker-b", "--json"])["total"].as_u64().unwrap() >= 2);
    let out = w.run(&["notes", "send", "--alias", "nobody", "x"]);
    assert_eq!(code(&out), 1);
    let out = w.run(&["notes", "send", "--execution", "9f2b0000-0000-4000-8000-000000000001", "x"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("execution has no runtime session"), "{}", stderr(&out));
    let out = w.run(&["notes", "send", "--execution", "nope", "x"]);
    assert_eq!(code(&out), 2);
    // --agent takes an id or a name, as `sessions list --agent` does (N12).
    let posted = s.requests().iter().filter(|r| r.method == "POST" && r.path == "/api/v1/operator-notes").count();
    let out = w.run(&["notes", "send", "--agent", "not-a-uuid", "x"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no managed agent in this account has the id or name \"not-a-uuid\""),
        "{}",
        stderr(&out)
    );
    let now = s.requests().iter().filter(|r| r.method == "POST" && r.path == "/api/v1/operator-notes").count();
    assert_eq!(now, posted, "nothing was sent");
    // By runtime id; then an ended session: said first, --wait returns at once.
    let rid_a = w.json(&["sessions", "list", "--json"])["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "kid-a")
        .unwrap()["runtime_session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let v = w.json(&["notes", "send", "--session", &rid_a, "--json", "by runtime id"]);
    assert_eq!(v["target"]["session"], "kid-a");
    hook(&s, "session-end", json!({"external_session_id": "kid-a", "reason": "exit"}));
    let t = Instant::now();
    let out = w.run(&["notes", "send", "--session", "kid-a", "--wait", "5m", "too late"]);
    assert!(t.elapsed() < Duration::from_secs(30));
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("session kid-a ended at") && stderr(&out).contains("notes cancel"),
        "{}",
        stderr(&out)
    );
    // A session whose hooks ran on the local inbox: the mode and why are named.
    std::fs::write(
        w.home.join("sessions/loc.json"),
        json!({"runtime_session_id": "00000000-0000-4000-8000-0000000000aa", "started_at": "2026-12-02T09:00:00Z",
               "agent_kind": "claude_code", "external_session_id": "loc", "mode": "local"})
        .to_string(),
    )
    .unwrap();
    let out = w.run(&["notes", "send", "--session", "loc", "x"]);
    assert_eq!(code(&out), 1, "the server does not know it: {}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "server mode (a server URL and a user token are configured), but the hooks of session loc ran in local mode"
        ),
        "{}",
        stderr(&out)
    );
    // --from is the local inbox's: said, not silently dropped.
    let out = w.run(&["notes", "send", "--session", "kid-b", "--from", "alice", "x"]);
    assert_eq!(code(&out), 0);
    assert!(stderr(&out).contains("--from applies to the local inbox only"), "{}", stderr(&out));
    // Receipts name the harness session id first.
    let out = w.run(&["notes", "list", "--session", "kid-b"]);
    assert!(stdout(&out).contains("EVENT/REASON"), "{}", stdout(&out));
    let id = v["note_id"].as_str().unwrap();
    assert!(stdout(&w.run(&["notes", "status", id])).contains("session kid-a"));
}

#[test]
fn server_attach_socket_timeline_receipts_and_typed_notes() {
    let s = FakeServer::start();
    let w = World::server("op-srv-attach", &s);
    let rid = start_server(&s, &w, "live", None, None);
    hook(
        &s,
        "permission-check",
        json!({"tool_name": "Bash", "tool_input": {"command": "echo hi"}, "source": "claude_code", "session_id": "live", "evaluation_phase": "pre_tool_use"}),
    );
    let mut child = attach(&w, "live", true);
    let mut stdin = child.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // Something on the server's event bus reaches the socket.
    client::post_json(
        &format!("{}/_fake/sessions/{rid}/events", s.url()),
        None,
        &json!({"type": "runtime.status", "status": "busy"}),
    )
    .unwrap();
    writeln!(stdin, "Deploy to eu-west-1.").unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let note = loop {
        let l =
            client::get(&format!("{}/operator-notes?runtime_session_id={rid}", s.api_base()), Some(&s.user_token()))
                .unwrap()
                .json();
        if let Some(id) = l["notes"][0]["note_id"].as_str() {
            break id.to_string();
        }
        assert!(Instant::now() < deadline, "the typed note was never sent");
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(2500));
    hook(
        &s,
        "permission-check",
        json!({"tool_name": "Read", "tool_input": {"file_path": "/etc/hosts"}, "source": "claude_code", "session_id": "live", "evaluation_phase": "pre_tool_use"}),
    );
    std::thread::sleep(Duration::from_millis(2500));
    hook(&s, "session-end", json!({"external_session_id": "live", "reason": "exit"}));
    let (out, ev) = attach_events(child, stdin, 20);
    let has = |kind: &str, pred: &dyn Fn(&Value) -> bool| ev.iter().any(|e| e["kind"] == kind && pred(e));
    assert!(has("attached", &|e| e["source"] == "socket"), "the socket's attached message: {out}");
    assert!(has("server_event", &|e| e["source"] == "socket" && e["tool"] == "runtime.status"), "{out}");
    assert!(has("session_started", &|_| true), "{out}");
    assert!(has("tool_call", &|e| e["tool"] == "Bash" && e["args"] == "[command: 9 chars]"), "sizes only: {out}");
    assert!(has("tool_call", &|e| e["tool"] == "Read"), "a tool call as it happens: {out}");
    assert!(has("note_sent", &|e| e["note_id"] == note.as_str()), "{out}");
    assert!(has("note_state", &|e| e["note_id"] == note.as_str() && e["state"] == "delivered"), "{out}");
    assert!(has("session_ended", &|_| true), "{out}");
    assert_eq!(ends(&ev), 1, "the end once, not also as the timeline's item (N17): {out}");
    // The socket took the user token in its header.
    let ws = s.requests().into_iter().find(|r| r.path.starts_with("/api/v1/ws/runtime-sessions/")).unwrap();
    assert_eq!(ws.token_kind.as_deref(), Some("api_key"));
}

#[test]
fn tokens_are_never_printed_and_html_is_never_shown() {
    // A server that echoes the bearer token, JSON-\u-escaped, in every error.
    let stub = StubServer::start(|req| {
        let tok = req.header("authorization").unwrap_or("").to_string();
        StubResponse::json(401, json!({"detail": format!("request had {}", json_u_escape(&tok))}))
    });
    let mut w = World::local("op-redact");
    let user = "usrSecretKey0123456789012345678901234567";
    w.env = vec![
        ("PRELOOP_URL".into(), stub.url()),
        ("PRELOOP_TOKEN".into(), "agt_RuntimeSecret_ZZZZ".into()),
        ("PRELOOP_USER_TOKEN".into(), user.into()),
    ];
    for args in [
        vec!["notes", "send", "--session", "s1", "hi"],
        vec!["notes", "status", "0123456789abcdef"],
        vec!["notes", "list", "--agent", "0b0d0000-0000-4000-8000-000000000000"],
        vec!["sessions", "list"],
    ] {
        let o = w.run(&args);
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert_ne!(code(&o), 0, "{args:?}");
        assert!(!all.contains(user) && !all.contains("agt_RuntimeSecret"), "{args:?}: {all}");
        assert!(!all.contains("\\u0075"), "not even escaped: {all}");
    }
    // An HTML answer is named, never printed.
    let s = FakeServer::start();
    let w = World::server("op-html", &s);
    s.set_fault(FaultSpec::route("/api/v1/operator-notes/*").garbage());
    let o = w.run(&["notes", "status", "0123456789abcdef"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("does not look like a Preloop server"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("<html>"), "{}", stderr(&o));
    s.clear_faults();
    // An unreachable server: words, no OS error numbers.
    let mut w = World::local("op-down");
    w.env = vec![("PRELOOP_URL".into(), "http://127.0.0.1:9".into()), ("PRELOOP_USER_TOKEN".into(), user.into())];
    let o = w.run(&["notes", "status", "0123456789abcdef"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("connection refused") && !stderr(&o).contains("os error"), "{}", stderr(&o));
}

#[test]
fn attach_on_a_terminal_edits_a_line_survives_a_resize_and_leaves_on_ctrl_c() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let w = World::local("op-tty");
    start_local(&w, "tty", None, None, None);
    let (mut master, mut slave) = (0, 0);
    let mut ws = libc::winsize { ws_row: 30, ws_col: 100, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: openpty fills two fds we then own.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &ws) };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both fds were just opened and are owned here.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut c = w.cmd(&["sessions", "attach", "tty"]);
    c.stdin(slave.try_clone().unwrap()).stdout(slave.try_clone().unwrap()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    drop(slave);
    let mut m = std::fs::File::from(master);
    let mut reader = m.try_clone().unwrap();
    let screen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sc = screen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            sc.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    std::thread::sleep(Duration::from_millis(800));
    m.write_all(b"hel\x7flp me").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    ws.ws_col = 50;
    // SAFETY: TIOCSWINSZ on the pty master we own; SIGWINCH to our child.
    unsafe {
        libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&m), libc::TIOCSWINSZ, &ws);
        libc::kill(child.id() as i32, libc::SIGWINCH);
    }
    m.write_all(b"\r").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while w.inbox().list().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    m.write_all(b"\x03").unwrap();
    let status = wait_exit(&mut child, 10).expect("Ctrl-C leaves");
    assert!(status.success(), "exit {status:?}");
    let notes = w.inbox().list().unwrap();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].text, "help me", "backspace edited the line");
    let out = String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
    assert!(out.contains("note> "), "the input line is drawn: {out:?}");
    let sent_line =
        out.split("\r\n").chain(out.split('\n')).find(|l| l.contains("note sent")).unwrap_or_default().to_string();
    let visible = sent_line.rsplit("\x1b[2K").next().unwrap_or("");
    assert!(visible.trim_end().chars().count() <= 50, "events fit the resized width: {visible:?}");
}

/// `doctor --verbose | head -1` and `install --dry-run | head -1`: stdout
/// closed after the first bytes ends the command quietly with exit 0, by
/// the error's kind (no panic, no message).
#[test]
fn doctor_and_install_end_quietly_on_a_closed_pipe() {
    let w = World::local("op-pipe-doctor");
    let bins = Path::new(env!("CARGO_BIN_EXE_preloop-hooks")).parent().unwrap().display().to_string();
    for args in [
        vec!["doctor", "--verbose", "--no-codex-query"],
        vec!["install", "--harness", "all", "--dry-run", "--bin-dir", &bins],
    ] {
        let mut child = w.cmd(&args).stdin(Stdio::null()).spawn().unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 4];
        out.read_exact(&mut first).unwrap();
        drop(out);
        let o = child.wait_with_output().unwrap();
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
        assert_ne!(code(&o), 101, "{args:?}: {}", stderr(&o));
    }
}

/// What a plain `sessions attach` of an ended session prints, stdin closed.
fn attach_ended(w: &World, id: &str) -> String {
    let mut child = attach(w, id, false);
    drop(child.stdin.take());
    assert!(wait_exit(&mut child, 20).is_some_and(|s| s.success()), "attach exits on an ended session");
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    out
}

/// #33 part 3 (K2, D-1), through the real CLI in both modes: a run's end
/// names what it never read. A note pending at the end is listed by
/// `notes list --undelivered` (one session, a conductor's children, every
/// recent one: with its text), counted by `sessions list` (UNDELIVERED,
/// `undelivered_notes`) and printed by `sessions attach` after the end; in
/// server mode a note recorded delivered that no output carried
/// (the session file's `uncarried_notes`) is named too, `never_carried`.
#[test]
fn a_runs_end_names_what_it_never_read_in_both_modes() {
    // Local inbox.
    let w = World::local("op-unread-local");
    let cond = start_local(&w, "boss", None, None, None);
    start_local(&w, "kid", Some(&cond), None, None);
    start_local(&w, "calm", None, None, None);
    let id = w.json(&["notes", "send", "--session", "kid", "--json", "Use \u{1b}[31mstaging"])["note_id"]
        .as_str()
        .unwrap()
        .to_string();
    w.inbox().session_end(&SessionEndRequest { external_session_id: "kid".into(), reason: "exit".into() }).unwrap();
    check_unread(&w, "kid", "boss", &id, "session_ended", "Use \\e[31mstaging");

    // A Preloop server (the fake one, its routes as docs/contracts/preloop-server.md §5.2).
    let s = FakeServer::start();
    let w = World::server("op-unread-server", &s);
    let cond = start_server(&s, &w, "boss", None, None);
    start_server(&s, &w, "kid", Some(&cond), None);
    start_server(&s, &w, "calm", None, None);
    // One claimed at once (recorded delivered) that no output carried.
    let shown = w.json(&["notes", "send", "--session", "kid", "--json", "claimed, never carried"])["note_id"]
        .as_str()
        .unwrap()
        .to_string();
    let claimed = hook(&s, "notes/pending", json!({"event": "pre_tool_use", "session_id": "kid", "channel": "hook"}));
    assert_eq!(claimed["notes"][0]["note_id"], shown.as_str(), "{claimed}");
    assert_eq!(w.json(&["notes", "status", &shown, "--json"])["state"], "delivered");
    let id = w.json(&["notes", "send", "--session", "kid", "--json", "Use \u{1b}[31mstaging"])["note_id"]
        .as_str()
        .unwrap()
        .to_string();
    hook(&s, "session-end", json!({"external_session_id": "kid", "reason": "exit"}));
    // What the hooks' SessionEnd writes on this machine (D-1).
    let path = w.home.join("sessions/kid.json");
    let mut file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    file["uncarried_notes"] = json!([shown]);
    std::fs::write(&path, file.to_string()).unwrap();
    check_unread(&w, "kid", "boss", &id, "session_ended", "Use \\e[31mstaging");
    let l = w.json(&["notes", "list", "--undelivered", "--session", "kid", "--json"]);
    let never = l["notes"].as_array().unwrap().iter().find(|n| n["note_id"] == shown.as_str()).cloned();
    assert_eq!(never.as_ref().map(|n| n["never_carried"].clone()), Some(json!(true)), "{l:#}");
    assert_eq!(w.json(&["notes", "status", &shown, "--json"])["never_carried"], true);
    let row = w.json(&["sessions", "list", "--json"])["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "kid")
        .cloned()
        .unwrap();
    assert_eq!(row["undelivered_notes"], 2, "undeliverable and never carried: {row:#}");
    let out = attach_ended(&w, "kid");
    assert!(
        out.contains(&format!("never read  {shown}  delivered  \"claimed, never carried\"  (never_carried)")),
        "{out}"
    );
}

/// The checks of [`a_runs_end_names_what_it_never_read_in_both_modes`] for
/// one mode: session `kid` (a child of `boss`) ended with note `id` unread.
fn check_unread(w: &World, kid: &str, boss: &str, id: &str, why: &str, shown_text: &str) {
    for args in [
        vec!["notes", "list", "--undelivered", "--session", kid, "--json"],
        vec!["notes", "list", "--undelivered", "--children", "all", "--parent", boss, "--json"],
        vec!["notes", "list", "--undelivered", "--json"],
    ] {
        let l = w.json(&args);
        check_schema("notes-list.schema.json", &l);
        let n = l["notes"].as_array().unwrap().iter().find(|n| n["note_id"] == id).cloned();
        let n = n.unwrap_or_else(|| panic!("{args:?}: {l:#}"));
        assert_eq!((n["state"].as_str(), n["undeliverable_reason"].as_str()), (Some("undeliverable"), Some(why)));
        assert_eq!(n["text"], "Use \u{1b}[31mstaging", "{args:?}: with its text");
    }
    let o = w.run(&["notes", "list", "--undelivered", "--session", kid]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains(id) && stdout(&o).contains(shown_text) && !stdout(&o).contains('\u{1b}'),
        "{}",
        stdout(&o)
    );
    let o = w.run(&["notes", "list", "--undelivered", "--session", "calm"]);
    assert_eq!(stdout(&o).trim(), "no undelivered notes");
    assert_eq!(code(&w.run(&["notes", "list", "--undelivered", "--state", "pending", "--all"])), 2, "one filter");
    let all = w.json(&["sessions", "list", "--json"]);
    check_schema("sessions.schema.json", &all);
    let count = |s: &str| {
        all["sessions"].as_array().unwrap().iter().find(|r| r["id"] == s).map(|r| r["undelivered_notes"].clone())
    };
    assert!(count(kid).is_some_and(|c| c.as_u64() >= Some(1)), "{all:#}");
    assert_eq!(count("calm"), Some(json!(0)));
    let o = w.run(&["sessions", "list"]);
    assert!(stdout(&o).lines().next().unwrap().contains("UNDELIVERED"), "{}", stdout(&o));
    let out = attach_ended(w, kid);
    assert!(out.contains("the session ended;") && out.contains("never showed follow"), "{out}");
    assert!(out.contains(&format!("never read  {id}  undeliverable  \"{shown_text}\"  ({why})")), "{out}");
    assert!(!out.contains('\u{1b}'), "{out:?}");
}
