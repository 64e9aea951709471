//! One harness's hook binaries as the tests drive them ([`Hooks`]), and the
//! scenarios more than one harness shares, written once here and run by each
//! harness's suite with its own events and captures.
//!
//! A test crate implements [`Hooks`] on a marker type (only its own
//! integration tests can name its binaries) and gives [`Home`] a small
//! extension trait whose methods call [`run`] and [`run_raw`], so that its
//! suites read `home.run(Event::Stop, &payload)`.

use crate::FakeServer;
use crate::support::{Home, Run, context_of, ids_in, one_object, read_json, schemas_dir, validate};
use preloop_shared::flow::Outcome;
use preloop_shared::operator::ReceiptState;
use preloop_shared::registry::Does;
use preloop_shared::runner::Parsed;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

/// An adapter's `parse`.
pub type ParseFn<E> = fn(E, &Value) -> Result<Parsed, String>;
/// An adapter's `render` (`None`: the hook prints nothing).
pub type RenderFn<E, O> = fn(E, &Outcome) -> Option<O>;

/// A harness's events (`preloop_shared::registry::event::*`): every one,
/// the harness's name for it, and our binary's name, from the registry.
pub use preloop_shared::registry::HarnessEvent as HookEvent;

/// What a test crate says about its harness: where its binaries are, the
/// pure adapter, its captures, and how the harness reads a hook's output.
pub trait Hooks {
    /// The harness's events.
    type Event: HookEvent;
    /// What the adapter renders.
    type Output: serde::Serialize;
    /// The captures' directory, under `fixtures/` and `schemas/`.
    const FIXTURES: &'static str;
    /// The adapter's parse.
    const PARSE: ParseFn<Self::Event>;
    /// The adapter's render (`None`: the hook prints nothing).
    const RENDER: RenderFn<Self::Event, Self::Output>;
    /// Whether a hook must leave stderr empty (Gemini parses stderr when
    /// stdout is empty).
    const QUIET_STDERR: bool = false;
    /// Whether the hooks speak the plugin shim's protocol
    /// (`preloop_shared::plugin`: a payload line, an answer line, then
    /// `applied`); [`run_raw`] then drives them as the shim does.
    const PLUGIN: bool = false;

    /// Every event we hook, in registry order.
    fn events() -> Vec<Self::Event> {
        Self::Event::all().to_vec()
    }
    /// The harness's own name for the event.
    fn name(event: Self::Event) -> &'static str {
        event.name()
    }
    /// The hook command of the event ([`crate::commands`]).
    fn bin(event: Self::Event) -> PathBuf {
        crate::commands::hook(event.binary())
    }
    /// The adapter's parse of a payload.
    fn parse(event: Self::Event, v: &Value) -> Result<Parsed, String> {
        (Self::PARSE)(event, v)
    }
    /// The adapter's render as JSON.
    fn render(event: Self::Event, o: &Outcome) -> Option<Value> {
        (Self::RENDER)(event, o).map(|out| serde_json::to_value(out).expect("an output serializes"))
    }
    /// The capture of the event's own payload (`<name>.json`).
    fn own_fixture(event: Self::Event) -> String {
        format!("{}.json", Self::name(event))
    }
    /// A capture as a fresh session.
    fn fixture_for(name: &str, session: &str) -> Value {
        crate::support::fixture_for(Self::FIXTURES, name, session)
    }
    /// Our output schema of the event
    /// (`schemas/<FIXTURES>/<name>.output.schema.json`), if it has one.
    fn output_schema(event: Self::Event) -> Option<Value> {
        let path = schemas_dir(Self::FIXTURES).join(format!("{}.output.schema.json", Self::name(event)));
        path.exists().then(|| read_json(&path))
    }
    /// A finished run's stdout as the harness reads it: nothing, or one
    /// object that passes the output schema ([`check_output`]).
    fn check(event: Self::Event, run: &Run) -> Option<Value> {
        check_output::<Self>(event, run)
    }
}

