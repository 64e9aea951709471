//! N6 (docs/hardening.md, round three): the detached SessionEnd worker
//! outlives the hook, so it must not keep open what the hook inherited
//! beyond 0-2. A wrapper or CI step that reads a status pipe to its end
//! would otherwise wait for the worker (up to its calls' timeouts).
//! `detach::worker_main` closes every descriptor above 2 first
//! (`fsutil::close_fds_above_stdio`); this test fails without that call.

use crate::common::{Home, bin, hook, unique_session};
use preloop_shared::Harness;
use preloop_testkit::{FakeServer, FaultSpec, support::wait_for};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The descriptor number the hook inherits the pipe's write end on.
const INHERITED_FD: i32 = 200;

/// Whether `fd` reaches end of file within `within` (every write end closed).
fn eof_within(fd: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut p, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if n > 0 {
            let mut b = [0u8; 64];
            // SAFETY: reading into a local buffer of that length.
            let r = unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) };
            if r == 0 {
                return true;
            }
        }
        if Instant::now() >= deadline {
            return false;
        }
    }
}

fn alive(pid: u32) -> bool {
    // A zombie still has /proc/<pid>; its state line says Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
}

#[test]
fn detached_session_end_worker_holds_no_inherited_descriptor() {
    let server = FakeServer::start();
    // Every call takes 3 s, so the worker lives that long after the hook
    // has exited.
    server.set_fault(FaultSpec::all().delay(Duration::from_secs(3)));
    let home = Home::for_server("worker-fds", &server);
    let h = hook(Harness::ClaudeCode, "SessionEnd");
    let session = unique_session("wfd");
    let payload = serde_json::to_vec(&h.payload(&session)).unwrap();

    // The pipe is close-on-exec here, so no other test's child inherits it;
    // only the hook gets its write end, as descriptor 200 (dup2 clears the
    // flag on the copy).
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the two-element array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (r, w) = (fds[0], fds[1]);
    let mut cmd = home.command(&bin(&h), &[]);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
    // SAFETY: dup2 is async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(
            move || if libc::dup2(w, INHERITED_FD) < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) },
        );
    }
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    // SAFETY: our own write end; the hook holds its copy.
    unsafe { libc::close(w) };
    child.stdin.take().unwrap().write_all(&payload).unwrap();
    let out = child.wait_with_output().unwrap();
    let hook_took = started.elapsed();
    assert!(out.status.success(), "the hook exits 0: {:?}", out.status);
    // That it handed off is its log line (`outcome=detached`, below); the
    // wall clock only has a sanity bound under the worker's 3 s call.
    assert!(hook_took < Duration::from_secs(10), "the hook handed off ({hook_took:?})");

    let line = wait_for(Duration::from_secs(5), "the hook's hand-off log line", || {
        home.log().lines().find(|l| l.contains("outcome=detached")).map(str::to_string)
    });
    let pid: u32 = line
        .split("worker pid ")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no worker pid in {line}"));

    // What decides is not how soon EOF comes but whether it comes while
    // the worker lives (it waits 3 s on each call): a worker that kept the
    // descriptor gives EOF only at its exit. So wait generously, then ask
    // whether the worker is still there.
    let eof = eof_within(r, Duration::from_secs(20));
    let worker_alive = alive(pid);
    // SAFETY: our own read end.
    unsafe { libc::close(r) };
    assert!(eof, "the inherited pipe saw no EOF within 20 s of the hook's exit");
    assert!(worker_alive, "EOF came only when the worker (pid {pid}) had exited: it kept descriptor {INHERITED_FD}");
    // The worker finishes its calls and exits on its own.
    wait_for(Duration::from_secs(20), "the worker's exit", || (!alive(pid)).then_some(()));
    wait_for(Duration::from_secs(5), "the worker's session-end", || {
        server.requests().iter().any(|q| q.path.ends_with("/session-end")).then_some(())
    });
}
