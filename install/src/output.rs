//! What the operator commands print: terminal-safe text (note bodies and
//! authors never drive the terminal), aligned tables, one time style,
//! durations, and a stdout writer whose errors are values: a closed pipe
//! (`… -o id | head -1`) ends a report quietly by its error kind, and never
//! stops a command's work half-way ([`out_line`]; newcomer-ux-4, P2).
//!
//! Every line of text the CLI prints, on stdout or stderr, goes through
//! [`shown`] in the writers below ([`line()`], [`out_line`],
//! [`out_text`], [`eline`], [`redraw`], [`status`]): a server (or a proxy)
//! can put terminal escapes into any field, and a field added later cannot
//! forget the escaping (red-team 3, N5). `println!` and friends are refused
//! in this crate by clippy (`install/clippy.toml`). Only [`json`] and
//! [`json_line`] write their document as serde made it: `--json` stays exact
//! JSON.

use preloop_shared::time::Timestamp;
use preloop_shared::{Error, Result};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Text as the CLI shows it: URL credentials hidden
/// ([`preloop_shared::redact::redact_url_credentials`], red-team 3, N8),
/// then [`safe`]. Idempotent, so a cell made safe already is unchanged.
pub fn shown(text: &str) -> String {
    safe(&preloop_shared::redact::redact_url_credentials(text))
}

/// [`shown`] on one line (whitespace runs become one space): table cells.
pub fn shown_line(text: &str) -> String {
    safe_line(&preloop_shared::redact::redact_url_credentials(text))
}

fn write_stdout(parts: &[&str]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    parts
        .iter()
        .try_for_each(|p| out.write_all(p.as_bytes()))
        .and_then(|_| out.flush())
        .map_err(|e| Error::io("write to stdout", e))
}

/// Write `text` (made [`shown`]) and a newline to stdout. A closed pipe is
/// an `Error::Io` whose source is `BrokenPipe`; `cli::main` turns it into a
/// quiet exit 0.
pub fn line(text: &str) -> Result<()> {
    write_stdout(&[&shown(text), "\n"])
}

/// Set once stdout went away under [`out_line`] or [`out_text`].
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether stdout went away (a pipe closed by `head`, a pager quit) while
/// [`out_line`] or [`out_text`] wrote: `cli::main` then says the command
/// finished, and exits as the work did.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// [`line()`] for output that is not threaded through a `Result` (doctor,
/// install, uninstall, login): a closed stdout is recorded
/// ([`stdout_closed`]) and the command goes on to its end, writing nothing
/// more; nothing below `main` ends the process (newcomer-ux-4, P2: an
/// `install | head -1` used to stop after its first harness, exit 0). Any
/// other write error is ignored as `println!` would panic on it.
pub fn out_line(text: &str) {
    out_raw(&[&shown(text), "\n"]);
}

/// `text` (made [`shown`]) without a newline, as [`out_line`].
pub fn out_text(text: &str) {
    out_raw(&[&shown(text)]);
}

/// Pretty JSON (as serde made it) as [`out_line`] writes a line (`doctor
/// --json`).
pub fn out_json<T: serde::Serialize>(v: &T) {
    out_raw(&[&serde_json::to_string_pretty(v).unwrap_or_default(), "\n"]);
}

