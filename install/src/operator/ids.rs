//! Ids as git and docker treat them, once for every command and both modes:
//! a session or note id may be typed in full or as a unique start of one
//! (at least [`MIN_PREFIX`] characters). A session id is looked up among
//! the sessions `sessions list` would show (its harness id, runtime id or
//! the id it prints); a note id among every note. A start shared by several
//! is a usage error naming them; a start of nothing known is refused (for a
//! session that has not started yet, `notes send --not-started` takes the id
//! as typed). `sessions list` prints each id cut to its shortest unique
//! start ([`short_ids`]), so what it shows is what these accept.

use super::{NotesOf, Operator, SessionRef};
use crate::output::{clip, safe_line};
use preloop_shared::operator::SessionRow;
use preloop_shared::{Error, Result};
use std::collections::HashSet;

/// The shortest start of an id taken as a prefix (git's rule).
pub const MIN_PREFIX: usize = 4;
/// The shortest id `sessions list` prints.
pub const SHORT_ID: usize = 8;
/// A note id: 16 hex characters.
pub const NOTE_ID_LEN: usize = 16;
/// How many candidates an ambiguity names.
const NAMED: usize = 8;

fn starts_with(id: &str, typed: &str) -> bool {
    id.len() >= typed.len() && id.is_char_boundary(typed.len()) && id[..typed.len()].eq_ignore_ascii_case(typed)
}

/// Every id a session answers to.
fn ids_of(r: &SessionRow) -> impl Iterator<Item = &str> {
    [Some(r.id.as_str()), Some(r.runtime_session_id.as_str()), r.external_session_id.as_deref()].into_iter().flatten()
}

/// The session a typed id names: itself, or the one known session whose id
/// starts with it. `Ok(None)` when none is known; a usage error when the
/// start is shared.
pub fn session(op: &dyn Operator, typed: &str) -> Result<Option<SessionRef>> {
    if let Some(s) = op.find_session(typed)? {
        return Ok(Some(s));
    }
    let rows = op.id_candidates()?;
    if typed.chars().count() < MIN_PREFIX {
        // Ids start with it: not "no session id starts with it", which
        // would be false, but the rule note ids get too (newcomer 4, P7).
        if rows.iter().any(|r| ids_of(r).any(|id| starts_with(id, typed))) {
            return Err(Error::Usage(format!(
                "no session is named {} {}, and a start of an id needs {MIN_PREFIX} characters or more: type more of it (`preloop-hooks sessions list` shows the ids)",
                safe_line(typed),
                op.mode().where_known()
            )));
        }
        return Ok(None);
    }
    // One entry per session however many of its ids match, most recently active first.
    let mut seen = HashSet::new();
    let hits: Vec<&SessionRow> = rows
        .iter()
        .filter(|r| ids_of(r).any(|id| starts_with(id, typed)))
        .filter(|r| seen.insert(r.runtime_session_id.as_str()))
        .collect();
    match hits.as_slice() {
        [] => Ok(None),
        [one] => op.find_session(&one.runtime_session_id),
        _ => {
            let n = hits.len();
            let list: Vec<String> =
                hits.iter().take(NAMED).map(|r| format!("{} ({})", safe_line(&r.id), clip(&r.label, 30))).collect();
            Err(Error::Usage(format!(
                "{} is the start of {} {}: {}{}; type more of the id",
                safe_line(typed),
                preloop_shared::words::count(n, "session"),
                op.mode().where_known(),
                list.join(", "),
                if n > NAMED { format!(" and {} more", n - NAMED) } else { String::new() }
            )))
        }
    }
}

/// What a harness's full session id looks like: every harness we hook
/// names its sessions by a UUID (8-4-4-4-12 hex characters: Claude Code's
/// and Gemini CLI's `session_id`, Codex's UUIDv7 `session_id`, Copilot
/// CLI's `sessionId`, Cursor's `conversation_id`; docs/contracts/). Only
/// such an id may name a session that has not started: a start of one, or
/// anything else, would queue a note for a session that never comes
/// (newcomer-ux-4, P4).
pub fn is_full_session_id(id: &str) -> bool {
    preloop_shared::flow::is_uuid(id)
}

