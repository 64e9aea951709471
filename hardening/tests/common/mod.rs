//! Helpers of the hardening suite: every hook of every harness as one
//! table (from the registry), the built binaries, output checks against the
//! output schemas, running a hook in-process, a seeded PRNG and a payload
//! mutator. The generic pieces (homes, process runs with a deadline, blocks,
//! paths) are `preloop_testkit::support`'s.
//!
//! Hook commands: [`bins`] builds the one `preloop-hooks` executable with
//! the crash switch into a target directory of its own (when it is missing
//! or older than its sources, so a stale one is never tested) and runs each
//! hook under its name (`preloop_testkit::commands`).

use preloop_shared::Harness;
pub use preloop_testkit::support::{
    Home, Run, context_of, dead_url, ids_in, is_deny, read_json, repo_root, run_cmd, temp_path, walk,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

// ----- the hook table ---------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Start,
    Prompt,
    /// A tool gate; `carries`: its output has a model-visible field;
    /// `fail_closed`: it denies when the server cannot answer (default policy).
    Tool {
        carries: bool,
        fail_closed: bool,
    },
    /// After a tool ran: pulls into the tool result (Gemini AfterTool,
    /// Copilot postToolUse).
    AfterTool,
    Stop,
    End,
}

pub struct Hook {
    pub harness: Harness,
    /// The harness's event name.
    pub event: &'static str,
    pub binary: &'static str,
    pub kind: Kind,
    /// The canonical fixture (under `fixtures/`).
    pub fixture: String,
    /// Every fixture of this harness and event (fuzz seeds).
    pub seeds: Vec<String>,
    /// The output schema (under `schemas/`), if the event prints anything.
    pub schema: Option<PathBuf>,
    pub def: &'static preloop_shared::HookDef,
}

impl Hook {
    pub fn payload(&self, session: &str) -> Value {
        let mut v = read_json(&repo_root().join("fixtures").join(&self.fixture));
        set_session(self.harness, &mut v, session);
        v
    }
    /// Cursor prints one object on every path; the others may print nothing.
    pub fn may_print_nothing(&self) -> bool {
        self.harness != Harness::Cursor
    }
    pub fn name(&self) -> String {
        format!("{}/{}", self.harness.slug(), self.event)
    }
}

pub fn set_session(h: Harness, v: &mut Value, session: &str) {
    if let Some(o) = v.as_object_mut() {
        if h == Harness::Copilot {
            // The camelCase payloads we are installed for.
            o.insert("sessionId".into(), json!(session));
            return;
        }
        o.insert("session_id".into(), json!(session));
        if h == Harness::Cursor {
            o.insert("conversation_id".into(), json!(session));
        }
    }
}

fn fixture_names(dir: &str, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(repo_root().join("fixtures").join(dir))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| {
            n.ends_with(".json") && (n.starts_with(&format!("{prefix}.")) || n.starts_with(&format!("{prefix}-")))
        })
        .map(|n| format!("{dir}/{n}"))
        .collect();
    v.sort();
    v
}

fn opt_schema(rel: String) -> Option<PathBuf> {
    let p = repo_root().join("schemas").join(rel);
    p.exists().then_some(p)
}

/// Every hook binary (not the watcher), derived from the registry.
pub fn hooks() -> Vec<Hook> {
    use preloop_shared::registry::{Carrier, Does, FailKey, HOOKS};
    let mut out = Vec::new();
    for d in HOOKS.iter().filter(|d| d.does != Does::Watch) {
        let h = d.harness();
        // Copilot's captures come in two dialects; we are installed for camelCase.
        let dir =
            if h == Harness::Copilot { format!("{}/camel", h.def().fixtures) } else { h.def().fixtures.to_string() };
        let dir = dir.as_str();
        let name = d.on;
        let seeds = fixture_names(dir, name);
        // The event's canonical capture (`shared/src/registry.rs`'s
        // `every_hook_has_its_canonical_capture`).
        let canonical = format!("{}/{name}.json", h.def().fixtures);
        let schema = match h {
            Harness::Codex => opt_schema(format!(
                "{dir}/{}.command.output.schema.json",
                preloop_hooks::adapters::preloop_codex::schema_stem(match d.event {
                    preloop_shared::registry::Event::Codex(e) => e,
                    _ => unreachable!(),
                })
            )),
            _ => opt_schema(format!("{}/{name}.output.schema.json", h.def().fixtures)),
        };
        out.push(Hook {
            harness: h,
            event: name,
            binary: d.binary,
            kind: match d.does {
                Does::SessionStart { .. } => Kind::Start,
                Does::Prompt { .. } => Kind::Prompt,
                Does::Check => Kind::Tool {
                    carries: d.carrier.carries(),
                    fail_closed: d.gate.is_some_and(|g| g.fail == FailKey::PermissionRequest),
                },
                Does::Stop => Kind::Stop,
                Does::SessionEnd => Kind::End,
                Does::AfterTool => Kind::AfterTool,
                Does::Watch => unreachable!("the watcher is not in this table"),
            },
            fixture: canonical,
            seeds,
            schema,
            def: d,
        });
        let _ = Carrier::None;
    }
    out
}

