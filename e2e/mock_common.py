"""Shared plumbing of the e2e mock model APIs (Python 3.11 stdlib only).

mock_anthropic.py (Claude Code), mock_openai.py (Codex, Responses API), mock_gemini.py
(Gemini CLI, v1beta) and mock_copilot.py (Copilot CLI, Chat Completions) differ only in
the wire format. Everything else lives here and is the same for all four:

  * the command line: --script FILE (JSON), --log FILE (JSONL, appended; numbering goes on
    when the file already holds records), --port (0 = a free one), --port-file FILE
    (written atomically once listening), --verbose; 127.0.0.1 only;
  * one JSONL record per request: seq, ts, method, path, headers (credentials cut short),
    body (parsed JSON) or body_raw, and what the mock module adds (route, reply, ...);
  * "before_reply_cmd": a scripted turn's argv, run (no shell) and waited for BEFORE that
    turn is answered, at most once per turn key (a retried request does not run it twice);
    its argv, rc, stdout, stderr and duration go into the request's record under
    "before_reply". It runs with the mock's own environment and working directory.
    "before_reply_timeout_s" is its limit (default 30). This is how a test sends a note
    "mid-run" deterministically.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REDACTED_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key")


class MockState:
    """The state of one mock process: the script, the arguments, the log, the counters."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seq = 0
        self.ran_before_reply = set()
        self.args = None
        self.script = {}
        self.counters = {}
        self.extra = {}      # per-mock state (e.g. mock_openai's guardian answer)

    def next_seq(self):
        with self.lock:
            self.seq += 1
            return self.seq

    def log(self, rec):
        line = json.dumps(rec, ensure_ascii=False)
        with self.lock:
            with open(self.args.log, "a", encoding="utf-8") as f:
                f.write(line + "\n")
                f.flush()

    def before_reply(self, key, turn):
        """Run the turn's before_reply_cmd the first time `key` is answered; the record
        to store under "before_reply" (None when the turn has none)."""
        argv = turn.get("before_reply_cmd")
        if not argv:
            return None
        with self.lock:
            first = key not in self.ran_before_reply
            self.ran_before_reply.add(key)
        if not first:
            return {"argv": argv, "skipped": "already ran for turn %s" % (key,)}
        return run_before_reply([str(a) for a in argv], float(turn.get("before_reply_timeout_s", 30)))


STATE = MockState()


def run_before_reply(argv, timeout):
    t0 = time.time()
    res = {"argv": argv, "started": t0}

    def text(b):
        return b.decode("utf-8", "replace") if isinstance(b, bytes) else (b or "")
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
        res.update(rc=p.returncode, stdout=p.stdout, stderr=p.stderr)
    except subprocess.TimeoutExpired as e:
        res.update(rc=None, error="timeout after %ss" % timeout, stdout=text(e.stdout),
                   stderr=text(e.stderr))
    except OSError as e:
        res.update(rc=None, error="%s: %s" % (type(e).__name__, e), stdout="", stderr="")
    res["duration_s"] = round(time.time() - t0, 3)
    return res


def count_runs(items, is_model):
    """Number of maximal runs of consecutive items for which is_model(item) is true: the
    turn index of a request (a retry maps to the same turn, a hook continuation to the
    next one)."""
    n, prev = 0, False
    for it in items or []:
        cur = isinstance(it, dict) and bool(is_model(it))
        if cur and not prev:
            n += 1
        prev = cur
    return n


def pick(turns, idx, overflow, default_overflow):
    """(turn, is_overflow) for turn index idx."""
    if idx < len(turns or []):
        return turns[idx], False
    return overflow or default_overflow, True


class Handler(BaseHTTPRequestHandler):
    """What every mock's handler shares: body reading, the log record, JSON and SSE
    answers, and "200 {}" for anything unknown (so a probe never hangs)."""

    protocol_version = "HTTP/1.1"
    server_version = "preloop-e2e-mock/1.0"

    def log_message(self, fmt, *a):
        if STATE.args is not None and STATE.args.verbose:
            sys.stderr.write("mock: " + fmt % a + "\n")

    def read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            n = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(n) if n else b""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        if enc in ("gzip", "deflate"):
            data = zlib.decompress(data, 16 + zlib.MAX_WBITS if enc == "gzip" else zlib.MAX_WBITS)
        elif enc == "zstd":
            raise ValueError("zstd request bodies are not supported by this mock")
        return data

    def record(self, raw):
        rec = {"seq": STATE.next_seq(), "ts": time.time(), "method": self.command,
               "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
        for k in REDACTED_HEADERS:
            if k in rec["headers"]:
                rec["headers"][k] = rec["headers"][k][:12] + "..."
        if raw:
            try:
                rec["body"] = json.loads(raw)
            except ValueError:
                rec["body_raw"] = raw.decode("utf-8", "replace")
        return rec

    def body_of(self, rec):
        return rec.get("body") if isinstance(rec.get("body"), dict) else {}

    def send_bytes(self, code, data, ctype):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache")
        self.send_header("x-request-id", "req_mock_%s" % uuid.uuid4().hex[:16])
        self.send_header("request-id", "req_mock_%s" % uuid.uuid4().hex[:16])
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, code, obj):
        self.send_bytes(code, json.dumps(obj).encode(), "application/json")

    def send_sse(self, events):
        """events: already formatted SSE events ("event: x\\ndata: {...}\\n\\n" or
        "data: {...}\\n\\n"), sent as one text/event-stream body."""
        self.send_bytes(200, "".join(events).encode(), "text/event-stream; charset=utf-8")

    def url_path(self):
        """The request path without the query string or a trailing slash."""
        return self.path.split("?")[0].rstrip("/")

    def answer(self, rec, route, obj, code=200):
        """Log the record under `route`, then answer with JSON."""
        rec["route"] = route
        STATE.log(rec)
        self.send_json(code, obj)

    def answer_other(self, rec):
        self.answer(rec, "other", {})

    def do_HEAD(self):
        rec = self.record(b"")
        rec["route"] = "head"
        STATE.log(rec)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.answer_other(self.record(b""))

    def do_POST(self):
        self.answer_other(self.record(self.read_body()))


def main(name, handler_cls, doc, default_script):
    """Parse the command line, load the script, serve on 127.0.0.1 until killed."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=0, help="0 = let the OS pick a free port")
    p.add_argument("--port-file", help="write the bound port here (atomically) once listening")
    p.add_argument("--script", help="scripted conversation (JSON)")
    p.add_argument("--log", required=True, help="JSONL request log (appended)")
    p.add_argument("--verbose", action="store_true")
    STATE.args = p.parse_args()
    STATE.script = default_script
    if STATE.args.script:
        with open(STATE.args.script, encoding="utf-8") as f:
            STATE.script = json.load(f)
    if os.path.exists(STATE.args.log):   # numbering goes on when a log is reused
        with open(STATE.args.log, encoding="utf-8") as f:
            STATE.seq = sum(1 for line in f if line.strip())
    srv = ThreadingHTTPServer(("127.0.0.1", STATE.args.port), handler_cls)
    srv.daemon_threads = True
    port = srv.server_address[1]
    if STATE.args.port_file:
        tmp = STATE.args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, STATE.args.port_file)
    sys.stderr.write("%s listening on 127.0.0.1:%d\n" % (name, port))
    sys.stderr.flush()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
