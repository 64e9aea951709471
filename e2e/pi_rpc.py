"""A small driver of `pi --mode rpc` for the e2e suites (Python stdlib only).

Pi's RPC mode (docs/contracts/pi.md §8) reads LF-delimited JSON commands on stdin and writes
responses and events as LF-delimited JSON on stdout (split on b"\\n" only). Pi stays alive
between runs, as in interactive mode (`ctx.hasUI` is true), so an `agent_end` continuation and
an idle wake reach the model here, never in `-p`.

    rpc = PiRpc(argv, env, cwd)
    rpc.send({"type": "prompt", "message": "Run echo one"})
    rpc.wait(type="agent_end")            # the record, or AssertionError after the timeout
    rpc.close()                           # stdin EOF: session_shutdown, then Pi exits
"""

import json
import subprocess
import threading
import time


class PiRpc:
    def __init__(self, argv, env, cwd, stderr_path):
        self._err = open(stderr_path, "wb")
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err)
        self.records = []  # (seconds since start, record)
        self._pos = 0
        self._cond = threading.Condition()
        self._t0 = time.monotonic()
        self._eof = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        buf = b""
        while True:
            chunk = self.proc.stdout.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                line = line.rstrip(b"\r")
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    rec = {"_raw": line.decode("utf-8", "replace")}
                with self._cond:
                    self.records.append((time.monotonic() - self._t0, rec))
                    self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def send(self, cmd):
        self.proc.stdin.write(json.dumps(cmd).encode() + b"\n")
        self.proc.stdin.flush()

    def wait(self, timeout=60, **want):
        """The next record (after the previous match) whose fields equal `want`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for j in range(self._pos, len(self.records)):
                    rec = self.records[j][1]
                    if all(rec.get(k) == v for k, v in want.items()):
                        self._pos = j + 1
                        return rec
                if self._eof:
                    raise AssertionError("pi exited while waiting for %r" % want)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no %r within %ss; last records: %s" % (
                        want, timeout, [r.get("type") for _, r in self.records[-15:]]))
                self._cond.wait(left)

    def count(self, **want):
        with self._cond:
            return sum(1 for _, r in self.records if all(r.get(k) == v for k, v in want.items()))

    def close(self, timeout=30):
        """Close stdin (Pi runs session_shutdown and exits); its exit code."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("pi did not exit within %ss of stdin EOF" % timeout)
        finally:
            self._err.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self._err):
            try:
                f.close()
            except (OSError, ValueError):
                pass
