//! Lineage by process ancestry (docs/guarantees.md, "Lineage"), with the
//! real hook commands in real process trees and the operator CLI: a
//! conductor whose harness exports nothing (Codex, Gemini CLI) still finds
//! the workers its shell started with `notes send --children all` and
//! `sessions list --parent`, on the local inbox and on a server;
//! `PRELOOP_PARENT_SESSION_ID` wins where it arrived; a worker whose shell
//! exited before its first hook ran is reparented and has no parent.
//!
//! The test process plays the conductor's harness (its hook commands are
//! its children); a worker's harness is `flock`, a program that is not a
//! shell and stays the parent of the command it runs, started from `sh -c`
//! (the conductor's shell tool).

use crate::common::*;
use preloop_testkit::support::{Run, fixture_for, run_cmd, wait_for};
use preloop_testkit::{FakeServer, commands};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

impl World {
    fn hook_env(&self, cmd: &mut Command, extra: &[(&str, &str)]) {
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.root.join("home"))
            .env("PRELOOP_HOME", &self.home)
            .envs(self.env.iter().cloned())
            .envs(extra.iter().copied());
    }

    /// A hook command run by the test process (the conductor's harness).
    fn hook(&self, name: &str, payload: &Value, extra: &[(&str, &str)]) -> Run {
        let mut c = Command::new(commands::hook(name));
        self.hook_env(&mut c, extra);
        let run = run_cmd(c, payload.to_string().as_bytes(), Duration::from_secs(30));
        run.assert_exit_0(name);
        run
    }

    /// A hook command run by a worker harness (`flock`) that the
    /// conductor's shell started: `sh -c 'flock <lock> <hook> <payload; true'`.
    /// `shell` replaces that line (`{run}` stands for the flock command).
    fn worker_hook(&self, name: &str, payload: &Value, shell: &str, extra: &[(&str, &str)]) {
        let tag = preloop_shared::fsutil::note_id();
        let file = self.root.join(format!("payload-{tag}.json"));
        write(&file, &payload.to_string());
        let run =
            format!("flock {} {} <{}", q(&self.root.join(format!("lock-{tag}"))), q(&commands::hook(name)), q(&file));
        let mut c = Command::new("sh");
        c.arg("-c").arg(shell.replace("{run}", &run));
        self.hook_env(&mut c, extra);
        run_cmd(c, b"", Duration::from_secs(30)).assert_exit_0("the worker's shell");
    }

    fn cli(&self, args: &[&str]) -> Value {
        self.json(args)
    }

    fn session(&self, id: &str) -> Value {
        serde_json::from_str(&read(&self.home.join(format!("sessions/{id}.json")))).unwrap()
    }
}

fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

fn sessions_of(v: &Value, key: &str, field: &str) -> Vec<String> {
    let mut out: Vec<String> =
        v[key].as_array().unwrap().iter().map(|s| s[field].as_str().unwrap().to_string()).collect();
    out.sort();
    out
}

/// A Codex conductor; two Claude Code workers and a Gemini CLI worker
/// started from its shell; `notes send --children all` and `sessions list
/// --parent` see all three, and nothing else.
fn conductor_finds_the_workers_its_shell_started(w: &World) {
    let cond = unique("cond");
    w.hook("preloop-codex-session-start", &fixture_for("codex-0.169.0", "SessionStart.json", &cond), &[]);
    let cond_file = w.session(&cond);
    let cond_rt = cond_file["runtime_session_id"].as_str().unwrap().to_string();
    assert_eq!(
        cond_file["harness_process"]["pid"].as_u64(),
        Some(std::process::id() as u64),
        "the conductor's harness process is the test process: {cond_file}"
    );
    let workers = [unique("kid-a"), unique("kid-b"), unique("kid-g")];
    for kid in &workers[..2] {
        let p = fixture_for("claude-code-2.1.328", "SessionStart.json", kid);
        w.worker_hook("preloop-claude-code-session-start", &p, "{run}; true", &[]);
    }
    let p = fixture_for("gemini-cli-0.61.0", "SessionStart.json", &workers[2]);
    w.worker_hook("preloop-gemini-session-start", &p, "{run}; true", &[]);
    for kid in &workers {
        assert_eq!(w.session(kid)["parent_session_id"].as_str(), Some(cond_rt.as_str()), "{kid}");
    }
    let mut want = workers.to_vec();
    want.sort();
    let listed = w.cli(&["sessions", "list", "--parent", &cond, "--json"]);
    assert_eq!(sessions_of(&listed, "sessions", "id"), want, "{listed}");
    // The CLI started by the conductor's harness (here: the test process)
    // with no --parent and no PRELOOP_PARENT_SESSION_ID finds its run the
    // same way.
    let sent = w.cli(&["notes", "send", "--children", "all", "--json", "Wrap up"]);
    assert_eq!(sessions_of(&sent, "notes", "session"), want, "{sent}");
    let sent = w.cli(&["notes", "send", "--children", "all", "--parent", &cond, "--json", "Wrap up, again"]);
    assert_eq!(sessions_of(&sent, "notes", "session"), want, "{sent}");
    // A session the test process started itself is not a child: it is the
    // conductor's own harness, not one its shell started.
    let sibling = unique("sibling");
    w.hook("preloop-codex-session-start", &fixture_for("codex-0.169.0", "SessionStart.json", &sibling), &[]);
    assert!(w.session(&sibling).get("parent_session_id").is_none());
}