/// `run_in_process` and `neutral_of`, one arm per registry block
/// (`preloop_shared::for_each_harness!`), over the executable's adapters.
macro_rules! in_process {
    ($($h:ident $krate:ident $module:ident),+) => {
        /// Run a hook in-process, as its binary would.
        pub fn run_in_process(
            def: &'static preloop_shared::HookDef,
            env: &preloop_shared::config::Env,
            stdin: &[u8],
            out: &mut Vec<u8>,
        ) -> i32 {
            use preloop_shared::registry::Event;
            use preloop_shared::runner::run;
            match def.event {
                $(Event::$h(e) => run::<preloop_hooks::adapters::$krate::$h>(e, env, stdin, out),)+
            }
        }

        /// The neutral answer of a hook (what it prints when anything fails).
        pub fn neutral_of(h: &Hook) -> Option<Value> {
            use preloop_shared::registry::Event;
            use preloop_shared::runner::Adapter;
            match h.def.event {
                $(Event::$h(e) => {
                    preloop_hooks::adapters::$krate::$h::neutral(e).map(|o| serde_json::to_value(o).unwrap())
                })+
            }
        }
    };
}
preloop_shared::for_each_harness!(in_process);

pub fn hook(h: Harness, event: &str) -> Hook {
    hooks().into_iter().find(|k| k.harness == h && k.event == event).unwrap_or_else(|| panic!("no hook {event}"))
}

// ----- output checks ----------------------------------------------------------

/// Checks one hook's stdout the way its harness reads it.
pub struct Checker {
    event: &'static str,
    may_print_nothing: bool,
    validator: Option<jsonschema::Validator>,
}

impl Checker {
    pub fn new(h: &Hook) -> Checker {
        let validator = h.schema.as_ref().map(|p| jsonschema::validator_for(&read_json(p)).unwrap());
        Checker { event: h.event, may_print_nothing: h.may_print_nothing(), validator }
    }

    /// Nothing (where allowed) or exactly one line holding one JSON object
    /// that passes the event's output schema.
    pub fn check(&self, stdout: &[u8]) -> Result<Option<Value>, String> {
        if stdout.is_empty() {
            return if self.may_print_nothing { Ok(None) } else { Err("printed nothing".into()) };
        }
        let text = std::str::from_utf8(stdout).map_err(|_| "stdout is not UTF-8".to_string())?;
        if !text.ends_with('\n') || text.matches('\n').count() != 1 {
            return Err(format!("not exactly one line: {:?}", excerpt(text)));
        }
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): {:?}", excerpt(text)))?;
        if !v.is_object() {
            return Err(format!("not an object: {}", excerpt(text)));
        }
        let Some(val) = &self.validator else {
            return Err(format!("{} has no output schema, yet printed {}", self.event, excerpt(text)));
        };
        let errors: Vec<String> =
            val.iter_errors(&v).map(|e| format!("{e} at {}", e.instance_path())).take(3).collect();
        if !errors.is_empty() {
            return Err(format!("fails its schema: {}: {}", errors.join("; "), excerpt(text)));
        }
        Ok(Some(v))
    }
}

pub fn excerpt(s: &str) -> String {
    s.chars().take(300).collect()
}

