//! The engine's delivery rules, one fast test each, through the
//! `Engine::with_backend` seam and testkit's in-memory backend (every call
//! recorded, the server's note states kept): claim and carry, deferred vs
//! immediate claims, spool order, the spool cap and expiry, the block cap,
//! carrier limits per registry row, the Stop rescue cap under the session
//! lock, ack after flush, a failed write, owed acks, failed state writes.
//! A rule change fails here before any process test.

use preloop_shared::config::{Config, Env};
use preloop_shared::flow::{AfterFlush, BLOCK_CAP, Carry, Engine, Input, InputKind, Outcome, SPOOL_CAP, split_to_fit};
use preloop_shared::registry::{CarrierLimit, HookDef, def_of, event, largest_limit};
use preloop_shared::session::{RunFiles, RunState, SpoolEntry};
use preloop_shared::time::Timestamp;
use preloop_shared::wire::{Decision, UndeliverableReason};
use preloop_shared::{Harness, render};
use preloop_testkit::memory_backend::{Call, MemoryBackend, NoteState};
use preloop_testkit::support::{Home, ids_in};
use serde_json::json;

const DROPPED: NoteState = NoteState::Undeliverable(UndeliverableReason::SpoolDropped);

/// One session in a private home, against one memory backend.
struct Rig {
    home: Home,
    mem: MemoryBackend,
    session: String,
    /// Settings changes for every engine.
    tweak: fn(&mut Config),
}

impl Rig {
    fn server() -> Rig {
        Rig { home: Home::new("engine"), mem: MemoryBackend::server(), session: "s1".into(), tweak: |_| {} }
    }
    fn local() -> Rig {
        Rig { mem: MemoryBackend::local(), ..Rig::server() }
    }

    fn config(&self, def: &HookDef) -> Config {
        let home = self.home.dir.to_str().unwrap();
        let mut env = vec![("PRELOOP_HOME", home)];
        if self.mem.lock().mode == preloop_shared::backend::HookMode::Server {
            env.extend([("PRELOOP_URL", "http://127.0.0.1:9"), ("PRELOOP_TOKEN", "agt_memory")]);
        }
        let mut c = Config::load_from(&Env::of(&env), Some(def.harness()));
        (self.tweak)(&mut c);
        c
    }

    fn engine(&self, def: &'static HookDef) -> Engine {
        Engine::with_backend(def, self.config(def), &self.session, Box::new(self.mem.clone()))
    }

    /// Run one hook: handle, then finish as if the output was written
    /// (`written`). Returns the outcome and the ids the output carried.
    fn hook_written(
        &self,
        def: &'static HookDef,
        kind: InputKind,
        written: bool,
    ) -> (Outcome, Vec<String>, Vec<String>) {
        let mut e = self.engine(def);
        let input = Input {
            session_id: self.session.clone(),
            cwd: Some("/tmp".into()),
            transcript_path: None,
            parent_session_id: None,
            kind,
        };
        let (out, after) = e.handle(&input).unwrap_or_else(|err| panic!("{}: {err}", def.binary));
        let ids = out.context.as_deref().map(ids_in).unwrap_or_default();
        assert_eq!(after.carried_ids(), ids, "{}: the block is what will be acked", def.binary);
        let dropped = after.dropped_ids().to_vec();
        e.finish(after, written);
        (out, ids, dropped)
    }

    fn hook(&self, def: &'static HookDef, kind: InputKind) -> (Outcome, Vec<String>) {
        let (o, ids, _) = self.hook_written(def, kind, true);
        (o, ids)
    }

    fn handle_only(&self, def: &'static HookDef, kind: InputKind) -> (Engine, Outcome, AfterFlush) {
        let mut e = self.engine(def);
        let input =
            Input { session_id: self.session.clone(), cwd: None, transcript_path: None, parent_session_id: None, kind };
        let (o, a) = e.handle(&input).unwrap();
        (e, o, a)
    }

    fn run_files(&self) -> RunFiles {
        RunFiles::new(&self.home.dir, &self.session)
    }

    fn state(&self) -> RunState {
        self.run_files().read().0
    }

    fn spool_ids(&self) -> Vec<String> {
        self.state().spool.iter().map(|e| e.note.id.clone()).collect()
    }

    fn start(&self, def: &'static HookDef) {
        self.hook(def, InputKind::SessionStart { pull: true });
    }
}

fn prompt() -> InputKind {
    InputKind::Prompt { prompt: "go on".into(), pull: true }
}

fn tool(carry: Carry) -> InputKind {
    InputKind::Tool {
        tool_name: "Bash".into(),
        mcp_tool: None,
        tool_input: json!({"command": "ls"}),
        model: None,
        carry,
    }
}

fn stop() -> InputKind {
    InputKind::Stop { may_continue: true }
}

fn cc(e: event::ClaudeCode) -> &'static HookDef {
    def_of(e)
}
fn cx(e: event::Codex) -> &'static HookDef {
    def_of(e)
}

// ----- claim and carry -----------------------------------------------------------------

