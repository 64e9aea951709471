#!/usr/bin/env python3
"""Scripted mock of an OpenAI-compatible Chat Completions API for GitHub Copilot CLI 1.0.102
in BYOK + offline mode, for the preloop-hooks e2e suite (Python 3.11 stdlib only; ported
from the project's shared rig).

Copilot CLI talks to it as a custom provider, with no GitHub login and no network:

    COPILOT_OFFLINE=true COPILOT_PROVIDER_BASE_URL=http://127.0.0.1:<port>/v1 \
    COPILOT_PROVIDER_API_KEY=mock-key COPILOT_MODEL=gpt-4.1 copilot -p ... --allow-all

Serves, on 127.0.0.1 only:
  POST .../chat/completions   streaming SSE (chat.completion.chunk ... [DONE]) or JSON when
                              body.stream is false; a scripted turn for requests that offer
                              tools, a short text for side requests (none offer tools)
  GET  .../models             a one-model list
  anything else               200 {} and logged

Every request is appended to a JSONL log: seq, ts, method, path, headers, body, route
("agent" | "side" | "models" | "other"), and for a turn "reply": {"kind": "agent",
"agent": <name>, "turn": <index>, "overflow", "turn_spec"} and, when the turn had one,
"before_reply".

Script (JSON, --script); every key is optional:
{
  "turns": [                                        # the main agent's turns, by turn index
    {"calls": [{"name": "bash",                     # tool calls in one response
                "arguments": {"command": "echo hi", "description": "say hi"}}],
     "before_reply_cmd": ["/abs/preloop-hooks", "notes", "send", ...]},
    {"text": "All done."}
  ],
  "overflow": {"text": "Done again."},             # past the last turn
  "side_text": "Mock title",                       # answer to requests without tools
  "model": "gpt-4.1",                              # what GET /models lists
  "agents": [{"name": "sub", "match": "SUBAGENT-TASK",   # a sub-agent: chosen when its first
              "turns": [...], "overflow": {...}}]        # user message contains "match"
}
A turn may also carry "delay_s", "http_status" + "error_body", "finish_reason", and
"before_reply_cmd" / "before_reply_timeout_s" (run and waited for before the turn is
answered, at most once per (agent, turn index); see mock_common.py, which also holds the
command line and the log).

Turn index = number of assistant messages in body.messages (consecutive ones count once), so
a retry is idempotent and a continuation (agentStop block) moves on to the next turn.
"""

import json
import time

import mock_common as mc
from mock_common import STATE

DEFAULT_SCRIPT = {"turns": [{"text": "Hello from the mock."}]}


def usage(body):
    n = max(1, len(json.dumps(body.get("messages", []))) // 4)
    return {"prompt_tokens": n, "completion_tokens": 5, "total_tokens": n + 5}


def tool_calls(turn, seq):
    out = []
    for i, c in enumerate(turn.get("calls") or []):
        args = c.get("arguments", {})
        out.append({"id": c.get("id") or "call_%d_%d" % (seq, i), "type": "function",
                    "function": {"name": c["name"],
                                 "arguments": args if isinstance(args, str) else json.dumps(args)}})
    return out


def pick_agent(body):
    """(name, agent script) for a request: the first agent whose "match" is in the first
    user message, else the main conversation (the script itself, name "main")."""
    first_user = next((m.get("content") for m in body.get("messages") or []
                       if isinstance(m, dict) and m.get("role") == "user"), "")
    first_user = first_user if isinstance(first_user, str) else json.dumps(first_user)
    for a in STATE.script.get("agents") or []:
        if a.get("match") and a["match"] in first_user:
            return a.get("name", a["match"]), a
    return "main", STATE.script


class Handler(mc.Handler):
    server_version = "mock-copilot/1.0"

    def do_GET(self):
        if self.url_path().endswith("/models"):
            model = STATE.script.get("model", "gpt-4.1")
            self.answer(self.record(b""), "models", {"object": "list", "data": [
                {"id": model, "object": "model", "created": 0, "owned_by": "mock"}]})
        else:
            self.answer_other(self.record(b""))

    def do_POST(self):
        rec = self.record(self.read_body())
        body = self.body_of(rec)
        if not self.url_path().endswith("/chat/completions"):
            self.answer_other(rec)
            return
        seq = rec["seq"]
        if not body.get("tools"):
            turn = {"text": STATE.script.get("side_text", "Mock title")}
            rec["route"] = "side"
            rec["reply"] = {"kind": "side"}
        else:
            name, agent = pick_agent(body)
            idx = mc.count_runs(body.get("messages"), lambda m: m.get("role") == "assistant")
            turn, overflow = mc.pick(agent.get("turns"), idx, agent.get("overflow"),
                                     {"text": "Mock: nothing more scripted (turn %d)." % idx})
            rec["route"] = "agent"
            rec["reply"] = {"kind": "agent", "agent": name, "turn": idx, "overflow": overflow}
            if not overflow:
                br = STATE.before_reply((name, idx), turn)
                if br:
                    rec["before_reply"] = br
        rec["reply"]["turn_spec"] = {k: v for k, v in turn.items() if k != "before_reply_cmd"}
        STATE.log(rec)
        if turn.get("delay_s"):
            time.sleep(float(turn["delay_s"]))
        if turn.get("http_status"):
            self.send_json(int(turn["http_status"]), turn.get("error_body") or {
                "error": {"message": "mock error", "type": "server_error"}})
            return
        calls = tool_calls(turn, seq)
        finish = turn.get("finish_reason") or ("tool_calls" if calls else "stop")
        cid = "chatcmpl-mock-%d" % seq
        model = body.get("model") or "mock-model"
        if not body.get("stream"):
            msg = {"role": "assistant", "content": turn.get("text")}
            if calls:
                msg["tool_calls"] = calls
            self.send_json(200, {"id": cid, "object": "chat.completion", "created": int(time.time()),
                                 "model": model, "choices": [{"index": 0, "message": msg,
                                                              "finish_reason": finish}],
                                 "usage": usage(body)})
            return

        def chunk(delta, fin=None, with_usage=False):
            c = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                 "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": fin}]}
            if with_usage:
                c["usage"] = usage(body)
            return "data: %s\n\n" % json.dumps(c)
        chunks = [chunk({"role": "assistant", "content": ""})]
        if turn.get("text"):
            chunks.append(chunk({"content": turn["text"]}))
        for i, tc in enumerate(calls):
            chunks.append(chunk({"tool_calls": [dict(tc, index=i)]}))
        chunks.append(chunk({}, finish, with_usage=True))
        self.send_sse(chunks + ["data: [DONE]\n\n"])


if __name__ == "__main__":
    mc.main("mock_copilot", Handler, __doc__, DEFAULT_SCRIPT)
