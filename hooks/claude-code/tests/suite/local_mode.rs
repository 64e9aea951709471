//! The Claude Code hook binaries on the embedded local inbox (no server).

use crate::common::*;
use preloop_shared::operator::ReceiptState;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

const S: &str = "79c16d5c-09a5-4248-9f5c-503fdaab7c68";

#[test]
fn no_note_means_no_output_for_every_event() {
    let home = Home::new("cc");
    for e in ["SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd"] {
        assert_eq!(hook(&home, e, S), None, "{e}");
    }
    let log = home.log();
    assert_eq!(log.lines().count(), 5, "one log line per invocation:\n{log}");
    assert!(log.lines().all(|l| l.contains("mode=local") && l.contains(S)), "{log}");
}

#[test]
fn a_note_travels_start_tool_stop_and_end() {
    let home = Home::new("cc");
    let first = home.send(S, "Deploy to eu-west-1, not us-east-1.");
    let out = hook(&home, "SessionStart", S);
    let ctx = context(&out).expect("SessionStart carries the pending note");
    assert_eq!(out.unwrap()["hookSpecificOutput"]["hookEventName"], "SessionStart");
    assert_eq!(ids_in(&ctx), vec![first.clone()]);
    assert!(ctx.contains("Deploy to eu-west-1, not us-east-1."));
    assert_eq!(home.note_state(&first), ("delivered".into(), Some("session_start".into()), None));

    let mid = home.send(S, "Stop refactoring the tests, ship the fix.");
    let out = hook(&home, "PreToolUse", S);
    let h = &out.as_ref().unwrap()["hookSpecificOutput"];
    assert!(h.get("permissionDecision").is_none(), "local mode never decides");
    assert_eq!(ids_in(&context(&out).unwrap()), vec![mid.clone()]);
    assert_eq!(home.receipt(&mid).delivery_event.as_deref(), Some("pre_tool_use"));
    assert_eq!(hook(&home, "PreToolUse", S), None, "delivered once");

    let late = home.send(S, "One more thing: update the changelog.");
    let out = hook(&home, "Stop", S);
    assert_eq!(ids_in(&context(&out).unwrap()), vec![late.clone()]);
    assert_eq!(home.receipt(&late).delivery_event.as_deref(), Some("stop"));

    let too_late = home.send(S, "and the docs");
    let mut active = payload("Stop", S);
    active["stop_hook_active"] = json!(true);
    assert_eq!(run("Stop", home.path(), &[], &active), None, "no second continuation in a row");
    assert_eq!(home.receipt(&too_late).state, ReceiptState::Pending);
    assert_eq!(hook(&home, "SessionEnd", S), None);
    assert_eq!(home.note_state(&too_late), ("undeliverable".into(), None, Some("session_ended".into())));
    // #33 part 3: the end's log line names it (the local inbox answers the ids).
    let end = home.log().lines().find(|l| l.contains(" SessionEnd ")).map(str::to_string).unwrap_or_default();
    assert!(end.contains(&format!(" never_read=1 never_read_ids={too_late}")), "{end}");
    assert!(!end.contains("and the docs"), "never a note's text: {end}");
    assert!(!home.path().join("run").join(format!("{S}.json")).exists(), "session state cleaned");
}

#[test]
fn stop_rescue_is_capped_at_three_per_session() {
    let home = started("cc", S);
    let mut continued = 0;
    for i in 0..5 {
        home.send(S, &format!("late note {i}"));
        if context(&hook(&home, "Stop", S)).is_some() {
            continued += 1;
        }
    }
    assert_eq!(continued, 3);
    let pending = home.inbox().list().unwrap().into_iter().filter(|n| n.state == ReceiptState::Pending).count();
    assert_eq!(pending, 2, "past the cap notes wait (for a tool call or the session end)");
}

