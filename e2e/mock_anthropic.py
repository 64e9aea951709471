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
with PRELOOP_HOME etc. set), in the mock's working directory. The command line, the log
and before_reply_cmd are shared with the other mocks: mock_common.py.
"""

import json
import re
import time
import uuid

import mock_common as mc
from mock_common import STATE

DEFAULT_SCRIPT = {"turns": [{"content": [{"type": "text", "text": "Hello from the mock."}]}],
                  "side_text": "OK"}
MODELS = ["claude-opus-5-5", "claude-sonnet-4-5-20250929", "claude-opus-4-6",
          "claude-haiku-4-5-20251001"]


def turn_index(body):
    return sum(1 for m in (body.get("messages") or []) if m.get("role") == "assistant")


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


class Handler(mc.Handler):
    server_version = "preloop-e2e-mock-anthropic/1.0"

    def do_GET(self):
        rec = self.record(b"")
        m = re.match(r"^/v1/models/([^/]+)$", self.url_path())
        if self.url_path() == "/v1/models":
            self.answer(rec, "models", {"data": [{"type": "model", "id": i, "display_name": i,
                                                  "created_at": "2025-01-01T00:00:00Z"} for i in MODELS],
                                        "has_more": False, "first_id": MODELS[0], "last_id": MODELS[-1]})
        elif m:
            self.answer(rec, "model", {"type": "model", "id": m.group(1), "display_name": m.group(1),
                                       "created_at": "2025-01-01T00:00:00Z"})
        else:
            self.answer_other(rec)

    def do_POST(self):
        rec = self.record(self.read_body())
        path = self.url_path()
        body = self.body_of(rec)
        if path == "/v1/messages/count_tokens":
            self.answer(rec, "count_tokens", {"input_tokens": usage(body)["input_tokens"]})
            return
        if path != "/v1/messages":
            self.answer_other(rec)
            return

        rec["route"] = "messages"
        idx = turn_index(body)
        if not body.get("tools"):
            turn = {"content": [{"type": "text", "text": STATE.script.get("side_text", "OK")}]}
            rec["reply"] = {"kind": "side", "turn": idx}
        else:
            turn, overflow = mc.pick(STATE.script.get("turns"), idx, STATE.script.get("overflow"), {
                "content": [{"type": "text", "text": "Mock: nothing more scripted (turn %d)." % idx}]})
            rec["reply"] = {"kind": "main", "turn": idx, "overflow": overflow}
            br = STATE.before_reply(idx, turn)
            if br:
                rec["before_reply"] = br
        content = materialise(turn.get("content") or [], rec["seq"])
        stop = turn.get("stop_reason") or (
            "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn")
        rec["reply"].update(content=content, stop_reason=stop)
        rec["t_reply"] = time.time()
        STATE.log(rec)
        delay = float(turn.get("delay_s", 0) or 0)
        if delay:
            time.sleep(delay)
        msg_id = "msg_mock_%d_%s" % (rec["seq"], uuid.uuid4().hex[:8])
        model = body.get("model", "claude-mock")
        u = usage(body)
        if body.get("stream"):
            self.send_sse(sse_events(msg_id, model, content, stop, u))
        else:
            self.send_json(200, {"id": msg_id, "type": "message", "role": "assistant",
                                 "model": model, "content": content, "stop_reason": stop,
                                 "stop_sequence": None, "usage": u})


def sse_events(msg_id, model, content, stop, u):
    ev = []

    def add(name, data):
        ev.append("event: %s\ndata: %s\n\n" % (name, json.dumps(data)))

    def delta(i, d):
        add("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})

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
                delta(i, {"type": "text_delta", "text": txt[j:j + 200]})
        elif t == "tool_use":
            add("content_block_start", {"type": "content_block_start", "index": i,
                                        "content_block": {"type": "tool_use", "id": blk["id"],
                                                          "name": blk["name"], "input": {}}})
            delta(i, {"type": "input_json_delta", "partial_json": json.dumps(blk.get("input", {}))})
        elif t == "thinking":
            add("content_block_start", {"type": "content_block_start", "index": i,
                                        "content_block": {"type": "thinking", "thinking": "",
                                                          "signature": ""}})
            delta(i, {"type": "thinking_delta", "thinking": blk.get("thinking", "")})
            delta(i, {"type": "signature_delta", "signature": blk.get("signature", "mock")})
        add("content_block_stop", {"type": "content_block_stop", "index": i})
    add("message_delta", {"type": "message_delta",
                          "delta": {"stop_reason": stop, "stop_sequence": None},
                          "usage": {"output_tokens": u["output_tokens"]}})
    add("message_stop", {"type": "message_stop"})
    return ev


if __name__ == "__main__":
    mc.main("mock_anthropic", Handler, __doc__, DEFAULT_SCRIPT)
