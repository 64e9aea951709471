//! What reaches the operator's terminal (issue 23, red-team 3): every field a
//! server sends is shown terminal-safe in every command (N5), `--json` keeps
//! it exactly; a URL's credentials are never shown (N8); `sessions attach`
//! gives the terminal back on SIGQUIT, SIGHUP and SIGTSTP, and takes it
//! again on SIGCONT.

use crate::common::*;
use preloop_shared::backend::Backend;
use preloop_testkit::stub_server::{StubResponse, StubServer};
use serde_json::{Value, json};
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const RID: &str = "11111111-2222-4333-8444-555555555555";
/// A window title, a screen clear, a colour, an OSC 52 clipboard write, a C1
/// CSI and a bidi override: what a hostile server puts in every field.
const EVIL: &str = "\u{1b}]0;PWNED-TITLE\u{7}\u{1b}[2J\u{1b}[31m\u{1b}]52;c;ZWNobyBwd25lZA==\u{7}\u{9b}1m\u{202e}";

fn has_raw_control(text: &str) -> bool {
    text.chars().any(|c| c == '\u{1b}' || c == '\u{7}' || c == '\u{9b}' || c == '\u{202e}')
}

/// Red-team 3's `opsrv.py`: every operator route answers, every string field
/// carries [`EVIL`]; the session has ended (so `attach` ends by itself); an
/// unknown route and a cancel answer with an error whose detail carries it.
fn hostile_server() -> StubServer {
    StubServer::start(|req| {
        let now = preloop_shared::time::Timestamp::now().to_iso_z();
        let e = EVIL;
        let receipt = |i: u32| {
            json!({"note_id": format!("n{i}{e}"), "state": format!("delivered{e}"), "text": format!("hello {e}"),
                   "runtime_session_id": RID, "external_session_id": format!("ext1{e}"), "created_at": now,
                   "author": {"display": format!("op{e}"), "auth_method": format!("jwt{e}")},
                   "delivery_event": format!("pre_tool_use{e}"), "harness": format!("claude_code{e}")})
        };
        let session = json!({"id": RID, "alias": format!("al{e}"), "title": format!("title{e}"), "started_at": now,
            "last_activity_at": now, "ended_at": now, "external_session_id": format!("ext1{e}"),
            "session_source_id": format!("ext1{e}"), "agent_kind": format!("claude_code{e}"),
            "agent_name": format!("ag{e}"), "status": format!("ended{e}")});
        let path = req.path.split('?').next().unwrap_or("").to_string();
        let ok = |v: Value| StubResponse::json(200, v);
        match (req.method.as_str(), path.as_str()) {
            (_, p) if p.ends_with("/health") => ok(json!({"status": "ok"})),
            (_, p) if p.starts_with("/api/v1/ws/") => StubResponse::json(404, json!({"detail": format!("no{e}")})),
            (_, p) if p.ends_with("/activity") => ok(json!({"items": [
                {"activity_id": "a1", "activity_type": "tool_call", "timestamp": now, "tool_name": format!("Bash{e}"),
                 "status": format!("ok{e}"), "metadata": {"arguments_summary": {format!("cmd{e}"): 3}}},
                {"activity_id": "a2", "activity_type": format!("odd{e}"), "timestamp": now, "summary": format!("s{e}")}]})),
            (_, p) if p.starts_with("/api/v1/runtime-sessions/") => ok(json!({"session": session})),
            (_, p) if p.starts_with("/api/v1/runtime-sessions") => {
                ok(json!({"items": [session], "total": 1, "has_more": false}))
            }
            ("POST", p) if p.ends_with("/cancel") => {
                StubResponse::json(409, json!({"detail": format!("already delivered{e}")}))
            }
            ("POST", p) if p.starts_with("/api/v1/operator-notes") => ok(json!({"notes": [receipt(3)]})),
            (_, p) if p.starts_with("/api/v1/operator-notes/") => ok(receipt(9)),
            (_, p) if p.starts_with("/api/v1/operator-notes") => ok(json!({"notes": [receipt(1), receipt(2)]})),
            (_, p) if p.starts_with("/api/v1/agents") => ok(json!({"items": []})),
            _ => StubResponse::json(404, json!({"detail": format!("nope{e}")})),
        }
    })
}

struct Home {
    _t: TempDir,
    root: PathBuf,
    home: PathBuf,
    url: String,
}