fn out_raw(parts: &[&str]) {
    if !stdout_closed()
        && let Err(e) = write_stdout(parts)
        && is_broken_pipe(&e)
    {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// On a terminal: clear the cursor's line and write `text` (made [`shown`])
/// there, with a newline or not (`sessions attach`: events above, the input
/// line at the bottom).
pub fn redraw(text: &str, newline: bool) -> Result<()> {
    write_stdout(&["\r\x1b[2K", &shown(text), if newline { "\n" } else { "" }])
}

/// One line (made [`shown`]) on stderr; a write error is ignored.
pub fn eline(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(shown(text).as_bytes()).and_then(|_| err.write_all(b"\n"));
}

/// A status line on a terminal's stderr, redrawn in place (`notes send
/// --wait`): the cursor's line cleared, then `text` made [`shown`] (empty
/// text just clears it).
pub fn status(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(b"\r\x1b[2K").and_then(|_| err.write_all(shown(text).as_bytes())).and_then(|_| err.flush());
}

/// Pretty JSON on stdout.
pub fn json<T: serde::Serialize>(v: &T) -> Result<()> {
    write_stdout(&[&serde_json::to_string_pretty(v).unwrap_or_default(), "\n"])
}

/// One compact JSON document on one line (event streams).
pub fn json_line<T: serde::Serialize>(v: &T) -> Result<()> {
    write_stdout(&[&serde_json::to_string(v).unwrap_or_default(), "\n"])
}

/// Whether an error is stdout going away (a pipe closed by `head`).
pub fn is_broken_pipe(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
}

pub fn stdout_is_tty() -> bool {
    std::io::stdout().is_terminal()
}

pub fn stderr_is_tty() -> bool {
    std::io::stderr().is_terminal()
}

/// Text a note author or a server wrote, made safe for a terminal: C0 and
/// C1 controls (ESC and so ANSI sequences included), DEL, bidi overrides and
/// isolates, zero-width and other invisible format characters are shown
/// escaped (`\e`, `\u{202e}`), so they can neither move the cursor, recolour
/// or clear the screen nor reorder what the operator reads. Newlines and
/// tabs are kept (use [`safe_line`] for one line).
pub fn safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            '\x1b' => out.push_str("\\e"),
            '\r' => out.push_str("\\r"),
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// [`safe`], flattened to one line (whitespace runs become one space).
pub fn safe_line(text: &str) -> String {
    safe(&text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// [`safe_line`], cut to `max` characters with `…`.
pub fn clip(text: &str, max: usize) -> String {
    let l = safe_line(text);
    if l.chars().count() > max && max > 1 { format!("{}…", l.chars().take(max - 1).collect::<String>()) } else { l }
}

fn is_unsafe(c: char) -> bool {
    let u = c as u32;
    u < 0x20
        || (0x7f..=0x9f).contains(&u)
        // bidi embeddings, overrides, isolates, marks
        || matches!(u, 0x061c | 0x200e | 0x200f | 0x202a..=0x202e | 0x2066..=0x2069)
        // zero-width and other invisible format characters
        || matches!(u, 0x200b..=0x200d | 0x2060..=0x2064 | 0xfeff | 0x00ad | 0x180e)
        || (0xfff9..=0xfffb).contains(&u)
}

/// Rows as an aligned table (the last column is not padded). Every cell is
/// made [`shown_line`] first, so the columns line up and a row stays one
/// line whatever a server sent.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| shown_line(c)).collect()).collect();
    let n = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate().take(n) {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let render = |cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            s.push_str(c);
            if i + 1 < cells.len() {
                s.push_str(&" ".repeat(widths[i].saturating_sub(c.chars().count()) + 2));
            }
        }
        s.trim_end().to_string()
    };
    let mut out = vec![render(&header.iter().map(|h| h.to_string()).collect::<Vec<_>>())];
    out.extend(rows.iter().map(|r| render(r)));
    out
}

pub fn print_table(header: &[&str], rows: &[Vec<String>]) -> Result<()> {
    for l in table(header, rows) {
        line(&l)?;
    }
    Ok(())
}

/// Label/value pairs, the values in one column.
pub fn print_pairs(rows: &[(&str, String)]) -> Result<()> {
    let w = rows.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0) + 2;
    for (k, v) in rows {
        line(&format!("{k:<w$}{v}"))?;
    }
    Ok(())
}

/// `2026-12-02 14:49:10Z`: the one absolute time style of every table.
pub fn time(t: Option<Timestamp>) -> String {
    t.map(|t| t.to_iso_z().chars().take(19).collect::<String>().replace('T', " ") + "Z").unwrap_or_else(|| "-".into())
}

/// `12s ago`, `5m ago`, `3h ago`, `2d ago`.
pub fn ago(t: Option<Timestamp>, now: Timestamp) -> String {
    let Some(t) = t else { return "-".into() };
    let s = (now.secs() - t.secs()).max(0);
    match s {
        0..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86_399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

/// `90s` → `1m30s`; whole units as one (`2h`).
pub fn human_secs(s: u64) -> String {
    let (d, h, m, sec) = (s / 86_400, (s % 86_400) / 3600, (s % 3600) / 60, s % 60);
    let mut out = String::new();
    for (n, u) in [(d, "d"), (h, "h"), (m, "m"), (sec, "s")] {
        if n > 0 {
            out.push_str(&format!("{n}{u}"));
        }
    }
    if out.is_empty() { "0s".into() } else { out }
}

/// The longest duration any flag takes: a note lives at most 7 days.
pub const MAX_DURATION_SECS: u64 = 7 * 86_400;

const DURATION_HELP: &str = "e.g. 90s, 15m, 2h, 1h30m, 1.5h, 1d; units s, m, h, d";

/// A positive duration in whole seconds: `90`, `90s`, `15m`, `2h`, `1d`,
/// compound `1h30m`, decimal `1.5h`; at most 7 days. `flag` names the option
/// in the usage error.
pub fn parse_duration(flag: &str, input: &str) -> Result<u64> {
    let s = input.trim();
    let bad = |why: &str| Error::Usage(format!("{flag} {input:?}: {why} ({DURATION_HELP})"));
    if s.is_empty() {
        return Err(bad("empty duration"));
    }
    if s.starts_with('-') {
        return Err(bad("a duration is more than 0"));
    }
    let mut total = 0f64;
    let mut rest = s;
    let mut any = false;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        if num.is_empty() {
            return Err(bad("not a duration"));
        }
        let n: f64 = num.parse().map_err(|_| bad("not a number"))?;
        let unit_len = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let mult = match unit {
            "" if !any && next.is_empty() => 1.0,
            "s" | "sec" | "secs" => 1.0,
            "m" | "min" | "mins" => 60.0,
            "h" | "hr" | "hrs" => 3600.0,
            "d" | "day" | "days" => 86_400.0,
            _ => return Err(bad(&format!("unknown unit {unit:?}"))),
        };
        total += n * mult;
        any = true;
        rest = next;
    }
    if !total.is_finite() || total > MAX_DURATION_SECS as f64 {
        return Err(bad("at most 7d (a note lives at most 7 days)"));
    }
    let secs = total.round() as u64;
    if secs == 0 {
        return Err(bad("a duration is more than 0"));
    }
    Ok(secs)
}

/// `println!` through [`out_line`]: a closed pipe never stops the command.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::output::out_line("")
    };
    ($($arg:tt)*) => {
        $crate::output::out_line(&format!($($arg)*))
    };
}

