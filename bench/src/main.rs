//! `preloop-bench`: what a hook costs, measured beside its floors, in one run
//! on one machine. Build and run with `scripts/bench` (release profile).
//!
//! Every case spawns a fresh process per run, writes its stdin, and waits for
//! it to exit: exactly what a harness pays per hook. The cases are measured
//! round-robin (run `i` of every case, then run `i + 1`), so a burst of load
//! from other processes on the machine hits every case alike and the ratios
//! stay meaningful on a noisy machine; the two heavy references (curl, the
//! Python hook) get rounds of their own afterwards, since interleaved they
//! slowed whatever case ran next. Reported: median and p95 wall time
//! over `--runs` runs (after warm-up), peak RSS (three more runs through
//! `preloop-bench-rss`), the executable's size, and the ratios the performance
//! targets are stated in: against the one-call C floor, and each no-note
//! server-mode hook against its own floor (the calls it makes).
//!
//! Cases:
//! * floors: `/bin/true`; **the C floor** (bench/c/floor_hook.c, built here
//!   at run time with the system C compiler, `-O2`): start, read stdin, one
//!   HTTP/1.1 POST on a raw loopback socket, read the answer, print `{}`
//!   (dynamic, as `cc -O2` builds, and `-static`, as the hooks are linked);
//!   the same program in Rust
//!   (`preloop-floor-hook`, a second row: it carries std's start-up). The C
//!   floor is also re-run after every [`FLOOR_EVERY`]th case of a round, so
//!   its samples are spread over the whole round like the hooks' are;
//! * references: curl making the same request; a Python urllib hook;
//! * every hook command of the five harnesses (payloads from `fixtures/`),
//!   run as installed: a hard link to the one `preloop-hooks` executable,
//!   started under the hook's name; in server mode (the in-process fake server, which answers at once) and
//!   local-inbox mode, without and with a pending note;
//! * a PreToolUse carrying a full spool (5 entries), in both modes;
//! * the local inbox's claim with 10, 1,000 and 10,000 notes stored for
//!   1,000 other sessions (seeded with `LocalInbox::send`);
//! * lineage: a session's first registration (Codex SessionStart, a fresh
//!   session per run) with the ancestry walk for a parent (no
//!   `PRELOOP_PARENT_SESSION_ID`; nothing found, so the whole walk) beside
//!   the same with the variable (no walk), in server mode; and the walk
//!   alone, in process, per ancestor read;
//! * each no-note server-mode hook's **own floor** (bench/c/floor_calls.c,
//!   own_floor.rs): the calls that hook was seen to make on the fake server,
//!   in order, replayed by a static C program on one keep-alive connection.
//!
//! `scripts/bench [--runs N] [--json FILE] [--only SUBSTRING] [--scale 10,1000,10000] [--nest N]
//!   [--max-slowdown F] [--baseline FILE] [--max-ratio X] [--self-test-slowdown F] [--base-bin-dir DIR]
//!   [--write-baseline FILE] [--trace FILE]`
//!
//! `--nest N` runs the benchmark N processes deeper (it starts itself again N
//! times, each the parent of the next): the lineage walk then reads N more
//! ancestors (30: its bound).
//!
//! The regression gate, A/B (CI: `--base-bin-dir "$(scripts/build-gate-base)"
//! --max-slowdown 1.1 --self-test-slowdown 1.2`): the run fails if a no-note
//! server-mode hook is surely over F × the same hook of the base executable
//! in DIR (bench/gate-base's commit), measured in alternating time blocks
//! as below; a self-test twin is measured against its own unslowed hook.
//! Without a base (CI's fallback where the commit is not in the clone:
//! `--max-slowdown 1.2 --self-test-slowdown 1.5`):
//! the run fails (exit 1) if a no-note server-mode hook is surely slower than
//! its limit against its own floor: `--max-slowdown F` sets the limit to F ×
//! the hook's baseline ratio (bench/gate-baseline.txt, written by
//! `--write-baseline`; `--baseline FILE` reads another), `--max-ratio X` to X
//! (both: the lower). Every hook
//! is measured against its floor in pairs of time blocks until a sign test
//! decides (gate.rs). `--self-test-slowdown F` adds a twin of each Claude
//! Code hook whose every run takes F times as long, and fails the run unless
//! the gate fails every twin: the gate's power, proven on every run.
//! `--trace FILE` writes every run of the gate's blocks to FILE.

use preloop_shared::backend::Backend;
use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{Author, SendRequest, Target};
use preloop_shared::registry::{Harness, HookDef, Role};
use preloop_shared::render;
use preloop_shared::session::{RunFiles, SpoolEntry};
use preloop_shared::time::Timestamp;
use preloop_shared::wire::SessionStartRequest;
use preloop_testkit::fake_server::FakeServer;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

mod gate;
mod own_floor;

const NOTE_TEXT: &str = "Deploy to eu-west-1, not us-east-1.";
/// The one-call C floor, built at run time (see [`own_floor::build`]).
const C_FLOOR_SRC: &str = include_str!("../c/floor_hook.c");
/// Each gated hook's ratio to its own floor, measured (`--write-baseline`):
/// what `--max-slowdown` multiplies.
const GATE_BASELINE: &str = include_str!("../gate-baseline.txt");
/// The C floor runs again after every this many cases of a round.
const FLOOR_EVERY: usize = 8;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Server,
    Local,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Server => "server",
            Mode::Local => "local",
        }
    }
}

/// What a case is, for the tables.
#[derive(Clone, Default)]
struct Meta {
    /// The hook binary's file name.
    binary: Option<String>,
    harness: &'static str,
    event: &'static str,
    mode: Option<Mode>,
    note: bool,
    /// A section other than the per-hook table (`floor`, `spool`, `scale`, `lineage`).
    section: &'static str,
    /// Which floor or reference (`true`, `c_floor`, `rust_floor`, `curl`, `python`), or
    /// which lineage case (`walk`, `variable`).
    role: &'static str,
    /// Stored notes (scale cases).
    stored: usize,
}

type Stdin = Box<dyn FnMut(usize) -> Vec<u8>>;
type Before = Box<dyn FnMut(usize)>;

struct Case {
    name: String,
    meta: Meta,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    stdin: Stdin,
    before: Option<Before>,
    times: Vec<Duration>,
    max_rss_kib: i64,
    failures: usize,
    /// For a hook gated against its own floor: that floor's case.
    floor: Option<usize>,
    /// How long the last run's process waited for a CPU while runnable (the
    /// kernel's `run_delay`, `/proc/<pid>/schedstat`): the gate measures wall
    /// time less this (gate.rs).
    waited: Duration,
    /// The gate's self-test only: every run stretched to this many times its
    /// own wall time (`--self-test-slowdown`); never set on a real case.
    slowdown: Option<f64>,
    /// For a gated hook in an A/B run (`--base-bin-dir`): the same hook of
    /// the base executable's case.
    base: Option<usize>,
}

#[derive(Clone, Copy)]
struct Stats {
    median: Duration,
    p95: Duration,
}

impl Case {
    fn new(name: impl Into<String>, meta: Meta, program: PathBuf, env: Vec<(String, String)>, stdin: Stdin) -> Case {
        Case {
            name: name.into(),
            meta,
            program,
            args: Vec::new(),
            // Every process gets the same typical environment first (the case's own settings win).
            env: harness_env().into_iter().chain(env).collect(),
            stdin,
            before: None,
            times: Vec::new(),
            max_rss_kib: 0,
            failures: 0,
            floor: None,
            waited: Duration::ZERO,
            slowdown: None,
            base: None,
        }
    }

    fn stats(&self) -> Option<Stats> {
        stats_of(&self.times)
    }

    /// One run: spawn, write stdin, wait. Returns the wall time.
    fn run_once(&mut self, i: usize) -> Option<Duration> {
        let input = self.prepare(i);
        self.time_once(&input)
    }

    /// What comes before run `i` (untimed): its `before` step, then its stdin.
    fn prepare(&mut self, i: usize) -> Vec<u8> {
        if let Some(b) = self.before.as_mut() {
            b(i);
        }
        (self.stdin)(i)
    }

    /// Spawn with `input` on stdin, read its stdout to the end, wait. The
    /// wall time; with `slowdown` set (the gate's self-test), that time
    /// stretched by CPU work in this thread (see [`burn_cpu`]).
    fn time_once(&mut self, input: &[u8]) -> Option<Duration> {
        let mut c = Command::new(&self.program);
        c.args(&self.args)
            .env_clear()
            .envs(self.env.iter().cloned())
            .stdin(Stdio::piped())
            // A pipe, as a harness gives: a hook whose stdout is /dev/null
            // knows nobody reads it and claims nothing.
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let t = Instant::now();
        let mut child = c.spawn().ok()?;
        {
            let mut sin = child.stdin.take()?;
            let _ = sin.write_all(input);
        }
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut child.stdout.take()?, &mut sink);
        // Exited, not yet reaped: its scheduler statistics are still there.
        exited(&child);
        let mut d = t.elapsed();
        let mut waited = run_delay(&format!("/proc/{}/schedstat", child.id())).unwrap_or_default();
        let (ok, _) = wait_rss(&child)?;
        if let Some(f) = self.slowdown {
            // The self-test's twin: this thread works (f - 1) times as long
            // as the hook ran, inside the timed interval; its own waits for a
            // CPU count as waits, as the hook's do.
            let own = || run_delay("/proc/thread-self/schedstat").unwrap_or_default();
            let (w0, b0) = (own(), Instant::now());
            burn_cpu(d.saturating_sub(waited).mul_f64(f - 1.0));
            d += b0.elapsed();
            waited += own().saturating_sub(w0);
        }
        self.waited = waited;
        if !ok {
            self.failures += 1;
        }
        Some(d)
    }

    /// One untimed run through `preloop-bench-rss`, for the peak RSS (see
    /// src/bin/rss.rs for why not from our own wait4).
    fn rss_once(&mut self, i: usize, spawner: &Path) -> Option<i64> {
        if let Some(b) = self.before.as_mut() {
            b(i);
        }
        let input = (self.stdin)(i);
        let mut c = Command::new(spawner);
        c.arg(&self.program)
            .args(&self.args)
            .env_clear()
            .envs(self.env.iter().cloned())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c.spawn().ok()?;
        {
            let mut sin = child.stdin.take()?;
            let _ = sin.write_all(&input);
        }
        let out = child.wait_with_output().ok()?;
        let kib: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
        self.max_rss_kib = self.max_rss_kib.max(kib);
        Some(kib)
    }
}

/// Whether the gate holds `c` against its own floor: a no-note server-mode
/// hook (or the self-test's slowed twin of one).
fn gated(c: &Case) -> bool {
    matches!(c.meta.section, "" | "self_test") && !c.meta.note && c.meta.mode == Some(Mode::Server)
}

/// Spin until this thread has used `d` more CPU time: the self-test's
/// slowdown is work, not a sleep, so it stretches under load as a slower
/// hook's own work would.
fn burn_cpu(d: Duration) {
    let cpu = || {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime with a valid clock id and out-pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    };
    let end = cpu() + d;
    while cpu() < end {
        std::hint::spin_loop();
    }
}

