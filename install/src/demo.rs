//! `demo`: a scripted Claude Code session against a throwaway local inbox,
//! through the real hook binaries, showing at each step what Claude Code
//! would send the hook and what the hook answers; the operator's steps run
//! the real `preloop-hooks` commands and show exactly what they print.
//! Every line fits in 100 columns.

use crate::output;
use crate::util;
use preloop_shared::{Error, Result, fsutil};
use serde_json::{Value, json};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const EVENTS: [(&str, &str); 4] = [
    ("SessionStart", "preloop-claude-code-session-start"),
    ("PreToolUse", "preloop-claude-code-pre-tool-use"),
    ("Stop", "preloop-claude-code-stop"),
    ("SessionEnd", "preloop-claude-code-session-end"),
];

/// The widest line the demo prints.
pub const WIDTH: usize = 100;

struct Demo {
    /// The executable that serves every hook (started under each hook's name).
    exe: PathBuf,
    cli: PathBuf,
    home: PathBuf,
    session: String,
    /// The session's ID as `sessions list` printed it, which the operator
    /// types (newcomer 4, P17); the full id until the list is shown.
    typed: std::cell::RefCell<String>,
    cwd: String,
    /// The framing sentence was shown once already.
    framing_shown: std::cell::Cell<bool>,
}

/// Print `text`, every line word-wrapped to [`WIDTH`] columns with `first`
/// before the first line and `rest` before continuations.
fn say(first: &str, rest: &str, text: &str) -> Result<()> {
    for (i, l) in text.lines().enumerate() {
        // Keep a line's own indentation (pretty JSON, tables).
        let lead: String = l.chars().take_while(|c| *c == ' ').collect();
        let l = &l[lead.len()..];
        let mut prefix = format!("{}{lead}", if i == 0 { first } else { rest });
        let rest = format!("{rest}{lead}");
        let rest = rest.as_str();
        let mut cur = String::new();
        for word in l.split(' ') {
            let room = WIDTH.saturating_sub(prefix.chars().count());
            if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > room {
                output::line(&format!("{prefix}{cur}"))?;
                prefix = rest.to_string();
                cur.clear();
            }
            // A single word longer than the room is cut into pieces.
            let mut w = word.to_string();
            while w.chars().count() > room.max(10) && cur.is_empty() {
                let head: String = w.chars().take(room.max(10)).collect();
                output::line(&format!("{prefix}{head}"))?;
                prefix = rest.to_string();
                w = w.chars().skip(room.max(10)).collect();
            }
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(&w);
        }
        output::line(format!("{prefix}{cur}").trim_end())?;
    }
    Ok(())
}

fn heading(n: usize, title: &str) -> Result<()> {
    output::line("")?;
    output::line(&format!("── {n}. {title} ──"))
}