/// Declare a harness's [`Hooks`] on a new marker type, from its adapter
/// crate (`Event`, `Output`, `parse`, `render`) and its captures' directory,
/// with the extension trait (named in parentheses) that
/// gives [`Home`] `run` and `run_raw` for its events. Further items of the
/// `Hooks` impl (`const QUIET_STDERR`, an own `fn fixture_for`) follow the
/// `;`.
///
/// ```ignore
/// preloop_testkit::hooks! {
///     /// Gemini CLI 0.61.0's hooks.
///     pub Gemini(GeminiHome) = preloop_gemini, "gemini-cli-0.61.0";
///     const QUIET_STDERR: bool = true;
/// }
/// ```
#[macro_export]
macro_rules! hooks {
    (
        $(#[$m:meta])* $vis:vis $name:ident($home:ident) = $adapter:ident, $fixtures:literal;
        $($item:item)*
    ) => {
        $(#[$m])*
        $vis struct $name;

        impl $crate::hooks::Hooks for $name {
            type Event = $adapter::Event;
            type Output = $adapter::Output;
            const FIXTURES: &'static str = $fixtures;
            const PARSE: $crate::hooks::ParseFn<$adapter::Event> = $adapter::parse;
            const RENDER: $crate::hooks::RenderFn<$adapter::Event, $adapter::Output> = $adapter::render;
            $($item)*
        }

        /// Running the harness's hook binaries in a `Home`.
        $vis trait $home {
            /// Run a hook binary with raw `stdin`.
            #[allow(dead_code)]
            fn run_raw(&self, event: $adapter::Event, stdin: &[u8]) -> $crate::support::Run;
            /// Run a hook with a JSON payload: exit 0, and stdout as the
            /// harness reads it (`Hooks::check`).
            fn run(
                &self,
                event: $adapter::Event,
                payload: &::serde_json::Value,
            ) -> (Option<::serde_json::Value>, $crate::support::Run);
        }

        impl $home for $crate::support::Home {
            fn run_raw(&self, event: $adapter::Event, stdin: &[u8]) -> $crate::support::Run {
                $crate::hooks::run_raw::<$name>(self, event, stdin)
            }
            fn run(
                &self,
                event: $adapter::Event,
                payload: &::serde_json::Value,
            ) -> (Option<::serde_json::Value>, $crate::support::Run) {
                $crate::hooks::run::<$name>(self, event, payload)
            }
        }
    };
}

/// The tests of [`hooks`](self)' shared scenarios for a harness whose hooks
/// all follow them (Gemini, Copilot), each hook picked by what the registry
/// says it does, the values the server must see read from the harness's own
/// captures, and the harness's own near misses of a payload for
/// [`bad_stdin_is_ignored`]. The stop hook's continuation is its capture
/// `<name>.stop_hook_active.json`.
///
/// ```ignore
/// preloop_testkit::hook_scenarios!(Gemini, bad_stdin: [br#"{"session_id": 7}"#.to_vec()]);
/// ```
#[macro_export]
macro_rules! hook_scenarios {
    ($hooks:ty, bad_stdin: $bad:expr $(,)?) => {
        use preloop_shared::registry::Does;
        use $crate::hooks::{self as scenarios, Hooks as _};
        use $crate::support::Home;

        fn start() -> <$hooks as $crate::hooks::Hooks>::Event {
            scenarios::hook_doing::<$hooks>(|d| matches!(d, Does::SessionStart { .. }))
        }
        fn stop() -> (<$hooks as $crate::hooks::Hooks>::Event, String) {
            let stop = scenarios::hook_doing::<$hooks>(|d| d == Does::Stop);
            (stop, format!("{}.stop_hook_active.json", <$hooks>::name(stop)))
        }
        fn end() -> <$hooks as $crate::hooks::Hooks>::Event {
            scenarios::hook_doing::<$hooks>(|d| d == Does::SessionEnd)
        }
        fn text(event: <$hooks as $crate::hooks::Hooks>::Event, key: &str) -> String {
            scenarios::capture_field::<$hooks>(event, key).as_str().expect("a string in the capture").to_string()
        }

        #[test]
        fn every_binary_exits_0_with_nothing_on_bad_stdin() {
            scenarios::bad_stdin_is_ignored::<$hooks>(&Home::new("bad"), &$bad);
        }

        #[test]
        fn a_session_with_nothing_pending_prints_nothing() {
            let s = $crate::support::unique_session("q");
            let within = std::time::Duration::from_secs(2);
            scenarios::nothing_pending_prints_nothing::<$hooks>(&Home::new("quiet"), || s.clone(), within);
        }

        #[test]
        fn local_stop_rescues_once_per_stop_and_three_times_per_session() {
            let (stop, active) = stop();
            scenarios::local_stop_rescues_three_times::<$hooks>(&Home::new("stop"), "as", start(), stop, &active);
        }

        #[test]
        fn local_session_end_makes_pending_notes_undeliverable() {
            scenarios::local_end_drops_pending::<$hooks>(&Home::new("end"), "se", start(), end());
        }

        #[test]
        fn server_start_registers_and_the_first_prompt_is_recorded() {
            let source = <$hooks>::events()[0].def().harness().source();
            let (server, home, s) = scenarios::server_start_registers::<$hooks>("reg", source, &text(start(), "cwd"));
            let prompt = scenarios::hook_doing::<$hooks>(|d| matches!(d, Does::Prompt { .. }));
            scenarios::server_first_prompt_registers::<$hooks>(&server, &home, &s, prompt, &text(prompt, "prompt"));
        }

        #[test]
        fn server_stop_continues_and_reports_the_turn_end() {
            let server = $crate::FakeServer::start();
            let home = Home::for_server("stop", &server);
            let (stop, active) = stop();
            scenarios::server_stop_continues::<$hooks>(&server, &home, start(), stop, &active);
        }

        #[test]
        fn server_session_end_in_process() {
            let server = $crate::FakeServer::start();
            let home = Home::for_server("end", &server).with_env(preloop_shared::detach::DETACH_ENV, "0");
            let reason = text(end(), "reason");
            scenarios::server_end_in_process::<$hooks>(&server, &home, start(), end(), &reason);
        }

        #[test]
        fn server_session_end_in_a_detached_worker() {
            let server = $crate::FakeServer::start();
            let home = Home::for_server("end-detached", &server);
            let reason = text(end(), "reason");
            scenarios::server_end_detached::<$hooks>(&server, &home, start(), end(), &reason);
        }

        #[test]
        fn an_unreachable_server_fails_open() {
            let s = $crate::support::unique_session("un");
            scenarios::unreachable_server_fails_open::<$hooks>(&Home::dead_server("dead"), &s, &[]);
        }
    };
}

/// Nothing, or exactly one line of one JSON object that passes the event's
/// [`Hooks::output_schema`]; stderr empty when [`Hooks::QUIET_STDERR`].
pub fn check_output<H: Hooks + ?Sized>(event: H::Event, run: &Run) -> Option<Value> {
    let what = H::name(event);
    if H::QUIET_STDERR {
        assert_eq!(run.err(), "", "{what} wrote on stderr (the harness would parse it)");
    }
    let v = one_object(&run.stdout).unwrap_or_else(|e| panic!("{what}: {e}"))?;
    let schema = H::output_schema(event).unwrap_or_else(|| panic!("{what} has no output schema, yet printed {v}"));
    validate(&schema, &v).unwrap_or_else(|e| panic!("{what} output fails its schema: {e}: {v}"));
    Some(v)
}

/// Run the event's binary with raw `stdin` in `home`.
pub fn run_raw<H: Hooks>(home: &Home, event: H::Event, stdin: &[u8]) -> Run {
    if H::PLUGIN {
        home.run_plugin(&H::bin(event), stdin, Some(preloop_shared::plugin::APPLIED), &[])
    } else {
        home.run_bin(&H::bin(event), stdin, &[])
    }
}

/// Run the event's binary with a JSON payload: exit 0, and stdout as the
/// harness reads it ([`Hooks::check`]).
pub fn run<H: Hooks>(home: &Home, event: H::Event, payload: &Value) -> (Option<Value>, Run) {
    let r = run_raw::<H>(home, event, serde_json::to_string(payload).unwrap().as_bytes());
    r.assert_exit_0(H::name(event));
    (H::check(event, &r), r)
}

/// Run the event's binary on its own capture for `session`.
pub fn run_own<H: Hooks>(home: &Home, event: H::Event, session: &str) -> Option<Value> {
    run::<H>(home, event, &H::fixture_for(&H::own_fixture(event), session)).0
}

/// The hook a session starts with (`SessionStart`, first in registry order).
pub fn first_event<H: Hooks>() -> H::Event {
    H::events()[0]
}

/// The harness's (first) hook that does what `what` says, by the registry.
pub fn hook_doing<H: Hooks>(what: impl Fn(Does) -> bool) -> H::Event {
    H::events().into_iter().find(|e| what(e.def().does)).expect("the harness has such a hook")
}

/// A field of the event's own capture (what the harness sends, which the
/// server must be told as it is).
pub fn capture_field<H: Hooks>(event: H::Event, key: &str) -> Value {
    H::fixture_for(&H::own_fixture(event), "capture")[key].clone()
}

/// Local mode, a session started: a home (`tag`), and a fresh session its
/// first hook ran for on its own capture.
pub fn started_locally<H: Hooks>(tag: &str) -> (Home, String) {
    let home = Home::new(tag);
    let s = crate::support::unique_session(tag);
    run_own::<H>(&home, first_event::<H>(), &s);
    (home, s)
}

/// Server mode, a session started: a fresh fake, a home (`tag`) against it,
/// and a fresh session its first hook ran for on its own capture.
pub fn started_on_server<H: Hooks>(tag: &str) -> (FakeServer, Home, String) {
    let server = FakeServer::start();
    let home = Home::for_server(tag, &server);
    let s = crate::support::unique_session(tag);
    run_own::<H>(&home, first_event::<H>(), &s);
    (server, home, s)
}

// ----- every mode ------------------------------------------------------------------

/// What no harness sends and every hook must survive (exit 0, nothing on
/// stdout): empty, blank, cut, not JSON, not an object, no session, not UTF-8.
pub const BAD_STDIN: [&[u8]; 8] = [b"", b"   \n", b"{", b"not json", b"[]", b"null", b"{}", &[0xff, 0xfe, 0x00]];

/// Every binary exits 0 and prints nothing on each of [`BAD_STDIN`] and
/// `extra` (a harness's own near misses), and nothing on stderr where
/// [`Hooks::QUIET_STDERR`].
pub fn bad_stdin_is_ignored<H: Hooks>(home: &Home, extra: &[Vec<u8>]) {
    let inputs = BAD_STDIN.iter().map(|b| b.to_vec()).chain(extra.iter().cloned());
    let inputs: Vec<Vec<u8>> = inputs.collect();
    for event in H::events() {
        for stdin in &inputs {
            let r = run_raw::<H>(home, event, stdin);
            let what = format!("{} on {:?}", H::name(event), String::from_utf8_lossy(stdin));
            assert_eq!(r.code(), Some(0), "{what}: a non-zero exit is an error to the harness");
            assert_eq!(r.out(), "", "{what} printed");
            if H::QUIET_STDERR {
                assert_eq!(r.err(), "", "{what}: stderr must stay empty");
            }
        }
    }
}

/// A hook run's time by its own clock: the `ms=` of the log line it wrote
/// (the first line after the `before` lines of `home`'s log that is not a
/// detached worker's). What its deadlines govern, without the fork and exec
/// a loaded machine stretches (docs/hardening.md, "Tests with a wall-clock
/// bound").
fn own_ms(home: &Home, before: usize, what: &str) -> u128 {
    let log = home.log();
    let line = log
        .lines()
        .skip(before)
        .find(|l| !l.contains(":detached "))
        .unwrap_or_else(|| panic!("{what}: no log line of its own:\n{log}"));
    crate::support::logged_ms(line)
}

/// A wall-clock sanity bound on a hook's run (spawn to exit) where its own
/// clock is what is held to a budget. Two orders of magnitude over what was
/// measured on 2 cores at load 8-11 beside a cold `cargo build` (a local
/// hook run: at most a few hundred ms; docs/hardening.md, round five).
pub const RUN_SANITY: Duration = Duration::from_secs(15);

/// Each binary, fed its own capture for `session()` with nothing pending,
/// prints nothing, within `within` by its own clock (and [`RUN_SANITY`] on
/// the wall clock).
pub fn nothing_pending_prints_nothing<H: Hooks>(home: &Home, mut session: impl FnMut() -> String, within: Duration) {
    for event in H::events() {
        let before = home.log().lines().count();
        let (out, r) = run::<H>(home, event, &H::fixture_for(&H::own_fixture(event), &session()));
        assert_eq!(out, None, "{}: nothing to say without notes", H::name(event));
        let took = own_ms(home, before, H::name(event));
        assert!(took < within.as_millis(), "{} took {took} ms by its own clock", H::name(event));
        assert!(r.elapsed < RUN_SANITY, "{} took {:?}", H::name(event), r.elapsed);
    }
}

/// A server nothing listens on ([`Home::dead_server`]): every binary answers
/// its own capture within 5 s by its own clock, and all but the `closed` ones
/// (their fail policy is to deny) print nothing. The outputs of `closed`, in
/// order.
pub fn unreachable_server_fails_open<H: Hooks>(home: &Home, session: &str, closed: &[H::Event]) -> Vec<Value> {
    let mut denied = Vec::new();
    for event in H::events() {
        let before = home.log().lines().count();
        let (out, r) = run::<H>(home, event, &H::fixture_for(&H::own_fixture(event), session));
        let took = own_ms(home, before, H::name(event));
        assert!(took < 5000, "{} took {took} ms by its own clock", H::name(event));
        assert!(r.elapsed < RUN_SANITY, "{} took {:?}", H::name(event), r.elapsed);
        if closed.contains(&event) {
            denied.push(out.unwrap_or_else(|| panic!("{}: fail closed", H::name(event))));
        } else {
            assert_eq!(out, None, "{}: fail open by default", H::name(event));
        }
    }
    denied
}

// ----- local mode ------------------------------------------------------------------

/// Local mode: a note still pending when `end` runs is `undeliverable`
/// (`session_ended`), and `end` prints nothing.
pub fn local_end_drops_pending<H: Hooks>(home: &Home, tag: &str, start: H::Event, end: H::Event) {
    let s = crate::support::unique_session(tag);
    run_own::<H>(home, start, &s);
    let id = home.send(&s, "too late");
    assert_eq!(run_own::<H>(home, end, &s), None);
    assert_eq!(home.note_state(&id), ("undeliverable".into(), None, Some("session_ended".into())));
}

/// What [`local_start_carries_a_waiting_note`] leaves for the harness's own
/// checks.
pub struct Started {
    pub home: Home,
    pub session: String,
    /// The first hook's output.
    pub out: Value,
    /// The block it carried.
    pub block: String,
}

/// Local mode, a new home (`tag`): a note sent to a fresh session before its
/// first hook ([`first_event`]) ran is carried by that hook and `delivered`
/// on `session_start`.
pub fn local_start_carries_a_waiting_note<H: Hooks>(tag: &str, text: &str) -> Started {
    let home = Home::new(tag);
    let session = crate::support::unique_session(tag);
    let id = home.send(&session, text);
    let out = run_own::<H>(&home, first_event::<H>(), &session).expect("the first hook carries the note");
    let block = context_of(&Some(out.clone())).expect("a block");
    assert_eq!(ids_in(&block), vec![id.clone()]);
    assert_eq!(home.note_state(&id), ("delivered".into(), Some("session_start".into()), None));
    Started { home, session, out, block }
}

/// Local mode: the tool hook `gate` prints nothing for a pending note and
/// leaves it pending (a hook that cannot carry never claims locally), and
/// the after-tool hook `after` carries it (`delivered` on `pre_tool_use`).
/// `after`'s output.
pub fn local_after_tool_carries_what_the_gate_left<H: Hooks>(
    home: &Home,
    s: &str,
    gate: H::Event,
    after: H::Event,
) -> Value {
    let id = home.send(s, "mid-run note");
    assert_eq!(run_own::<H>(home, gate, s), None, "nothing decides, nothing is held");
    assert_eq!(home.receipt(&id).state, ReceiptState::Pending);
    let out = run_own::<H>(home, after, s).expect("the note");
    assert_eq!(ids_in(&context_of(&Some(out.clone())).unwrap()), vec![id.clone()]);
    assert_eq!(home.note_state(&id), ("delivered".into(), Some("pre_tool_use".into()), None));
    out
}

/// Local mode, five rounds of a late note: the continuation's own stop
/// (`active`, a capture with `stop_hook_active`) never continues, and `stop`
/// continues with the note, verbatim in an XML block (delivered on `stop`),
/// three times in the session; past the cap the note stays pending.
pub fn local_stop_rescues_three_times<H: Hooks>(home: &Home, tag: &str, start: H::Event, stop: H::Event, active: &str) {
    let s = crate::support::unique_session(tag);
    run_own::<H>(home, start, &s);
    let mut rescued = 0;
    for round in 0..5 {
        let id = home.send(&s, &format!("late note {round}"));
        let (out, _) = run::<H>(home, stop, &H::fixture_for(active, &s));
        assert_eq!(out, None, "never a second continuation in a row");
        match run_own::<H>(home, stop, &s) {
            Some(v) => {
                rescued += 1;
                // A block with a reason, or a plugin shim's continuation (Pi).
                assert!(v["decision"] == json!("block") || v["kind"] == json!("continue"), "a continuation: {v}");
                let reason = context_of(&Some(v.clone())).expect("its text");
                let reason = reason.as_str();
                assert!(reason.starts_with("<operator-notes count=\"1\""), "verbatim XML: {reason}");
                assert_eq!(ids_in(reason), vec![id.clone()]);
                assert_eq!(home.receipt(&id).delivery_event.as_deref(), Some("stop"));
            }
            None => assert_eq!(home.receipt(&id).state, ReceiptState::Pending),
        }
    }
    assert_eq!(rescued, 3, "our stop_rescue_cap");
}

// ----- server mode -----------------------------------------------------------------

/// Server mode, a fresh fake and home (`tag`): the first hook, on its own
/// capture for a fresh session, prints nothing, registers the session as
/// `source` with the capture's `cwd`, pulls for `session_start` with
/// deferral, and writes the public session file with the server's runtime
/// id. The fake, the home and the session.
pub fn server_start_registers<H: Hooks>(tag: &str, source: &str, cwd: &str) -> (FakeServer, Home, String) {
    let server = FakeServer::start();
    let home = Home::for_server(tag, &server);
    let s = crate::support::unique_session(tag);
    assert_eq!(run_own::<H>(&home, first_event::<H>(), &s), None);
    let calls = server.hook_calls();
    let routes: Vec<&str> = calls.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(routes, ["session-start", "notes/pending"]);
    let (start, pull) = (&calls[0].1, &calls[1].1);
    assert_eq!((&start["source"], &start["session_id"], &start["cwd"]), (&json!(source), &json!(s), &json!(cwd)));
    assert_eq!((&pull["event"], &pull["defer_delivery"]), (&json!("session_start"), &json!(true)));
    let rid = server.runtime_session_id(&server.agent_id(), &s).expect("registered");
    let file = home.session_file(&s).expect("the public session file");
    assert_eq!(
        (file.runtime_session_id.as_str(), file.agent_kind.as_str(), file.mode.as_str()),
        (rid.as_str(), source, "server")
    );
    (server, home, s)
}

/// Server mode: a note sent after the session started reaches the first
/// prompt (`prompt`, on its own capture: `first_prompt`), pulled with
/// deferral and acked after the output (`delivered` on `session_start`); that
/// prompt registers the session again with its text, under the name the
/// server records a prompt time for (`UserPromptSubmit`), and later prompts
/// do not.
pub fn server_first_prompt_registers<H: Hooks>(
    server: &FakeServer,
    home: &Home,
    s: &str,
    prompt: H::Event,
    first_prompt: &str,
) {
    server.clear_requests();
    let id = server.send_to_session(s, "run the tests first");
    let out = run_own::<H>(home, prompt, s);
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id.clone()]);
    let start = server.hook_call("session-start");
    assert_eq!((&start["first_prompt"], &start["hook_event_name"]), (&json!(first_prompt), &json!("UserPromptSubmit")));
    let ack = server.hook_call("notes/ack");
    assert_eq!((&ack["note_ids"], &ack["session_id"]), (&json!([id]), &json!(s)));
    assert_eq!(server.note_state(&id), ("delivered".into(), Some("session_start".into()), None));
    // Later prompts do not register again.
    server.clear_requests();
    run_own::<H>(home, prompt, s);
    assert_eq!(server.hook_routes(), vec!["notes/pending"]);
}

