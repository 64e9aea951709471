#!/usr/bin/env python3
"""Scripted mock of the Gemini API (generativelanguage v1beta) for Gemini CLI 0.61.0, for the
preloop-hooks e2e suite (Python 3.11 stdlib only; ported from the project's shared rig).

Gemini CLI talks to it with an API key and a base URL from the environment, and
`security.auth.selectedType: "gemini-api-key"` in ~/.gemini/settings.json (without it the
base URL alone selects the "gateway" auth type, which `-p` rejects):

    GEMINI_API_KEY=mock-key GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:<port> gemini -p ...

Serves, on 127.0.0.1 only:
  POST /v1beta/models/<model>:streamGenerateContent?alt=sse   SSE, one scripted turn
  POST /v1beta/models/<model>:generateContent                 JSON: a JSON-schema side
                                                              request, or a scripted turn
  POST /v1beta/models/<model>:countTokens                     {"totalTokens": n}
  GET  /v1beta/models[/<model>]                               a one-model list / the model
  anything else                                               200 {} and logged

Every request is appended to a JSONL log: seq, ts, method, path, headers, body, route
("stream" | "generate" | "side_json" | "countTokens" | "models" | "model" | "other"), and
for a turn "reply": {"kind": "main", "turn": <index>, "overflow", "parts"} and, when the
turn had one, "before_reply".

Script (JSON, --script); every key is optional:
{
  "turns": [                                   # main-agent turns, picked by turn index
    {"calls": [{"name": "run_shell_command",   # function calls, one response (parallel)
                "args": {"command": "echo hi"}}],
     "before_reply_cmd": ["/abs/preloop-hooks", "notes", "send", ...]},
    {"text": "All done."}                      # final answer
  ],
  "overflow": {"text": "Done again."},         # past the last turn
  "side_json": {"next_speaker": "user", "reasoning": "mock"},   # merged into JSON-mode answers
  "chunks": 1                                  # split a text answer into this many SSE chunks
}
A turn may also carry "delay_s", "http_status" + "error_body", "thought_signature" (added to
each functionCall part), "finish_reason" (default STOP), "chunks", "parts" (raw parts
appended), and "before_reply_cmd" / "before_reply_timeout_s" (run and waited for before the
turn is answered, at most once per turn index; see mock_common.py, which also holds the
command line and the log).

Turn index = number of model contents (role "model", consecutive ones counted once) in
body.contents, so a retry maps to the same turn and an AfterAgent continuation simply moves
to the next turn. The CLI needs no thought signature on a mocked function call.
"""

import json
import re
import time

import mock_common as mc
from mock_common import STATE

DEFAULT_SCRIPT = {"turns": [{"text": "Hello from the mock."}]}


