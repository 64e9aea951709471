//! `demo`: a scripted Claude Code session against a throwaway local inbox,
//! through the real hook binaries, showing at each step what Claude Code
//! would send the hook and what the hook answers.

use crate::notes;
use crate::util;
use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{Author, SendRequest, Target};
use preloop_shared::{Error, Result, fsutil};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const EVENTS: [(&str, &str); 4] = [
    ("SessionStart", "preloop-claude-code-session-start"),
    ("PreToolUse", "preloop-claude-code-pre-tool-use"),
    ("Stop", "preloop-claude-code-stop"),
    ("SessionEnd", "preloop-claude-code-session-end"),
];

struct Demo {
    bin_dir: PathBuf,
    home: PathBuf,
    session: String,
    cwd: String,
    inbox: LocalInbox,
}

fn heading(n: usize, title: &str) {
    println!();
    println!("── {n}. {title} ──");
}

fn indent(text: &str, by: &str) -> String {
    text.lines().map(|l| format!("{by}{l}")).collect::<Vec<_>>().join("\n")
}

impl Demo {
    fn hook(&self, event: &str, extra: Value) -> Result<Option<Value>> {
        let bin = EVENTS.iter().find(|(e, _)| *e == event).map(|(_, b)| self.bin_dir.join(b)).expect("known event");
        let mut input = json!({
            "session_id": self.session,
            "transcript_path": format!("/tmp/demo/{}.jsonl", self.session),
            "cwd": self.cwd,
            "hook_event_name": event,
        });
        if let (Some(o), Some(e)) = (input.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                o.insert(k.clone(), v.clone());
            }
        }
        println!("  Claude Code runs {} with stdin:", bin.file_name().and_then(|n| n.to_str()).unwrap_or("?"));
        println!("{}", indent(&serde_json::to_string(&input).unwrap_or_default(), "    "));
        let mut child = Command::new(&bin)
            .env("PRELOOP_HOME", &self.home)
            .env_remove("PRELOOP_URL")
            .env_remove("PRELOOP_TOKEN")
            .env_remove("PRELOOP_USER_TOKEN")
            .env_remove("CLAUDE_ENV_FILE")
            .env_remove("CLAUDE_CODE_ENTRYPOINT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error::io(format!("run {}", bin.display()), e))?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(input.to_string().as_bytes());
        }
        let out = wait_output(child, Duration::from_secs(20))
            .ok_or_else(|| Error::Refused(format!("{} did not answer within 20 s", bin.display())))?;
        let text = out.trim();
        if text.is_empty() {
            println!("  the hook answers: nothing (exit 0): Claude Code carries on as if there were no hook");
            return Ok(None);
        }
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Error::Protocol { route: "demo", detail: format!("hook printed non-JSON: {e}") })?;
        let ctx = v.pointer("/hookSpecificOutput/additionalContext").and_then(Value::as_str).map(str::to_string);
        let mut shown = v.clone();
        if ctx.is_some() {
            shown["hookSpecificOutput"]["additionalContext"] = json!("<the block below>");
        }
        println!("  the hook answers (stdout):");
        println!("{}", indent(&serde_json::to_string_pretty(&shown).unwrap_or_default(), "    "));
        if let Some(c) = ctx {
            println!("  additionalContext, verbatim:");
            println!("{}", indent(&c, "    │ "));
        }
        Ok(Some(v))
    }

    fn send(&self, text: &str) -> Result<String> {
        println!("  $ preloop-hooks notes send --session {} {text:?}", self.session);
        let r = self.inbox.send(&SendRequest {
            text: text.into(),
            target: Target::Session(self.session.clone()),
            next_session: false,
            expires_in_secs: None,
            author: Author {
                display: Some("Demo Operator".into()),
                auth_method: Some("local".into()),
                ..Author::default()
            },
        })?;
        println!("  {} pending for session {}", r.note_id, self.session);
        Ok(r.note_id)
    }

    fn receipt(&self, id: &str) -> Result<()> {
        let r = self.inbox.status(id)?;
        let how = match (r.delivery_event.as_deref(), r.undeliverable_reason.as_deref()) {
            (_, Some(why)) => format!(" ({why})"),
            (Some(ev), None) if r.is_delivered() => format!(" via {ev}"),
            _ => String::new(),
        };
        println!("  $ preloop-hooks notes status {id}   →   {}{how}", r.state);
        Ok(())
    }
}