#[test]
fn a_pull_is_claimed_deferred_and_acked_only_after_the_output_is_written() {
    let rig = Rig::server();
    let ids = rig.mem.queue_n(2, "deploy to eu-west-1");
    let (mut e, out, after) = rig.handle_only(cc(event::ClaudeCode::UserPromptSubmit), prompt());
    assert_eq!(ids_in(out.context.as_deref().unwrap()), ids);
    let pulls: Vec<_> = rig.mem.calls().into_iter().filter(|c| matches!(c, Call::Pull(_))).collect();
    let Call::Pull(req) = &pulls[0] else { unreachable!() };
    assert!(req.defer_delivery, "a pull is always deferred");
    for id in &ids {
        assert_eq!(rig.mem.state(id), NoteState::Claimed, "not acked before the write");
    }
    assert!(rig.mem.acks().is_empty());
    e.finish(after, true);
    let acks = rig.mem.acks();
    assert_eq!(acks.len(), 1);
    assert_eq!((acks[0].note_ids.clone(), acks[0].undeliverable_reason), (ids.clone(), None));
    for id in &ids {
        assert_eq!(rig.mem.state(id), NoteState::Delivered);
    }
}

/// Watch the session state file for a rewrite: a second name for the file
/// as it is now, which an atomic rewrite leaves behind (inode numbers are
/// reused, link counts are not fooled).
struct StateWitness(std::path::PathBuf);

impl StateWitness {
    fn new(rig: &Rig) -> StateWitness {
        let w = rig.home.dir.join("state-witness");
        let _ = std::fs::remove_file(&w);
        std::fs::hard_link(rig.run_files().state, &w).unwrap();
        StateWitness(w)
    }
    fn rewritten(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&self.0).unwrap().nlink() == 1
    }
}

#[test]
fn notes_that_fit_the_output_leave_the_session_state_unwritten() {
    for rig in [Rig::server(), Rig::local()] {
        rig.start(cc(event::ClaudeCode::SessionStart));
        rig.hook(cc(event::ClaudeCode::UserPromptSubmit), prompt()); // the first prompt is recorded once
        let witness = StateWitness::new(&rig);
        let ids = rig.mem.queue_n(2, "fits");
        let (_, carried) = rig.hook(cc(event::ClaudeCode::UserPromptSubmit), prompt());
        assert_eq!(carried, ids);
        assert!(
            !witness.rewritten(),
            "{}: no spool, nothing owed: no rewrite (no fdatasync)",
            rig.mem.lock().mode.as_str()
        );
    }
    // Carrying the spool changes the state: it is written.
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    rig.hook(cx(event::Codex::UserPromptSubmit), prompt());
    let spooled = rig.mem.queue_n(2, "spooled by a gate");
    rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    let witness = StateWitness::new(&rig);
    let (_, carried) = rig.hook(cx(event::Codex::UserPromptSubmit), prompt());
    assert_eq!(carried, spooled);
    assert!(witness.rewritten(), "the emptied spool is written");
    assert!(rig.spool_ids().is_empty());
}

/// A SessionStart that changes nothing (the run already holds the
/// runtime id the server answers) neither takes the session lock nor
/// rewrites the state: with the lock held elsewhere it returns at once
/// instead of waiting out `RUN_LOCK_WAIT` (docs/performance.md, "Round
/// five"). Where the state changes (a new runtime id), the lock is taken.
#[test]
fn a_session_start_that_changes_nothing_takes_no_lock_and_writes_nothing() {
    for rig in [Rig::server(), Rig::local()] {
        let def = cc(event::ClaudeCode::SessionStart);
        rig.start(def);
        let before = rig.state();
        assert!(before.runtime_session_id.is_some());
        let witness = StateWitness::new(&rig);
        let held = rig.run_files().lock(std::time::Duration::ZERO).unwrap();
        let t = std::time::Instant::now();
        rig.start(def); // panics on the lock's `Busy` after 5 s were it taken
        assert!(t.elapsed() < std::time::Duration::from_secs(4), "waited for the lock: {:?}", t.elapsed());
        assert!(!witness.rewritten(), "{}: nothing changed, nothing written", rig.mem.lock().mode.as_str());
        assert_eq!(rig.state().runtime_session_id, before.runtime_session_id);
        drop(held);
        // A changed state still goes through the lock: a stale runtime id is rewritten.
        let mut stale = rig.state();
        stale.runtime_session_id = Some("00000000-0000-4000-8000-000000000000".into());
        {
            let _g = rig.run_files().lock(std::time::Duration::ZERO).unwrap();
            rig.run_files().write(&stale).unwrap();
        }
        rig.start(def);
        assert_eq!(rig.state().runtime_session_id, before.runtime_session_id, "the server's id is recorded again");
    }
}