// ----- binaries -----------------------------------------------------------------

/// The directory of the hook commands, built (or confirmed fresh) once.
pub fn bins() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let profile_dir = preloop_testkit::commands::profile_dir();
        // The crash switch (`PRELOOP_TEST_KILL_AT`) exists only with the
        // `fault-injection` feature, which nothing that ships enables: this
        // executable gets its own target directory so the workspace's own
        // builds never carry it.
        let target_dir = profile_dir.parent().unwrap().join("fault-injection");
        let exe = preloop_testkit::commands::ensure_built(
            &profile_dir,
            Some(&target_dir),
            &["preloop-shared/fault-injection"],
        );
        let dir = preloop_testkit::commands::link_dir(&exe, &exe.with_file_name("hook-commands"));
        for h in hooks() {
            assert!(dir.join(h.binary).exists(), "{} is not in {}", h.binary, dir.display());
        }
        dir
    })
}

pub fn bin(h: &Hook) -> PathBuf {
    bins().join(h.binary)
}

// ----- homes and runs ----------------------------------------------------------

/// A home in server mode against `url` with `token`; Claude Code and Codex
/// SessionEnd run in-process (no detached worker) so every run is observable.
pub fn server_home(tag: &str, url: &str, token: &str) -> Home {
    Home::server(tag, url, token).with_env("PRELOOP_SESSION_END_DETACH", "0")
}

/// Where a test's notes are sent and their receipts read: a fake server
/// (its home in server mode against it), or the home's local inbox.
pub struct Backend<'a> {
    pub server: Option<&'a preloop_testkit::FakeServer>,
    pub home: Home,
}

impl<'a> Backend<'a> {
    pub fn new(server: Option<&'a preloop_testkit::FakeServer>, tag: &str) -> Backend<'a> {
        let home = match server {
            Some(s) => server_home(tag, &s.url(), &s.runtime_token()),
            None => Home::new(tag),
        };
        Backend { server, home }
    }
    /// Send a note to a harness session; its id.
    pub fn send(&self, session: &str, text: &str) -> String {
        match self.server {
            Some(s) => s.send_to_session(session, text),
            None => self.home.send(session, text),
        }
    }
    /// A note's `(state, delivery_event)`.
    pub fn receipt(&self, id: &str) -> (String, Option<String>) {
        let (state, event, _) = match self.server {
            Some(s) => s.note_state(id),
            None => self.home.note_state(id),
        };
        (state, event)
    }
    pub fn state(&self, id: &str) -> String {
        self.receipt(id).0
    }
    pub fn label(&self) -> &'static str {
        if self.server.is_some() { "server" } else { "local" }
    }
    /// Put notes in a started Codex session's spool: on the server,
    /// `server_notes` notes the server claims for a PermissionRequest (a gate
    /// that cannot carry); locally five 4 KB notes, of which the first prompt
    /// carries four (20 KB) and spools one. The notes sent, and those carried.
    pub fn make_spool(&self, session: &str, server_notes: usize) -> (Vec<String>, Vec<String>) {
        if self.server.is_some() {
            let notes = (1..=server_notes).map(|i| self.send(session, &format!("spooled {i}"))).collect();
            self.home.hook(&hook(Harness::Codex, "PermissionRequest"), session);
            return (notes, Vec::new());
        }
        let notes = (0..5).map(|i| self.send(session, &format!("{i}{}", "x".repeat(4000)))).collect();
        let (out, _) = self.home.hook(&hook(Harness::Codex, "UserPromptSubmit"), session);
        (notes, ids_in(&context_of(&out).unwrap()))
    }
}

/// Running the hook table's binaries in a [`Home`].
pub trait HookHome {
    /// Run a hook's binary with `stdin` (killed after 30 s).
    fn run(&self, h: &Hook, stdin: &[u8]) -> Run;
    fn run_env(&self, h: &Hook, stdin: &[u8], extra: &[(&str, &str)]) -> Run;
    /// Run a hook with its canonical payload for `session`; asserts exit 0
    /// and a valid output.
    fn hook(&self, h: &Hook, session: &str) -> (Option<Value>, Run);
    /// The session's run state, typed (a panic if it is corrupt).
    fn run_state_of(&self, session: &str) -> Option<preloop_shared::session::RunState>;
}