fn stats_of(times: &[Duration]) -> Option<Stats> {
    if times.is_empty() {
        return None;
    }
    let mut t = times.to_vec();
    t.sort();
    Some(Stats { median: t[t.len() / 2], p95: t[(t.len() * 95 / 100).min(t.len() - 1)] })
}

/// Wait until `child` has exited, leaving it unreaped (`WNOWAIT`).
fn exited(child: &std::process::Child) {
    // SAFETY: waitid on our own child's pid with a valid out-pointer.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(libc::P_PID, child.id() as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT);
    }
}

/// The second field of a `schedstat` file: nanoseconds spent runnable but
/// waiting for a CPU.
fn run_delay(path: &str) -> Option<Duration> {
    let text = std::fs::read_to_string(path).ok()?;
    text.split_whitespace().nth(1)?.parse().ok().map(Duration::from_nanos)
}

/// Wait for a child and return (exited 0, its ru_maxrss in KiB); `std` does not expose rusage.
fn wait_rss(child: &std::process::Child) -> Option<(bool, i64)> {
    let mut status = 0;
    // SAFETY: rusage is plain integers and timevals, for which all zeros is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child's pid with valid out-pointers.
    let r = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    (r > 0).then(|| (libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, usage.ru_maxrss))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `dir` laid out by the executable's own `preloop-hooks links DIR` (what
/// `install` makes: a hard link to it under every hook command's name, a
/// symlink or a copy where the file system takes none), so the benchmark
/// measures the installed layout through the code that makes it.
///
/// The executable is first copied to `<dir>.exe/preloop-hooks` and laid out
/// from there, so that the candidate and an A/B run's base are files with
/// the same history in the page cache: measured, the same source built
/// twice (the builds differ in 32 bytes of build id) read 1.01-1.11x
/// (median pair ratios), one just written by the linker and one built
/// minutes earlier, while the same file laid out twice read ~0.99x.
fn hook_commands(exe: &Path, dir: &Path) -> std::io::Result<PathBuf> {
    let own = dir.with_extension("exe");
    std::fs::create_dir_all(&own)?;
    let copy = own.join("preloop-hooks");
    {
        let mut from = std::fs::File::open(exe)?;
        let mut to = std::fs::File::create(&copy)?;
        std::io::copy(&mut from, &mut to)?;
    }
    std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let out = Command::new(&copy).arg("links").arg(dir).output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    Ok(dir.to_path_buf())
}

fn bin_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target/release"))
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
}

/// Every option, in one table (ripgrep's way): its name, what its value is,
/// and what it does. `--help` prints it; anything else on the command line is
/// refused before a run starts.
const FLAGS: &[(&str, &str, &str)] = &[
    ("--runs", "N", "measured runs per case, after warm-up (default 200)"),
    ("--json", "FILE", "also write every case's figures to FILE"),
    ("--only", "SUBSTRING", "measure only the cases whose name contains SUBSTRING"),
    ("--scale", "N,N,...", "local inbox sizes for the scale cases (default 10,1000,10000)"),
    ("--nest", "N", "run N processes deeper, so the lineage walk reads N more ancestors"),
    ("--max-slowdown", "F", "gate: fail a hook slower than F x its baseline against its own floor"),
    ("--baseline", "FILE", "gate: read the baselines from FILE (default: bench/gate-baseline.txt, built in)"),
    ("--max-ratio", "X", "gate: fail a hook over X x its own floor"),
    ("--self-test-slowdown", "F", "gate: prove that an F x slower twin of each Claude Code hook fails"),
    (
        "--base-bin-dir",
        "DIR",
        "gate: measure each hook against the same hook of DIR/preloop-hooks (scripts/build-gate-base) in alternating time blocks; --max-slowdown F then fails a hook surely over F x the base",
    ),
    ("--write-baseline", "FILE", "write the measured ratios as a baseline file"),
    ("--trace", "FILE", "write every run of the gate's blocks to FILE"),
];

/// The usage text `--help` prints, from [`FLAGS`].
fn usage() -> String {
    let mut u = String::from(
        "preloop-bench: each hook against its floors (docs/performance.md)\n\nUsage: preloop-bench [OPTION VALUE]...\n\nOptions:\n",
    );
    for (name, value, help) in FLAGS {
        u.push_str(&format!("  {:<34}{help}\n", format!("{name} {value}")));
    }
    u.push_str("  -h, --help                        print this\n");
    u
}

/// Check the command line against [`FLAGS`]: `Ok(true)` when `--help` was
/// asked, an error line (with the fix) for an unknown option, a missing
/// value or a value that does not parse as the option's kind.
fn check_args(args: &[String]) -> Result<bool, String> {
    let mut i = 1;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "-h" || a == "--help" {
            return Ok(true);
        }
        let Some((name, value, _)) = FLAGS.iter().find(|(n, _, _)| *n == a) else {
            return Err(format!("unknown option {a:?}; see preloop-bench --help"));
        };
        let Some(v) = args.get(i + 1) else {
            return Err(format!("{name} takes a value ({value}); see preloop-bench --help"));
        };
        let parses = match *value {
            "N" => v.parse::<usize>().is_ok(),
            "F" | "X" => v.parse::<f64>().is_ok(),
            _ => true,
        };
        if !parses {
            return Err(format!("{name} {v:?}: {value} must be a number; see preloop-bench --help"));
        }
        i += 2;
    }
    Ok(false)
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|s| s.parse().ok())
}

// ----- harnesses and their payloads ------------------------------------------

struct HookEvent {
    /// Its registry row: the harness's event name, the binary, the role.
    def: &'static HookDef,
    /// A captured payload from fixtures/.
    fixture: &'static str,
}

struct HarnessDef {
    slug: &'static str,
    /// Cursor keys its sessions by `conversation_id`.
    cursor: bool,
    events: Vec<HookEvent>,
}

impl HarnessDef {
    fn start(&self) -> &HookEvent {
        &self.events[0]
    }
}

/// Every hook of every harness, in registry order (the watcher aside), each
/// with the captured payload it is measured with.
fn harnesses() -> Vec<HarnessDef> {
    Harness::all()
        .map(|h| HarnessDef {
            slug: h.slug(),
            cursor: h == Harness::Cursor,
            events: h
                .hooks()
                .filter(|d| d.role != Role::Watch)
                .map(|d| HookEvent { def: d, fixture: read_fixture(h, d.on) })
                .collect(),
        })
        .collect()
}

/// The capture of `event` under `fixtures/<harness>/`, read once.
fn read_fixture(h: Harness, event: &str) -> &'static str {
    // Each event's canonical capture (`shared/src/registry.rs`'s
    // `every_hook_has_its_canonical_capture`).
    let file = format!("{event}.json");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures").join(h.def().fixtures).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Box::leak(text.into_boxed_str())
}

/// A fixture with its session id replaced by `sid`.
fn payload(fixture: &str, cursor: bool, sid: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_str(fixture).expect("fixture is JSON");
    let o = v.as_object_mut().expect("fixture is an object");
    o.remove("_source");
    if o.contains_key("sessionId") {
        // Copilot's camelCase payloads.
        o.insert("sessionId".into(), json!(sid));
        return serde_json::to_vec(&v).unwrap();
    }
    o.insert("session_id".into(), json!(sid));
    if cursor {
        o.insert("conversation_id".into(), json!(sid));
    }
    serde_json::to_vec(&v).unwrap()
}