/// `RunFiles::write` pays an `fdatasync` only for a state that keeps a
/// note or an ack nothing else has: the with-note Stop, which only counts a
/// rescue, writes its state unsynced; a gate that spools writes it synced.
#[test]
fn only_a_state_that_holds_notes_is_synced() {
    let counters = RunState { runtime_session_id: Some("r".into()), stop_rescues: 3, ..RunState::default() };
    assert!(!counters.holds_notes());
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    rig.hook(cx(event::Codex::UserPromptSubmit), prompt());
    rig.mem.queue("late");
    let (out, carried) = rig.hook(cx(event::Codex::Stop), stop());
    assert!(out.continue_turn && carried.len() == 1);
    assert_eq!(rig.state().stop_rescues, 1, "the rescue is counted");
    assert!(!rig.state().holds_notes(), "a rescue's state is counters alone: written without a sync");
    rig.mem.queue_n(2, "spooled by a gate");
    rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    assert!(rig.state().holds_notes(), "a spool is written with a sync");
    let owed = RunState {
        owed_acks: vec![preloop_shared::session::OwedAck { note_ids: vec!["n".into()], dropped: false }],
        ..RunState::default()
    };
    assert!(owed.holds_notes(), "an owed ack is kept with a sync");
}

#[test]
fn a_failed_write_puts_the_notes_back_at_the_front_of_the_spool() {
    let rig = Rig::server();
    rig.start(cc(event::ClaudeCode::SessionStart));
    let first = rig.mem.queue_n(2, "first");
    let (_, carried, _) = rig.hook_written(cc(event::ClaudeCode::UserPromptSubmit), prompt(), false);
    assert_eq!(carried, first);
    assert!(rig.mem.acks().is_empty(), "nothing is acked that was not written");
    assert_eq!(rig.spool_ids(), first, "back in the spool");
    for id in &first {
        assert_eq!(rig.mem.state(id), NoteState::Claimed);
    }
    let second = rig.mem.queue("second");
    let (_, carried) = rig.hook(cc(event::ClaudeCode::UserPromptSubmit), prompt());
    assert_eq!(carried, [first.clone(), vec![second.clone()]].concat(), "the returned notes go first, once");
    for id in first.iter().chain([&second]) {
        assert_eq!(rig.mem.state(id), NoteState::Delivered);
        assert_eq!(rig.mem.note(id).acks, 1, "acked once");
    }
    assert!(rig.spool_ids().is_empty());
}

#[test]
fn an_immediate_claim_is_the_servers_delivery_and_is_never_acked() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    let ids = rig.mem.queue_n(2, "mid-run");
    let (out, carried) = rig.hook(cx(event::Codex::PreToolUse), tool(Carry::All));
    assert_eq!(carried, ids);
    assert_eq!(out.decision, Some(Decision::Allow));
    for id in &ids {
        assert_eq!(rig.mem.note(id).claimed_by, Some("permission-check"));
        assert_eq!(rig.mem.state(id), NoteState::Delivered);
        assert_eq!(rig.mem.note(id).acks, 0, "an immediate claim needs no ack");
    }
}

#[test]
fn a_deferred_gate_claim_is_spooled_then_carried_and_acked_by_the_next_carrier() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    let ids = rig.mem.queue_n(2, "held for the next carrier");
    let (out, carried) = rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    assert!(carried.is_empty() && out.context.is_none(), "PermissionRequest shows nothing");
    assert_eq!(rig.spool_ids(), ids);
    assert!(rig.state().spool.iter().all(|e| e.deferred));
    for id in &ids {
        assert_eq!(rig.mem.state(id), NoteState::Claimed);
    }
    let (_, carried) = rig.hook(cx(event::Codex::UserPromptSubmit), prompt());
    assert_eq!(carried, ids);
    for id in &ids {
        assert_eq!(rig.mem.state(id), NoteState::Delivered);
    }
    assert!(rig.spool_ids().is_empty());
}

#[test]
fn a_local_gate_that_cannot_carry_claims_nothing() {
    let rig = Rig::local();
    rig.start(cx(event::Codex::SessionStart));
    let id = rig.mem.queue("wait for a carrier");
    let (out, _) = rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    assert_eq!(out.decision, None, "nothing decides on one machine");
    assert_eq!(rig.mem.state(&id), NoteState::Pending);
    let (_, carried) = rig.hook(cx(event::Codex::PreToolUse), tool(Carry::All));
    assert_eq!(carried, vec![id.clone()]);
    assert_eq!(rig.mem.state(&id), NoteState::Delivered, "the local claim is deferred and acked after the write");
}

// ----- spool order, cap, expiry ---------------------------------------------------------

#[test]
fn the_spool_keeps_immediate_claims_first_then_the_spool_then_new_deferred_ones() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    let deferred = rig.mem.queue_n(2, "deferred");
    rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    // A sub-agent's PreToolUse: the server claims immediately, nothing is shown.
    let immediate = rig.mem.queue_n(2, "immediate");
    rig.hook(cx(event::Codex::PreToolUse), tool(Carry::None));
    assert_eq!(rig.spool_ids(), [immediate.clone(), deferred.clone()].concat());
    let later = rig.mem.queue("new deferred");
    rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    assert_eq!(rig.spool_ids(), [immediate.clone(), deferred.clone(), vec![later.clone()]].concat());
    let (_, carried) = rig.hook(cx(event::Codex::UserPromptSubmit), prompt());
    assert_eq!(carried, [immediate, deferred, vec![later]].concat(), "oldest promise first");
}