fn wait_output(mut child: std::process::Child, timeout: Duration) -> Option<String> {
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return reader.join().ok(),
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

pub fn run(bin_dir: &Path, keep: bool) -> Result<()> {
    let missing: Vec<&str> =
        EVENTS.iter().map(|(_, b)| *b).filter(|b| !util::is_executable(&bin_dir.join(b))).collect();
    if !missing.is_empty() {
        return Err(Error::Config(format!(
            "the demo runs the real Claude Code hook binaries, and {} is missing in {}: build them with `cargo build --workspace` (or pass --bin-dir)",
            missing.join(", "),
            bin_dir.display()
        )));
    }
    let home = std::env::temp_dir().join(format!("preloop-demo-{}", fsutil::note_id()));
    fsutil::private_dir(&home)?;
    let demo = Demo {
        bin_dir: bin_dir.to_path_buf(),
        session: format!("demo-{}", &fsutil::uuid_v4()[..8]),
        cwd: std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "/".into()),
        inbox: LocalInbox::new(&home, 86_400),
        home: home.clone(),
    };
    let result = script(&demo);
    if keep {
        println!();
        println!(
            "kept the demo's state in {} (PRELOOP_HOME={} preloop-hooks sessions list)",
            home.display(),
            home.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&home);
    }
    result
}

fn script(d: &Demo) -> Result<()> {
    println!("preloop-hooks demo: one scripted Claude Code session, run through the real hook binaries in");
    println!("{}, against a throwaway local inbox (PRELOOP_HOME={}).", d.bin_dir.display(), d.home.display());
    println!("Nothing outside that directory is read or written; no server and no model are involved.");

    heading(1, "The session starts");
    d.hook("SessionStart", json!({"source": "startup"}))?;
    println!("  → the hook registered the session; `preloop-hooks sessions list` now shows it:");
    for r in notes::session_rows(&d.home) {
        println!("    {}  {}  {}", r.external_session_id.unwrap_or_default(), r.harness.unwrap_or_default(), r.state);
    }

    heading(2, "Mid-run, the operator sends a note");
    let first = d.send("Use the staging database, not production.")?;

    heading(3, "The agent calls a tool: PreToolUse carries the note");
    d.hook(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": "psql -c 'select 1'"}, "tool_use_id": "toolu_demo_1"}),
    )?;
    println!("  → Claude Code runs the tool (the hook made no permission decision) and adds the block to the");
    println!("    model's next request, labelled \"PreToolUse:Bash hook additional context:\".");
    d.receipt(&first)?;

    heading(4, "After the last tool call, a late note arrives");
    let late = d.send("Before you finish: add a line to CHANGELOG.md.")?;

    heading(5, "The turn ends: Stop rescues the late note");
    d.hook("Stop", json!({"stop_hook_active": false, "last_assistant_message": "Done: the query works."}))?;
    println!("  → Claude Code does not end the turn: the model gets one more request with the block, labelled");
    println!("    \"Stop hook additional context:\", and answers it.");
    d.receipt(&late)?;

    heading(6, "The continued turn ends");
    d.hook("Stop", json!({"stop_hook_active": true, "last_assistant_message": "Added the changelog line."}))?;
    println!("  → nothing pending, so the turn really ends.");

    heading(7, "A note nobody picks up, then the session ends");
    let lost = d.send("Also bump the version.")?;
    d.hook("SessionEnd", json!({"reason": "prompt_input_exit"}))?;
    println!("  → the session is over; its waiting note is marked undeliverable, so the sender knows.");
    d.receipt(&lost)?;

    heading(8, "What the operator sees");
    println!("  $ preloop-hooks notes list --session {}", d.session);
    let notes = d.inbox.list()?;
    let rows: Vec<Vec<String>> = notes
        .iter()
        .map(|n| {
            vec![
                format!("  {}", n.note_id),
                n.state.clone(),
                n.delivery_event.clone().or(n.undeliverable_reason.clone()).unwrap_or_else(|| "-".into()),
                notes::one_line(&n.text, 50),
            ]
        })
        .collect();
    util::print_table(&["  ID", "STATE", "EVENT/REASON", "TEXT"], &rows);
    println!();
    println!("Next: `preloop-hooks install` wires these hooks into Claude Code (and Codex, Cursor), and");
    println!("`preloop-hooks doctor` checks the setup. See install/README.md.");
    Ok(())
}