/// What a harness passes its hooks besides our settings: the user's whole
/// environment. A fixed, typical developer environment (45 variables,
/// ~2.7 KB, none of them read by the hooks), so a hook that copies or scans
/// its environment pays for it here as it does in a real session, the same
/// on every machine. Every case gets it, floors and references included.
/// Nothing here points a tool elsewhere (no `PYENV_ROOT`, `VIRTUAL_ENV`,
/// `CARGO_HOME`...): curl and python3 must run as they would without it.
fn harness_env() -> Vec<(String, String)> {
    const LS_COLORS: &str = "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:do=01;35:bd=40;33;01:cd=40;33;01:or=40;31;01:mi=00:su=37;41:sg=30;43:ca=00:tw=30;42:ow=34;42:st=37;44:ex=01;32:*.tar=01;31:*.tgz=01;31:*.arc=01;31:*.arj=01;31:*.taz=01;31:*.lha=01;31:*.lz4=01;31:*.lzh=01;31:*.lzma=01;31:*.tlz=01;31:*.txz=01;31:*.tzo=01;31:*.t7z=01;31:*.zip=01;31:*.z=01;31:*.dz=01;31:*.gz=01;31:*.lrz=01;31:*.lz=01;31:*.lzo=01;31:*.xz=01;31:*.zst=01;31:*.tzst=01;31:*.bz2=01;31:*.bz=01;31:*.tbz=01;31:*.tbz2=01;31:*.tz=01;31:*.deb=01;31:*.rpm=01;31:*.jar=01;31:*.war=01;31:*.ear=01;31:*.sar=01;31:*.rar=01;31:*.alz=01;31:*.ace=01;31:*.zoo=01;31:*.cpio=01;31:*.7z=01;31:*.rz=01;31:*.cab=01;31:*.wim=01;31:*.swm=01;31:*.dwm=01;31:*.esd=01;31:*.avif=01;35:*.jpg=01;35:*.jpeg=01;35:*.mjpg=01;35:*.mjpeg=01;35:*.gif=01;35:*.bmp=01;35:*.pbm=01;35:*.pgm=01;35:*.ppm=01;35:*.tga=01;35:*.xbm=01;35:*.xpm=01;35:*.tif=01;35:*.tiff=01;35:*.png=01;35:*.svg=01;35:*.svgz=01;35:*.mng=01;35:*.pcx=01;35:*.mov=01;35:*.mpg=01;35:*.mpeg=01;35:*.m2v=01;35:*.mkv=01;35:*.webm=01;35:*.webp=01;35:*.ogm=01;35:*.mp4=01;35:*.m4v=01;35:*.mp4v=01;35:*.vob=01;35:*.qt=01;35:*.nuv=01;35:*.wmv=01;35:*.asf=01;35:*.rm=01;35:*.rmvb=01;35:*.flc=01;35:*.avi=01;35:*.fli=01;35:*.flv=01;35:*.gl=01;35:*.dl=01;35:*.xcf=01;35:*.xwd=01;35:*.yuv=01;35:*.cgm=01;35:*.emf=01;35:*.ogv=01;35:*.ogx=01;35:*.aac=00;36:*.au=00;36:*.flac=00;36:*.m4a=00;36:*.mid=00;36:*.midi=00;36:*.mka=00;36:*.mp3=00;36:*.mpc=00;36:*.ogg=00;36:*.ra=00;36:*.wav=00;36:*.oga=00;36:*.opus=00;36:*.spx=00;36:*.xspf=00;36:";
    [
        ("USER", "dev"),
        ("LOGNAME", "dev"),
        ("SHELL", "/bin/bash"),
        ("LANG", "en_US.UTF-8"),
        ("LANGUAGE", "en_US:en"),
        ("TERM", "xterm-256color"),
        ("COLORTERM", "truecolor"),
        ("TERM_PROGRAM", "vscode"),
        ("TERM_PROGRAM_VERSION", "1.96.2"),
        ("EDITOR", "vim"),
        ("VISUAL", "vim"),
        ("PAGER", "less"),
        ("LESS", "-R"),
        ("PWD", "/home/dev/src/project"),
        ("OLDPWD", "/home/dev/src"),
        ("SHLVL", "2"),
        ("HISTSIZE", "100000"),
        ("HISTFILESIZE", "200000"),
        ("HISTCONTROL", "ignoreboth:erasedups"),
        ("MAIL", "/var/mail/dev"),
        ("XDG_RUNTIME_DIR", "/run/user/1000"),
        ("XDG_SESSION_TYPE", "tty"),
        ("XDG_SESSION_CLASS", "user"),
        ("XDG_SESSION_ID", "42"),
        ("XDG_DATA_DIRS", "/usr/local/share:/usr/share:/var/lib/snapd/desktop"),
        ("XDG_CONFIG_DIRS", "/etc/xdg/xdg-ubuntu:/etc/xdg"),
        ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"),
        ("SSH_AUTH_SOCK", "/tmp/ssh-XXXXkq3RZ1/agent.48213"),
        ("SSH_CONNECTION", "10.0.0.23 52814 10.0.0.5 22"),
        ("SSH_CLIENT", "10.0.0.23 52814 22"),
        ("SSH_TTY", "/dev/pts/3"),
        ("NVM_DIR", "/home/dev/.nvm"),
        ("NVM_BIN", "/home/dev/.nvm/versions/node/v22.12.0/bin"),
        ("NVM_INC", "/home/dev/.nvm/versions/node/v22.12.0/include/node"),
        ("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64"),
        ("ANDROID_HOME", "/home/dev/Android/Sdk"),
        ("GOPATH", "/home/dev/go"),
        ("KUBECONFIG", "/home/dev/.kube/config"),
        ("AWS_PROFILE", "dev-sandbox"),
        ("GIT_EDITOR", "vim"),
        (
            "MANPATH",
            "/home/dev/.nvm/versions/node/v22.12.0/share/man:/usr/local/man:/usr/local/share/man:/usr/share/man",
        ),
        ("NODE_OPTIONS", "--max-old-space-size=8192"),
        ("GPG_TTY", "/dev/pts/3"),
        ("DISPLAY", "localhost:10.0"),
        ("LS_COLORS", LS_COLORS),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn base_env(home: &Path) -> Vec<(String, String)> {
    vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".into(), home.display().to_string()),
        ("PRELOOP_HOME".into(), home.display().to_string()),
        // Stop continues a turn for a late note at most 3 times per session
        // by default; the Stop cases run one session many times.
        ("PRELOOP_STOP_RESCUE_CAP".into(), "1000000".into()),
    ]
}

/// A Claude Code PreToolUse case in session `sid`, which it starts here
/// (untimed); `meta` gives all but the binary, harness and event.
fn claude_pre_tool_use(bins: &Path, env: Vec<(String, String)>, sid: &str, name: String, meta: Meta) -> Case {
    let h = &harnesses()[0];
    let (start, pre) = (&h.events[0], &h.events[2]);
    run_untimed(&bins.join(start.def.binary), &env, &payload(start.fixture, false, sid));
    let meta = Meta { binary: Some(pre.def.binary.to_string()), harness: h.slug, event: pre.def.on, ..meta };
    let (fixture, sid) = (pre.fixture, sid.to_string());
    Case::new(name, meta, bins.join(pre.def.binary), env, Box::new(move |_| payload(fixture, false, &sid)))
}

/// Wait until `path` is gone, at most `limit`.
fn wait_gone(path: &Path, limit: Duration) {
    let t = Instant::now();
    while path.exists() && t.elapsed() < limit {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Run a binary once, untimed (registration before a case).
fn run_untimed(program: &Path, env: &[(String, String)], input: &[u8]) {
    let mut c = Command::new(program);
    c.env_clear().envs(env.iter().cloned()).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = c
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (build the release binaries first: scripts/bench)", program.display()));
    let _ = child.stdin.take().unwrap().write_all(input);
    let _ = child.wait();
}

fn send_local(home: &Path, sid: &str) {
    // One note per run to the same session: no rate limit, as on the fake server.
    LocalInbox::new(home, 86_400)
        .with_rate_limit(None)
        .send(&SendRequest {
            text: NOTE_TEXT.into(),
            target: Target::Session(sid.into()),
            next_session: false,
            expires_in_secs: None,
            author: Author { display: Some("bench".into()), auth_method: Some("local".into()), ..Author::default() },
        })
        .expect("send a local note");
}

/// Sends notes to the fake server as an operator.
struct ServerNotes {
    url: String,
    user_token: String,
}

impl ServerNotes {
    fn send(&self, sid: &str) {
        let body = json!({"external_session_id": sid, "text": NOTE_TEXT}).to_string();
        ureq::post(&self.url)
            .header("Authorization", &format!("Bearer {}", self.user_token))
            .header("Content-Type", "application/json")
            .send(body.as_bytes())
            .unwrap_or_else(|e| panic!("send a note to the fake server for {sid}: {e}"));
    }
}

/// Fill a session's spool with `n` entries (as non-carrying hooks leave it).
fn fill_spool(home: &Path, sid: &str, n: usize) {
    let run = RunFiles::new(home, sid);
    let _g = run.lock(Duration::from_secs(5)).expect("session lock");
    let (mut state, _) = run.read();
    let now = Timestamp::now();
    state.spool = (0..n)
        .map(|k| SpoolEntry {
            note: render::render_element(&format!("spooled-{k}"), "bench", "local", now, NOTE_TEXT),
            deferred: false,
            spooled_at: now,
        })
        .collect();
    run.write(&state).expect("write the spool");
}

/// Seed a local inbox: `sessions` registered sessions and `notes` pending
/// notes spread over them (none for the measured session).
fn seed_inbox(home: &Path, sessions: usize, notes: usize) {
    let inbox = LocalInbox::new(home, 86_400);
    let threads = 4;
    std::thread::scope(|s| {
        for t in 0..threads {
            let inbox = &inbox;
            s.spawn(move || {
                for k in (t..sessions).step_by(threads) {
                    let req = SessionStartRequest {
                        session_id: format!("other-{k:04}"),
                        source: Some("claude_code".into()),
                        cwd: Some("/tmp/proj".into()),
                        hook_event_name: Some("SessionStart".into()),
                        ..Default::default()
                    };
                    inbox.session_start(&req).expect("register a session");
                }
            });
        }
    });
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for k in (t..notes).step_by(threads) {
                    send_local(home, &format!("other-{:04}", k % sessions));
                }
            });
        }
    });
}