/// Fill the spool to its cap through a gate the server hands notes to,
/// five claims at a time (the server's claim limit).
fn fill_spool(rig: &Rig, what: &str) -> Vec<String> {
    let mut kept = Vec::new();
    while kept.len() < SPOOL_CAP {
        kept.extend(rig.mem.queue_n(BLOCK_CAP.min(SPOOL_CAP - kept.len()), what));
        rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    }
    kept
}

/// A pull made while the spool already fills a block claims nothing: the
/// notes stay pending on the server instead of being claimed into a spool
/// that could have to give them up.
#[test]
fn a_full_block_in_the_spool_means_no_pull() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    let spooled = rig.mem.queue_n(BLOCK_CAP, "spooled");
    rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    let pending = rig.mem.queue("pending");
    let (_, carried) = rig.hook(cx(event::Codex::UserPromptSubmit), prompt());
    assert_eq!(carried, spooled);
    assert_eq!(rig.mem.state(&pending), NoteState::Pending, "not claimed while the spool was full");
    let (_, carried) = rig.hook(cx(event::Codex::UserPromptSubmit), prompt());
    assert_eq!(carried, vec![pending]);
}

#[test]
fn past_the_cap_deferred_notes_are_acked_spool_dropped_and_immediate_ones_kept() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    let kept = fill_spool(&rig, "kept");
    let over = rig.mem.queue_n(3, "over the cap");
    let (_, _, dropped) = rig.hook_written(cx(event::Codex::PermissionRequest), tool(Carry::None), true);
    assert_eq!(dropped, over, "the newest deferred notes are given up");
    for id in &over {
        assert_eq!(rig.mem.state(id), DROPPED);
    }
    assert_eq!(rig.spool_ids(), kept);
    // Notes the server already recorded delivered are never given up.
    let immediate = rig.mem.queue_n(5, "immediate");
    let (_, _, dropped) = rig.hook_written(cx(event::Codex::PreToolUse), tool(Carry::None), true);
    assert!(dropped.is_empty(), "{dropped:?}");
    assert_eq!(rig.spool_ids(), [immediate.clone(), kept.clone()].concat());
    // And every kept note still goes out, five per block, once.
    let mut carried = Vec::new();
    for _ in 0..(SPOOL_CAP + 5).div_ceil(BLOCK_CAP) {
        let (_, ids) = rig.hook(cx(event::Codex::UserPromptSubmit), prompt());
        assert!(ids.len() <= BLOCK_CAP);
        carried.extend(ids);
    }
    assert_eq!(carried, [immediate, kept].concat());
    assert!(rig.mem.in_state(NoteState::Claimed).is_empty());
}

#[test]
fn spooled_deferred_notes_expire_and_are_reported_immediate_ones_never() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    let old_deferred = rig.mem.queue("old deferred");
    rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    let old_immediate = rig.mem.queue("old immediate");
    rig.hook(cx(event::Codex::PreToolUse), tool(Carry::None));
    // Both were spooled two days ago (the lifetime is one).
    let files = rig.run_files();
    let mut st = rig.state();
    for e in &mut st.spool {
        e.spooled_at = Timestamp::now().add_secs(-2 * 86_400);
    }
    files.write(&st).unwrap();
    let (_, carried, dropped) = rig.hook_written(cx(event::Codex::UserPromptSubmit), prompt(), true);
    assert_eq!(dropped, vec![old_deferred.clone()]);
    assert_eq!(rig.mem.state(&old_deferred), DROPPED);
    assert_eq!(carried, vec![old_immediate.clone()], "an expired promise still goes out");
}

#[test]
fn session_end_reports_deferred_spooled_notes_dropped_and_ends_the_rest() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    let spooled = rig.mem.queue("spooled");
    rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    let pending = rig.mem.queue("pending");
    rig.hook(cx(event::Codex::SessionEnd), InputKind::SessionEnd { reason: "other".into() });
    assert_eq!(rig.mem.state(&spooled), DROPPED, "spool_dropped, not session_ended");
    assert_eq!(rig.mem.state(&pending), NoteState::Undeliverable(UndeliverableReason::SessionEnded));
    assert_eq!(rig.state(), RunState::default(), "the session state is gone");
}

// ----- block cap and carrier limits --------------------------------------------------

fn entry(id: &str, text: &str, deferred: bool) -> SpoolEntry {
    SpoolEntry { note: MemoryBackend::element(id, text), deferred, spooled_at: Timestamp::now() }
}

