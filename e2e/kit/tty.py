"""A harness's terminal UI on a pseudo-terminal, for the suites that drive a TUI (e2e/test_tui.py,
and Claude Code's through kit.claude.PtyClaude).

Tty starts a program with a pty as its controlling terminal and its stdin, stdout and stderr (a
session of its own, 120x40, TERM=xterm-256color), reads what it draws on a thread (answering the
cursor-position and device-attribute queries a TUI may ask, as a terminal would; appending it all
to `log_path` when given), and types into it. `screen()` is what it drew so far with escape
sequences taken out, for failure messages and for waiting on a word.
"""

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import threading
import time

__all__ = ["Tty"]

_ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=!]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b.")


class Tty:
    def __init__(self, argv, env, cwd, rows=40, cols=120, log_path=None):
        env = dict(env, TERM="xterm-256color")
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.t0 = time.time()
        # The pty becomes the controlling terminal of the new session (as login_tty does).
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
                                     start_new_session=True, close_fds=True,
                                     preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self._raw = bytearray()
        self._lock = threading.Lock()
        self._log = open(log_path, "ab") if log_path else None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        while True:
            try:
                ready, _, _ = select.select([self.master], [], [], 0.2)
                if not ready:
                    if self.proc.poll() is not None:
                        return
                    continue
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self._raw += data
                if self._log:
                    self._log.write(data)
                    self._log.flush()
            # A terminal answers these; a TUI may wait for the answer.
            if b"\x1b[6n" in data:
                self._write(b"\x1b[1;1R")
            if b"\x1b[c" in data or b"\x1b[0c" in data:
                self._write(b"\x1b[?62;22c")

    def _write(self, data):
        try:
            os.write(self.master, data)
        except OSError:
            pass

    def mark(self, what):
        """A line in the log (not on the screen) saying what the test did, and when."""
        if self._log:
            with self._lock:
                self._log.write(("\n<<<%s at +%.2fs>>>\n" % (what, time.time() - self.t0)).encode())
                self._log.flush()

    def type(self, text, enter=True):
        """Type `text` a character at a time (a paste may be taken as one), then Enter."""
        for ch in text:
            self._write(ch.encode())
            time.sleep(0.03)
        if enter:
            time.sleep(0.4)
            self._write(b"\r")
        self.mark("TYPED %r" % text)

    def ctrl_c(self, times=1):
        for _ in range(times):
            self._write(b"\x03")
            time.sleep(0.3)
        self.mark("CTRL-C x%d" % times)

    def alive(self):
        return self.proc.poll() is None

    @property
    def exit_status(self):
        return self.proc.poll()

    def wait_until(self, pred, timeout, step=0.1):
        """Poll pred() until it is truthy (returned) or timeout (None)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = pred()
            if v:
                return v
            time.sleep(step)
        return None

    def screen(self):
        with self._lock:
            raw = bytes(self._raw)
        return _ESCAPES.sub(b"", raw).decode("utf-8", errors="replace")

    def wait_for(self, predicate, secs, what):
        """Poll `predicate()` until true or `secs` pass; AssertionError naming `what` and the screen."""
        deadline = time.monotonic() + secs
        while time.monotonic() < deadline:
            if predicate():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if predicate():
            return
        raise AssertionError("%s (after %.0f s; exit %s); screen tail:\n%s"
                             % (what, secs, self.proc.poll(), self.screen()[-2000:]))

    def close(self, sig=signal.SIGTERM, secs=20):
        """Stop the program (its whole session) and reap it; its exit code."""
        if self.proc.poll() is None:
            self.mark("SIGNAL %d" % sig)
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=secs)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._reader.join(timeout=5)
        try:
            os.close(self.master)
        except OSError:
            pass
        if self._log:
            self._log.close()
            self._log = None
        return self.proc.returncode