impl Home {
    fn new(tag: &str, url: String) -> Home {
        let t = TempDir::new(tag);
        let root = t.path().to_path_buf();
        Home { home: root.join("preloop"), root, _t: t, url }
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = operator_cmd(&self.root, &self.home, args);
        c.env("PRELOOP_URL", &self.url)
            .env("PRELOOP_TOKEN", "agt_probe_runtime_0123")
            .env("PRELOOP_USER_TOKEN", "usr_probe_user_0123456789");
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        run_with_stdin(self.cmd(args), None)
    }
}

/// N5: `note_id`, `state`, a timeline item's `status`, `agent_kind`, the
/// activity type, error details, ... are escaped in every command, as note
/// text always was; `--json` carries them exactly.
#[test]
fn n5_every_server_field_is_terminal_safe() {
    let s = hostile_server();
    let h = Home::new("n5", s.url());
    let id = format!("n9{EVIL}");
    let runs: Vec<Vec<&str>> = vec![
        vec!["notes", "send", "--session", RID, "hi"],
        vec!["notes", "list", "--session", RID],
        vec!["notes", "list", "--session", RID, "--wide"],
        vec!["notes", "status", "0123456789abcdef"],
        vec!["notes", "cancel", "0123456789abcdef"],
        vec!["sessions", "list"],
        vec!["sessions", "list", "--wide"],
        vec!["sessions", "attach", RID, "--no-input", "--history", "5"],
        vec!["doctor", "--no-codex-query"],
    ];
    for args in &runs {
        let o = h.run(args);
        let (out, err) = (stdout(&o), stderr(&o));
        assert!(!has_raw_control(&out), "{args:?} stdout: {out:?}");
        assert!(!has_raw_control(&err), "{args:?} stderr: {err:?}");
        assert!(!out.contains("panicked") && !err.contains("panicked"), "{args:?}: {err}");
    }
    // The fields really were printed, escaped (a run that printed nothing would pass above).
    let list = stdout(&h.run(&["notes", "list", "--session", RID]));
    assert!(list.contains("n1\\e]0;PWNED-TITLE\\u{7}\\e[2J") && list.contains("delivered\\e]0;"), "{list}");
    let attach = stdout(&h.run(&["sessions", "attach", RID, "--no-input", "--history", "5"]));
    assert!(attach.contains("ok\\e]0;PWNED-TITLE") && attach.contains("\\u{9b}1m\\u{202e}"), "{attach}");
    let sessions = stdout(&h.run(&["sessions", "list"]));
    assert!(sessions.contains("claude_code\\e]0;PWNED-TITLE"), "{sessions}");
    let cancel = stderr(&h.run(&["notes", "cancel", "0123456789abcdef"]));
    assert!(cancel.contains("is delivered\\e]0;PWNED-TITLE"), "{cancel}");
    // --json: the exact strings, as serde escapes them.
    let o = h.run(&["notes", "list", "--session", RID, "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    let n1 = v["notes"].as_array().unwrap().iter().find(|n| n["note_id"] == format!("n1{EVIL}").as_str());
    assert_eq!(n1.unwrap_or_else(|| panic!("{v}"))["state"], format!("delivered{EVIL}"), "{v}");
    let o = h.run(&["notes", "status", "0123456789abcdef", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    assert_eq!(v["note_id"], id);
}

const PASSWORD: &str = "Sup3rS3cretPw";

/// N8: a password in the server URL is shown as `***`: doctor (text and
/// `--json`), the operator commands' messages, login.
#[test]
fn n8_url_credentials_are_never_shown() {
    let s = hostile_server();
    let url = s.url().replacen("http://", &format!("http://admin:{PASSWORD}@"), 1);
    let h = Home::new("n8", url.clone());
    let mut seen_redacted = false;
    for args in [
        vec!["doctor", "--no-codex-query"],
        vec!["doctor", "--no-codex-query", "--json"],
        vec!["doctor", "--no-codex-query", "--verbose"],
        vec!["notes", "list", "--all"],
        vec!["notes", "send", "--session", "nobody", "hi"],
        vec!["sessions", "list"],
    ] {
        let o = h.run(&args);
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert!(!all.contains(PASSWORD), "{args:?}: {all}");
        seen_redacted |= all.contains("http://admin:***@127.0.0.1");
    }
    assert!(seen_redacted, "a URL was shown, with its password hidden");
    // A server that is not there: the error names the URL.
    let down = Home::new("n8-down", format!("http://admin:{PASSWORD}@127.0.0.1:9"));
    let o = down.run(&["notes", "status", "0123456789abcdef"]);
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(!all.contains(PASSWORD), "{all}");
    // login: its warnings, its errors and what it says it saved.
    let fresh = Home::new("n8-login", String::new());
    for (target, no_verify) in
        [(url.as_str(), false), ("http://admin:Sup3rS3cretPw@127.0.0.1:9", false), (url.as_str(), true)]
    {
        let mut c = operator_cmd(&fresh.root, &fresh.home, &["login", "--url", target]);
        if no_verify {
            c.arg("--no-verify");
        }
        let o = run_with_stdin(c, Some("agt_probe_runtime_0123"));
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert!(!all.contains(PASSWORD), "login {target}: {all}");
        assert!(all.contains("admin:***@"), "login {target} names the URL: {all}");
    }
}

// ----- sessions attach and signals ------------------------------------------------------

/// A `sessions attach` of a local session on a pty: the child, the pty
/// master (read in the background) and the slave (kept to read its modes).
struct Attached {
    child: std::process::Child,
    _master: std::fs::File,
    slave: OwnedFd,
    _h: Home,
}

fn attach_on_a_pty(tag: &str) -> Attached {
    let h = Home::new(tag, String::new());
    preloop_shared::local::LocalInbox::new(&h.home, 86_400)
        .session_start(&preloop_shared::wire::SessionStartRequest {
            session_id: "tty".into(),
            source: Some("claude_code".into()),
            cwd: Some("/work/tty".into()),
            hook_event_name: Some("SessionStart".into()),
            ..Default::default()
        })
        .unwrap();
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize { ws_row: 30, ws_col: 100, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: openpty fills two fds we then own.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &ws) };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both fds were just opened and are owned here.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut c = operator_cmd(&h.root, &h.home, &["sessions", "attach", "tty"]);
    c.stdin(slave.try_clone().unwrap()).stdout(slave.try_clone().unwrap()).stderr(Stdio::null());
    let child = c.spawn().unwrap();
    let master = std::fs::File::from(master);
    let mut reader = master.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
    });
    let a = Attached { child, _master: master, slave, _h: h };
    assert!(a.wait_mode(false, 10), "attach puts the terminal in raw mode");
    a
}

impl Attached {
    /// Whether the pty is in canonical mode with echo (as a shell leaves it).
    fn canonical(&self) -> bool {
        // SAFETY: tcgetattr on an fd we own, into a struct we own.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            assert_eq!(libc::tcgetattr(self.slave.as_raw_fd(), &mut t), 0);
            t.c_lflag & libc::ICANON != 0 && t.c_lflag & libc::ECHO != 0 && t.c_lflag & libc::ISIG != 0
        }
    }
    fn wait_mode(&self, canonical: bool, secs: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if self.canonical() == canonical {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
    fn signal(&self, sig: i32) {
        // SAFETY: a signal to our own child.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }
    /// Wait for the child to stop (WUNTRACED), without reaping it.
    fn wait_stopped(&self, secs: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            let mut status = 0;
            // SAFETY: waitpid on our own child; WNOHANG|WUNTRACED reports a stop without reaping.
            let r = unsafe { libc::waitpid(self.child.id() as i32, &mut status, libc::WNOHANG | libc::WUNTRACED) };
            if r > 0 && libc::WIFSTOPPED(status) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
    fn exit(mut self, secs: u64) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        panic!("attach did not exit within {secs}s");
    }
}

/// SIGQUIT and SIGHUP end `attach` like SIGTERM: the terminal is canonical
/// again afterwards (red-team 3, N5: they left it raw).
#[test]
fn attach_gives_the_terminal_back_on_sigquit_and_sighup() {
    for (sig, name) in [(libc::SIGQUIT, "SIGQUIT"), (libc::SIGHUP, "SIGHUP"), (libc::SIGTERM, "SIGTERM")] {
        let a = attach_on_a_pty(&format!("sig-{name}"));
        a.signal(sig);
        assert!(a.wait_mode(true, 10), "{name}: the terminal is canonical again");
        let status = a.exit(10);
        assert!(status.success(), "{name}: exit {status:?}");
    }
}

/// SIGTSTP stops `attach` with the terminal given back; SIGCONT takes it
/// raw again and `attach` goes on (and still leaves cleanly).
#[test]
fn attach_stops_with_the_terminal_given_back_and_resumes_raw() {
    let a = attach_on_a_pty("sig-tstp");
    a.signal(libc::SIGTSTP);
    assert!(a.wait_stopped(10), "SIGTSTP stops it");
    assert!(a.canonical(), "stopped with the terminal canonical");
    a.signal(libc::SIGCONT);
    assert!(a.wait_mode(false, 10), "SIGCONT: raw again");
    a.signal(libc::SIGTERM);
    assert!(a.wait_mode(true, 10), "canonical after leaving");
    let status = a.exit(10);
    assert!(status.success(), "exit {status:?}");
}
