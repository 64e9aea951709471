//! The little terminal handling `sessions attach` needs, on libc alone: raw
//! input (so a line can be edited while events scroll above it), the window
//! width (re-read after SIGWINCH), and restoring the terminal however the
//! program leaves: dropping [`RawMode`] (a return, Ctrl-C, SIGINT and SIGTERM
//! through the main loop), SIGQUIT and SIGHUP (the terminal is restored in
//! the handler and the main loop leaves), SIGTSTP (restored, then stopped)
//! and SIGCONT (raw again, the input line redrawn). Red-team 3, N5.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

static RESIZED: AtomicBool = AtomicBool::new(true);
/// The terminal's modes as found and raw, for the signal handlers.
static MODES: OnceLock<(libc::termios, libc::termios)> = OnceLock::new();
/// Whether the terminal should be raw now (a [`RawMode`] is alive).
static RAW: AtomicBool = AtomicBool::new(false);
/// SIGQUIT or SIGHUP arrived: leave.
static LEAVE: AtomicBool = AtomicBool::new(false);

/// Set the terminal to the saved (`raw == false`) or the raw modes.
/// Async-signal-safe: an atomic load and `tcsetattr`.
fn apply(raw: bool) {
    if let Some((saved, raw_modes)) = MODES.get() {
        let t = if raw { raw_modes } else { saved };
        // SAFETY: tcsetattr on fd 0 with a termios read by `RawMode::enter`.
        unsafe {
            libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, t);
        }
    }
}

extern "C" fn on_leave_signal(_: libc::c_int) {
    RAW.store(false, Ordering::SeqCst);
    apply(false);
    LEAVE.store(true, Ordering::SeqCst);
}

extern "C" fn on_tstp(_: libc::c_int) {
    if RAW.load(Ordering::SeqCst) {
        apply(false);
    }
    // Stop as SIGTSTP's default would; SIGSTOP cannot be caught, so this
    // handler goes on (after SIGCONT) where it stopped.
    // SAFETY: kill and getpid are async-signal-safe.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGSTOP);
    }
}

extern "C" fn on_cont(_: libc::c_int) {
    if RAW.load(Ordering::SeqCst) {
        apply(true);
    }
    // Redraw: the shell may have written over the input line.
    RESIZED.store(true, Ordering::SeqCst);
}

const GUARDED: [libc::c_int; 4] = [libc::SIGQUIT, libc::SIGHUP, libc::SIGTSTP, libc::SIGCONT];

fn set_handlers(on: bool) {
    for sig in GUARDED {
        let handler = match sig {
            _ if !on => libc::SIG_DFL,
            libc::SIGTSTP => on_tstp as *const () as libc::sighandler_t,
            libc::SIGCONT => on_cont as *const () as libc::sighandler_t,
            _ => on_leave_signal as *const () as libc::sighandler_t,
        };
        // SAFETY: the handlers only touch atomics and call tcsetattr, kill
        // and getpid, which are async-signal-safe.
        unsafe {
            libc::signal(sig, handler);
        }
    }
}

/// Whether SIGQUIT or SIGHUP asked to leave (the terminal is restored already).
pub fn leave_requested() -> bool {
    LEAVE.load(Ordering::SeqCst)
}

extern "C" fn on_winch(_: libc::c_int) {
    RESIZED.store(true, Ordering::SeqCst);
}

/// Watch for window size changes.
pub fn watch_resize() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGWINCH, on_winch as *const () as libc::sighandler_t);
    }
}

/// Whether the window changed size since the last call.
pub fn take_resized() -> bool {
    RESIZED.swap(false, Ordering::SeqCst)
}

/// The width to wrap and clip to, the one rule of every command
/// (install/README.md, "doctor"): `COLUMNS` when set, else the terminal's
/// (stdout's, read again after a resize), else 80.
pub fn width() -> usize {
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|c| c.parse::<usize>().ok()).filter(|c| *c > 0) {
        return c;
    }
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one winsize through a valid pointer to ours.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_col > 0 { usize::from(ws.ws_col) } else { 80 }
}

/// Raw input on stdin while alive: no echo, no line buffering, Ctrl-C and
/// Ctrl-D arrive as bytes. Output processing stays on. Dropping it restores
/// the terminal as it was; while it lives, SIGQUIT, SIGHUP, SIGTSTP and
/// SIGCONT are handled so that no way of leaving or stopping keeps the
/// terminal raw.
pub struct RawMode {
    saved: libc::termios,
}

impl RawMode {
    pub fn enter() -> Option<RawMode> {
        // SAFETY: tcgetattr/tcsetattr on fd 0 with termios structs we own.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(libc::STDIN_FILENO, &mut t) != 0 {
                return None;
            }
            let saved = t;
            t.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG | libc::IEXTEN);
            t.c_iflag &= !(libc::ICRNL | libc::IXON);
            t.c_cc[libc::VMIN] = 1;
            t.c_cc[libc::VTIME] = 0;
            let _ = MODES.set((saved, t));
            RAW.store(true, Ordering::SeqCst);
            set_handlers(true);
            if libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &t) != 0 {
                RAW.store(false, Ordering::SeqCst);
                set_handlers(false);
                return None;
            }
            Some(RawMode { saved })
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        RAW.store(false, Ordering::SeqCst);
        set_handlers(false);
        // SAFETY: restores the attributes read in `enter`.
        unsafe {
            libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &self.saved);
        }
    }
}

/// A line being typed: bytes in, a finished line (or a request to quit) out.
#[derive(Default)]
pub struct LineEditor {
    pub buf: String,
    pending: Vec<u8>,
    escape: u8,
}

pub enum Key {
    None,
    Line(String),
    Quit,
}

impl LineEditor {
    pub fn feed(&mut self, b: u8) -> Key {
        // Skip escape sequences (arrows, function keys).
        if self.escape > 0 {
            self.escape = match (self.escape, b) {
                (1, b'[') | (1, b'O') => 2,
                (2, b'0'..=b'9' | b';') => 2,
                _ => 0,
            };
            return Key::None;
        }
        match b {
            0x03 | 0x04 if self.buf.is_empty() || b == 0x03 => Key::Quit,
            0x1b => {
                self.escape = 1;
                Key::None
            }
            b'\r' | b'\n' => Key::Line(std::mem::take(&mut self.buf)),
            0x7f | 0x08 => {
                self.buf.pop();
                Key::None
            }
            0x15 => {
                self.buf.clear();
                Key::None
            }
            b if b < 0x20 => Key::None,
            b => {
                self.pending.push(b);
                if let Ok(s) = std::str::from_utf8(&self.pending) {
                    self.buf.push_str(s);
                    self.pending.clear();
                } else if self.pending.len() >= 4 {
                    self.pending.clear();
                }
                Key::None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_editing() {
        let mut e = LineEditor::default();
        for b in "héllo".bytes() {
            assert!(matches!(e.feed(b), Key::None));
        }
        e.feed(0x7f);
        for b in [0x1b, b'[', b'A'] {
            e.feed(b);
        }
        assert!(matches!(e.feed(b'\r'), Key::Line(l) if l == "héll"));
        assert!(matches!(e.feed(0x03), Key::Quit));
    }
}