def usage(body):
    n = max(1, len(json.dumps(body.get("contents", []))) // 4)
    return {"promptTokenCount": n, "candidatesTokenCount": 5, "totalTokenCount": n + 5}


def turn_parts(turn):
    parts = []
    if turn.get("text") is not None:
        parts.append({"text": turn["text"]})
    for c in turn.get("calls") or []:
        fc = {"name": c["name"], "args": c.get("args", {})}
        if c.get("id"):
            fc["id"] = c["id"]
        p = {"functionCall": fc}
        if turn.get("thought_signature"):
            p["thoughtSignature"] = turn["thought_signature"]
        parts.append(p)
    parts.extend(turn.get("parts") or [])
    return parts


def response_obj(parts, body, model, seq, finish="STOP", with_usage=True):
    r = {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
         "modelVersion": model, "responseId": "mock-%d" % seq}
    if finish:
        r["candidates"][0]["finishReason"] = finish
    if with_usage:
        r["usageMetadata"] = usage(body)
    return r


def schema_answer(schema, side):
    """A JSON value that satisfies a (simple) responseSchema / responseJsonSchema."""
    if not isinstance(schema, dict):
        return side or {}
    t = str(schema.get("type", "")).lower()
    if t == "object" or "properties" in schema:
        out = {}
        for k, sub in (schema.get("properties") or {}).items():
            out[k] = side[k] if k in (side or {}) else schema_answer(sub, None)
        for k, v in (side or {}).items():
            out.setdefault(k, v)
        return out
    if schema.get("enum"):
        return schema["enum"][0]
    return {"array": [], "number": 0, "integer": 0, "boolean": False}.get(t, "mock")


class Handler(mc.Handler):
    server_version = "mock-gemini/1.0"

    def do_GET(self):
        rec = self.record(b"")
        m = re.search(r"/models/([^/:]+)$", self.url_path())
        if re.search(r"/models$", self.url_path()):
            self.answer(rec, "models", {"models": [{"name": "models/gemini-2.5-flash",
                                                    "supportedGenerationMethods": ["generateContent"]}]})
        elif m:
            self.answer(rec, "model", {"name": "models/" + m.group(1), "inputTokenLimit": 1048576,
                                       "outputTokenLimit": 65536})
        else:
            self.answer_other(rec)

    def do_POST(self):
        rec = self.record(self.read_body())
        body = self.body_of(rec)
        m = re.search(r"/models/([^/:]+):([A-Za-z]+)$", self.url_path())
        if not m:
            self.answer_other(rec)
            return
        model, method = m.group(1), m.group(2)
        if method == "countTokens":
            self.answer(rec, "countTokens", {"totalTokens": usage(body)["promptTokenCount"]})
            return
        gen = body.get("generationConfig") or {}
        schema = gen.get("responseJsonSchema") or gen.get("responseSchema")
        if method == "generateContent" and (gen.get("responseMimeType") == "application/json"
                                            or schema is not None):
            ans = schema_answer(schema, STATE.script.get("side_json")
                                or {"next_speaker": "user", "reasoning": "mock"})
            rec["route"] = "side_json"
            rec["reply"] = {"kind": "side_json", "json": ans}
            STATE.log(rec)
            self.send_json(200, response_obj([{"text": json.dumps(ans)}], body, model, rec["seq"]))
            return
        idx = mc.count_runs(body.get("contents"), lambda c: c.get("role") == "model")
        turn, overflow = mc.pick(STATE.script.get("turns"), idx, STATE.script.get("overflow"),
                                 {"text": "Mock: nothing more scripted (turn %d)." % idx})
        rec["route"] = "stream" if method == "streamGenerateContent" else "generate"
        rec["reply"] = {"kind": "main", "turn": idx, "overflow": overflow}
        if not overflow:
            br = STATE.before_reply(idx, turn)
            if br:
                rec["before_reply"] = br
        parts = turn_parts(turn)
        rec["reply"]["parts"] = parts
        STATE.log(rec)
        if turn.get("delay_s"):
            time.sleep(float(turn["delay_s"]))
        if turn.get("http_status"):
            self.send_json(int(turn["http_status"]), turn.get("error_body") or {
                "error": {"code": int(turn["http_status"]), "message": "mock error",
                          "status": "INTERNAL"}})
            return
        finish = turn.get("finish_reason", "STOP")
        if method != "streamGenerateContent":
            self.send_json(200, response_obj(parts, body, model, rec["seq"], finish))
            return
        n = int(turn.get("chunks") or STATE.script.get("chunks") or 1)
        events = []
        if n > 1 and len(parts) == 1 and "text" in parts[0]:
            t = parts[0]["text"]
            step = max(1, len(t) // n)
            pieces = [t[i:i + step] for i in range(0, len(t), step)]
            for i, piece in enumerate(pieces):
                last = i == len(pieces) - 1
                events.append(response_obj([{"text": piece}], body, model, rec["seq"],
                                           finish if last else None, last))
        else:
            events.append(response_obj(parts, body, model, rec["seq"], finish))
        self.send_sse(["data: %s\r\n\r\n" % json.dumps(ev) for ev in events])


if __name__ == "__main__":
    mc.main("mock_gemini", Handler, __doc__, DEFAULT_SCRIPT)
