//! `preloop-bench-rss PROGRAM [ARGS...]`: run PROGRAM (stdin inherited,
//! stdout and stderr discarded) and print its peak resident set in KiB.
//!
//! Linux folds the spawning process's resident set into the child's
//! `ru_maxrss` (the high-water mark of the memory image exec replaced), so a
//! child spawned by the benchmark itself (tens of MB: the fake server, the
//! seeded inboxes) would report the benchmark's size. Spawned from this tiny
//! process, the figure is the hook's own plus at most this program's ~1 MB;
//! `/bin/true` measured the same way shows that floor.
use std::process::{Command, Stdio};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else { std::process::exit(2) };
    let Ok(child) = Command::new(program).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn() else {
        std::process::exit(2)
    };
    let mut status = 0;
    // SAFETY: rusage is plain integers and timevals, for which all zeros is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child's pid with valid out-pointers.
    let r = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    if r <= 0 {
        std::process::exit(2);
    }
    println!("{}", usage.ru_maxrss);
    std::process::exit(if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 { 0 } else { 1 });
}