#[test]
fn a_block_holds_at_most_five_notes() {
    let entries: Vec<SpoolEntry> = (0..12).map(|i| entry(&format!("{i:016x}"), "tiny", true)).collect();
    let big = CarrierLimit::Chars(1 << 20);
    let split = split_to_fit(big, big, entries);
    assert_eq!((split.take.len(), split.rest.len(), split.oversized.len()), (BLOCK_CAP, 7, 0));
    // In the engine: a spool of five and a claim of five make two blocks.
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    let spooled = rig.mem.queue_n(5, "spooled");
    rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    let claimed = rig.mem.queue_n(5, "claimed");
    let (out, first) = rig.hook(cx(event::Codex::PreToolUse), tool(Carry::All));
    assert!(out.context.unwrap().starts_with("<operator-notes count=\"5\""));
    assert_eq!(first, claimed, "the server's immediate claims first");
    let (_, second) = rig.hook(cx(event::Codex::UserPromptSubmit), prompt());
    assert_eq!(second, spooled);
}

#[test]
fn carrier_limits_are_the_registry_rows() {
    use event::*;
    assert_eq!(def_of(ClaudeCode::UserPromptSubmit).limit, CarrierLimit::Utf16(10_000));
    assert_eq!(def_of(ClaudeCode::Stop).limit, CarrierLimit::Utf16(10_000));
    assert_eq!(def_of(Codex::UserPromptSubmit).limit, CarrierLimit::Bytes(20_000));
    assert_eq!(def_of(Codex::PreToolUse).limit, CarrierLimit::Bytes(20_000));
    assert_eq!(def_of(Codex::Stop).limit, CarrierLimit::Bytes(10_000));
    assert_eq!(def_of(Cursor::PreToolUse).limit, CarrierLimit::Chars(10_000));
    assert_eq!(largest_limit(Harness::Codex), CarrierLimit::Bytes(20_000));
}

#[test]
fn claude_counts_utf16_units() {
    // 3,000 astral characters: 3,000 characters, 6,000 UTF-16 units.
    let text = "🦀".repeat(3000);
    let two = vec![entry("aaaaaaaaaaaaaaaa", &text, true), entry("bbbbbbbbbbbbbbbb", &text, true)];
    let limit = cc(event::ClaudeCode::UserPromptSubmit).limit;
    let split = split_to_fit(limit, largest_limit(Harness::ClaudeCode), two.clone());
    assert_eq!((split.take.len(), split.rest.len()), (1, 1), "two do not fit 10,000 UTF-16 units");
    let block = render::frame(&[two[0].note.clone(), two[1].note.clone()]).unwrap();
    assert!(block.chars().count() < 10_000, "as characters they would have fit");
}

#[test]
fn a_note_that_fits_only_the_larger_codex_carrier_waits_for_it() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    // 4,096 three-byte characters: ~12,300 bytes, over Stop's 10,000, under the context's 20,000.
    let big = rig.mem.queue(&"€".repeat(4096));
    rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    let (out, carried, dropped) = rig.hook_written(cx(event::Codex::Stop), stop(), true);
    assert!(carried.is_empty() && !out.continue_turn && dropped.is_empty(), "Stop cannot show it: it waits");
    assert_eq!(rig.mem.state(&big), NoteState::Claimed);
    assert_eq!(rig.spool_ids(), vec![big.clone()]);
    assert_eq!(rig.state().stop_rescues, 0, "no rescue spent on nothing");
    let (_, carried) = rig.hook(cx(event::Codex::UserPromptSubmit), prompt());
    assert_eq!(carried, vec![big.clone()]);
    assert_eq!(rig.mem.state(&big), NoteState::Delivered);
}

#[test]
fn an_oversized_note_is_never_shown_and_a_deferred_one_is_reported_dropped() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    // A server that breaks its own 4,096-character limit: 60,000 bytes.
    let deferred = rig.mem.queue(&"é".repeat(30_000));
    let fits = rig.mem.queue("a normal note");
    let (out, carried, dropped) = rig.hook_written(cx(event::Codex::UserPromptSubmit), prompt(), true);
    assert_eq!(carried, vec![fits.clone()], "the oversized note is not shown, cut or whole");
    assert!(!out.context.unwrap().contains("éééé"));
    assert_eq!(dropped, vec![deferred.clone()]);
    assert_eq!(rig.mem.state(&deferred), DROPPED);
    // An immediate one is the server's `delivered` already: not shown, logged.
    let immediate = rig.mem.queue(&"é".repeat(30_000));
    let mut e = rig.engine(cx(event::Codex::PreToolUse));
    let input = Input {
        session_id: rig.session.clone(),
        cwd: None,
        transcript_path: None,
        parent_session_id: None,
        kind: tool(Carry::All),
    };
    let (out, after) = e.handle(&input).unwrap();
    assert!(out.context.is_none() && after.dropped_ids().is_empty());
    assert!(e.warnings.iter().any(|w| w.contains(&immediate)), "{:?}", e.warnings);
    assert!(rig.spool_ids().is_empty(), "never kept to be shown later");
}

// ----- Stop --------------------------------------------------------------------------