/// The usage error of `--not-started` with an id that is not a full one.
pub fn not_a_full_id(typed: &str) -> Error {
    Error::Usage(format!(
        "--not-started takes a session's full id, a UUID like 0d9fc67d-6d54-4639-a547-e6bdcde2c737 (every harness names its sessions so); {} is not one: type the whole id the harness prints",
        clip(typed, 40)
    ))
}

/// The refusal of an id no known session has or starts with; `send` adds
/// how to address a session that has not started yet, for an id that can
/// name one ([`is_full_session_id`]).
pub fn unknown_session(op: &dyn Operator, typed: &str, send: bool) -> Error {
    Error::NotFound(format!(
        "no session {} {} (no session id is or starts with it; `preloop-hooks sessions list` shows them){}",
        safe_line(typed),
        op.mode().where_known(),
        if send && is_full_session_id(typed) {
            "; for a session that has not started yet, add --not-started"
        } else {
            ""
        }
    ))
}

/// The full note id a typed id names: itself (16 hex characters), or the
/// one note whose id starts with it.
pub fn note(op: &dyn Operator, typed: &str) -> Result<String> {
    let hex = typed.bytes().all(|b| b.is_ascii_hexdigit());
    if hex && typed.len() == NOTE_ID_LEN {
        return Ok(typed.to_string());
    }
    if !hex || !(MIN_PREFIX..NOTE_ID_LEN).contains(&typed.len()) {
        return Err(Error::Usage(format!(
            "{:?} is not a note id (16 hex characters, e.g. 3f2a9c0d1e4b5a6c, or the first {MIN_PREFIX} or more of one)",
            clip(typed, 40)
        )));
    }
    let mut hits: Vec<String> =
        op.notes(&NotesOf::All, None)?.into_iter().map(|n| n.note_id).filter(|id| starts_with(id, typed)).collect();
    hits.sort();
    hits.dedup();
    match hits.len() {
        0 => Err(Error::NotFound(format!(
            "no note id starts with {typed} (`preloop-hooks notes list --all -o id` shows them)"
        ))),
        1 => Ok(hits.remove(0)),
        n => Err(Error::Usage(format!(
            "{typed} is the start of {}: {}{}; type more of the id",
            preloop_shared::words::count(n, "note"),
            hits.iter().take(NAMED).cloned().collect::<Vec<_>>().join(", "),
            if n > NAMED { format!(" and {} more", n - NAMED) } else { String::new() }
        ))),
    }
}