#[test]
fn session_start_writes_session_file_env_export_and_headless_line() {
    let home = Home::new("cc");
    let env_file = home.path().join("claude-env.sh");
    let out = run_raw(
        command(
            "SessionStart",
            home.path(),
            &[
                ("CLAUDE_ENV_FILE", env_file.to_str().unwrap()),
                ("CLAUDE_CODE_ENTRYPOINT", "sdk-cli"),
                ("PRELOOP_SESSION_ALIAS", "release worker"),
            ],
        ),
        payload("SessionStart", S).to_string().as_bytes(),
    );
    check_contract("SessionStart", &out);
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join("sessions").join(format!("{S}.json"))).unwrap())
            .unwrap();
    let rid = file["runtime_session_id"].as_str().unwrap().to_string();
    assert_eq!(file["agent_kind"], "claude_code");
    assert_eq!(file["cwd"], "/tmp/proj");
    assert_eq!(file["alias"], "release-worker");
    assert!(file["started_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(std::fs::read_to_string(&env_file).unwrap(), format!("export PRELOOP_PARENT_SESSION_ID={rid}\n"));
    assert_eq!(String::from_utf8_lossy(&out.stderr), format!("preloop runtime_session_id={rid}\n"));

    // A child run started from it records the lineage.
    let child = "child-session-1";
    run("SessionStart", home.path(), &[("PRELOOP_PARENT_SESSION_ID", &rid)], &payload("SessionStart", child));
    let cf: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("sessions").join(format!("{child}.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(cf["parent_session_id"], rid.as_str());

    // Interactive runs print nothing on stderr.
    let out = run_raw(
        command("SessionStart", home.path(), &[("CLAUDE_CODE_ENTRYPOINT", "cli")]),
        payload("SessionStart", "other").to_string().as_bytes(),
    );
    assert!(out.stderr.is_empty());
}

#[test]
fn first_prompt_titles_the_session_and_pulls_notes() {
    let home = started("cc", S);
    let id = home.send(S, "note at prompt time");
    let out = hook(&home, "UserPromptSubmit", S);
    assert_eq!(ids_in(&context(&out).unwrap()), vec![id]);
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join("sessions").join(format!("{S}.json"))).unwrap())
            .unwrap();
    assert_eq!(file["title"], "Fix the flaky test in api/");
}

#[test]
fn sixteen_parallel_pre_tool_use_hooks_deliver_each_note_exactly_once() {
    let home = started("cc", S);
    let sent: Vec<String> = (0..5).map(|i| home.send(S, &format!("note {i}"))).collect();
    let children: Vec<_> = (0..16)
        .map(|_| {
            let mut c = command("PreToolUse", home.path(), &[]);
            let mut child = c.spawn().unwrap();
            use std::io::Write;
            child.stdin.take().unwrap().write_all(payload("PreToolUse", S).to_string().as_bytes()).unwrap();
            child
        })
        .collect();
    let mut got = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        if let Some(ctx) = context(&check_contract("PreToolUse", &out)) {
            got.extend(ids_in(&ctx));
        }
    }
    got.sort();
    let mut want = sent.clone();
    want.sort();
    assert_eq!(got, want, "each note in exactly one output");
    for id in &sent {
        assert_eq!(home.receipt(id).state, ReceiptState::Delivered);
    }
}

#[test]
fn concurrent_stops_never_exceed_the_rescue_cap() {
    let home = started("cc", S);
    // 20, the most one sender may send a session in an hour: more than the
    // 15 three continuations can carry.
    for i in 0..20 {
        home.send(S, &format!("late {i}"));
    }
    let children: Vec<_> = (0..8)
        .map(|_| {
            let mut child = command("Stop", home.path(), &[]).spawn().unwrap();
            use std::io::Write;
            child.stdin.take().unwrap().write_all(payload("Stop", S).to_string().as_bytes()).unwrap();
            child
        })
        .collect();
    let continued = children
        .into_iter()
        .filter(|_| true)
        .map(|c| c.wait_with_output().unwrap())
        .filter(|o| context(&check_contract("Stop", o)).is_some())
        .count();
    assert_eq!(continued, 3);
    let delivered = home.inbox().list().unwrap().into_iter().filter(|n| n.state == ReceiptState::Delivered).count();
    assert_eq!(delivered, 15, "3 continuations of 5 notes each");
}

#[test]
fn two_sessions_never_see_each_others_notes() {
    let home = Home::new("cc");
    for s in ["a-session", "b-session"] {
        hook(&home, "SessionStart", s);
    }
    let a = home.send("a-session", "for a");
    let b = home.send("b-session", "for b");
    assert_eq!(ids_in(&context(&hook(&home, "PreToolUse", "b-session")).unwrap()), vec![b]);
    assert_eq!(ids_in(&context(&hook(&home, "PreToolUse", "a-session")).unwrap()), vec![a]);
}