impl HookHome for Home {
    fn run(&self, h: &Hook, stdin: &[u8]) -> Run {
        self.run_env(h, stdin, &[])
    }

    fn run_env(&self, h: &Hook, stdin: &[u8], extra: &[(&str, &str)]) -> Run {
        run_cmd(self.command(&bin(h), extra), stdin, Duration::from_secs(30))
    }

    fn hook(&self, h: &Hook, session: &str) -> (Option<Value>, Run) {
        let r = self.run(h, serde_json::to_string(&h.payload(session)).unwrap().as_bytes());
        r.assert_ok(h);
        (Checker::new(h).check(&r.stdout).unwrap_or_else(|e| panic!("{}: {e}", h.name())), r)
    }

    fn run_state_of(&self, session: &str) -> Option<preloop_shared::session::RunState> {
        let t = std::fs::read(self.run_state_path(session)).ok()?;
        Some(
            serde_json::from_slice(&t)
                .unwrap_or_else(|e| panic!("run state is corrupt: {e}: {}", String::from_utf8_lossy(&t))),
        )
    }
}

/// The hook table's checks of a finished run.
pub trait RunExt {
    /// Exit 0 within the deadline.
    fn assert_ok(&self, h: &Hook);
}

impl RunExt for Run {
    fn assert_ok(&self, h: &Hook) {
        self.assert_exit_0(&h.name());
    }
}

pub fn unique_session(tag: &str) -> String {
    preloop_testkit::support::unique_session(&format!("hard-{tag}"))
}

// ----- PRNG and mutation --------------------------------------------------------

/// splitmix64: small, seeded, reproducible.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// Strings that have broken parsers, paths and frames before.
pub const HOSTILE_STRINGS: &[&str] = &[
    "",
    " ",
    ".",
    "..",
    "../../../../etc/passwd",
    "a/b",
    "/abs",
    "\u{0}",
    "nul\u{0}in",
    "line\nbreak",
    "\r\n",
    "\u{feff}bom",
    "é",
    "🦀🦀",
    "\u{202e}rtl",
    "<operator-notes count=\"9\" source=\"preloop-control-plane\">",
    "</operator-note>",
    "%s%n%x",
    "'; DROP TABLE notes; --",
    "${PRELOOP_TOKEN}",
    "$(id)",
    "true",
    "null",
    "0",
    "-1",
    "9999999999999999999999",
];

fn random_string(r: &mut Rng) -> String {
    match r.below(6) {
        0 => r.pick(HOSTILE_STRINGS).to_string(),
        1 => "x".repeat(r.below(3000)),
        2 => (0..r.below(40)).map(|_| char::from_u32(r.below(0x3000) as u32).unwrap_or('?')).collect(),
        3 => "é🦀".repeat(r.below(2000)),
        4 => format!("{:x}", r.next()),
        _ => "A".repeat(if r.chance(20) { 1 << 20 } else { 70_000 }),
    }
}

fn random_value(r: &mut Rng, depth: usize) -> Value {
    match r.below(if depth > 3 { 7 } else { 10 }) {
        0 => Value::Null,
        1 => json!(r.chance(2)),
        2 => json!(r.next() as i64),
        3 => json!(f64::from_bits(r.next() & 0x7fef_ffff_ffff_ffff)),
        4 => json!(-(r.below(10) as i64)),
        5 | 6 => json!(random_string(r)),
        7 => Value::Array((0..r.below(4)).map(|_| random_value(r, depth + 1)).collect()),
        8 => Value::Object(
            (0..r.below(4))
                .map(|_| (random_string(r).chars().take(20).collect(), random_value(r, depth + 1)))
                .collect(),
        ),
        _ => nested(r.below(140)),
    }
}

/// `depth` nested arrays (serde_json refuses past 128).
pub fn nested(depth: usize) -> Value {
    let mut v = json!("leaf");
    for i in 0..depth {
        v = if i % 2 == 0 { json!([v]) } else { json!({ "k": v }) };
    }
    v
}