/// Each row's id cut to the shortest start, at least [`SHORT_ID`]
/// characters, that no other session of `known` (every session the ids
/// resolve against) has an id starting with: what [`session`] takes back.
pub fn short_ids(rows: &[SessionRow], known: &[SessionRow]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            let id: Vec<char> = r.id.chars().collect();
            let shared = known
                .iter()
                .chain(rows)
                .filter(|o| o.runtime_session_id != r.runtime_session_id)
                .flat_map(ids_of)
                .map(|other| id.iter().zip(other.chars()).take_while(|(a, b)| a.eq_ignore_ascii_case(b)).count())
                .max()
                .unwrap_or(0);
            id.iter().take((shared + 1).max(SHORT_ID)).collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::Side;
    use crate::operator::memory::Memory;
    use preloop_shared::operator::ReceiptState;

    const CODEX_A: &str = "01a23abb-7e5c-7d0e-9b1a-aaaaaaaaaaaa";
    const CODEX_B: &str = "01a23abb-7e5c-7f00-8c2d-bbbbbbbbbbbb";
    const CLAUDE: &str = "801fb481-6c51-4319-b2b0-5e90de8b176f";

    fn three(mode: Side) -> Memory {
        Memory::new(mode).session(CODEX_A, "r-1111", 30).session(CODEX_B, "r-2222", 20).session(CLAUDE, "r-3333", 10)
    }

    #[test]
    fn a_unique_start_names_its_session_in_either_id() {
        let op = three(Side::Local);
        for typed in ["801fb481", "801FB4", "801f", CLAUDE, "r-3333", "r-33"] {
            let s = session(&op, typed).unwrap().unwrap_or_else(|| panic!("{typed} names a session"));
            assert_eq!(s.name(), CLAUDE, "{typed}");
        }
        assert_eq!(session(&op, "01a23abb-7e5c-7d").unwrap().map(|s| s.runtime_id), Some("r-1111".into()));
    }

    #[test]
    fn a_shared_start_is_a_usage_error_naming_the_candidates() {
        for (mode, place) in [(Side::Local, "on this machine"), (Side::Server, "in this account")] {
            let op = three(mode);
            let err = session(&op, "01a23abb").unwrap_err();
            assert_eq!(crate::error::exit_of(&err).code(), 2);
            assert_eq!(
                err.to_string(),
                format!(
                    "01a23abb is the start of 2 sessions {place}: {CODEX_B} (title r-2222), {CODEX_A} (title r-1111); type more of the id"
                )
            );
        }
    }

    #[test]
    fn a_start_of_nothing_known_or_too_short_names_nothing() {
        let op = three(Side::Local);
        assert_eq!(session(&op, "deadbeef").unwrap(), None);
        // Three characters are not a start: the rule, not "no id starts with
        // it", which is false here (newcomer 4, P7); a usage error as for
        // notes. Where no id starts with them, that is what is said.
        assert_eq!(session(&three(Side::Local), "zz9").unwrap(), None);
        for (mode, place) in [(Side::Local, "on this machine"), (Side::Server, "in this account")] {
            let e = session(&three(mode), "801").unwrap_err();
            assert_eq!(crate::error::exit_of(&e).code(), 2, "{e}");
            assert_eq!(
                e.to_string(),
                format!(
                    "no session is named 801 {place}, and a start of an id needs 4 characters or more: type more of it (`preloop-hooks sessions list` shows the ids)"
                )
            );
        }
        // --not-started is suggested for a full id only (newcomer-ux-4, P4).
        let e = unknown_session(&op, "deadbeef", true);
        assert_eq!(crate::error::exit_of(&e).code(), 1);
        assert!(!e.to_string().contains("--not-started"), "{e}");
        let full = "deadbeef-0000-4000-8000-000000000000";
        assert!(unknown_session(&op, full, true).to_string().ends_with("add --not-started"));
        assert!(!unknown_session(&op, full, false).to_string().contains("--not-started"));
    }

    #[test]
    fn short_ids_are_unique_and_taken_back() {
        let op = three(Side::Server);
        let rows = op.sessions(&preloop_shared::operator::SessionFilter::default()).unwrap();
        let short = short_ids(&rows, &rows);
        assert_eq!(short, [&CLAUDE[..8], &CODEX_B[..16], &CODEX_A[..16]]);
        for (s, r) in short.iter().zip(&rows) {
            assert_eq!(session(&op, s).unwrap().map(|x| x.runtime_id), Some(r.runtime_session_id.clone()), "{s}");
        }
        // Unique among the rows shown is not enough: the ids resolve against every session.
        let shown = &rows[..2];
        assert_eq!(short_ids(shown, &rows)[1], &CODEX_B[..16]);
    }

    #[test]
    fn note_ids_take_a_unique_start() {
        let op = Memory::new(Side::Local)
            .note("3f2a9c0d1e4b5a6c", "s", ReceiptState::Pending, 2)
            .note("3f2a00001e4b5a6c", "s", ReceiptState::Pending, 1)
            .note("77aa00001e4b5a6c", "s", ReceiptState::Pending, 1);
        assert_eq!(note(&op, "77aa").unwrap(), "77aa00001e4b5a6c");
        assert_eq!(note(&op, "3f2a9").unwrap(), "3f2a9c0d1e4b5a6c");
        let err = note(&op, "3f2a").unwrap_err();
        assert_eq!(
            (crate::error::exit_of(&err).code(), err.to_string()),
            (2, "3f2a is the start of 2 notes: 3f2a00001e4b5a6c, 3f2a9c0d1e4b5a6c; type more of the id".into())
        );
        assert_eq!(crate::error::exit_of(&note(&op, "ffff").unwrap_err()).code(), 1);
        assert_eq!(crate::error::exit_of(&note(&op, "3f2").unwrap_err()).code(), 2, "too short to be a start");
        assert_eq!(crate::error::exit_of(&note(&op, "not-hex").unwrap_err()).code(), 2);
    }
}