#[test]
fn stop_rescues_are_capped_per_session() {
    let rig = Rig::server();
    rig.start(cc(event::ClaudeCode::SessionStart));
    let mut continued = 0;
    for i in 0..5 {
        rig.mem.queue(&format!("late {i}"));
        let (out, carried) = rig.hook(cc(event::ClaudeCode::Stop), stop());
        if out.continue_turn {
            continued += 1;
            assert_eq!(carried.len(), 1);
        }
    }
    assert_eq!(continued, 3);
    assert_eq!(rig.state().stop_rescues, 3);
    assert_eq!(rig.mem.in_state(NoteState::Pending).len(), 2, "past the cap nothing is claimed");
    // And a Stop that may not continue claims nothing at all.
    let rig2 = Rig::server();
    rig2.mem.queue("x");
    let (out, _) = rig2.hook(cc(event::ClaudeCode::Stop), InputKind::Stop { may_continue: false });
    assert!(!out.continue_turn && rig2.mem.in_state(NoteState::Pending).len() == 1);
}

#[test]
fn concurrent_stops_spend_at_most_the_cap_under_the_session_lock() {
    let rig = Rig::server();
    rig.start(cc(event::ClaudeCode::SessionStart));
    rig.mem.queue_n(16, "late");
    let outs: Vec<(Outcome, Vec<String>)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..16).map(|_| s.spawn(|| rig.hook(cc(event::ClaudeCode::Stop), stop()))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let continued = outs.iter().filter(|(o, _)| o.continue_turn).count();
    assert!((1..=3).contains(&continued), "{continued} continuations");
    assert_eq!(rig.state().stop_rescues as usize, continued);
    let mut all: Vec<String> = outs.into_iter().flat_map(|(_, ids)| ids).collect();
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "no note in two outputs");
    assert_eq!(rig.mem.in_state(NoteState::Delivered).len(), n);
    assert!(rig.mem.in_state(NoteState::Claimed).is_empty());
}

// ----- acks and failures -----------------------------------------------------------

#[test]
fn an_ack_that_fails_is_owed_and_retried_by_the_next_hook() {
    let rig = Rig::server();
    rig.start(cc(event::ClaudeCode::SessionStart));
    let id = rig.mem.queue("acked later");
    rig.mem.fail("notes/ack", 1);
    let (_, carried) = rig.hook(cc(event::ClaudeCode::UserPromptSubmit), prompt());
    assert_eq!(carried, vec![id.clone()]);
    assert_eq!(rig.mem.state(&id), NoteState::Claimed);
    assert_eq!(rig.state().owed_acks.len(), 1);
    let (_, carried) = rig.hook(cc(event::ClaudeCode::UserPromptSubmit), prompt());
    assert!(carried.is_empty(), "never carried twice");
    assert_eq!(rig.mem.state(&id), NoteState::Delivered, "the owed ack went out");
    assert!(rig.state().owed_acks.is_empty());
}

#[test]
fn owed_acks_are_paid_at_session_end() {
    let rig = Rig::server();
    rig.start(cc(event::ClaudeCode::SessionStart));
    let id = rig.mem.queue("acked at the end");
    rig.mem.fail("notes/ack", 1);
    rig.hook(cc(event::ClaudeCode::UserPromptSubmit), prompt());
    rig.hook(cc(event::ClaudeCode::SessionEnd), InputKind::SessionEnd { reason: "other".into() });
    assert_eq!(rig.mem.state(&id), NoteState::Delivered, "delivered, not session_ended");
}

#[test]
fn a_dropped_ack_that_fails_is_owed_as_dropped() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    fill_spool(&rig, "kept");
    let over = rig.mem.queue("over");
    rig.mem.fail("notes/ack", 1);
    rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    assert_eq!(rig.mem.state(&over), NoteState::Claimed);
    let owed = rig.state().owed_acks;
    assert!(owed.len() == 1 && owed[0].dropped && owed[0].note_ids == vec![over.clone()]);
    rig.hook(cx(event::Codex::UserPromptSubmit), prompt());
    assert_eq!(rig.mem.state(&over), DROPPED);
}

#[test]
fn a_state_that_cannot_be_written_still_carries_what_was_claimed() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    // The state file cannot be replaced (a directory in its place); the lock works.
    let files = rig.run_files();
    std::fs::remove_file(&files.state).unwrap();
    std::fs::create_dir(&files.state).unwrap();
    let ids = rig.mem.queue_n(2, "in hand");
    let (_, carried) = rig.hook(cx(event::Codex::PreToolUse), tool(Carry::All));
    assert_eq!(carried, ids, "an immediate claim goes out");
    // A gate's deferred claim that cannot be spooled is reported, never left claimed.
    let held = rig.mem.queue("nowhere to keep it");
    let (_, _, dropped) = rig.hook_written(cx(event::Codex::PermissionRequest), tool(Carry::None), true);
    assert_eq!(dropped, vec![held.clone()]);
    assert_eq!(rig.mem.state(&held), DROPPED);
}