/// `eprintln!` through [`eline`]: the message made [`shown`].
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::eline(&format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_ansi_and_bidi_are_shown_escaped() {
        assert_eq!(safe("ansi \x1b[2J\x1b[31mRED"), "ansi \\e[2J\\e[31mRED");
        assert_eq!(safe("a\u{202e}b\u{200b}c\u{9b}d"), "a\\u{202e}b\\u{200b}c\\u{9b}d");
        assert_eq!(safe("line1\nline2\ttab"), "line1\nline2\ttab");
        assert_eq!(safe_line("a\n  b\r"), "a b");
        assert_eq!(clip("abcdef", 4), "abc…");
    }

    #[test]
    fn durations() {
        for (i, s) in [
            ("90", 90),
            ("90s", 90),
            ("15m", 900),
            ("2h", 7200),
            ("1h30m", 5400),
            ("1.5h", 5400),
            ("1d", 86_400),
            ("1.5s", 2),
        ] {
            assert_eq!(parse_duration("--wait", i).unwrap(), s, "{i}");
        }
        for bad in ["", "0", "0s", "-5s", "soon", "5x", "9223372036854775807s", "8d", "1e3s", "h"] {
            let e = parse_duration("--wait", bad).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{bad}: {e}");
        }
        assert!(parse_duration("--wait", "0").unwrap_err().to_string().contains("more than 0"));
        assert_eq!(human_secs(90), "1m30s");
        assert_eq!(human_secs(7200), "2h");
    }

    #[test]
    fn tables_align() {
        let t = table(&["A", "BB"], &[vec!["xxx".into(), "y".into()]]);
        assert_eq!(t, vec!["A    BB", "xxx  y"]);
    }
}
