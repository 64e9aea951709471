//! Each hook's own floor (bench/c/floor_calls.c): the calls the hook makes,
//! read off the fake server while the hook runs, replayed by a C program on
//! one keep-alive connection. Nothing is listed by hand, so the floor follows
//! the hook when its calls change.

use crate::Case;
use preloop_testkit::fake_server::{FakeServer, RecordedRequest};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The per-hook floor program, built at run time (see [`build`]).
const FLOOR_CALLS_SRC: &str = include_str!("../c/floor_calls.c");

/// What both C floors share (stdin, writes, Content-Length, connect): written
/// beside every source [`build`] compiles.
const FLOOR_IO_H: &str = include_str!("../c/floor_io.h");

/// Captured runs per hook; the calls are those of the shortest capture, and
/// every other capture must make them too (see [`derive()`]).
const CAPTURES: usize = 3;

/// One request a hook made, as the floor replays it.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    /// Every header line but those the floor writes itself (`Host`,
    /// `Authorization`, `Content-Length`) and the connection's own
    /// (`Connection`: the floor keeps its one connection open), in order.
    pub headers: Vec<(String, String)>,
    /// `Authorization: Bearer <the hook's token>` was sent.
    pub bearer: bool,
    pub body: Vec<u8>,
}

impl Call {
    fn from_recorded(r: &RecordedRequest) -> Call {
        let skip = ["host", "authorization", "content-length", "connection", "transfer-encoding", "expect"];
        Call {
            method: r.method.clone(),
            target: if r.query.is_empty() { r.path.clone() } else { format!("{}?{}", r.path, r.query) },
            headers: r.headers.iter().filter(|(k, _)| !skip.contains(&k.as_str())).cloned().collect(),
            bearer: r.header("authorization").is_some_and(|v| v.to_ascii_lowercase().starts_with("bearer")),
            body: match &r.body {
                None => Vec::new(),
                Some(serde_json::Value::String(s)) => s.clone().into_bytes(),
                Some(v) => serde_json::to_vec(v).expect("a JSON value serialises"),
            },
        }
    }

    /// `POST /api/v1/agents/session-start`, for the tables.
    pub fn label(&self) -> String {
        format!("{} {}", self.method, self.target)
    }
}

/// What `case` (a hook) sends the server on a run, and the stdin of that run.
///
/// One warm-up run first (a hook's first run in a session can differ: Cursor's
/// beforeSubmitPrompt registers the first prompt), then [`CAPTURES`] runs, each
/// captured from after its `before` step (a SessionEnd's registration) to the
/// hook's exit: what the harness waits for. Calls made after the exit (a
/// server-mode SessionEnd's detached worker) are not the hook's cost and are
/// not in its floor; should such a worker ever get a request in before its hook
/// exits, that capture is longer than the others, so the shortest is taken,
/// and every capture must contain it in order, or the derivation fails.
pub fn derive(server: &FakeServer, case: &mut Case, first_run: usize) -> Result<(Vec<Call>, Vec<u8>), String> {
    case.run_once(first_run);
    let mut captures: Vec<(Vec<Call>, Vec<u8>)> = Vec::new();
    for k in 0..CAPTURES {
        let input = case.prepare(first_run + 1 + k);
        quiesce(server);
        server.clear_requests();
        if case.time_once(&input).is_none() {
            return Err(format!("{}: the hook did not run", case.name));
        }
        let calls = server.requests().iter().map(Call::from_recorded).collect();
        captures.push((calls, input));
    }
    quiesce(server);
    // The calls are those of the shortest capture; every capture must make
    // them all. Their order can differ between captures where the hook has
    // two calls in flight at once (Stop sends its turn-end report and, before
    // reading its answer, pulls on a second connection), so the order the
    // floor replays is the one seen most often.
    let fewest = captures.iter().map(|(c, _)| c.len()).min().expect("CAPTURES > 0");
    let key = |c: &[Call]| {
        let mut k: Vec<String> = c.iter().map(Call::label).collect();
        k.sort();
        k
    };
    let shortest: Vec<&(Vec<Call>, Vec<u8>)> = captures.iter().filter(|(c, _)| c.len() == fewest).collect();
    let want = key(&shortest[0].0);
    for (calls, _) in &captures {
        let mut have = key(calls);
        let all_in = want.iter().all(|w| match have.iter().position(|h| h == w) {
            Some(i) => {
                have.remove(i);
                true
            }
            None => false,
        });
        if !all_in {
            return Err(format!(
                "{}: its calls differ from run to run ({} vs {}), so no floor can be derived from them",
                case.name,
                labels(&shortest[0].0),
                labels(calls)
            ));
        }
    }
    let order = |c: &[Call]| c.iter().map(Call::label).collect::<Vec<_>>();
    let chosen = shortest
        .iter()
        .max_by_key(|(c, _)| shortest.iter().filter(|(d, _)| order(d) == order(c)).count())
        .expect("at least one shortest capture");
    Ok((*chosen).clone())
}

pub fn labels(calls: &[Call]) -> String {
    if calls.is_empty() {
        return "none".into();
    }
    calls.iter().map(Call::label).collect::<Vec<_>>().join(", ")
}

/// Wait until no request has reached the server for 20 ms (at most 2 s): a
/// detached worker of the run before has done its calls.
fn quiesce(server: &FakeServer) {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut seen = server.requests().len();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let now = server.requests().len();
        if now == seen {
            return;
        }
        seen = now;
    }
}