#[test]
fn a_session_lock_that_cannot_be_taken_still_carries_what_was_claimed() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    // `run` is a regular file: no lock, no state.
    let files = rig.run_files();
    std::fs::remove_dir_all(&files.dir).unwrap();
    std::fs::write(&files.dir, b"").unwrap();
    let ids = rig.mem.queue_n(2, "in hand");
    let (_, carried) = rig.hook(cx(event::Codex::PreToolUse), tool(Carry::All));
    assert_eq!(carried, ids);
    let held = rig.mem.queue("nowhere to keep it");
    let (_, _, dropped) = rig.hook_written(cx(event::Codex::PermissionRequest), tool(Carry::None), true);
    assert_eq!(dropped, vec![held.clone()]);
    assert_eq!(rig.mem.state(&held), DROPPED);
    // A failed write with nowhere to return the notes to: reported, not left claimed.
    let pulled = rig.mem.queue("pulled");
    let (_, carried, _) = rig.hook_written(cx(event::Codex::PreToolUse), tool(Carry::All), false);
    assert_eq!(carried, vec![pulled.clone()]);
    assert_eq!(rig.mem.state(&pulled), NoteState::Delivered, "an immediate claim stays the server's delivery");
}

#[test]
fn a_failing_check_follows_the_fail_policy_and_still_carries_the_spool() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    let spooled = rig.mem.queue("spooled");
    rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    rig.mem.fail_always("permission-check");
    let (out, _) = rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    assert_eq!(out.decision, Some(Decision::Deny), "permission_request_on_error defaults to deny");
    let (out, carried) = rig.hook(cx(event::Codex::PreToolUse), tool(Carry::All));
    assert_eq!(out.decision, None, "pre_tool_use_on_error defaults to open");
    assert_eq!(carried, vec![spooled.clone()], "the spool rides the fail-open answer");
    assert_eq!(rig.mem.state(&spooled), NoteState::Delivered);
    let closed =
        Rig { tweak: |c| c.settings.pre_tool_use_on_error = preloop_shared::config::FailPolicy::Deny, ..Rig::server() };
    closed.mem.fail_always("permission-check");
    let (out, _) = closed.hook(cx(event::Codex::PreToolUse), tool(Carry::All));
    assert_eq!(out.decision, Some(Decision::Deny));
}

#[test]
fn a_deny_carries_its_note_and_note_handling_never_changes_the_decision() {
    let rig = Rig::server();
    rig.start(cc(event::ClaudeCode::SessionStart));
    let id = rig.mem.queue("why it was denied");
    rig.mem.decide_next(Decision::Deny, "central policy");
    let (out, carried) = rig.hook(cc(event::ClaudeCode::PreToolUse), tool(Carry::All));
    assert_eq!((out.decision, out.reason.as_deref()), (Some(Decision::Deny), Some("central policy")));
    assert_eq!(carried, vec![id]);
    // Even with the state unwritable and the acks failing, the deny stands.
    let files = rig.run_files();
    std::fs::remove_dir_all(&files.dir).unwrap();
    std::fs::write(&files.dir, b"").unwrap();
    rig.mem.fail_always("notes/ack");
    rig.mem.queue("another");
    rig.mem.decide_next(Decision::Deny, "still denied");
    let (out, _) = rig.hook(cc(event::ClaudeCode::PreToolUse), tool(Carry::All));
    assert_eq!(out.decision, Some(Decision::Deny));
}

// ----- mission audit 3 (issue 23): receipts and sessions ------------------------------

/// D-3: a hook that runs after SessionEnd (a late prompt, tool call, post-tool
/// hook or Stop) never registers the session again, which would reopen it on
/// the server, and claims nothing; only a SessionStart (a resume) reopens it.
#[test]
fn d3_a_late_hook_never_reopens_an_ended_session() {
    let rig = Rig::server();
    rig.start(cc(event::ClaudeCode::SessionStart));
    rig.hook(cc(event::ClaudeCode::SessionEnd), InputKind::SessionEnd { reason: "exit".into() });
    assert!(rig.mem.lock().ended);
    let late = rig.mem.queue("after end");
    rig.mem.clear_calls();
    for (def, kind) in [
        (cc(event::ClaudeCode::UserPromptSubmit), prompt()),
        (def_of(event::Copilot::PostToolUse), InputKind::AfterTool { carry: true }),
        (cc(event::ClaudeCode::Stop), stop()),
    ] {
        let (out, carried) = rig.hook(def, kind);
        assert_eq!((out, carried), (Outcome::default(), vec![]), "{}: neutral", def.binary);
    }
    assert_eq!(rig.mem.routes(), Vec::<&str>::new(), "no session-start, no pull, no turn end");
    // A gate still asks the server (a deny is never skipped), without reopening.
    rig.mem.decide_next(Decision::Deny, "no");
    let (out, _) = rig.hook(cc(event::ClaudeCode::PreToolUse), tool(Carry::All));
    assert_eq!(out.decision, Some(Decision::Deny));
    assert_eq!(rig.mem.routes(), vec!["permission-check"]);
    assert!(rig.mem.lock().ended, "still ended");
    assert_eq!(rig.mem.state(&late), NoteState::Pending);
    assert_eq!(rig.state(), RunState::default(), "no run state for an ended session");
    // A resume reopens it and carries the note.
    let (_, carried) = rig.hook(cc(event::ClaudeCode::SessionStart), InputKind::SessionStart { pull: true });
    assert_eq!(carried, vec![late.clone()]);
    assert_eq!(rig.mem.state(&late), NoteState::Delivered);
}