impl Demo {
    fn hook(&self, event: &str, extra: Value) -> Result<Option<Value>> {
        let Some(name) = EVENTS.iter().find(|(e, _)| *e == event).map(|(_, b)| *b) else {
            return Err(Error::NotFound(format!("the demo has no hook command for {event}")));
        };
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
        say("  ", "  ", &format!("Claude Code runs the hook {name} with this JSON on stdin:"))?;
        say("    ", "    ", &serde_json::to_string_pretty(&input).unwrap_or_default())?;
        // What the hook command (a link to the executable) runs: the
        // executable, started under the hook's name.
        let mut child = Command::new(&self.exe)
            .arg0(name)
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
            .map_err(|e| Error::io(format!("run {name}"), e))?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(input.to_string().as_bytes());
        }
        let out = wait_output(child, Duration::from_secs(20))
            .ok_or_else(|| Error::Refused(format!("{name} did not answer within 20 s")))?;
        let text = out.trim();
        if text.is_empty() {
            say("  ", "  ", "The hook answers nothing (exit 0): Claude Code carries on as if there were no hook.")?;
            return Ok(None);
        }
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Error::Protocol { route: "demo", detail: format!("hook printed non-JSON: {e}") })?;
        let ctx = v.pointer("/hookSpecificOutput/additionalContext").and_then(Value::as_str).map(str::to_string);
        let mut shown = v.clone();
        if ctx.is_some() {
            shown["hookSpecificOutput"]["additionalContext"] = json!("<the block below>");
        }
        say("  ", "  ", "The hook answers on stdout:")?;
        say("    ", "    ", &serde_json::to_string_pretty(&shown).unwrap_or_default())?;
        if let Some(c) = ctx {
            say("  ", "  ", "additionalContext, which Claude Code adds to the model's next request:")?;
            let mut lines: Vec<String> = c.lines().map(str::to_string).collect();
            if self.framing_shown.replace(true) && lines.len() > 1 {
                lines[1] = "(the same framing sentence as above)".into();
            }
            say("    │ ", "    │   ", &lines.join("\n"))?;
        }
        Ok(Some(v))
    }

    /// Run the real `preloop-hooks` with these arguments against the demo's
    /// home and show the command and exactly what it prints.
    fn cli(&self, args: &[&str]) -> Result<String> {
        let shown: Vec<String> =
            args.iter().map(|a| if a.contains(' ') { format!("{a:?}") } else { a.to_string() }).collect();
        say("  $ ", "      ", &format!("preloop-hooks {}", shown.join(" ")))?;
        let out = Command::new(&self.cli)
            .args(args)
            .env("PRELOOP_HOME", &self.home)
            .env("USER", "demo-operator")
            .env_remove("PRELOOP_URL")
            .env_remove("PRELOOP_TOKEN")
            .env_remove("PRELOOP_USER_TOKEN")
            .env_remove("PRELOOP_PARENT_SESSION_ID")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::io(format!("run {}", self.cli.display()), e))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        for l in text.lines() {
            // Tables are shown as printed, cut at the width rather than wrapped.
            let l = format!("  {l}");
            output::line(&if l.chars().count() > WIDTH {
                format!("{}…", l.chars().take(WIDTH - 1).collect::<String>())
            } else {
                l
            })?;
        }
        if !out.status.success() {
            return Err(Error::Refused(format!(
                "`preloop-hooks {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(text)
    }

    fn send(&self, text: &str) -> Result<String> {
        let typed = self.typed.borrow().clone();
        let out = self.cli(&["notes", "send", "--session", &typed, text])?;
        out.split_whitespace()
            .next()
            .map(str::to_string)
            .ok_or_else(|| Error::Protocol { route: "demo", detail: "notes send printed no note id".into() })
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

pub fn run(bin_dir: Option<&Path>, keep: bool) -> Result<()> {
    let cli = std::env::current_exe().map_err(|e| Error::io("find preloop-hooks itself", e))?;
    let exe = match bin_dir {
        Some(d) => d.join(crate::names::CLI_NAME),
        None => cli.clone(),
    };
    if !util::is_executable(&exe) {
        return Err(Error::Config(format!(
            "the demo runs the real Claude Code hooks, which {} serves, and it is missing: build it with `cargo build` (or pass --bin-dir)",
            exe.display()
        )));
    }
    let home = std::env::temp_dir().join(format!("preloop-demo-{}", fsutil::note_id()));
    fsutil::private_dir(&home)?;
    let session = format!("demo-{}", &fsutil::uuid_v4()[..8]);
    let demo = Demo {
        exe,
        cli,
        typed: std::cell::RefCell::new(session.clone()),
        session,
        cwd: std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "/".into()),
        home: home.clone(),
        framing_shown: std::cell::Cell::new(false),
    };
    let result = script(&demo);
    if keep {
        output::line("")?;
        say("", "", &format!("Kept the demo's state in {}. Look around with:", home.display()))?;
        say("  ", "    ", &format!("PRELOOP_HOME={} preloop-hooks sessions list", home.display()))?;
    } else {
        let _ = std::fs::remove_dir_all(&home);
    }
    result
}

fn script(d: &Demo) -> Result<()> {
    say(
        "",
        "",
        "You are watching a coding agent work and want to tell it something without stopping it: \
         preloop-hooks carries your note into the agent's next turn and tells you when it landed.",
    )?;
    output::line("")?;
    say(
        "",
        "",
        &format!(
            "This demo plays one Claude Code session. Claude Code runs a \"hook\" (a small program) at \
             each step of its loop: SessionStart, PreToolUse before every tool call, Stop when a turn \
             ends, SessionEnd. Ours are all one executable, {}, run under each hook's name (install makes \
             the names links to it). Notes wait in a local inbox (plain files under \
             PRELOOP_HOME={}, removed afterwards; a Preloop server works the same way). No model is \
             involved.",
            d.exe.display(),
            d.home.display()
        ),
    )?;

    heading(1, "The session starts")?;
    d.hook("SessionStart", json!({"source": "startup"}))?;
    say("  ", "  ", "The hook registered the session. The operator finds it:")?;
    let listed = d.cli(&["sessions", "list"])?;
    // The operator types the ID as the list prints it (a unique start).
    if let Some(id) =
        listed.lines().filter_map(|l| l.split_whitespace().next()).find(|w| w.len() >= 4 && d.session.starts_with(w))
    {
        d.typed.replace(id.to_string());
    }
    say("  ", "  ", "Every command takes the ID as this list prints it, as git takes a commit's start.")?;

    heading(2, "Mid-run, the operator sends a note")?;
    let first = d.send("Use the staging database, not production.")?;

    heading(3, "The agent calls a tool: PreToolUse carries the note")?;
    d.hook(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": "psql -c 'select 1'"}, "tool_use_id": "toolu_demo_1"}),
    )?;
    say(
        "  → ",
        "    ",
        "Claude Code runs the tool (the hook made no permission decision) and adds the block to the \
         model's next request, labelled \"PreToolUse:Bash hook additional context:\". The note's receipt:",
    )?;
    d.cli(&["notes", "status", &first])?;

    heading(4, "After the last tool call, a late note arrives")?;
    let late = d.send("Before you finish: add a line to CHANGELOG.md.")?;

    heading(5, "The turn ends: Stop carries the late note")?;
    d.hook("Stop", json!({"stop_hook_active": false, "last_assistant_message": "Done: the query works."}))?;
    say(
        "  → ",
        "    ",
        "Claude Code does not end the turn: the model gets one more request with the block (\"Stop hook \
         additional context:\") and answers it. At most 3 such continuations per session.",
    )?;
    d.cli(&["notes", "status", &late])?;

    heading(6, "The continued turn ends")?;
    d.hook("Stop", json!({"stop_hook_active": true, "last_assistant_message": "Added the changelog line."}))?;
    say("  → ", "    ", "Nothing is pending, so the turn really ends.")?;

    heading(7, "A note nobody picks up, then the session ends")?;
    d.send("Also bump the version.")?;
    d.hook("SessionEnd", json!({"reason": "prompt_input_exit"}))?;
    say(
        "  → ",
        "    ",
        "The session is over. Its waiting note is marked undeliverable (session_ended) instead of \
         expiring silently a day later, so the sender knows.",
    )?;

    heading(8, "What the operator sees")?;
    let typed = d.typed.borrow().clone();
    d.cli(&["notes", "list", "--session", &typed])?;
    output::line("")?;
    let names: Vec<&str> = preloop_shared::Harness::all().map(|h| h.name()).collect();
    let harnesses = match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    };
    say(
        "",
        "",
        &format!(
            "Next: `preloop-hooks install` wires these hooks into {harnesses}; \
             `preloop-hooks doctor` checks the setup; `preloop-hooks --help` lists every command."
        ),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn wrap_stays_within_the_width() {
        // `say` writes to stdout; here only the width rule is checked on its own.
        let long = "word ".repeat(60);
        let mut lines = Vec::new();
        let mut cur = String::new();
        for w in long.split(' ') {
            if !cur.is_empty() && cur.len() + 1 + w.len() > super::WIDTH - 2 {
                lines.push(cur.clone());
                cur.clear();
            }
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(w);
        }
        assert!(lines.iter().all(|l| l.len() <= super::WIDTH));
    }
}