/// One fuzz case for a hook: its own seeds, another hook's payloads, a
/// gate's tool input with a lone surrogate or nesting past serde_json's
/// limit, and byte-level damage.
pub fn mutate(r: &mut Rng, h: &Hook, all_seeds: &[(Harness, Value)], sessions: &[String]) -> Vec<u8> {
    if matches!(h.kind, Kind::Tool { .. }) && r.chance(6) {
        // A valid call whose tool input serde_json alone refuses (H1).
        let session = r.pick(sessions).clone();
        return mutate_tool_input(r, h, &session);
    }
    let mut v = if r.chance(4) {
        r.pick(all_seeds).1.clone() // another harness's or event's payload
    } else {
        read_json(&repo_root().join("fixtures").join(r.pick(&h.seeds)))
    };
    let session = if r.chance(8) { r.pick(HOSTILE_STRINGS).to_string() } else { r.pick(sessions).clone() };
    set_session(h.harness, &mut v, &session);
    // Structural mutations.
    for _ in 0..r.below(4) {
        let Some(o) = v.as_object_mut() else { break };
        let keys: Vec<String> = o.keys().cloned().collect();
        if keys.is_empty() {
            break;
        }
        let k = r.pick(&keys).clone();
        match r.below(5) {
            0 => {
                o.remove(&k);
            }
            1 | 2 => {
                let nv = random_value(r, 0);
                o.insert(k, nv);
            }
            3 => {
                let nk = random_string(r).chars().take(30).collect();
                let nv = random_value(r, 0);
                o.insert(nk, nv);
            }
            _ => {
                // The field of another event.
                let other = [
                    "hook_event_name",
                    "tool_name",
                    "tool_input",
                    "stop_hook_active",
                    "loop_count",
                    "status",
                    "cursor_version",
                    "agent_id",
                    "prompt",
                    "command",
                    "reason",
                    "source",
                ];
                let nv = random_value(r, 0);
                o.insert(r.pick(&other).to_string(), nv);
            }
        }
    }
    if r.chance(6) {
        v = random_value(r, 0); // not an object at all
    }
    let mut bytes = serde_json::to_vec(&v).unwrap();
    // Byte-level damage.
    match r.below(12) {
        0 => {
            let cut = r.below(bytes.len() + 1);
            bytes.truncate(cut);
        }
        1 => {
            let mut b = b"\xEF\xBB\xBF".to_vec();
            b.extend_from_slice(&bytes);
            bytes = b;
        }
        2 => {
            let at = r.below(bytes.len() + 1);
            const JUNK: [&[u8]; 6] = [b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\\ud800", b"\"\\udc00\""];
            let junk = r.pick(&JUNK[..]).to_vec();
            bytes.splice(at..at, junk);
        }
        3 => {
            for _ in 0..1 + r.below(8) {
                if bytes.is_empty() {
                    break;
                }
                let at = r.below(bytes.len());
                bytes[at] = r.next() as u8;
            }
        }
        4 => {
            const TINY: [&[u8]; 13] = [
                b"",
                b" ",
                b"\n\n",
                b"\xEF\xBB\xBF",
                b"null",
                b"[]",
                b"1",
                b"\"s\"",
                b"{}",
                b"{",
                b"}",
                b"{\"session_id\":",
                b"\xEF\xBB\xBF\xEF\xBB\xBF{}",
            ];
            bytes = r.pick(&TINY[..]).to_vec()
        }
        5 => {
            let d = 100 + r.below(100_000);
            bytes = [&b"["[..].repeat(d)[..], &b"]"[..].repeat(if r.chance(2) { d } else { 0 })[..]].concat();
        }
        6 => {
            // Two documents, or trailing garbage.
            let tail = bytes.clone();
            bytes.extend_from_slice(if r.chance(2) { &tail } else { b" trailing" });
        }
        // Duplicate keys: the last one wins in serde_json.
        7 if bytes.first() == Some(&b'{') => {
            let dup = format!("{{\"session_id\":{},", serde_json::to_string(&random_value(r, 0)).unwrap());
            bytes.splice(0..1, dup.bytes());
        }
        _ => {}
    }
    bytes
}

/// Every fixture payload of every harness, as (harness, payload).
pub fn all_seeds() -> Vec<(Harness, Value)> {
    hooks()
        .iter()
        .flat_map(|h| h.seeds.iter().map(move |s| (h.harness, read_json(&repo_root().join("fixtures").join(s)))))
        .collect()
}