/// D-2: the flow execution is read from `PRELOOP_FLOW_EXECUTION_ID` (Preloop
/// 0.17.1's name, set by its flow sidecar); `PRELOOP_EXECUTION_ID` stays an
/// alias, and the documented name wins when both are set.
#[test]
fn d2_the_flow_execution_is_read_from_preloops_variable_and_the_old_name() {
    use preloop_shared::config::execution_id_in;
    assert_eq!(execution_id_in(&Env::of(&[("PRELOOP_FLOW_EXECUTION_ID", "exec-1")])).as_deref(), Some("exec-1"));
    assert_eq!(execution_id_in(&Env::of(&[("PRELOOP_EXECUTION_ID", "exec-2")])).as_deref(), Some("exec-2"));
    let both = Env::of(&[("PRELOOP_EXECUTION_ID", "old"), ("PRELOOP_FLOW_EXECUTION_ID", "new")]);
    assert_eq!(execution_id_in(&both).as_deref(), Some("new"));
    let blank = Env::of(&[("PRELOOP_FLOW_EXECUTION_ID", " "), ("PRELOOP_EXECUTION_ID", "old")]);
    assert_eq!(execution_id_in(&blank).as_deref(), Some("old"), "a blank value names nothing");
    assert_eq!(execution_id_in(&Env::of(&[("PRELOOP_FLOW_EXECUTION_ID", &"x".repeat(65))])), None);
    assert_eq!(execution_id_in(&Env::default()), None);
}

/// D-8: a hook never claims what its output cannot carry. A Codex Stop whose
/// spool holds a note that only the larger context carriers can show makes
/// no pull: a note it claimed now could not go out in its output, and the
/// server would record `stop` as the delivery event of whichever hook
/// carried it later.
#[test]
fn d8_a_stop_whose_spool_waits_for_a_larger_carrier_claims_nothing() {
    let rig = Rig::server();
    rig.start(cx(event::Codex::SessionStart));
    let big = rig.mem.queue(&"€".repeat(4096));
    rig.hook(cx(event::Codex::PermissionRequest), tool(Carry::None));
    let late = rig.mem.queue("late");
    rig.mem.clear_calls();
    let (out, carried) = rig.hook(cx(event::Codex::Stop), stop());
    assert!(carried.is_empty() && !out.continue_turn);
    assert_eq!(rig.mem.routes(), vec!["session-event"], "no pull behind a spool this carrier cannot show");
    assert_eq!(rig.mem.state(&late), NoteState::Pending);
    let (_, carried) = rig.hook(cx(event::Codex::UserPromptSubmit), prompt());
    assert_eq!(carried, vec![big, late]);
}

/// D-1: the one over-report the server leaves open (an immediate claim
/// beyond the carrier's room, when the session ends before a carrying hook)
/// is reported at the end: the session file names the notes
/// (`uncarried_notes`, shown by `notes status`), the hook log too.
#[test]
fn d1_immediate_claims_no_output_carried_are_recorded_at_session_end() {
    let rig = Rig::server();
    rig.start(cc(event::ClaudeCode::SessionStart));
    let ids = rig.mem.queue_n(5, &"x".repeat(4000));
    let (_, carried) = rig.hook(cc(event::ClaudeCode::PreToolUse), tool(Carry::All));
    assert_eq!(carried, ids[..2].to_vec(), "the carrier holds two");
    assert!(ids.iter().all(|id| rig.mem.state(id) == NoteState::Delivered), "the server's immediate claim");
    rig.hook(cc(event::ClaudeCode::Stop), InputKind::Stop { may_continue: false });
    let mut e = rig.engine(cc(event::ClaudeCode::SessionEnd));
    let input = Input {
        session_id: rig.session.clone(),
        cwd: None,
        transcript_path: None,
        parent_session_id: None,
        kind: InputKind::SessionEnd { reason: "exit".into() },
    };
    let (_, after) = e.handle(&input).unwrap();
    e.finish(after, true);
    let named: Vec<&String> = e.warnings.iter().filter(|w| w.contains("never carried")).collect();
    assert_eq!(named.len(), 3, "{:?}", e.warnings);
    // #33 part 3: the end's log line names them (ids, never text).
    assert_eq!(
        e.never_read,
        Some(preloop_shared::flow::NeverRead { count: 3, ids: ids[2..].to_vec() }),
        "the session-end line names what it never read"
    );
    let file = preloop_shared::session::read_session_file(&rig.home.dir, &rig.session).unwrap().unwrap();
    assert!(file.ended_at.is_some());
    assert_eq!(file.uncarried_notes, ids[2..].to_vec());
    assert_eq!(preloop_shared::session::uncarried_by(&rig.home.dir, &ids[3]).as_deref(), Some("s1"));
    assert_eq!(preloop_shared::session::uncarried_by(&rig.home.dir, &ids[0]), None, "carried ones are not named");
}