// ----- main ------------------------------------------------------------------

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match check_args(&args) {
        Ok(true) => {
            print!("{}", usage());
            return;
        }
        Ok(false) => {}
        Err(why) => {
            eprintln!("preloop-bench: {why}");
            std::process::exit(2);
        }
    }
    let runs: usize = arg(&args, "--runs").unwrap_or(200).max(1);
    let json_out: Option<String> = arg(&args, "--json");
    let only: Option<String> = arg(&args, "--only");
    let scales: Vec<usize> = arg::<String>(&args, "--scale")
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10, 1_000, 10_000]);
    let warmup = (runs / 10).max(3);
    // `--nest N`: run N processes deeper in the process tree (this
    // benchmark starts itself again, each the parent of the next), so the
    // lineage cases' ancestry walk reads N more ancestors: with N = 30 it
    // reaches its bound (lineage::MAX_ANCESTORS).
    if let Some(n) = arg::<usize>(&args, "--nest")
        && n > 0
    {
        let mut again: Vec<String> = args[1..].to_vec();
        if let Some(k) = again.iter().position(|a| a == "--nest") {
            again[k + 1] = (n - 1).to_string();
        }
        let exe = std::env::current_exe().expect("the benchmark's own path");
        let status = Command::new(exe).args(again).status().expect("start the benchmark again");
        std::process::exit(status.code().unwrap_or(1));
    }
    let factor = |name: &str, min: f64, example: &str| -> Option<f64> {
        let v: Option<f64> = arg(&args, name);
        if args.iter().any(|a| a == name) && v.is_none_or(|m| !m.is_finite() || m <= min) {
            eprintln!("preloop-bench: {name} takes a number over {min} (e.g. {example})");
            std::process::exit(2);
        }
        v
    };
    let max_ratio = factor("--max-ratio", 0.0, "1.5");
    let max_slowdown = factor("--max-slowdown", 1.0, "1.1");
    let self_test = factor("--self-test-slowdown", 1.0, "1.2");
    let write_baseline_to: Option<String> = arg(&args, "--write-baseline");
    if let Some(path) = arg::<String>(&args, "--trace") {
        match std::fs::File::create(&path) {
            Ok(f) => *gate::TRACE.lock().unwrap_or_else(|e| e.into_inner()) = Some(f),
            Err(e) => {
                eprintln!("preloop-bench: --trace {path}: {e}");
                std::process::exit(2);
            }
        }
    }
    // The baselines built in, or `--baseline FILE` (a candidate, before it is committed).
    let (baseline_name, baseline_text) = match arg::<String>(&args, "--baseline") {
        Some(path) => match std::fs::read_to_string(&path) {
            Ok(t) => (path, t),
            Err(e) => {
                eprintln!("preloop-bench: --baseline {path}: {e}");
                std::process::exit(2);
            }
        },
        None => ("bench/gate-baseline.txt".to_string(), GATE_BASELINE.to_string()),
    };
    let baseline = match gate::parse_baseline(&baseline_text) {
        Ok(b) => b.into_iter().collect::<BTreeMap<_, _>>(),
        Err(e) => {
            eprintln!("preloop-bench: {baseline_name}: {e}");
            std::process::exit(2);
        }
    };
    // `--base-bin-dir DIR`: an A/B run, each hook against the base executable's.
    let base_exe: Option<PathBuf> = arg::<String>(&args, "--base-bin-dir").map(|d| Path::new(&d).join("preloop-hooks"));
    if let Some(b) = &base_exe {
        if !b.is_file() {
            eprintln!(
                "preloop-bench: --base-bin-dir: no {} (build the base with scripts/build-gate-base, which prints its directory)",
                b.display()
            );
            std::process::exit(2);
        }
        if max_ratio.is_some() || max_slowdown.is_none() {
            eprintln!(
                "preloop-bench: --base-bin-dir gates each hook against the base's: give --max-slowdown F (e.g. 1.1), not --max-ratio"
            );
            std::process::exit(2);
        }
    }
    let rule = GateRule { max_ratio, max_slowdown, baseline, ab: base_exe.is_some() };
    if self_test.is_some() && max_ratio.is_none() && max_slowdown.is_none() {
        eprintln!("preloop-bench: --self-test-slowdown tests the gate: give --max-slowdown or --max-ratio too");
        std::process::exit(2);
    }
    let tmp = std::env::temp_dir().join(format!("preloop-bench-{}", std::process::id()));
    let exe = bin_dir().join("preloop-hooks");
    // The hook commands as `preloop-hooks install` lays them out: hard links
    // to the one executable, each started under its own name.
    let bins = match hook_commands(&exe, &tmp.join("bin")) {
        Ok(d) => d,
        Err(e) => {
            eprintln!(
                "preloop-bench: cannot lay out the hook commands of {}: {e} (build it with scripts/build-release)",
                exe.display()
            );
            std::process::exit(1);
        }
    };
    // The base executable's hook commands, laid out the same way, and its own
    // home: its session files are its own, whatever their format was then.
    let base_bins = match &base_exe {
        None => None,
        Some(b) => match hook_commands(b, &tmp.join("base-bin")) {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("preloop-bench: cannot lay out the base's hook commands ({}): {e}", b.display());
                std::process::exit(1);
            }
        },
    };
    let server = FakeServer::start();
    // The real server allows 20 notes an hour; the with-note cases send one per run.
    server.set_rate_limit(None);
    server.set_request_logging(false);
    // Permission requests (Codex PermissionRequest, Cursor before*Execution)
    // would wait for a human approval: the agent's native tool approvals are
    // switched off, so the fake answers them at once too.
    server.set_native_tool_approvals(&server.agent_id(), true);
    let url = server.url();
    let token = server.runtime_token();
    let notes = Rc::new(ServerNotes { url: format!("{url}/api/v1/operator-notes"), user_token: server.user_token() });
    let home_of = |m: Mode| tmp.join(m.as_str());
    let base_home = tmp.join("server-base");
    std::fs::create_dir_all(&base_home).unwrap();
    let env_of = |m: Mode| {
        let mut e = base_env(&home_of(m));
        if m == Mode::Server {
            e.push(("PRELOOP_URL".into(), url.clone()));
            e.push(("PRELOOP_TOKEN".into(), token.clone()));
        }
        e
    };
    for m in [Mode::Server, Mode::Local] {
        std::fs::create_dir_all(home_of(m)).unwrap();
    }
    let base_server_env = {
        let mut e = base_env(&base_home);
        e.push(("PRELOOP_URL".into(), url.clone()));
        e.push(("PRELOOP_TOKEN".into(), token.clone()));
        e
    };

    let mut cases: Vec<Case> = Vec::new();
    let floor_meta = |role: &'static str| Meta { section: "floor", role, ..Meta::default() };
    cases.push(Case::new(
        "floor: /bin/true",
        floor_meta("true"),
        PathBuf::from("/bin/true"),
        vec![],
        Box::new(|_| Vec::new()),
    ));
    // The floors and references make the very request a Claude Code
    // PreToolUse makes for a registered session (its capture's tool call,
    // cwd and event name): the server then does the same work for them as
    // for the hook (an unregistered session skips the timeline row and the
    // note claim), so the ratios hold only what the client costs.
    let pre_tool_use: Value = {
        let claude = &harnesses()[0];
        let start = claude.start();
        for sid in ["bench-floor", "bench-python"] {
            run_untimed(&bins.join(start.def.binary), &env_of(Mode::Server), &payload(start.fixture, false, sid));
        }
        let ev = claude.events.iter().find(|e| e.def.on == "PreToolUse").expect("Claude Code has PreToolUse");
        serde_json::from_str(ev.fixture).expect("fixture is JSON")
    };
    let check = json!({
        "tool_name": pre_tool_use["tool_name"],
        "tool_input": pre_tool_use["tool_input"],
        "source": "claude_code",
        "hook_event_name": "PreToolUse",
        "session_id": "bench-floor",
        "cwd": pre_tool_use["cwd"],
        "evaluation_phase": "pre_tool_use",
    })
    .to_string();
    let check: &'static [u8] = Box::leak(check.into_bytes().into_boxed_slice());
    let check_body = move || check.to_vec();
    let addr = url.trim_start_matches("http://").to_string();
    let own_floor_env: Vec<(String, String)> =
        vec![("FLOOR_ADDR".into(), addr.clone()), ("FLOOR_TOKEN".into(), token.clone())];
    let floor_env = vec![
        ("FLOOR_ADDR".into(), addr),
        ("FLOOR_PATH".into(), "/api/v1/agents/permission-check".into()),
        ("FLOOR_TOKEN".into(), token.clone()),
    ];
    // The one-call C floor, as `cc -O2` builds by default (dynamic, PIE; the
    // reference row every earlier round was stated against), and the same
    // linked statically, as the hooks and their own floors are.
    let c_floor = own_floor::build(&tmp, "floor-hook-c", C_FLOOR_SRC, &[], false);
    let c_floor_static = own_floor::build(&tmp, "floor-hook-c-static", C_FLOOR_SRC, &[], true);
    let (c_floor, c_floor_static) = match (c_floor, c_floor_static) {
        (Ok(d), Ok(s)) => (d, s),
        (Err(why), _) | (_, Err(why)) => {
            eprintln!(
                "preloop-bench: cannot build the C floor (bench/c/floor_hook.c), which every ratio is stated against: {why}\n\
                 Install a C compiler (the workspace needs one anyway: ring) or point CC at one."
            );
            let _ = std::fs::remove_dir_all(&tmp);
            std::process::exit(1);
        }
    };
    let compiler = c_floor.compiler.clone();
    cases.push(Case::new(
        "floor (C): start + stdin + one loopback HTTP POST on a raw socket + print {} (cc -O2: dynamic, PIE)",
        floor_meta("c_floor"),
        c_floor.program,
        floor_env.clone(),
        Box::new(move |_| check_body()),
    ));
    if c_floor_static.static_link {
        cases.push(Case::new(
            "floor (C), linked -static",
            floor_meta("c_floor_static"),
            c_floor_static.program,
            floor_env.clone(),
            Box::new(move |_| check_body()),
        ));
    }
    cases.push(Case::new(
        "floor (Rust): the same in Rust (preloop-floor-hook)",
        floor_meta("rust_floor"),
        bin_dir().join("preloop-floor-hook"),
        floor_env,
        Box::new(move |_| check_body()),
    ));
    if let Some(curl) = which("curl") {
        let mut c = Case::new(
            "reference: curl, same request",
            floor_meta("curl"),
            curl,
            vec![],
            Box::new(move |_| check_body()),
        );
        c.args = [
            "-s",
            "-o",
            "/dev/null",
            "-X",
            "POST",
            "-H",
            &format!("Authorization: Bearer {token}"),
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            "@-",
            &format!("{url}/api/v1/agents/permission-check"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        cases.push(c);
    }
    if let Some(py) = which("python3") {
        let script = "import json,sys,urllib.request,os\nd=json.load(sys.stdin)\nb=json.dumps({'tool_name':d['tool_name'],'tool_input':d['tool_input'],'source':'claude_code','session_id':d['session_id'],'evaluation_phase':'pre_tool_use'}).encode()\nr=urllib.request.Request(os.environ['PRELOOP_URL']+'/api/v1/agents/permission-check',data=b,headers={'Authorization':'Bearer '+os.environ['PRELOOP_TOKEN'],'Content-Type':'application/json'})\nres=json.load(urllib.request.urlopen(r,timeout=5))\nif res.get('operator_note'): print(json.dumps({'hookSpecificOutput':{'hookEventName':'PreToolUse','additionalContext':res['operator_note']}}))\n";
        let fixture = harnesses()[0].events[2].fixture;
        let mut c = Case::new(
            "reference: Python urllib hook",
            floor_meta("python"),
            py,
            env_of(Mode::Server),
            Box::new(move |_| payload(fixture, false, "bench-python")),
        );
        c.args = vec!["-c".into(), script.into()];
        cases.push(c);
    }

    // Every hook binary, both modes, without and with a pending note.
    let mut n = 0;
    for h in harnesses() {
        let start_fixture = h.start().fixture;
        let cursor = h.cursor;
        for ev in &h.events {
            for mode in [Mode::Server, Mode::Local] {
                // The gate's self-test adds a twin of each no-note
                // server-mode Claude Code hook (between them every shape: two
                // calls in turn, one, two at once, none and a detached
                // worker) whose every run is stretched by `slowdown`.
                let twin = self_test
                    .filter(|_| mode == Mode::Server && h.slug == "claude-code")
                    .map(|f| (false, Some(f), false));
                // An A/B run adds each no-note server-mode hook of the base.
                // (A hook the base does not have is left without one: the
                // gate then says to name a newer base.)
                let base = base_bins
                    .as_ref()
                    .filter(|b| mode == Mode::Server && b.join(ev.def.binary).exists())
                    .map(|_| (false, None, true));
                for (note, slowdown, is_base) in
                    [(false, None, false), (true, None, false)].into_iter().chain(twin).chain(base)
                {
                    n += 1;
                    let sid = format!("bench-{}-{n:03}", h.slug);
                    let (bins, env, home) = match &base_bins {
                        Some(b) if is_base => (b, base_server_env.clone(), base_home.clone()),
                        _ => (&bins, env_of(mode), home_of(mode)),
                    };
                    let start_bin = bins.join(h.start().def.binary);
                    let meta = Meta {
                        binary: Some(ev.def.binary.to_string()),
                        harness: h.slug,
                        event: ev.def.on,
                        mode: Some(mode),
                        note,
                        ..Meta::default()
                    };
                    let name = format!(
                        "{} {}, {}, {}{}{}",
                        h.slug,
                        ev.def.on,
                        mode.as_str(),
                        if note { "with note" } else { "no note" },
                        slowdown.map(|f| format!(", made {f}x slower (self-test)")).unwrap_or_default(),
                        if is_base { ", base" } else { "" }
                    );
                    let section = match (slowdown, is_base) {
                        (Some(_), _) => "self_test",
                        (None, true) => "base",
                        (None, false) => "",
                    };
                    let meta = Meta { section, ..meta };
                    let fixture = ev.fixture;
                    let send: Rc<dyn Fn(&str)> = match mode {
                        Mode::Server => {
                            let notes = notes.clone();
                            Rc::new(move |s: &str| notes.send(s))
                        }
                        Mode::Local => {
                            let home = home.clone();
                            Rc::new(move |s: &str| send_local(&home, s))
                        }
                    };
                    let ends = ev.def.role == Role::End;
                    let case = if ends {
                        // SessionEnd ends its session: each run gets its own,
                        // registered (untimed) just before.
                        let (sb, env2, sid2) = (start_bin.clone(), env.clone(), sid.clone());
                        let mut c = Case::new(
                            name,
                            meta,
                            bins.join(ev.def.binary),
                            env.clone(),
                            Box::new(move |i| payload(fixture, cursor, &format!("{sid2}-{i}"))),
                        );
                        let sid3 = sid.clone();
                        let home2 = home.clone();
                        let mut last: Option<String> = None;
                        c.before = Some(Box::new(move |i| {
                            // The last run's detached worker (server mode) is
                            // done before the next run starts: it frees files
                            // and calls the server, and measured beside the
                            // next run it made that one slower by up to 2x.
                            if let Some(prev) = last.take() {
                                wait_gone(&RunFiles::new(&home2, &prev).ending, Duration::from_secs(2));
                            }
                            let s = format!("{sid3}-{i}");
                            last = Some(s.clone());
                            run_untimed(&sb, &env2, &payload(start_fixture, cursor, &s));
                            if note {
                                send(&s);
                            }
                        }));
                        c
                    } else {
                        run_untimed(&start_bin, &env, &payload(start_fixture, cursor, &sid));
                        let sid2 = sid.clone();
                        let mut c = Case::new(
                            name,
                            meta,
                            bins.join(ev.def.binary),
                            env.clone(),
                            Box::new(move |_| payload(fixture, cursor, &sid2)),
                        );
                        if note {
                            c.before = Some(Box::new(move |_| send(&sid)));
                        }
                        c
                    };
                    cases.push(Case { slowdown, ..case });
                }
            }
        }
    }

    // A PreToolUse carrying a full spool (refilled, untimed, before each run).
    for mode in [Mode::Server, Mode::Local] {
        let sid = format!("bench-spool-{}", mode.as_str());
        let home = home_of(mode);
        let mut c = claude_pre_tool_use(
            &bins,
            env_of(mode),
            &sid,
            format!("claude-code PreToolUse, {}, carrying a full spool (5)", mode.as_str()),
            Meta { mode: Some(mode), section: "spool", ..Meta::default() },
        );
        c.before = Some(Box::new(move |_| fill_spool(&home, &sid, 5)));
        cases.push(c);
    }

    // Lineage (docs/guarantees.md, "Lineage"): a session's first
    // registration walks its ancestors above its harness process for a
    // parent run when no PRELOOP_PARENT_SESSION_ID arrived. A fresh Codex
    // session per run, registered by its SessionStart: without the variable
    // (the walk; the benchmark's own ancestors serve no session, so it reads
    // them all: the most a walk costs at this depth) and with it, naming a
    // live session (no walk). Everything else, the harness process recorded
    // included, is the same in both. Server mode only: on the local inbox a
    // named parent is checked against every session file of the machine
    // (LocalInbox), which the walk does not do, so the pair would not differ
    // by the walk alone.
    let codex = harnesses().into_iter().find(|h| h.slug == "codex").expect("Codex is a harness");
    let codex_start = codex.start();
    {
        let mode = Mode::Server;
        let env = env_of(mode);
        let parent_sid = format!("bench-lineage-parent-{}", mode.as_str());
        run_untimed(&bins.join(codex_start.def.binary), &env, &payload(codex_start.fixture, false, &parent_sid));
        let parent = preloop_shared::session::read_session_file(&home_of(mode), &parent_sid)
            .ok()
            .flatten()
            .map(|f| f.runtime_session_id)
            .expect("the lineage case's parent session registered");
        for walk in [true, false] {
            let mut env = env.clone();
            if !walk {
                env.push(("PRELOOP_PARENT_SESSION_ID".into(), parent.clone()));
            }
            let sid = format!("bench-lineage-{}-{}", mode.as_str(), if walk { "walk" } else { "variable" });
            let fixture = codex_start.fixture;
            cases.push(Case::new(
                format!(
                    "lineage: codex SessionStart, first registration, {}, {}",
                    mode.as_str(),
                    if walk { "ancestry walk (no variable)" } else { "PRELOOP_PARENT_SESSION_ID (no walk)" }
                ),
                Meta {
                    binary: Some(codex_start.def.binary.to_string()),
                    harness: codex.slug,
                    event: codex_start.def.on,
                    mode: Some(mode),
                    section: "lineage",
                    role: if walk { "walk" } else { "variable" },
                    ..Meta::default()
                },
                bins.join(codex_start.def.binary),
                env,
                Box::new(move |i| payload(fixture, false, &format!("{sid}-{i}"))),
            ));
        }
    }

    // The local claim as the inbox grows: notes stored for 1,000 other sessions.
    let mut seeding = Duration::ZERO;
    if only.as_deref().is_none_or(|o| "claim".contains(o) || o.contains("claim")) {
        for &stored in &scales {
            let home = tmp.join(format!("scale-{stored}"));
            let t = Instant::now();
            seed_inbox(&home, 1_000, stored);
            seeding += t.elapsed();
            let env = base_env(&home);
            for note in [false, true] {
                let sid = format!("bench-claim-{stored}-{note}");
                let mut c = claude_pre_tool_use(
                    &bins,
                    env.clone(),
                    &sid,
                    format!(
                        "claim (claude-code PreToolUse, local), {stored} notes stored, {}",
                        if note { "with note" } else { "no note" }
                    ),
                    Meta { mode: Some(Mode::Local), note, section: "scale", stored, ..Meta::default() },
                );
                if note {
                    let home = home.clone();
                    c.before = Some(Box::new(move |_| send_local(&home, &sid)));
                }
                cases.push(c);
            }
        }
    }
    if let Some(o) = &only {
        cases.retain(|c| c.meta.section == "floor" || c.name.contains(o.as_str()));
    }

    // Each gated hook's own floor: its calls, read off the fake server while
    // it runs (own_floor.rs), compiled into one C program (an argument picks
    // the hook's table), then one case per hook; a self-test twin shares its
    // hook's floor.
    let hooks: Vec<usize> = (0..cases.len()).filter(|&k| gated(&cases[k]) && cases[k].slowdown.is_none()).collect();
    server.set_request_logging(true);
    let mut floors: Vec<(String, Vec<own_floor::Call>)> = Vec::new();
    let mut floor_inputs = Vec::new();
    for (f, &k) in hooks.iter().enumerate() {
        match own_floor::derive(&server, &mut cases[k], 1_000_000 + 10 * f) {
            Ok((calls, input)) => {
                floors.push((cases[k].meta.binary.clone().unwrap_or_default(), calls));
                floor_inputs.push(input);
            }
            Err(why) => {
                eprintln!("preloop-bench: {why}");
                let _ = std::fs::remove_dir_all(&tmp);
                std::process::exit(1);
            }
        }
    }
    server.set_request_logging(false);
    server.clear_requests();
    let floor_build = if floors.is_empty() {
        None
    } else {
        match own_floor::build_floors(&tmp, &floors) {
            Ok(b) => Some(b),
            Err(why) => {
                eprintln!("preloop-bench: cannot build the per-hook floors (bench/c/floor_calls.c): {why}");
                let _ = std::fs::remove_dir_all(&tmp);
                std::process::exit(1);
            }
        }
    };
    for (f, (&k, input)) in hooks.iter().zip(floor_inputs).enumerate() {
        let program = floor_build.as_ref().map(|b| b.program.clone()).expect("built above");
        let m = cases[k].meta.clone();
        let mut c = Case::new(
            format!("{}'s own floor: {}", m.binary.as_deref().unwrap_or(""), own_floor::labels(&floors[f].1)),
            Meta { section: "own_floor", role: "own_floor", ..m },
            program,
            own_floor_env.clone(),
            Box::new(move |_| input.clone()),
        );
        c.args = vec![f.to_string()];
        cases.push(c);
        let floor = cases.len() - 1;
        for j in 0..cases.len() {
            if gated(&cases[j]) && cases[j].meta.binary == cases[k].meta.binary {
                cases[j].floor = Some(floor);
            }
        }
    }
    let calls_of: BTreeMap<String, String> =
        floors.iter().map(|(hook, calls)| (hook.clone(), own_floor::labels(calls))).collect();
    // An A/B run: each gated hook's reference is the same hook of the base
    // (which also runs after that hook's own floor in the round-robin pass,
    // for its ratio to it); a self-test twin's is its own unslowed hook, so
    // the twin is exactly a hook made that much slower than its reference,
    // whatever the candidate's speed against the base.
    let base_cases: Vec<usize> = (0..cases.len()).filter(|&b| cases[b].meta.section == "base").collect();
    for b in base_cases {
        let binary = cases[b].meta.binary.clone();
        let same = |c: &Case, section: &str| {
            c.meta.section == section && c.meta.binary == binary && c.meta.mode == Some(Mode::Server) && !c.meta.note
        };
        let Some(k) = (0..cases.len()).find(|&k| same(&cases[k], "")) else {
            continue;
        };
        cases[b].floor = cases[k].floor;
        cases[k].base = Some(b);
        let twins: Vec<usize> = (0..cases.len()).filter(|&t| same(&cases[t], "self_test")).collect();
        for t in twins {
            cases[t].base = Some(k);
        }
    }

    // Measure, round-robin: run i of every case, then run i + 1. The C floor
    // also runs after every FLOOR_EVERY-th case, so its samples come from the
    // whole round, as the hooks' do (they are pooled into its one row).
    let c_idx = cases.iter().position(|c| c.meta.role == "c_floor").expect("the C floor case");
    // The heavy references (curl, the Python hook: 6 and 100 ms of other
    // code through the caches) are measured in rounds of their own after the
    // others: interleaved, whatever case ran next read 1.6-1.8x the floor in
    // the round (measured with Claude Code's and Codex's SessionStart in that
    // place) against 1.1-1.2x paired with the floor.
    let heavy = |c: &Case| matches!(c.meta.role, "curl" | "python");
    // A gated hook runs straight after its own floor (each of them then
    // follows a different executable, as every case of the round does).
    let mut order = Vec::with_capacity(cases.len() * (FLOOR_EVERY + 1) / FLOOR_EVERY + 1);
    let mut since_floor = 0;
    for j in (0..cases.len()).filter(|&j| !heavy(&cases[j]) && cases[j].meta.section != "own_floor") {
        if let Some(f) = cases[j].floor {
            order.push(f);
        }
        order.push(j);
        if j != c_idx {
            since_floor += 1;
            if since_floor % FLOOR_EVERY == 0 && j + 1 < cases.len() {
                order.push(c_idx);
            }
        }
    }
    let references: Vec<usize> = (0..cases.len()).filter(|&j| heavy(&cases[j])).collect();
    let started = Instant::now();
    for round in [order, references] {
        for i in 0..(runs + warmup) {
            for &j in &round {
                let c = &mut cases[j];
                if let Some(d) = c.run_once(i)
                    && i >= warmup
                {
                    c.times.push(d);
                }
            }
        }
    }
    let elapsed = started.elapsed();
    let walk = walk_in_process(&home_of(Mode::Local));
    // Peak RSS: three more runs of every case through a tiny spawner.
    let spawner = bin_dir().join("preloop-bench-rss");
    for k in 0..3 {
        for c in cases.iter_mut() {
            c.rss_once(runs + warmup + k, &spawner);
        }
    }
    let floors_linked = floor_build.as_ref().map(|b| b.static_link);
    report(
        &cases,
        &exe,
        runs,
        warmup,
        elapsed,
        seeding,
        &compiler,
        floors_linked,
        &calls_of,
        walk,
        json_out.as_deref(),
    );
    let next_run = runs + warmup + 3;
    let (gate_ok, self_test_ok) = if rule.max_ratio.is_some() || rule.max_slowdown.is_some() {
        gate(&mut cases, &rule, &calls_of, next_run)
    } else {
        (true, true)
    };
    let baseline_written = write_baseline_to.map(|path| {
        let r = write_baseline(&mut cases, &path, 16, next_run + 1_000_000);
        if let Err(e) = &r {
            eprintln!("preloop-bench: cannot write {path}: {e}");
        }
        r.is_ok()
    });
    // The last SessionEnds' detached workers are done before their home goes.
    if let Ok(dir) = std::fs::read_dir(home_of(Mode::Server).join("run")) {
        for e in dir.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "ending")) {
            wait_gone(&e.path(), Duration::from_secs(2));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    // A hook always exits 0 (the harness contract): anything else, or a case
    // that could not run at all, means the benchmark (or a hook) has rotted.
    if cases.iter().any(|c| c.failures > 0 || c.times.is_empty()) {
        eprintln!("preloop-bench: some cases failed (see WARNING above)");
        std::process::exit(1);
    }
    if !gate_ok {
        eprintln!(
            "preloop-bench: a no-note server-mode hook is surely over its limit against its own floor (see the regression gate above)"
        );
        std::process::exit(1);
    }
    if !self_test_ok {
        eprintln!(
            "preloop-bench: the gate's self-test failed: a hook made deliberately slower passed the gate (see the rows marked self-test above)"
        );
        std::process::exit(1);
    }
    if baseline_written == Some(false) {
        std::process::exit(1);
    }
}

/// How the gate sets each hook's limit (ratio to its own floor).
struct GateRule {
    /// `--max-ratio X`: every hook ≤ X × its own floor.
    max_ratio: Option<f64>,
    /// `--max-slowdown F`: every hook ≤ F × its baseline ratio (bench/gate-baseline.txt).
    max_slowdown: Option<f64>,
    baseline: BTreeMap<String, f64>,
    /// An A/B run (`--base-bin-dir`): `max_slowdown` is against the base's
    /// same hook, not the baseline.
    ab: bool,
}

impl GateRule {
    /// The hook's limit and how it came about, or why it has none.
    fn limit(&self, hook: &str) -> Result<(f64, String), String> {
        if self.ab {
            return self.max_slowdown.map(|f| (f, format!("{f} × base"))).ok_or_else(|| "no limit".to_string());
        }
        let mut limit: Option<(f64, String)> = self.max_ratio.map(|m| (m, format!("{m}")));
        if let Some(f) = self.max_slowdown {
            let Some(b) = self.baseline.get(hook) else {
                return Err(format!(
                    "no baseline for {hook} in bench/gate-baseline.txt: measure it with `scripts/bench --only {hook} --write-baseline FILE` and add its line"
                ));
            };
            if limit.as_ref().is_none_or(|(l, _)| b * f < *l) {
                limit = Some((b * f, format!("{:.2} ({f} × {b:.2})", b * f)));
            }
        }
        limit.ok_or_else(|| "no limit".to_string())
    }
}

/// The regression gate: every no-note server-mode hook against its
/// reference, with its limit from [`GateRule`]: its own floor (a stored
/// baseline ratio or `--max-ratio`), or in an A/B run the same hook of the
/// base executable. The round-robin pass reads each ratio first; then every
/// hook is re-measured against its reference in time blocks until a rank
/// test decides (gate.rs), and fails only if surely over, and the table
/// says why it was re-measured. The self-test's slowed twins must fail it
/// (in an A/B run each against its own unslowed hook). `next_run` numbers
/// the extra runs (SessionEnd registers a fresh session per run index).
/// Prints a table; returns (every real hook passed, every twin failed).
fn gate(cases: &mut [Case], rule: &GateRule, calls_of: &BTreeMap<String, String>, mut next_run: usize) -> (bool, bool) {
    let median_ms = |t: &[Duration]| stats_of(t).map(|s| ms(s.median));
    let rr_ratio = |cases: &[Case], a: usize, b: Option<usize>| -> Option<f64> {
        Some(median_ms(&cases[a].times)? / median_ms(&cases[b?].times)?)
    };
    let show = |r: Option<f64>| r.map(|r| format!("{r:.2}")).unwrap_or_else(|| "no runs".into());
    let desc = match (rule.ab, rule.max_ratio, rule.max_slowdown) {
        (true, _, Some(f)) => format!("≤ {f}× the same hook of the base executable (A/B)"),
        (_, Some(m), Some(f)) => format!("≤ {m}× its own floor and ≤ {f}× its baseline ratio"),
        (_, Some(m), None) => format!("≤ {m}× its own floor"),
        (_, None, Some(f)) => format!("≤ {f}× its baseline ratio to its own floor (bench/gate-baseline.txt)"),
        (_, None, None) => "(no limit)".into(),
    };
    let reference = if rule.ab { "the base's same hook" } else { "its own floor" };
    println!("\n### Regression gate: every no-note server-mode hook's median {desc}\n");
    println!(
        "Every hook is decided against {reference} in pairs of time blocks ({} runs each after {} thrown away; reference, hook, hook, reference, ...), one ratio per pair (the blocks' second-fastest runs, gate.rs), until a Wilcoxon signed-rank test or the sign test is sure: it fails if a hook right at its limit would read that far over it with probability ≤ {}, passes when that far under it with probability ≤ {}, and passes as undecided after {} pairs. The round-robin ratio is shown, and whether it was over the limit, but decides nothing: under load it strays from the blocks' by up to 40%, either way. Self-test rows are a hook's twin with every run made slower on purpose{}: they must fail.\n",
        gate::BLOCK_RUNS,
        gate::BLOCK_WARM,
        gate::ALPHA_FAIL,
        gate::ALPHA_PASS,
        gate::MAX_PAIRS,
        if rule.ab { ", measured against its own unslowed hook" } else { "" },
    );
    let (mut ok, mut self_test_ok) = (true, true);
    // Each hook's limit (or why it has none) and round-robin ratios, then all
    // of them re-measured in rounds (gate::remeasure), then the table.
    let mut rows = Vec::new();
    let mut jobs = Vec::new();
    for k in (0..cases.len()).filter(|&k| gated(&cases[k])) {
        let bin = cases[k].meta.binary.clone().unwrap_or_default();
        let twin = cases[k].slowdown.is_some();
        let against = if rule.ab { cases[k].base } else { cases[k].floor };
        let limit = match against {
            None if rule.ab && twin => Err("no unslowed hook to compare with".to_string()),
            None if rule.ab => Err(format!(
                "the base executable has no {bin}: name a newer base in bench/gate-base (scripts/build-gate-base)"
            )),
            None => Err("no own floor".to_string()),
            Some(r) => rule.limit(&bin).map(|(l, desc)| (r, l, desc)),
        };
        // Round-robin: the hook against its own floor, (A/B) the base's hook
        // against the same floor, and the hook against its reference.
        let floor_rr = rr_ratio(cases, k, cases[k].floor);
        let base_floor_rr = against.filter(|_| rule.ab).and_then(|b| rr_ratio(cases, b, cases[b].floor));
        let ref_rr = against.and_then(|r| rr_ratio(cases, k, Some(r)));
        let why = gate::remeasure_reason(ref_rr, limit.as_ref().ok().map(|(_, l, _)| *l));
        if let Ok((r, l, _)) = &limit {
            jobs.push((k, *r, *l));
        }
        rows.push((k, bin, limit, floor_rr, base_floor_rr, ref_rr, why));
    }
    let over_rr: Vec<String> = rows
        .iter()
        .filter(|r| r.6.starts_with("over"))
        .map(|r| match cases[r.0].slowdown {
            Some(f) => format!("{}'s {f}× twin", r.1),
            None => r.1.clone(),
        })
        .collect();
    println!(
        "Re-measured in blocks: all {} hooks with a limit{}. {} read over their limit in the round-robin pass{}; the others are re-measured too, because a round-robin ratio under load strays from the blocks' by up to 40% either way, so it cannot clear a hook (docs/performance.md, \"Regression gate\").\n",
        jobs.len(),
        if rule.ab {
            ", each against the base's same hook (the twins against their own unslowed hook)"
        } else {
            ", each against its own floor"
        },
        over_rr.len(),
        if over_rr.is_empty() { String::new() } else { format!(" ({})", over_rr.join(", ")) },
    );
    let started = Instant::now();
    let runs_before = next_run;
    let measured = gate::remeasure(cases, &jobs, &mut next_run);
    let pairs: usize = measured.iter().map(|m| m.ratios.len()).sum();
    println!(
        "The re-measurement took {pairs} pairs of blocks ({} runs) in {:.0} s.\n",
        next_run - runs_before,
        started.elapsed().as_secs_f64()
    );
    if rule.ab {
        println!(
            "| hook | calls it makes | limit | ÷ own floor (round-robin, medians) | base ÷ own floor (round-robin) | ÷ reference (round-robin) | re-measured because | pairs over limit | median pair ratio | passed |"
        );
        println!("|---|---|---|---:|---:|---:|---|---:|---:|---|");
    } else {
        println!(
            "| hook | calls it makes | limit | ÷ own floor (round-robin, medians) | re-measured because | pairs over limit | median pair ratio | passed |"
        );
        println!("|---|---|---|---:|---|---:|---:|---|");
    }
    let mut measured = measured.into_iter();
    for (k, bin, limit, floor_rr, base_floor_rr, ref_rr, why) in rows {
        let twin = cases[k].slowdown.is_some();
        let name = match cases[k].slowdown {
            Some(f) => format!("{bin}, made {f}× slower (self-test)"),
            None => bin.clone(),
        };
        let calls = calls_of.get(&bin).map(String::as_str).unwrap_or("");
        let ratios = if rule.ab {
            format!("{} | {} | {}", show(floor_rr), show(base_floor_rr), show(ref_rr))
        } else {
            show(floor_rr)
        };
        let limit_desc = match limit {
            Ok((_, _, desc)) => desc,
            Err(why) => {
                println!("| {name} | {calls} | {why} | {ratios} | not measured | | | NO |");
                if twin {
                    self_test_ok = false
                } else {
                    ok = false
                }
                continue;
            }
        };
        let m = measured.next().expect("one measurement per job");
        let failed = m.over_limit == Some(true);
        let verdict = match (m.over_limit, twin) {
            (Some(true), false) => "NO".to_string(),
            (Some(true), true) => "no, as it must (self-test passed)".to_string(),
            (over, t) => format!(
                "yes{}{}",
                if over.is_none() { " (undecided: within the noise of its limit)" } else { "" },
                if t { ": the self-test FAILED (a slower hook passed)" } else { "" }
            ),
        };
        println!(
            "| {name} | {calls} | {limit_desc} | {ratios} | {why} | {} of {} | {:.2} | {verdict} |",
            m.over,
            m.ratios.len(),
            m.ratio()
        );
        if twin {
            self_test_ok &= failed;
        } else {
            ok &= !failed;
        }
    }
    (ok, self_test_ok)
}

/// `--write-baseline FILE`: every gated hook measured against its own floor
/// in `pairs` pairs of time blocks; FILE gets the median pair ratio per hook
/// (bench/gate-baseline.txt's format).
fn write_baseline(cases: &mut [Case], path: &str, pairs: usize, mut next_run: usize) -> std::io::Result<()> {
    let mut out = format!(
        "# preloop-bench --write-baseline: each no-note server-mode hook's ratio to its own floor, the median\n# over {pairs} pairs of time blocks ({} runs each, gate.rs); the pairs' range in the comment.\n",
        gate::BLOCK_RUNS
    );
    println!("\n### Baseline: each hook against its own floor, {pairs} pairs of time blocks\n");
    println!("| hook | median pair ratio | lowest | highest |");
    println!("|---|---:|---:|---:|");
    let jobs: Vec<(usize, usize)> = (0..cases.len())
        .filter(|&k| gated(&cases[k]) && cases[k].slowdown.is_none())
        .filter_map(|k| Some((k, cases[k].floor?)))
        .collect();
    let measured = gate::measure(cases, &jobs, pairs, &mut next_run);
    for (&(k, _), r) in jobs.iter().zip(measured) {
        let (lo, hi) = r.iter().fold((f64::INFINITY, 0.0f64), |(l, h), x| (l.min(*x), h.max(*x)));
        let bin = cases[k].meta.binary.clone().unwrap_or_default();
        let med = gate::median(&r);
        println!("| {bin} | {med:.3} | {lo:.3} | {hi:.3} |");
        out.push_str(&format!("{bin} {med:.3}  # {lo:.3}-{hi:.3}\n"));
    }
    std::fs::write(path, out)
}

/// The ancestry walk alone, in this process: what a first registration
/// without `PRELOOP_PARENT_SESSION_ID` adds, read ancestor by ancestor
/// (`/proc/<pid>/stat`, then one failed `open` of `procs/<pid>-<start>`
/// under `home`). Returns the ancestors read per walk and the mean time of
/// one walk.
fn walk_in_process(home: &Path) -> Option<(usize, Duration)> {
    use preloop_shared::lineage::{Ancestry, find_parent};
    const WALKS: u32 = 2_000;
    let depth = Ancestry::here(true).ancestors.len();
    if depth == 0 {
        return None;
    }
    let t = Instant::now();
    for _ in 0..WALKS {
        let a = Ancestry::here(true);
        std::hint::black_box(find_parent(home, &a, preloop_shared::backend::HookMode::Local, None));
    }
    Some((depth, t.elapsed() / WALKS))
}

// ----- report ------------------------------------------------------------------

#[allow(clippy::too_many_arguments)]
fn report(
    cases: &[Case],
    exe: &Path,
    runs: usize,
    warmup: usize,
    elapsed: Duration,
    seeding: Duration,
    compiler: &str,
    floors_linked: Option<bool>,
    calls_of: &BTreeMap<String, String>,
    walk: Option<(usize, Duration)>,
    json_out: Option<&str>,
) {
    let stats: Vec<Option<Stats>> = cases.iter().map(Case::stats).collect();
    let floor_stats = |role: &str| {
        cases.iter().zip(&stats).find(|(c, _)| c.meta.section == "floor" && c.meta.role == role).and_then(|(_, s)| *s)
    };
    let median_of = |role: &str| floor_stats(role).map(|s| ms(s.median));
    let truth = median_of("true");
    let c_floor = floor_stats("c_floor");
    let floor = c_floor.map(|s| ms(s.median));
    let floor_p95 = c_floor.map(|s| ms(s.p95));
    let rust_floor = median_of("rust_floor");
    let curl = median_of("curl");
    let python = median_of("python");
    let ratio = |a: f64, b: Option<f64>| b.map(|b| format!("{:.2}", a / b)).unwrap_or_else(|| "n/a".into());
    let cell = |s: Option<Stats>| {
        s.map(|s| format!("{:.2} | {:.2}", ms(s.median), ms(s.p95))).unwrap_or_else(|| "failed | ".into())
    };

    println!(
        "preloop-bench: {runs} runs per case after {warmup} warm-up runs, round-robin over {} cases, the C floor also after every {FLOOR_EVERY}th case ({:.0} s, inbox seeding {:.0} s); wall time per process (spawn, stdin, exit). C floor built with {compiler}, -O2.\n",
        cases.len(),
        elapsed.as_secs_f64(),
        seeding.as_secs_f64()
    );
    let failed: Vec<String> = cases
        .iter()
        .filter(|c| c.failures > 0 || c.times.is_empty())
        .map(|c| format!("{} ({} non-zero exits, {} runs)", c.name, c.failures, c.times.len()))
        .collect();
    if !failed.is_empty() {
        println!("WARNING: {}\n", failed.join("; "));
    }

    println!("### Floors and references\n");
    println!("| case | median ms | p95 ms | peak RSS MB | ÷ C floor (median) | ÷ C floor (p95) |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (c, s) in cases.iter().zip(&stats).filter(|(c, _)| c.meta.section == "floor") {
        println!(
            "| {} | {} | {:.1} | {} | {} |",
            c.name,
            cell(*s),
            c.max_rss_kib as f64 / 1024.0,
            s.map(|s| ratio(ms(s.median), floor)).unwrap_or_default(),
            s.map(|s| ratio(ms(s.p95), floor_p95)).unwrap_or_default()
        );
    }

    // Per hook and mode: no note beside with note, and the ratios.
    println!("\n### Every hook binary\n");
    println!(
        "Ratios are of the no-note path, against the C floor (median ÷ its median, p95 ÷ its p95); server mode also against the Rust floor, curl and the Python hook (medians), local mode also against /bin/true.\n"
    );
    println!(
        "| hook | mode | no note: median ms | p95 ms | with note: median ms | p95 ms | peak RSS MB | ÷ C floor | ÷ C floor p95 | ÷ Rust floor | ÷ curl | ÷ Python | ÷ /bin/true |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let hook_rows = cases.iter().zip(&stats).filter(|(c, _)| c.meta.section.is_empty() && !c.meta.note);
    let mut worst: BTreeMap<&'static str, (f64, String)> = BTreeMap::new();
    let mut note_worst = (0.0f64, String::new());
    let mut bump = |key: &'static str, r: f64, who: &str| {
        let e = worst.entry(key).or_insert((0.0, String::new()));
        if r > e.0 {
            *e = (r, who.to_string());
        }
    };
    for (c, s) in hook_rows {
        let with = cases.iter().zip(&stats).find(|(w, _)| {
            w.meta.section.is_empty() && w.meta.note && w.meta.binary == c.meta.binary && w.meta.mode == c.meta.mode
        });
        let rss = c.max_rss_kib.max(with.map(|(w, _)| w.max_rss_kib).unwrap_or(0));
        let med = s.map(|s| ms(s.median)).unwrap_or(f64::NAN);
        let p95 = s.map(|s| ms(s.p95)).unwrap_or(f64::NAN);
        let label = format!("{} {}", c.meta.harness, c.meta.event);
        let ends = c.meta.event.eq_ignore_ascii_case("SessionEnd");
        let (fm, fp) = (floor.map(|f| med / f), floor_p95.map(|f| p95 / f));
        let (rf, cu, py, tr) = match c.meta.mode {
            Some(Mode::Server) => {
                if let (Some(fm), Some(fp)) = (fm, fp) {
                    bump(if ends { "session_end median" } else { "server median" }, fm, &label);
                    bump(if ends { "session_end p95" } else { "server p95" }, fp, &label);
                }
                for (key, base) in
                    [("server ÷ Rust floor", rust_floor), ("server ÷ Python", python), ("server ÷ curl", curl)]
                {
                    if let Some(b) = base {
                        bump(key, med / b, &label);
                    }
                }
                (ratio(med, rust_floor), ratio(med, curl), ratio(med, python), "".into())
            }
            _ => {
                if let Some(b) = truth {
                    bump("local ÷ /bin/true", med / b, &label);
                }
                if let Some(fm) = fm {
                    bump("local ÷ C floor", fm, &label);
                }
                ("".into(), "".into(), "".into(), ratio(med, truth))
            }
        };
        if let (Some((_, Some(ws))), Some(b)) = (with, floor)
            && ms(ws.median) / b > note_worst.0
        {
            note_worst = (ms(ws.median) / b, format!("{label}, {}", c.meta.mode.map(Mode::as_str).unwrap_or("")));
        }
        println!(
            "| {} | {} | {} | {} | {:.1} | {} | {} | {rf} | {cu} | {py} | {tr} |",
            c.meta.binary.as_deref().unwrap_or(&c.name),
            c.meta.mode.map(Mode::as_str).unwrap_or(""),
            cell(*s),
            with.map(|(_, ws)| cell(*ws)).unwrap_or_else(|| "| ".into()),
            rss as f64 / 1024.0,
            fm.map(|r| format!("{r:.2}")).unwrap_or_else(|| "n/a".into()),
            fp.map(|r| format!("{r:.2}")).unwrap_or_else(|| "n/a".into()),
        );
    }

    // Each no-note server-mode hook against its own floor.
    let own_rows: Vec<_> = cases
        .iter()
        .zip(&stats)
        .filter(|(c, _)| c.meta.section.is_empty() && gated(c))
        .filter_map(|(c, s)| Some((c, (*s)?, stats[c.floor?]?)))
        .collect();
    let mut own_worst = (0.0f64, String::new());
    if !own_rows.is_empty() {
        println!("\n### Every no-note server-mode hook against its own floor\n");
        println!(
            "A hook's own floor (bench/c/floor_calls.c, built {}) reads the same stdin, makes the calls the hook was seen to make (read off the fake server, in order) on one keep-alive connection and prints {{}}: nothing can be faster without making fewer calls. It runs straight before its hook in every round.\n",
            match floors_linked {
                Some(true) => "-O2 -static, as the hooks are linked",
                _ => "-O2, dynamically: no static C library here",
            }
        );
        println!(
            "| hook | calls before it exits | own floor: median ms | p95 ms | hook: median ms | p95 ms | ÷ own floor | ÷ own floor p95 | ÷ one-call C floor |"
        );
        println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
        for (c, s, f) in &own_rows {
            let bin = c.meta.binary.clone().unwrap_or_default();
            let r = ms(s.median) / ms(f.median);
            if r > own_worst.0 {
                own_worst = (r, bin.clone());
            }
            println!(
                "| {bin} | {} | {} | {} | {r:.2} | {:.2} | {} |",
                calls_of.get(&bin).map(String::as_str).unwrap_or(""),
                cell(Some(*f)),
                cell(Some(*s)),
                ms(s.p95) / ms(f.p95),
                ratio(ms(s.median), floor)
            );
        }
    }

    let spool: Vec<_> = cases.iter().zip(&stats).filter(|(c, _)| c.meta.section == "spool").collect();
    if !spool.is_empty() {
        println!("\n### Spool operations\n");
        println!("| case | median ms | p95 ms | peak RSS MB | ÷ same hook, no note |");
        println!("|---|---:|---:|---:|---:|");
        for (c, s) in spool {
            let base = cases
                .iter()
                .zip(&stats)
                .find(|(b, _)| {
                    b.meta.section.is_empty()
                        && !b.meta.note
                        && b.meta.binary == c.meta.binary
                        && b.meta.mode == c.meta.mode
                })
                .and_then(|(_, s)| s.map(|s| ms(s.median)));
            println!(
                "| {} | {} | {:.1} | {} |",
                c.name,
                cell(*s),
                c.max_rss_kib as f64 / 1024.0,
                s.map(|s| ratio(ms(s.median), base)).unwrap_or_default()
            );
        }
    }

    let scale: Vec<_> = cases.iter().zip(&stats).filter(|(c, _)| c.meta.section == "scale").collect();
    let mut growth = Vec::new();
    if !scale.is_empty() {
        println!("\n### Local-inbox claim as the inbox grows (notes stored for 1,000 other sessions)\n");
        println!("| stored notes | no note: median ms | p95 ms | with note: median ms | p95 ms |");
        println!("|---:|---:|---:|---:|---:|");
        let mut stored: Vec<usize> = scale.iter().map(|(c, _)| c.meta.stored).collect();
        stored.dedup();
        let get = |n: usize, note: bool| {
            scale.iter().find(|(c, _)| c.meta.stored == n && c.meta.note == note).and_then(|(_, s)| **s)
        };
        for &n in &stored {
            println!("| {n} | {} | {} |", cell(get(n, false)), cell(get(n, true)));
        }
        if let (Some(&lo), Some(&hi)) = (stored.first(), stored.last()) {
            for note in [false, true] {
                if let (Some(a), Some(b)) = (get(lo, note), get(hi, note)) {
                    growth.push((note, lo, hi, ms(b.median) / ms(a.median)));
                }
            }
        }
    }

    let lineage: Vec<_> = cases.iter().zip(&stats).filter(|(c, _)| c.meta.section == "lineage").collect();
    if !lineage.is_empty() {
        println!("\n### Lineage: the first registration's ancestry walk\n");
        println!(
            "A fresh Codex session per run, registered by its SessionStart: without PRELOOP_PARENT_SESSION_ID its ancestors above its harness process are walked for a parent run (none serves a session here, so the walk reads them all), with it nothing is walked.\n"
        );
        println!(
            "| mode | with the walk: median ms | p95 ms | with the variable: median ms | p95 ms | walk − variable, median ms |"
        );
        println!("|---|---:|---:|---:|---:|---:|");
        {
            let mode = Mode::Server;
            let get = |role: &str| {
                lineage.iter().find(|(c, _)| c.meta.mode == Some(mode) && c.meta.role == role).and_then(|(_, s)| **s)
            };
            let (w, v) = (get("walk"), get("variable"));
            let delta = match (w, v) {
                (Some(w), Some(v)) => format!("{:+.3}", ms(w.median) - ms(v.median)),
                _ => "n/a".into(),
            };
            println!("| {} | {} | {} | {delta} |", mode.as_str(), cell(w), cell(v));
        }
        if let Some((depth, per_walk)) = walk {
            println!(
                "\nThe walk alone, in process: {depth} ancestors read (the bound is {}; `--nest 30` reaches it) in {:.1} µs.",
                preloop_shared::lineage::MAX_ANCESTORS,
                per_walk.as_secs_f64() * 1e6
            );
        }
    }

    // What a user keeps on disk, and peak RSS per hook command.
    println!("\n### Executables (release profile, stripped)\n");
    let exe_size = std::fs::metadata(exe).map(|m| m.len()).unwrap_or(0);
    println!(
        "One file, `preloop-hooks` ({:.2} MB), serves the CLI and all {} hook commands (hard links to it).\n",
        exe_size as f64 / 1e6,
        preloop_shared::registry::binaries().len()
    );
    println!("| hook command | peak RSS MB (max over its cases) |");
    println!("|---|---:|");
    let mut max_hook_rss = (0i64, String::new());
    for n in preloop_shared::registry::binaries() {
        let rss = cases.iter().filter(|c| c.meta.binary.as_deref() == Some(n)).map(|c| c.max_rss_kib).max();
        if let Some(r) = rss
            && r > max_hook_rss.0
        {
            max_hook_rss = (r, n.to_string());
        }
        if let Some(r) = rss {
            println!("| {n} | {:.1} |", r as f64 / 1024.0);
        }
    }

    println!("\n### Targets\n");
    println!("| target | measured (worst case) | met |");
    println!("|---|---|---|");
    let verdict = |ok: bool| if ok { "yes" } else { "NO" };
    let row = |key: &str, target: &str, limit: Option<f64>| {
        if let Some((r, who)) = worst.get(key) {
            let met = limit.map(|l| verdict(*r <= l)).unwrap_or("");
            println!("| {target} | {r:.2}× ({who}) | {met} |");
        }
    };
    row("server median", "no-note hook ≤ 1.3× the C floor, median (server mode, except SessionEnd)", Some(1.3));
    row("server p95", "no-note hook ≤ 1.3× the C floor, p95 (server mode, except SessionEnd)", Some(1.3));
    row("session_end median", "no-note SessionEnd ≤ 1.5× the C floor, median (server mode)", Some(1.5));
    row("session_end p95", "no-note SessionEnd ≤ 1.5× the C floor, p95 (server mode)", Some(1.5));
    if !own_worst.1.is_empty() {
        println!(
            "| no-note hook ≤ 1.15× its own floor, median (server mode; issue 34) | {:.2}× ({}) | {} |",
            own_worst.0,
            own_worst.1,
            verdict(own_worst.0 <= 1.15)
        );
    }
    row("server ÷ Rust floor", "(reference) no-note hook ÷ the Rust floor, median (server mode)", None);
    if let Some((r, who)) = worst.get("server ÷ Python") {
        println!("| no-note hook ≤ 0.05× the Python hook (server mode) | {r:.3}× ({who}) | {} |", verdict(*r <= 0.05));
    }
    row("server ÷ curl", "(reference) no-note hook ÷ curl (server mode)", None);
    row("local ÷ /bin/true", "local-inbox no-note hook ≤ 2× /bin/true", Some(2.0));
    row("local ÷ C floor", "(reference) local-inbox no-note hook ÷ the C floor, median", None);
    if !note_worst.1.is_empty() {
        println!("| (reference) with-note hook ÷ the C floor, median | {:.2}× ({}) | |", note_worst.0, note_worst.1);
    }
    println!(
        "| every executable a user installs ≤ 12 MB | {:.2} MB (preloop-hooks, the only one) | {} |",
        exe_size as f64 / 1e6,
        verdict(exe_size <= 12_000_000)
    );
    if !max_hook_rss.1.is_empty() {
        println!(
            "| peak RSS ≤ 8 MB | {:.1} MB ({}) | {} |",
            max_hook_rss.0 as f64 / 1024.0,
            max_hook_rss.1,
            verdict(max_hook_rss.0 <= 8 * 1024)
        );
    }
    for (note, lo, hi, g) in &growth {
        println!(
            "| claim flat (≤ 2×) from {lo} to {hi} stored notes, {} | {g:.2}× | {} |",
            if *note { "with note" } else { "no note" },
            verdict(*g <= 2.0)
        );
    }

    if let Some(path) = json_out {
        let v: Vec<Value> = cases
            .iter()
            .zip(&stats)
            .filter_map(|(c, s)| s.map(|s| {
                let own = c.floor.and_then(|f| stats[f]).filter(|_| c.meta.section.is_empty());
                json!({"case": c.name, "binary": c.meta.binary, "mode": c.meta.mode.map(Mode::as_str), "note": c.meta.note, "stored_notes": c.meta.stored, "median_ms": ms(s.median), "p95_ms": ms(s.p95), "c_floor_ratio_median": floor.map(|f| ms(s.median) / f), "c_floor_ratio_p95": floor_p95.map(|f| ms(s.p95) / f), "own_floor_ratio_median": own.map(|f| ms(s.median) / ms(f.median)), "own_floor_ratio_p95": own.map(|f| ms(s.p95) / ms(f.p95)), "max_rss_kib": c.max_rss_kib, "failures": c.failures})
            }))
            .collect();
        let _ = std::fs::write(
            path,
            serde_json::to_string_pretty(&json!({"runs": runs, "c_floor_compiler": compiler, "results": v})).unwrap(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{FLAGS, GateRule, check_args, usage};
    use std::collections::BTreeMap;

    /// An A/B run's limit is the factor itself, against the base's same hook,
    /// for every hook, with or without a stored baseline line; otherwise the
    /// factor multiplies the baseline, and a hook without one has no limit.
    #[test]
    fn the_limit_is_against_the_base_in_an_ab_run_and_the_baseline_otherwise() {
        let baseline: BTreeMap<String, f64> = [("preloop-a".to_string(), 1.5)].into();
        let ab = GateRule { max_ratio: None, max_slowdown: Some(1.1), baseline: baseline.clone(), ab: true };
        assert_eq!(ab.limit("preloop-a").unwrap().0, 1.1);
        assert_eq!(ab.limit("preloop-new").unwrap(), (1.1, "1.1 × base".to_string()));
        let stored = GateRule { max_ratio: None, max_slowdown: Some(1.2), baseline, ab: false };
        assert!((stored.limit("preloop-a").unwrap().0 - 1.8).abs() < 1e-9);
        assert!(stored.limit("preloop-new").unwrap_err().contains("no baseline for preloop-new"));
    }

    #[test]
    fn the_command_line_is_checked_against_the_flags_table() {
        let a = |v: &[&str]| {
            std::iter::once("preloop-bench").chain(v.iter().copied()).map(String::from).collect::<Vec<_>>()
        };
        assert_eq!(check_args(&a(&["--runs", "20", "--scale", "10,1000", "--max-slowdown", "1.2"])), Ok(false));
        assert_eq!(check_args(&a(&["--runs", "3", "--help"])), Ok(true));
        assert_eq!(check_args(&a(&["--base-bin-dir", "/tmp/base", "--max-slowdown", "1.1"])), Ok(false));
        assert!(check_args(&a(&["--rnus", "3"])).unwrap_err().contains("unknown option \"--rnus\""));
        assert!(check_args(&a(&["--runs"])).unwrap_err().contains("takes a value"));
        assert!(check_args(&a(&["--runs", "many"])).unwrap_err().contains("must be a number"));
        for (name, _, _) in FLAGS {
            assert!(usage().contains(name), "{name} is not in the usage");
        }
    }

    /// Every hook the registry lists has a capture to be measured with, and
    /// each harness's first is its session start (the others need it run).
    #[test]
    fn every_hook_has_its_capture() {
        for h in &super::harnesses() {
            assert!(matches!(h.start().def.does, preloop_shared::registry::Does::SessionStart { .. }), "{}", h.slug);
            for ev in &h.events {
                serde_json::from_str::<serde_json::Value>(ev.fixture).expect(ev.def.on);
            }
        }
    }
}