fn unique(tag: &str) -> String {
    format!("{tag}-{}", preloop_shared::fsutil::note_id())
}

#[test]
fn local_conductor_of_any_harness_finds_the_workers_its_shell_started() {
    conductor_finds_the_workers_its_shell_started(&World::new("lineage-local", None));
}

#[test]
fn server_conductor_of_any_harness_finds_the_workers_its_shell_started() {
    let s = FakeServer::start();
    let w = World::new("lineage-server", Some(&s));
    conductor_finds_the_workers_its_shell_started(&w);
    // The parent went to the server at registration, as the exported variable does.
    let starts: Vec<Value> = s.hook_calls().into_iter().filter(|(r, _)| r == "session-start").map(|(_, b)| b).collect();
    assert_eq!(starts.iter().filter(|b| b.get("parent_session_id").is_some()).count(), 3, "{starts:?}");
}

#[test]
fn the_exported_variable_wins_over_ancestry() {
    let w = World::new("lineage-env", None);
    let cond = unique("cond");
    w.hook("preloop-codex-session-start", &fixture_for("codex-0.169.0", "SessionStart.json", &cond), &[]);
    let other = unique("other");
    w.hook("preloop-codex-session-start", &fixture_for("codex-0.169.0", "SessionStart.json", &other), &[]);
    let other_rt = w.session(&other)["runtime_session_id"].as_str().unwrap().to_string();
    let kid = unique("kid");
    let p = fixture_for("claude-code-2.1.328", "SessionStart.json", &kid);
    w.worker_hook("preloop-claude-code-session-start", &p, "{run}; true", &[("PRELOOP_PARENT_SESSION_ID", &other_rt)]);
    assert_eq!(w.session(&kid)["parent_session_id"].as_str(), Some(other_rt.as_str()));
}

#[test]
fn a_worker_whose_shell_exited_first_is_reparented_and_has_no_parent() {
    let w = World::new("lineage-orphan", None);
    let cond = unique("cond");
    w.hook("preloop-codex-session-start", &fixture_for("codex-0.169.0", "SessionStart.json", &cond), &[]);
    // `( sleep; run ) &`: the shell returns at once; the worker's first hook
    // runs after its shell is gone, under init (or a subreaper).
    let kid = unique("kid");
    let p = fixture_for("claude-code-2.1.328", "SessionStart.json", &kid);
    w.worker_hook("preloop-claude-code-session-start", &p, "(sleep 0.3; {run}) >/dev/null 2>&1 &", &[]);
    let f = wait_for(Duration::from_secs(20), "the orphaned worker's session file", || {
        std::fs::read_to_string(w.home.join(format!("sessions/{kid}.json"))).ok()
    });
    let f: Value = serde_json::from_str(&f).unwrap();
    assert!(f.get("parent_session_id").is_none(), "{f}");
    // `nohup … &` while the shell is still there keeps it (the seeds' recipe:
    // the shell sleeps while the worker starts).
    let kid = unique("kid");
    let p = fixture_for("claude-code-2.1.328", "SessionStart.json", &kid);
    w.worker_hook("preloop-claude-code-session-start", &p, "nohup {run} >/dev/null 2>&1 & wait", &[]);
    assert!(w.session(&kid).get("parent_session_id").is_some());
}

/// SessionEnd forgets the conductor's process: a worker started after it
/// ended (by a harness that stays alive) is nobody's child.
#[test]
fn an_ended_conductor_is_nobodys_parent() {
    let w = World::new("lineage-ended", None);
    let cond = unique("cond");
    w.hook("preloop-codex-session-start", &fixture_for("codex-0.169.0", "SessionStart.json", &cond), &[]);
    assert_eq!(std::fs::read_dir(w.home.join("procs")).unwrap().count(), 1);
    w.hook("preloop-codex-session-end", &fixture_for("codex-0.169.0", "SessionEnd.json", &cond), &[]);
    // (The SessionEnd hook may finish in a detached worker.)
    wait_for(Duration::from_secs(10), "the index entry to go", || {
        (std::fs::read_dir(w.home.join("procs")).unwrap().count() == 0).then_some(())
    });
    let kid = unique("kid");
    let p = fixture_for("claude-code-2.1.328", "SessionStart.json", &kid);
    w.worker_hook("preloop-claude-code-session-start", &p, "{run}; true", &[]);
    assert!(w.session(&kid).get("parent_session_id").is_none());
}
