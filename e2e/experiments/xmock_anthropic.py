#!/usr/bin/env python3
"""Minimal scripted Anthropic Messages API mock with per-agent scripts (stdlib only).

Used by the measurements in docs/contracts/measurements-2026-12.md. Unlike
e2e/mock_anthropic.py it can script a main agent AND its sub-agents:

  {"agents": [
     {"name": "main", "turns": [{"content": [...]}, ...]},          # no "match": the default
     {"name": "sub", "match": "SUBTASK-1", "turns": [...]}           # chosen when "match" is a
   ],                                                                # substring of messages[0]
   "side_text": "OK"}                                                # requests without tools

Turn index = number of assistant messages already in body.messages. Past the last turn:
the agent's "overflow" turn or a short text. Every request is logged (JSONL) with
{"seq", "ts", "path", "headers", "body", "reply": {"agent", "turn", "content"}}.
  xmock_anthropic.py --script S.json --log L.jsonl --port-file P
"""
import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
SEQ = [0]
A = None
SCRIPT = {}


def classify(body):
    msgs = body.get("messages") or []
    first = json.dumps(msgs[0], ensure_ascii=False) if msgs else ""
    n = sum(1 for m in msgs if m.get("role") == "assistant")
    for a in SCRIPT.get("agents", []):
        if a.get("match") and a["match"] in first:
            return a, n
    if not body.get("tools"):
        return None, n
    for a in SCRIPT.get("agents", []):
        if not a.get("match"):
            return a, n
    return None, n


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _send(self, code, data, ctype):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send(200, b'{"data": [], "has_more": false}', "application/json")

    def do_POST(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            raw = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                raw += self.rfile.read(size)
                self.rfile.readline()
        else:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
        with LOCK:
            SEQ[0] += 1
            seq = SEQ[0]
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        rec = {"seq": seq, "ts": time.time(), "path": path,
               "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
        if path != "/v1/messages":
            rec["route"] = "other"
            self._log(rec)
            self._send(200, b'{"input_tokens": 10}', "application/json")
            return
        agent, idx = classify(body)
        if agent is None:
            turn = {"content": [{"type": "text", "text": SCRIPT.get("side_text", "OK")}]}
            name = None
        else:
            turns = agent.get("turns", [])
            turn = turns[idx] if idx < len(turns) else agent.get("overflow") or {
                "content": [{"type": "text", "text": "Nothing more (turn %d)." % idx}]}
            name = agent.get("name")
        content = []
        for i, b in enumerate(turn.get("content", [])):
            b = dict(b)
            if b.get("type") == "tool_use":
                b.setdefault("id", "toolu_x_%d_%d" % (seq, i))
            content.append(b)
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        rec.update(route="messages", reply={"agent": name, "turn": idx, "content": content})
        self._log(rec)
        if turn.get("delay_s"):
            time.sleep(turn["delay_s"])
        mid = "msg_x_%d" % seq
        model = body.get("model", "mock")
        usage = {"input_tokens": 100, "output_tokens": 10,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not body.get("stream"):
            self._send(200, json.dumps({"id": mid, "type": "message", "role": "assistant",
                                        "model": model, "content": content, "stop_reason": stop,
                                        "stop_sequence": None, "usage": usage}).encode(),
                       "application/json")
            return
        ev = []

        def add(name, data):
            ev.append("event: %s\ndata: %s\n\n" % (name, json.dumps(data)))
        add("message_start", {"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": usage}})
        for i, b in enumerate(content):
            if b["type"] == "text":
                add("content_block_start", {"type": "content_block_start", "index": i,
                                            "content_block": {"type": "text", "text": ""}})
                add("content_block_delta", {"type": "content_block_delta", "index": i,
                                            "delta": {"type": "text_delta", "text": b["text"]}})
            else:
                add("content_block_start", {"type": "content_block_start", "index": i,
                                            "content_block": {"type": "tool_use", "id": b["id"],
                                                              "name": b["name"], "input": {}}})
                add("content_block_delta", {"type": "content_block_delta", "index": i,
                                            "delta": {"type": "input_json_delta",
                                                      "partial_json": json.dumps(b.get("input", {}))}})
            add("content_block_stop", {"type": "content_block_stop", "index": i})
        add("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop,
                                                                "stop_sequence": None},
                              "usage": {"output_tokens": 10}})
        add("message_stop", {"type": "message_stop"})
        self._send(200, "".join(ev).encode(), "text/event-stream")

    def _log(self, rec):
        line = json.dumps(rec, ensure_ascii=False) + "\n"
        with LOCK:
            with open(A.log, "a") as f:
                f.write(line)


def main():
    global A, SCRIPT
    p = argparse.ArgumentParser()
    p.add_argument("--script", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--port-file", required=True)
    A = p.parse_args()
    SCRIPT = json.load(open(A.script))
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    with open(A.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.replace(A.port_file + ".tmp", A.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
