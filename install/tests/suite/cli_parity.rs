//! The local inbox and the server refuse the same notes with the same line
//! (mission-audit D-6): the send rate limit (20 notes an hour per sender and
//! target, exit 1), the 4,096-character limit (counted in characters, not
//! bytes; exit 2), and a first prompt's secrets never reach `sessions list`.

use crate::common::*;
use preloop_shared::backend::Backend;
use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{NOTE_RATE_LIMIT_PER_HOUR, RATE_LIMIT_DETAIL, rate_limited};
use preloop_shared::wire::SessionStartRequest;
use preloop_testkit::{FakeServer, client};
use serde_json::json;
use std::path::PathBuf;
use std::process::Output;

/// One operator's machine, in local mode or against the fake server.
struct Machine {
    _t: TempDir,
    root: PathBuf,
    home: PathBuf,
    server: Option<FakeServer>,
}

impl Machine {
    fn local(tag: &str) -> Machine {
        let t = TempDir::new(tag);
        let root = t.path().to_path_buf();
        Machine { home: root.join("preloop"), root, _t: t, server: None }
    }

    fn server(tag: &str) -> Machine {
        Machine { server: Some(FakeServer::start()), ..Machine::local(tag) }
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut c = operator_cmd(&self.root, &self.home, args);
        if let Some(s) = &self.server {
            c.env("PRELOOP_URL", s.url())
                .env("PRELOOP_TOKEN", s.runtime_token())
                .env("PRELOOP_USER_TOKEN", s.user_token());
        }
        run_with_stdin(c, None)
    }

    /// A session the hooks registered, with this first prompt.
    fn start(&self, session: &str, first_prompt: Option<&str>) {
        match &self.server {
            None => {
                let req = SessionStartRequest {
                    session_id: session.into(),
                    source: Some("claude_code".into()),
                    cwd: Some("/work/demo".into()),
                    first_prompt: first_prompt.map(str::to_string),
                    hook_event_name: Some("UserPromptSubmit".into()),
                    ..Default::default()
                };
                LocalInbox::new(&self.home, 86_400).session_start(&req).unwrap();
            }
            Some(s) => {
                let r = client::post_json(
                    &format!("{}/agents/session-start", s.api_base()),
                    Some(&s.runtime_token()),
                    &json!({"session_id": session, "source": "claude_code", "cwd": "/w"}),
                )
                .unwrap();
                assert_eq!(r.status, 200, "{}", r.text());
            }
        }
    }

    fn send(&self, session: &str, text: &str) -> Output {
        self.run(&["notes", "send", "--session", session, text])
    }
}

/// The one stderr line of a refused send, after checking its exit code.
fn refusal(out: &Output, exit: i32) -> String {
    assert_eq!(code(out), exit, "{}", stderr(out));
    assert!(out.stdout.is_empty(), "nothing on stdout: {}", stdout(out));
    let err = stderr(out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    lines[0].to_string()
}

#[test]
fn the_21st_note_in_an_hour_is_refused_with_one_line_in_both_modes() {
    let mut lines = Vec::new();
    for m in [Machine::local("parity-rate"), Machine::server("parity-rate-srv")] {
        m.start("s-1", None);
        m.start("s-2", None);
        for i in 0..NOTE_RATE_LIMIT_PER_HOUR {
            let out = m.send("s-1", &format!("note {i}"));
            assert_eq!(code(&out), 0, "note {i}: {}", stderr(&out));
        }
        let line = refusal(&m.send("s-1", "one too many"), 1);
        // Never queued.
        let listed = m.run(&["notes", "list", "--session", "s-1", "-o", "id"]);
        assert_eq!(stdout(&listed).lines().count(), NOTE_RATE_LIMIT_PER_HOUR, "{}", stderr(&listed));
        // Another session is another target locally (on the server both
        // belong to one managed agent, which is the target there).
        if m.server.is_none() {
            assert_eq!(code(&m.send("s-2", "for s-2")), 0);
        }
        lines.push(line);
    }
    assert_eq!(lines[0], format!("preloop-hooks: {}", rate_limited(RATE_LIMIT_DETAIL)));
    assert_eq!(lines[0], lines[1], "the same line in local and server mode");
}

#[test]
fn a_note_is_4096_characters_not_bytes_in_both_modes() {
    let mut lines = Vec::new();
    for m in [Machine::local("parity-len"), Machine::server("parity-len-srv")] {
        m.start("s-1", None);
        // 4,096 four-byte characters: 16,384 bytes, and accepted.
        let out = m.send("s-1", &"😀".repeat(4096));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        lines.push(refusal(&m.send("s-1", &"😀".repeat(4097)), 2));
    }
    assert_eq!(lines[0], "preloop-hooks: a note is 1-4096 characters; this one has 4097");
    assert_eq!(lines[0], lines[1], "the same line in local and server mode");
}

#[test]
fn a_secret_in_a_first_prompt_never_appears_in_sessions_list() {
    let m = Machine::local("parity-title");
    m.start("s-1", Some("Fix the flaky test with key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx and password=hunter2"));
    for args in [&["sessions", "list", "--json"][..], &["sessions", "list", "--wide"][..]] {
        let out = m.run(args);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("sk-ant-[redacted]"), "{args:?}: {text}");
        assert!(!text.contains("AbCdEf") && !text.contains("hunter2"), "{args:?}: {text}");
    }
}