/// A C string literal holding `bytes` exactly (octal escapes for anything
/// but letters, digits, space and a few safe marks).
fn c_str(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() + 2);
    s.push('"');
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b" _-/.,:;{}[]=+*@#!&|<>()".contains(&b) {
            s.push(b as char);
        } else {
            let _ = write!(s, "\\{b:03o}");
        }
    }
    s.push('"');
    s
}

/// floor_calls.h: one table of calls per floor, in `floors` order (the
/// program's argument is the index).
pub fn header(floors: &[(String, Vec<Call>)]) -> String {
    let mut h = String::from("/* Generated by preloop-bench from the calls each hook made (own_floor.rs). */\n");
    for (k, (_, calls)) in floors.iter().enumerate() {
        if calls.is_empty() {
            continue;
        }
        let _ = writeln!(h, "static const struct call calls_{k}[] = {{");
        for c in calls {
            let headers: String = c.headers.iter().map(|(n, v)| format!("{n}: {v}\r\n")).collect();
            let _ = writeln!(
                h,
                "    {{{}, {}, {}, {}, {}, {}}},",
                c_str(c.method.as_bytes()),
                c_str(c.target.as_bytes()),
                c_str(headers.as_bytes()),
                i32::from(c.bearer),
                c_str(&c.body),
                c.body.len()
            );
        }
        h.push_str("};\n");
    }
    h.push_str("static const struct floor FLOORS[] = {\n");
    for (k, (hook, calls)) in floors.iter().enumerate() {
        let table = if calls.is_empty() { "0".to_string() } else { format!("calls_{k}") };
        let _ = writeln!(h, "    {{{}, {}, {table}}},", c_str(hook.as_bytes()), calls.len());
    }
    h.push_str("};\n");
    h
}

/// How a C floor was built.
pub struct Built {
    pub program: PathBuf,
    /// The compiler's `--version` line.
    pub compiler: String,
    pub static_link: bool,
}

/// Compile the C source `src` (written to `dir/<name>.c`, with floor_io.h and
/// `extra` files beside it) into `dir/<name>` with the system C compiler (`$CC`, else `cc`,
/// `gcc`, `clang`), `-O2`, plus `-static` when `static_link` is asked and a
/// static C library links; else dynamically (`static_link` false in the answer).
pub fn build(dir: &Path, name: &str, src: &str, extra: &[(&str, &str)], static_link: bool) -> Result<Built, String> {
    let src_path = dir.join(format!("{name}.c"));
    let out = dir.join(name);
    std::fs::write(&src_path, src).map_err(|e| format!("write {}: {e}", src_path.display()))?;
    for (file, text) in [("floor_io.h", FLOOR_IO_H)].iter().chain(extra) {
        std::fs::write(dir.join(file), text).map_err(|e| format!("write {file}: {e}"))?;
    }
    let mut tried = Vec::new();
    let from_env = std::env::var("CC").ok().filter(|c| !c.trim().is_empty());
    let links: &[bool] = if static_link { &[true, false] } else { &[false] };
    for &stat in links {
        for cc in from_env.iter().map(String::as_str).chain(["cc", "gcc", "clang"]) {
            let mut words = cc.split_whitespace();
            let Some(prog) = words.next() else { continue };
            let mut c = Command::new(prog);
            c.args(words).arg("-O2");
            if stat {
                c.arg("-static");
            }
            let r = c
                .arg("-o")
                .arg(&out)
                .arg(&src_path)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output();
            match r {
                Ok(o) if o.status.success() && out.is_file() => {
                    let compiler = Command::new(prog)
                        .arg("--version")
                        .output()
                        .ok()
                        .and_then(|o| String::from_utf8(o.stdout).ok())
                        .and_then(|v| v.lines().next().map(str::to_string))
                        .unwrap_or_else(|| cc.to_string());
                    return Ok(Built { program: out, compiler, static_link: stat });
                }
                Ok(o) => tried.push(format!(
                    "{cc}{}: {}",
                    if stat { " -static" } else { "" },
                    String::from_utf8_lossy(&o.stderr).trim()
                )),
                Err(e) => tried.push(format!("{cc}: {e}")),
            }
        }
    }
    Err(tried.join("; "))
}

/// Build bench/c/floor_calls.c with `floors` (hook name, its calls) compiled in.
pub fn build_floors(dir: &Path, floors: &[(String, Vec<Call>)]) -> Result<Built, String> {
    build(dir, "floor-calls", FLOOR_CALLS_SRC, &[("floor_calls.h", &header(floors))], true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_strings_hold_every_byte() {
        assert_eq!(c_str(b"ab\"\\\r\n\x01\xff9"), "\"ab\\042\\134\\015\\012\\001\\3779\"");
    }

    #[test]
    fn the_header_has_a_table_per_floor_and_none_for_no_calls() {
        let call = Call {
            method: "POST".into(),
            target: "/api/v1/x".into(),
            headers: vec![("content-type".into(), "application/json".into())],
            bearer: true,
            body: b"{}".to_vec(),
        };
        let h = header(&[("a".into(), vec![call.clone(), call]), ("b".into(), vec![])]);
        assert!(h.contains("static const struct call calls_0[]"), "{h}");
        assert!(!h.contains("calls_1"), "{h}");
        assert!(h.contains("{\"a\", 2, calls_0}"), "{h}");
        assert!(h.contains("{\"b\", 0, 0}"), "{h}");
        assert!(h.contains("\"content-type: application/json\\015\\012\", 1, \"{}\", 2}"), "{h}");
    }
}