/// Server mode: the after-tool hook `after` pulls a pending note with
/// deferral (`pre_tool_use`) and acks it after its output: two calls, the
/// note `delivered` on `pre_tool_use`.
pub fn server_after_tool_pulls_deferred<H: Hooks>(
    server: &FakeServer,
    home: &Home,
    s: &str,
    after: H::Event,
    id: &str,
) {
    server.clear_requests();
    let out = run_own::<H>(home, after, s);
    assert_eq!(ids_in(&context_of(&out).unwrap()), vec![id.to_string()]);
    assert_eq!(server.hook_routes(), vec!["notes/pending", "notes/ack"]);
    let pull = server.hook_call("notes/pending");
    assert_eq!((&pull["event"], &pull["defer_delivery"]), (&json!("pre_tool_use"), &json!(true)));
    assert_eq!(server.note_state(id), ("delivered".into(), Some("pre_tool_use".into()), None));
}

/// The one call a tool hook made since the requests were cleared: a
/// `permission-check` in the `pre_tool_use` phase (never an escalation to a
/// human), by `source`, for `tool_name`. Its body.
pub fn the_one_pre_tool_check(server: &FakeServer, source: &str, tool_name: &str) -> Value {
    let calls = server.hook_calls();
    assert_eq!(server.hook_routes(), vec!["permission-check"], "one permission-check, nothing else: {calls:?}");
    let body = calls.into_iter().next().unwrap().1;
    assert_eq!(body["evaluation_phase"], json!("pre_tool_use"));
    assert_eq!((&body["source"], &body["tool_name"]), (&json!(source), &json!(tool_name)));
    body
}