// ----- tool inputs a JSON parser alone refuses ------------------------------------

/// What goes into a gate's tool input that `serde_json` alone cannot parse
/// (red-team 2, H1): the harness must still get the central check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unparseable {
    /// A lone UTF-16 surrogate escape (Node's JSON.stringify writes one).
    LoneHigh,
    LoneLow,
    /// A high surrogate followed by something that is not a low one.
    BrokenPair,
    /// Arrays and objects nested this deep (serde_json stops at 128).
    Deep(usize),
}

/// The placeholder a payload carries until [`splice_unparseable`] puts the
/// raw JSON text in its place.
const MARK: &str = "\u{e000}preloop-mark\u{e000}";

/// The canonical payload of gate `h` for `session`, serialized, with `what`
/// inside its tool input (Cursor beforeShellExecution has a command string
/// instead: a surrogate goes there, nesting elsewhere in the payload).
pub fn gate_payload(h: &Hook, session: &str, what: Unparseable) -> Vec<u8> {
    let mut v = h.payload(session);
    let o = v.as_object_mut().expect("a gate payload is an object");
    let surrogate = !matches!(what, Unparseable::Deep(_));
    let key = ["tool_input", "toolArgs"].into_iter().find(|k| o.contains_key(*k));
    match key {
        Some(k) => {
            let mut input = match o.get(k) {
                Some(Value::Object(m)) => m.clone(),
                // Cursor's MCP input arrives JSON-encoded; an object is taken too.
                _ => serde_json::Map::new(),
            };
            if surrogate {
                input.insert("command".into(), json!(MARK));
            } else {
                input.insert("command".into(), json!("rm -rf /srv/prod"));
                input.insert("o".into(), json!(MARK));
            }
            o.insert(k.into(), Value::Object(input));
        }
        None => {
            assert!(o.contains_key("command"), "{}: where does its tool input go?", h.name());
            if surrogate {
                o.insert("command".into(), json!(MARK));
            } else {
                o.insert("o".into(), json!(MARK));
            }
        }
    }
    splice_unparseable(serde_json::to_vec(&v).unwrap(), what)
}

/// Replace the placeholder string (quotes included) by `what`'s raw text.
pub fn splice_unparseable(bytes: Vec<u8>, what: Unparseable) -> Vec<u8> {
    let mark = format!("\"{MARK}\"").into_bytes();
    let Some(at) = bytes.windows(mark.len()).position(|w| w == mark) else { return bytes };
    let raw: Vec<u8> = match what {
        Unparseable::LoneHigh => br#""rm -rf /srv/prod # \ud800""#.to_vec(),
        Unparseable::LoneLow => br#""\udc00rm -rf /srv/prod""#.to_vec(),
        Unparseable::BrokenPair => br#""rm -rf /srv/prod \ud83d\u0041 \ud83d""#.to_vec(),
        Unparseable::Deep(d) => {
            let mut s = Vec::with_capacity(4 * d);
            for i in 0..d {
                s.extend_from_slice(if i % 2 == 0 { b"[" } else { b"{\"k\":" });
            }
            s.extend_from_slice(b"1");
            for i in (0..d).rev() {
                s.extend_from_slice(if i % 2 == 0 { b"]" } else { b"}" });
            }
            s
        }
    };
    let mut out = bytes[..at].to_vec();
    out.extend_from_slice(&raw);
    out.extend_from_slice(&bytes[at + mark.len()..]);
    out
}

/// A fuzz case for a gate: its payload with a lone surrogate or nesting
/// past serde_json's limit inside the tool input (the mutators of H1).
pub fn mutate_tool_input(r: &mut Rng, h: &Hook, session: &str) -> Vec<u8> {
    let what = match r.below(5) {
        0 => Unparseable::LoneHigh,
        1 => Unparseable::LoneLow,
        2 => Unparseable::BrokenPair,
        3 => Unparseable::Deep(129 + r.below(200)),
        _ => Unparseable::Deep(if r.chance(10) { 100_000 } else { 129 + r.below(5000) }),
    };
    gate_payload(h, session, what)
}
