//! `preloop-fake-server [--port N] [--print-env] [--ignore-stdin]`
//!
//! Starts the fake Preloop server on 127.0.0.1 and prints one JSON line on
//! stdout: `{"url", "runtime_token", "user_token", "agent_id", ...}` (see
//! `FakeServer::info`). With `--print-env` it then prints
//! `PRELOOP_URL=...`, `PRELOOP_TOKEN=...`, `PRELOOP_USER_TOKEN=...` and
//! `PRELOOP_AGENT_ID=...` lines. It runs until SIGTERM/SIGINT, or until its
//! stdin reaches EOF (unless stdin is `/dev/null` or `--ignore-stdin` is
//! given, so it can run detached). Test controls are under `/_fake/`.

use preloop_testkit::FakeServer;
use std::io::{Read, Write};

const USAGE: &str = "usage: preloop-fake-server [--port N] [--print-env] [--ignore-stdin]";

fn main() {
    let mut port: u16 = 0;
    let mut print_env = false;
    let mut ignore_stdin = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" | "-p" => match args.next().and_then(|p| p.parse().ok()) {
                Some(p) => port = p,
                None => fail("--port needs a number"),
            },
            a if a.starts_with("--port=") => match a["--port=".len()..].parse() {
                Ok(p) => port = p,
                Err(_) => fail("--port needs a number"),
            },
            "--print-env" => print_env = true,
            "--ignore-stdin" => ignore_stdin = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => fail(&format!("unknown argument {other:?}")),
        }
    }
    let server = match FakeServer::start_on(port) {
        Ok(s) => s,
        Err(e) => fail(&format!("cannot listen on 127.0.0.1:{port}: {e}")),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", server.info());
    if print_env {
        let _ = writeln!(out, "PRELOOP_URL={}", server.url());
        let _ = writeln!(out, "PRELOOP_TOKEN={}", server.runtime_token());
        let _ = writeln!(out, "PRELOOP_USER_TOKEN={}", server.user_token());
        let _ = writeln!(out, "PRELOOP_AGENT_ID={}", server.agent_id());
    }
    let _ = out.flush();
    drop(out);

    if !ignore_stdin && !stdin_is_dev_null() {
        // Block until EOF on stdin: the parent closing the pipe stops us.
        let mut sink = [0u8; 4096];
        let mut stdin = std::io::stdin().lock();
        loop {
            match stdin.read(&mut sink) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        drop(server);
        return;
    }
    // SIGTERM/SIGINT end the process with their default action.
    loop {
        std::thread::park();
    }
}

fn stdin_is_dev_null() -> bool {
    std::fs::read_link("/proc/self/fd/0").is_ok_and(|p| p == std::path::Path::new("/dev/null"))
}

fn fail(msg: &str) -> ! {
    eprintln!("preloop-fake-server: {msg}\n{USAGE}");
    std::process::exit(2);
}