/// Server mode: the `stop` hook continues with a late note (delivered on
/// `stop`) and reports the turn end (`session-event` Stop); the
/// continuation's own stop (`active`, a capture with `stop_hook_active`)
/// reports it too, and pulls nothing.
pub fn server_stop_continues<H: Hooks>(
    server: &FakeServer,
    home: &Home,
    start: H::Event,
    stop: H::Event,
    active: &str,
) {
    let s = crate::support::unique_session("st");
    run_own::<H>(home, start, &s);
    let id = server.send_to_session(&s, "late");
    server.clear_requests();
    let out = run_own::<H>(home, stop, &s).expect("a continuation");
    assert!(out["decision"] == json!("block") || out["kind"] == json!("continue"), "a continuation: {out}");
    assert_eq!(ids_in(&context_of(&Some(out)).unwrap()), vec![id.clone()]);
    assert_eq!(server.note_state(&id), ("delivered".into(), Some("stop".into()), None));
    assert_eq!(server.hook_call("session-event")["hook_event_name"], json!("Stop"), "turn end reported");
    server.clear_requests();
    server.send_to_session(&s, "later");
    let (out, _) = run::<H>(home, stop, &H::fixture_for(active, &s));
    assert_eq!(out, None);
    assert_eq!(server.hook_routes(), vec!["session-event"]);
}

