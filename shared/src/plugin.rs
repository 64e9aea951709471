//! The protocol between a plugin shim and a hook command, for harnesses
//! that load a JS/TS plugin of ours instead of running hook commands from
//! a config file (Pi's extension, OpenCode's plugin;
//! `docs/adding-a-harness.md`, "A plugin-carried harness"), and the shim
//! as an adapter crate ships it ([`Shim`]).
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

/// A plugin shim of ours as its adapter crate ships it: the harness's
/// `hooks/<harness>/shim/source.js` with the core all shims share ([`CORE`],
/// `shared/plugin/core.js`) where the source says [`CORE_MARKER`], stamped
/// with this build's version: static, written byte for byte by
/// `preloop-hooks install` and compared so by `doctor`.
pub struct Shim {
    /// The harness's part, `include_str!`'d by the adapter crate.
    pub source: &'static str,
    /// How every version of the shim starts (its first line up to the version).
    pub header: &'static str,
}

/// The line of a shim's `source.js` where the shared core goes.
pub const CORE_MARKER: &str = "// @@PRELOOP_CORE@@\n";
/// The core every shim shares: the manifest read, the log line, the
/// protocol's hook run (`shared/plugin/core.js`; under Node the tests load a
/// shim through `shared/plugin/assemble.mjs`, which splices it the same way).
pub const CORE: &str = include_str!("../plugin/core.js");
const STAMP: &str = "@@PRELOOP_VERSION@@";

impl Shim {
    /// The shim of this build.
    pub fn text(&self) -> String {
        self.source.replacen(CORE_MARKER, CORE, 1).replace(STAMP, env!("CARGO_PKG_VERSION"))
    }

    /// Whether `text` is a shim of ours (any version).
    pub fn is_ours(&self, text: &str) -> bool {
        text.starts_with(self.header)
    }

    /// The version a shim of ours says it is, for messages.
    pub fn version_of(&self, text: &str) -> String {
        text.strip_prefix(self.header)
            .and_then(|t| t.split_whitespace().next())
            .map(|v| format!("version {}", v.trim_end_matches('.')))
            .unwrap_or_else(|| "not ours".into())
    }
}

/// The fields every payload of ours starts with, checked for the hook that
/// reads it: the protocol version (`protocol`, against `speaks`), the event
/// it was made for (`event`, against the hook's `on`) and a session id. The
/// session id, trimmed; an error for the log otherwise.
pub fn payload_header(protocol: u32, speaks: u32, event: &str, on: &str, session_id: &str) -> Result<String, String> {
    if protocol != speaks {
        return Err(format!("protocol {protocol} (this build speaks {speaks})"));
    }
    if event != on {
        return Err(format!("a {event} payload given to the {on} hook"));
    }
    let session_id = session_id.trim();
    if session_id.is_empty() {
        return Err("no session_id".into());
    }
    Ok(session_id.to_string())
}

/// An answer as the shim reads it: its JSON and a newline.
pub fn answer_line(answer: &impl serde::Serialize) -> Vec<u8> {
    let mut line = serde_json::to_vec(answer).unwrap_or_default();
    line.push(b'\n');
    line
}

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
    use crate::registry::{Declaration, Harness};

    /// Each plugin harness's source has one core marker, and its shim is
    /// stamped in its header and its `VERSION` only.
    #[test]
    fn every_plugin_source_takes_the_shared_core_once() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let plugins: Vec<Harness> =
            Harness::ALL.into_iter().filter(|h| h.def().declaration == Declaration::Plugin).collect();
        assert!(plugins.len() >= 2, "{plugins:?}");
        assert!(!CORE.contains(STAMP) && !CORE.contains(CORE_MARKER));
        for h in plugins {
            let path = root.join("hooks").join(h.slug()).join("shim/source.js");
            let source = std::fs::read_to_string(&path).unwrap();
            assert_eq!(source.matches(CORE_MARKER).count(), 1, "{}: one core marker line", path.display());
            assert_eq!(source.matches(STAMP).count(), 2, "{}: the header and VERSION are stamped", path.display());
            let shim = Shim { source: Box::leak(source.into_boxed_str()), header: "" };
            let header = format!("// preloop-hooks {} ", h.def().name);
            let text = shim.text();
            let first = text.lines().next().unwrap_or_default();
            assert!(first.starts_with(&header) && first.contains(env!("CARGO_PKG_VERSION")), "{first}");
            assert!(text.contains(CORE), "{}", path.display());
        }
    }

    #[test]
    fn a_payload_is_for_this_protocol_this_hook_and_a_session() {
        assert_eq!(payload_header(1, 1, "tool_call", "tool_call", " s1 "), Ok("s1".into()));
        assert_eq!(
            payload_header(2, 1, "tool_call", "tool_call", "s1"),
            Err("protocol 2 (this build speaks 1)".into())
        );
        assert_eq!(
            payload_header(1, 1, "agent_end", "tool_call", "s1"),
            Err("a agent_end payload given to the tool_call hook".into())
        );
        assert_eq!(payload_header(1, 1, "idle", "idle", "  "), Err("no session_id".into()));
    }

    #[test]
    fn a_shim_is_stamped_with_this_build_and_knows_its_version() {
        let s = Shim {
            source: "// x plugin @@PRELOOP_VERSION@@. more\n// @@PRELOOP_CORE@@\nconst VERSION = \"@@PRELOOP_VERSION@@\";\n",
            header: "// x plugin ",
        };
        let t = s.text();
        assert!(s.is_ours(&t) && !t.contains(STAMP) && !t.contains(CORE_MARKER) && t.contains(CORE));
        assert_eq!(s.version_of(&t), format!("version {}", env!("CARGO_PKG_VERSION")));
        assert_eq!(s.version_of("// x plugin 0.0.9 (old)"), "version 0.0.9");
        assert_eq!(s.version_of("x"), "not ours");
        assert!(!s.is_ours("// y plugin 1"));
    }

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
