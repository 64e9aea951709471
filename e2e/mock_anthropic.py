#!/usr/bin/env python3
"""Scripted mock of the Anthropic Messages API for the preloop-hooks e2e suite.

Python 3.11 stdlib only. Listens on 127.0.0.1 only and serves:

  POST /v1/messages               SSE stream when body.stream is true, JSON otherwise
  POST /v1/messages/count_tokens  a rough token estimate
  GET  /v1/models, /v1/models/ID  a plausible model list / model
  anything else                   200 {} (logged), so no probe ever hangs

Every request is appended to a JSONL log, one object per line:
  {"seq", "ts", "method", "path", "route", "headers", "body" | "body_raw",
   "reply": {...}, "before_reply": {...}}
route is "messages" | "count_tokens" | "models" | "model" | "other" | "head".

Script (--script FILE, JSON):

  {
    "turns": [                                   # one conversation
      {"content": [{"type": "tool_use", "name": "Bash",
                    "input": {"command": "echo hi", "description": "say hi"}}],
       "before_reply_cmd": ["/abs/preloop-hooks", "notes", "send", ...]},
      {"content": [{"type": "text", "text": "Done."}]}
    ],
    "overflow": {"content": [{"type": "text", "text": "Nothing more."}]},   # optional
    "side_text": "OK"                            # reply to requests without tools
  }

The turn index of a /v1/messages request is the number of assistant messages in
body.messages, so a retried request maps to the same turn and a Stop-hook
continuation (one more request after the final text) maps to the next turn.
Past the last scripted turn the "overflow" turn is used.

A turn may carry:
  "before_reply_cmd": [argv...]   run (no shell) and waited for BEFORE this
                                  request is answered; its argv, exit code,
                                  stdout, stderr and duration are logged in the
                                  request's record under "before_reply". It runs
                                  at most once per turn index (a retried request
                                  does not send a second note).
  "before_reply_timeout_s": N     limit for that command (default 30)
  "delay_s": N                    sleep before answering
  "stop_reason": "..."            override (default tool_use if the reply has a
                                  tool_use block, else end_turn)
tool_use ids are generated (toolu_mock_<seq>_<i>) unless the block gives "id".

The commands run with the mock's own environment (the test kit starts the mock
with PRELOOP_HOME etc. set), in the mock's working directory.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"seq": 0, "ran_before_reply": set()}
ARGS = None
SCRIPT = {"turns": [{"content": [{"type": "text", "text": "Hello from the mock."}]}],
          "side_text": "OK"}

MODELS = ["claude-opus-5-5", "claude-sonnet-4-5-20250929", "claude-opus-4-6",
          "claude-haiku-4-5-20251001"]


def next_seq():
    with LOCK:
        STATE["seq"] += 1
        return STATE["seq"]


def log_record(rec):
    line = json.dumps(rec, ensure_ascii=False)
    with LOCK:
        with open(ARGS.log, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()


def turn_index(body):
    return sum(1 for m in (body.get("messages") or []) if m.get("role") == "assistant")


def pick_turn(idx):
    turns = SCRIPT.get("turns") or []
    if idx < len(turns):
        return turns[idx], False
    ov = SCRIPT.get("overflow") or {
        "content": [{"type": "text", "text": "Mock: nothing more scripted (turn %d)." % idx}]}
    return ov, True


def materialise(content, seq):
    out = []
    for i, blk in enumerate(content):
        blk = dict(blk)
        if blk.get("type") == "tool_use":
            blk.setdefault("id", "toolu_mock_%d_%d" % (seq, i))
            blk.setdefault("input", {})
        out.append(blk)
    return out


def usage(body):
    n = max(1, len(json.dumps(body.get("messages", []), ensure_ascii=False)) // 4)
    return {"input_tokens": min(n, 5000), "output_tokens": 12,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def run_before_reply(argv, timeout):
    t0 = time.time()
    res = {"argv": argv, "started": t0}
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
        res.update(rc=p.returncode, stdout=p.stdout, stderr=p.stderr)
    except subprocess.TimeoutExpired as e:
        res.update(rc=None, error="timeout after %ss" % timeout,
                   stdout=(e.stdout or b"").decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or ""),
                   stderr=(e.stderr or b"").decode("utf-8", "replace") if isinstance(e.stderr, bytes) else (e.stderr or ""))
    except OSError as e:
        res.update(rc=None, error="%s: %s" % (type(e).__name__, e), stdout="", stderr="")
    res["duration_s"] = round(time.time() - t0, 3)
    return res


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "preloop-e2e-mock-anthropic/1.0"

    def log_message(self, fmt, *a):
        if ARGS.verbose:
            sys.stderr.write("mock: " + fmt % a + "\n")

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send_bytes(self, code, data, ctype):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_mock_%s" % uuid.uuid4().hex[:16])
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, code, obj):
        self.send_bytes(code, json.dumps(obj).encode(), "application/json")

    def record(self, raw):
        rec = {"seq": next_seq(), "ts": time.time(), "method": self.command, "path": self.path,
               "headers": {k.lower(): v for k, v in self.headers.items()}}
        if raw:
            try:
                rec["body"] = json.loads(raw)
            except ValueError:
                rec["body_raw"] = raw.decode("utf-8", "replace")
        return rec

    def do_HEAD(self):
        rec = self.record(b"")
        rec["route"] = "head"
        log_record(rec)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        rec = self.record(b"")
        path = self.path.split("?")[0].rstrip("/")
        if path == "/v1/models":
            rec["route"] = "models"
            log_record(rec)
            self.send_json(200, {"data": [{"type": "model", "id": i, "display_name": i,
                                           "created_at": "2025-01-01T00:00:00Z"} for i in MODELS],
                                 "has_more": False, "first_id": MODELS[0], "last_id": MODELS[-1]})
            return
        m = re.match(r"^/v1/models/([^/]+)$", path)
        if m:
            rec["route"] = "model"
            log_record(rec)
            self.send_json(200, {"type": "model", "id": m.group(1), "display_name": m.group(1),
                                 "created_at": "2025-01-01T00:00:00Z"})
            return
        rec["route"] = "other"
        log_record(rec)
        self.send_json(200, {})

    def do_POST(self):
        raw = self.read_body()
        rec = self.record(raw)
        path = self.path.split("?")[0].rstrip("/")
        body = rec.get("body") if isinstance(rec.get("body"), dict) else {}
        if path == "/v1/messages/count_tokens":
            rec["route"] = "count_tokens"
            log_record(rec)
            self.send_json(200, {"input_tokens": usage(body)["input_tokens"]})
            return
        if path != "/v1/messages":
            rec["route"] = "other"
            log_record(rec)
            self.send_json(200, {})
            return

        rec["route"] = "messages"
        idx = turn_index(body)
        if not body.get("tools"):
            turn, overflow = {"content": [{"type": "text",
                                           "text": SCRIPT.get("side_text", "OK")}]}, False
            rec["reply"] = {"kind": "side", "turn": idx}
        else:
            turn, overflow = pick_turn(idx)
            rec["reply"] = {"kind": "main", "turn": idx, "overflow": overflow}
            argv = turn.get("before_reply_cmd")
            if argv:
                with LOCK:
                    first = idx not in STATE["ran_before_reply"]
                    STATE["ran_before_reply"].add(idx)
                if first:
                    rec["before_reply"] = run_before_reply(
                        [str(a) for a in argv], float(turn.get("before_reply_timeout_s", 30)))
                else:
                    rec["before_reply"] = {"argv": argv, "skipped": "already ran for turn %d" % idx}
        content = materialise(turn.get("content") or [], rec["seq"])
        stop = turn.get("stop_reason") or (
            "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn")
        rec["reply"].update(content=content, stop_reason=stop)
        rec["t_reply"] = time.time()
        log_record(rec)
        delay = float(turn.get("delay_s", 0) or 0)
        if delay:
            time.sleep(delay)
        msg_id = "msg_mock_%d_%s" % (rec["seq"], uuid.uuid4().hex[:8])
        model = body.get("model", "claude-mock")
        u = usage(body)
        if body.get("stream"):
            self.send_sse(msg_id, model, content, stop, u)
        else:
            self.send_json(200, {"id": msg_id, "type": "message", "role": "assistant",
                                 "model": model, "content": content, "stop_reason": stop,
                                 "stop_sequence": None, "usage": u})

    def send_sse(self, msg_id, model, content, stop, u):
        ev = []

        def add(name, data):
            ev.append("event: %s\ndata: %s\n\n" % (name, json.dumps(data)))

        add("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": dict(u, output_tokens=1)}})
        add("ping", {"type": "ping"})
        for i, blk in enumerate(content):
            t = blk.get("type")
            if t == "text":
                add("content_block_start", {"type": "content_block_start", "index": i,
                                            "content_block": {"type": "text", "text": ""}})
                txt = blk.get("text", "")
                for j in range(0, max(len(txt), 1), 200):
                    add("content_block_delta", {"type": "content_block_delta", "index": i,
                                                "delta": {"type": "text_delta",
                                                          "text": txt[j:j + 200]}})
            elif t == "tool_use":
                add("content_block_start", {"type": "content_block_start", "index": i,
                                            "content_block": {"type": "tool_use", "id": blk["id"],
                                                              "name": blk["name"], "input": {}}})
                add("content_block_delta", {"type": "content_block_delta", "index": i,
                                            "delta": {"type": "input_json_delta",
                                                      "partial_json": json.dumps(blk.get("input", {}))}})
            elif t == "thinking":
                add("content_block_start", {"type": "content_block_start", "index": i,
                                            "content_block": {"type": "thinking", "thinking": "",
                                                              "signature": ""}})
                add("content_block_delta", {"type": "content_block_delta", "index": i,
                                            "delta": {"type": "thinking_delta",
                                                      "thinking": blk.get("thinking", "")}})
                add("content_block_delta", {"type": "content_block_delta", "index": i,
                                            "delta": {"type": "signature_delta",
                                                      "signature": blk.get("signature", "mock")}})
            add("content_block_stop", {"type": "content_block_stop", "index": i})
        add("message_delta", {"type": "message_delta",
                              "delta": {"stop_reason": stop, "stop_sequence": None},
                              "usage": {"output_tokens": u["output_tokens"]}})
        add("message_stop", {"type": "message_stop"})
        self.send_bytes(200, "".join(ev).encode(), "text/event-stream; charset=utf-8")


def main():
    global ARGS, SCRIPT
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=0, help="0 = let the OS pick a free port")
    p.add_argument("--port-file", help="write the bound port here (atomically) once listening")
    p.add_argument("--script", help="scripted conversation (JSON)")
    p.add_argument("--log", required=True, help="JSONL request log (appended)")
    p.add_argument("--verbose", action="store_true")
    ARGS = p.parse_args()
    if ARGS.script:
        with open(ARGS.script, encoding="utf-8") as f:
            SCRIPT = json.load(f)
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    if ARGS.port_file:
        tmp = ARGS.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, ARGS.port_file)
    sys.stderr.write("mock_anthropic listening on 127.0.0.1:%d\n" % port)
    sys.stderr.flush()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