/// Server mode, the default: the binary hands the end to a detached worker
/// and returns at once with the neutral answer; the worker then makes the
/// same calls as the in-process end.
pub fn server_end_detached<H: Hooks>(server: &FakeServer, home: &Home, start: H::Event, end: H::Event, reason: &str) {
    let s = crate::support::unique_session("ed");
    run_own::<H>(home, start, &s);
    let id = server.send_to_session(&s, "never read");
    let out = run_own::<H>(home, end, &s);
    assert!(out.as_ref().is_none_or(|o| o == &json!({})), "the neutral answer, got {out:?}");
    crate::support::wait_for(Duration::from_secs(10), "the detached worker's session-end", || {
        (server.note_state(&id).0 == "undeliverable").then_some(())
    });
    assert_eq!(server.note_state(&id), ("undeliverable".into(), None, Some("session_ended".into())));
    let body = server.hook_call("session-end");
    assert_eq!((&body["external_session_id"], &body["reason"]), (&json!(s), &json!(reason)));
    assert!(home.log().contains("outcome=detached"), "{}", home.log());
}

/// Server mode with `PRELOOP_SESSION_END_DETACH=0`: `end` is done when the
/// binary returns (no detached worker):
/// a pending note is `undeliverable` (`session_ended`), and the session-end
/// call names the session and `reason`.
pub fn server_end_in_process<H: Hooks>(server: &FakeServer, home: &Home, start: H::Event, end: H::Event, reason: &str) {
    let s = crate::support::unique_session("en");
    run_own::<H>(home, start, &s);
    let id = server.send_to_session(&s, "never read");
    assert_eq!(run_own::<H>(home, end, &s), None);
    assert_eq!(server.note_state(&id), ("undeliverable".into(), None, Some("session_ended".into())));
    let body = server.hook_call("session-end");
    assert_eq!((&body["external_session_id"], &body["reason"]), (&json!(s), &json!(reason)));
}
