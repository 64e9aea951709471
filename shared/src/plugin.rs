//! The protocol between a plugin shim and a hook command, for harnesses
//! that load a JS/TS plugin of ours instead of running hook commands from
//! a config file (Pi's extension; `docs/adding-a-harness.md`, "A
//! plugin-carried harness").
//!
//! The shim spawns `preloop-hooks hook <command>` once per event and:
//!
//! 1. writes the event's payload as **one line** of JSON on the hook's
//!    stdin, and keeps stdin open;
//! 2. reads the hook's answer, **one line** of JSON on its stdout (or
//!    nothing: stdout closes without a line);
//! 3. applies the answer to the harness (returns it from the handler, or
//!    hands it to the harness's message queue), then writes
//!    [`APPLIED`] and a newline on stdin and closes it; an answer it could
//!    not apply is answered by closing stdin without that line.
//!
//! The hook counts its output as written only once it read [`APPLIED`]
//! (within [`CONFIRM_WAIT`]): only then are the notes in it acked
//! `delivered` (deferred claims are acked after the output, as for every
//! harness, [`crate::flow::Engine::finish`]). Without the confirmation
//! they go back to the front of the session's spool for the next carrying
//! hook. So a receipt never says `delivered` for a note the harness was
//! not handed; the price is that a confirmation lost after the shim
//! applied the answer (the hook killed in between) carries the note a
//! second time, never zero times.

use crate::fsutil::StdoutFd;
use std::io::{self, Write};
use std::time::Duration;

/// The line a shim writes back once it applied an answer.
pub const APPLIED: &str = "applied";

/// How long a hook waits for the shim's confirmation after its answer.
/// The shim applies an answer at once (a timer of 0 ms for a
/// continuation), so this only bounds a shim that went away.
pub const CONFIRM_WAIT: Duration = Duration::from_secs(5);

/// The payload: stdin's first line, read within `deadline`.
pub fn read_payload(deadline: Duration) -> Result<Vec<u8>, String> {
    crate::fsutil::read_line_with_deadline(0, crate::runner::MAX_STDIN, deadline)
}

/// Whether a confirmation line says the answer was applied.
pub fn is_applied(line: &[u8]) -> bool {
    line.trim_ascii() == APPLIED.as_bytes()
}

/// The hook's stdout under a shim: what is written goes out at once, and
/// `flush` (the runner's last step of writing an answer) returns only
/// once the shim confirmed it applied the answer, or fails.
pub struct Confirmed<W: Write, R: FnMut(Duration) -> Result<Vec<u8>, String>> {
    out: W,
    read_confirmation: R,
    wait: Duration,
    wrote: bool,
}

impl Confirmed<StdoutFd, fn(Duration) -> Result<Vec<u8>, String>> {
    /// Stdout, confirmed through stdin.
    pub fn stdout(wait: Duration) -> Self {
        fn read(wait: Duration) -> Result<Vec<u8>, String> {
            crate::fsutil::read_line_with_deadline(0, 64, wait)
        }
        Confirmed { out: StdoutFd::new(), read_confirmation: read, wait, wrote: false }
    }
}

impl<W: Write, R: FnMut(Duration) -> Result<Vec<u8>, String>> Confirmed<W, R> {
    /// `out`, confirmed by what `read_confirmation` returns (tests).
    pub fn new(out: W, read_confirmation: R, wait: Duration) -> Self {
        Confirmed { out, read_confirmation, wait, wrote: false }
    }
}

impl<W: Write, R: FnMut(Duration) -> Result<Vec<u8>, String>> Write for Confirmed<W, R> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.wrote |= n > 0;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()?;
        if !self.wrote {
            return Ok(());
        }
        match (self.read_confirmation)(self.wait) {
            Ok(line) if is_applied(&line) => Ok(()),
            Ok(line) if line.is_empty() => Err(io::Error::other("the plugin did not apply the answer (stdin closed)")),
            Ok(_) => Err(io::Error::other("the plugin's confirmation is not \"applied\"")),
            Err(e) => Err(io::Error::other(format!("no confirmation from the plugin: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(answer: Result<Vec<u8>, String>) -> (io::Result<()>, Vec<u8>) {
        let mut buf = Vec::new();
        let mut w = Confirmed::new(&mut buf, |_| answer.clone(), Duration::from_millis(1));
        w.write_all(b"{}\n").unwrap();
        let r = w.flush();
        (r, buf)
    }

    #[test]
    fn an_answer_counts_as_written_only_once_applied() {
        assert!(run(Ok(b"applied".to_vec())).0.is_ok());
        assert!(run(Ok(b" applied\r".to_vec())).0.is_ok());
        assert!(run(Ok(Vec::new())).0.is_err(), "stdin closed without the line");
        assert!(run(Ok(b"dropped".to_vec())).0.is_err());
        assert!(run(Err("still open after 5 ms".into())).0.is_err());
        assert_eq!(run(Ok(b"applied".to_vec())).1, b"{}\n");
    }

    #[test]
    fn nothing_written_needs_no_confirmation() {
        let mut w = Confirmed::new(Vec::new(), |_| Err("never asked".to_string()), Duration::from_millis(1));
        assert!(w.flush().is_ok());
    }
}