#[test]
fn bad_input_gives_the_neutral_answer() {
    let home = Home::new("cc");
    let cases: Vec<&[u8]> = vec![
        b"",
        b"   \n",
        b"{not json",
        b"[1,2,3]",
        b"\"str\"",
        b"{\"session_id\": 5}",
        b"\xff\xfe\x00garbage",
        b"\xEF\xBB\xBF{\"hook_event_name\":\"PreToolUse\"}",
        b"{\"session_id\":\"s\",\"hook_event_name\":\"Stop\",\"tool_name\":\"Bash\"}",
    ];
    for e in ["SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd"] {
        for input in &cases {
            let out = run_raw(command(e, home.path(), &[]), input);
            assert_eq!(check_contract(e, &out), None, "{e} {:?}", String::from_utf8_lossy(input));
            assert!(out.stderr.is_empty(), "diagnostics go to the log, not stderr");
        }
    }
    // A BOM in front of a valid payload is fine.
    let mut bom = b"\xEF\xBB\xBF".to_vec();
    bom.extend(payload("PreToolUse", S).to_string().as_bytes());
    let id = home.send(S, "after a BOM");
    let out = run_raw(command("PreToolUse", home.path(), &[]), &bom);
    assert_eq!(ids_in(&context(&check_contract("PreToolUse", &out)).unwrap()), vec![id]);
}

#[test]
fn an_unusable_home_gives_the_neutral_answer() {
    let home = Home::new("cc");
    let file = home.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    for e in ["SessionStart", "PreToolUse", "Stop", "SessionEnd"] {
        assert_eq!(run(e, &file, &[], &payload(e, S)), None, "{e}");
    }
}

#[test]
fn files_are_private_even_under_a_permissive_umask() {
    let home = Home::new("cc");
    home.send(S, "private");
    let mut c = std::process::Command::new("sh");
    c.arg("-c").arg(format!("umask 000; exec '{}'", bin("SessionStart").display()));
    c.env_clear().env("PATH", std::env::var("PATH").unwrap()).env("PRELOOP_HOME", home.path());
    c.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    check_contract("SessionStart", &run_raw(c, payload("SessionStart", S).to_string().as_bytes()));
    for entry in preloop_testkit::support::walk(home.path()).into_iter().filter(|p| p != home.path()) {
        let mode = std::fs::symlink_metadata(&entry).unwrap().permissions().mode() & 0o777;
        let want = if entry.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode, want, "{}", entry.display());
    }
}

#[test]
fn cursor_payloads_touch_nothing() {
    let home = Home::new("cc");
    let id = home.send(S, "for claude only");
    let mut v = payload("PreToolUse", S);
    v["cursor_version"] = json!("2026.10.01-e373342");
    assert_eq!(run("PreToolUse", home.path(), &[], &v), None);
    assert_eq!(home.receipt(&id).state, ReceiptState::Pending);
    assert!(home.log().contains("outcome=stand_down"));
}

#[test]
fn a_block_past_the_carrier_limit_is_split_at_note_boundaries() {
    let home = Home::new("cc");
    let ids: Vec<String> = (0..3).map(|i| home.send(S, &format!("{i}{}", "x".repeat(3999)))).collect();
    let out = hook(&home, "SessionStart", S);
    let ctx = context(&out).unwrap();
    assert!(ctx.chars().count() <= 10_000, "Claude shows 10,000 characters inline");
    assert_eq!(ids_in(&ctx), ids[..2].to_vec(), "oldest first, whole notes only");
    assert_eq!(home.receipt(&ids[2]).state, ReceiptState::Claimed, "the rest waits in the spool, claimed");
    let out = hook(&home, "PreToolUse", S);
    assert_eq!(ids_in(&context(&out).unwrap()), vec![ids[2].clone()], "the next carrying hook takes the spool");
    for id in &ids {
        assert_eq!(home.receipt(id).state, ReceiptState::Delivered);
    }
}

/// A run started for a Preloop flow execution (`PRELOOP_EXECUTION_ID`)
/// records it in its session file, so `notes send --execution` finds it on
/// the local inbox; the transcript path the payload names is recorded too.
#[test]
fn the_flow_execution_and_the_transcript_are_recorded() {
    let home = Home::new("cc");
    let mut start = payload("SessionStart", S);
    start["transcript_path"] = json!("/tmp/transcripts/cc.jsonl");
    run("SessionStart", home.path(), &[("PRELOOP_EXECUTION_ID", "exec-42")], &start);
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join(format!("sessions/{S}.json"))).unwrap())
            .unwrap();
    assert_eq!(file["execution_id"], "exec-42");
    assert_eq!(file["transcript_path"], "/tmp/transcripts/cc.jsonl");
    // Over the server's 64 characters: not recorded.
    let other = "0e2a7a5c-8b1f-4c55-9a63-8a2d3b1c9f00";
    run("SessionStart", home.path(), &[("PRELOOP_EXECUTION_ID", &"x".repeat(65))], &payload("SessionStart", other));
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join(format!("sessions/{other}.json"))).unwrap())
            .unwrap();
    assert!(file.get("execution_id").is_none());
}
