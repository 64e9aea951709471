#!/usr/bin/env python3
"""Scripted mock of the OpenAI Responses API for Codex CLI (Python 3 stdlib only).

Codex talks to it as a custom model provider (config.toml):

    [model_providers.mock]
    base_url = "http://127.0.0.1:<port>/v1"
    wire_api = "responses"
    env_key  = "MOCK_API_KEY"

Serves, on 127.0.0.1 only:
  POST /v1/responses          streaming SSE (response.created, output_item.added/done,
                              output_text.delta, response.completed), or JSON when
                              body.stream is false
  GET  /v1/models             a one-model list (Codex exec does not call it, but be safe)
  anything else               200 {} and logged, so a probe never hangs

Every request is appended to a JSONL log (one object per line: seq, ts, method,
path, headers, body, route and, for /v1/responses, "reply": what was chosen).

Script (JSON file given with --script); every key is optional:
{
  "agents": [
    {"name": "main",                       # the first agent without "match" answers
     "turns": [                            # the ordinary (tool-bearing) requests
       {"calls": [{"cmd": "echo hi"}]},                       # turn 0: one shell call
       {"text": "All done."}                                  # turn 1: final message
     ],
     "overflow": {"text": "Done again."},  # past the last turn (default: a short text)
     "turn_index": "history"               # how a request's turn is found, see below
    },
    {"name": "sub", "match": "SUBAGENT-TASK", "turns": [...]}  # a sub-agent: chosen when its
  ],                                        # first prompt message contains "match"
  "guardian": {"outcome": "allow", "risk_level": "low",      # reply to the automatic approval
               "user_authorization": "high",                  # reviewer ("guardian") request;
               "rationale": "MOCK-GUARDIAN allow"},           # merged over these defaults
  "compact_text": "MOCK-COMPACTION-SUMMARY",                  # reply to a compaction request
  "side_text": "OK"                                           # reply to a request with no tools
}

A turn:
  "text":   assistant message text (emitted before any calls)
  "calls":  list of function calls, emitted in one response (parallel calls):
              {"cmd": "echo hi", ...}      shell call: exec_command with arguments
                                           {"cmd": ..., plus every other key given here, e.g.
                                            "sandbox_permissions": "require_escalated",
                                            "justification": "need to write", "workdir": ...}
              {"name": "spawn_agent", "namespace": "multi_agent_v1",
               "arguments": {...}}         any other function call (arguments: dict or string)
            a call may carry "call_id"; default call_<seq>_<i> (seq = the request's log seq);
            "@@AGENT_ID@@" anywhere in a turn is replaced by the agent_id of the newest
            spawn_agent result in the request (for wait_agent / send_input / close_agent)
  "items":  raw Responses output items appended as they are (escape hatch)
  "delay_s": sleep before answering;  "usage": overrides of the token usage reported
            (input_tokens, output_tokens, total_tokens ...), e.g. to trigger auto-compaction
  "http_status": answer with this HTTP status and "error_body" (JSON) instead of a stream
  "guardian": per-turn override of the guardian reply (for the reviews that follow this turn)
  "before_reply_cmd": [argv...]  run (no shell) and waited for BEFORE this turn is answered
            (stdout, stderr, rc, duration logged under the record's "before_reply"); at most
            once per (agent, turn index), so a retried request does not run it twice. It runs
            with the mock's own environment. "before_reply_timeout_s": its limit (default 30).
            (As in every e2e mock: mock_common.py, which also holds the command line and
            the log.)

Turn index: with "turn_index": "history" (default), the turn of a request is the number of
model responses already in body.input (maximal runs of assistant message / function_call /
reasoning items), so retries are idempotent and a Stop-hook continuation just advances to
the next turn.  With "sequential", each request routed to the agent advances a server-side
counter (use it when compaction rewrites the history).

Request kinds (reply.kind in the log):
  guardian  client_metadata["x-openai-subagent"] == "guardian" (or that header, or subagent_kind
            in x-codex-turn-metadata): the automatic approval reviewer, which asks for a
            json_schema {outcome: allow|deny, risk_level: low|medium|high|critical,
            user_authorization: unknown|low|medium|high, rationale}; answered with the guardian
            JSON as the assistant message text
  compact   the compaction prompt ("CONTEXT CHECKPOINT COMPACTION") is in the last user message,
            or request_kind in client_metadata["x-codex-turn-metadata"] names compaction:
            answered with compact_text
  agent     scripted turn of the matched agent
  side      no tools offered: answered with side_text
"""

import json
import time
import uuid

import mock_common as mc
from mock_common import STATE

DEFAULT_SCRIPT = {"agents": [{"name": "main", "turns": [{"text": "Hello from the mock."}]}]}
GUARDIAN_DEFAULT = {"outcome": "allow", "risk_level": "low", "user_authorization": "high",
                    "rationale": "MOCK-GUARDIAN reviewed the action"}
MODEL_ITEM_TYPES = ("function_call", "custom_tool_call", "local_shell_call", "reasoning",
                    "web_search_call", "tool_search_call")


def item_text(item):
    c = item.get("content")
    if isinstance(c, str):
        return c
    out = []
    for part in c or []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            out.append(part["text"])
    return "".join(out)


def is_model_item(item):
    t = item.get("type")
    if t == "message":
        return item.get("role") == "assistant"
    return t in MODEL_ITEM_TYPES


def count_model_responses(items):
    return mc.count_runs(items, is_model_item)


WRAPPER_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md",
                    "<permissions instructions>", "<skills_instructions>", "<INSTRUCTIONS>")


def first_prompt(items):
    """Text of the first user message that is not a Codex-generated wrapper."""
    for it in items:
        if it.get("type") == "message" and it.get("role") == "user":
            t = item_text(it)
            if not t.lstrip().startswith(WRAPPER_PREFIXES):
                return t
    return ""


def last_user_text(items):
    for it in reversed(items):
        if it.get("type") == "message" and it.get("role") == "user":
            return item_text(it)
    return ""


def classify(body, headers):
    """Return (kind, agent_or_None)."""
    meta = body.get("client_metadata") or {}
    try:
        turn_meta = json.loads(meta.get("x-codex-turn-metadata")
                               or headers.get("x-codex-turn-metadata") or "{}")
    except ValueError:
        turn_meta = {}
    sub = (meta.get("x-openai-subagent") or headers.get("x-openai-subagent")
           or turn_meta.get("subagent_kind") or "")
    if sub == "guardian":
        return "guardian", None
    items = [i for i in (body.get("input") or []) if isinstance(i, dict)]
    if ("compact" in str(turn_meta.get("request_kind", "")) or sub == "compact"
            or "CONTEXT CHECKPOINT COMPACTION" in last_user_text(items)):
        return "compact", None
    agents = STATE.script.get("agents") or []
    prompt = first_prompt(items)
    for a in agents:
        m = a.get("match")
        if m and m in prompt:
            return "agent", a
    if not body.get("tools"):
        return "side", None
    for a in agents:
        if not a.get("match"):
            return "agent", a
    return "side", None


def turn_index(agent, body):
    if agent.get("turn_index") == "sequential":
        with STATE.lock:
            n = STATE.counters.get(agent.get("name"), 0)
            STATE.counters[agent.get("name")] = n + 1
        return n
    return count_model_responses([i for i in (body.get("input") or []) if isinstance(i, dict)])


def pick_turn(agent, idx):
    return mc.pick(agent.get("turns"), idx, agent.get("overflow"),
                   {"text": "Mock: nothing more scripted (turn %d)." % idx})


def last_agent_id(body):
    """agent_id from the newest function_call_output that carries one (spawn_agent's result)."""
    for it in reversed([i for i in (body.get("input") or []) if isinstance(i, dict)]):
        if it.get("type") == "function_call_output":
            out = it.get("output")
            try:
                d = json.loads(out) if isinstance(out, str) else out
            except ValueError:
                continue
            if isinstance(d, dict) and d.get("agent_id"):
                return d["agent_id"]
    return ""


def fill(obj, subs):
    if isinstance(obj, str):
        for k, v in subs.items():
            obj = obj.replace(k, v)
        return obj
    if isinstance(obj, dict):
        return {k: fill(v, subs) for k, v in obj.items()}
    if isinstance(obj, list):
        return [fill(v, subs) for v in obj]
    return obj


def build_output(turn, seq, body=None):
    """Responses output items for a scripted turn."""
    if body is not None and "@@AGENT_ID@@" in json.dumps(turn):
        turn = fill(turn, {"@@AGENT_ID@@": last_agent_id(body)})
    out = []
    if turn.get("text") is not None:
        out.append({"type": "message", "role": "assistant", "id": "msg_mock_%d" % seq,
                    "status": "completed",
                    "content": [{"type": "output_text", "text": turn["text"], "annotations": []}]})
    for i, c in enumerate(turn.get("calls") or []):
        c = dict(c)
        call_id = c.pop("call_id", "call_%d_%d" % (seq, i))
        if "cmd" in c:
            name = c.pop("name", "exec_command")
            args = c
            extra = {}
            for k in ("namespace",):
                if k in args:
                    extra[k] = args.pop(k)
        else:
            name = c.pop("name")
            args = c.pop("arguments", {})
            extra = c
        item = {"type": "function_call", "id": "fc_mock_%d_%d" % (seq, i), "status": "completed",
                "call_id": call_id, "name": name,
                "arguments": args if isinstance(args, str) else json.dumps(args)}
        item.update(extra)
        out.append(item)
    out.extend(turn.get("items") or [])
    return out


def usage_for(body, override):
    n = max(1, len(json.dumps(body.get("input", []))) // 4)
    u = {"input_tokens": n, "input_tokens_details": {"cached_tokens": 0},
         "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0}}
    for k, v in (override or {}).items():
        u[k] = v
    if "total_tokens" not in (override or {}):
        u["total_tokens"] = u["input_tokens"] + u["output_tokens"]
    return u


def text_turn(text):
    return {"text": text}


class Handler(mc.Handler):
    server_version = "mock-openai/1.0"

    def do_GET(self):
        rec = self.record(b"")
        if self.url_path().endswith("/models"):
            self.answer(rec, "models", {"object": "list", "models": [], "data": [
                {"id": "mock-model", "object": "model", "created": 0, "owned_by": "mock"}]})
        else:
            self.answer_other(rec)

    def do_POST(self):
        try:
            raw = self.read_body()
        except Exception as e:  # noqa: BLE001
            rec = self.record(b"")
            rec["route"] = "bad_body"
            rec["error"] = str(e)
            STATE.log(rec)
            self.send_json(400, {"error": {"message": str(e)}})
            return
        rec = self.record(raw)
        body = self.body_of(rec)
        if not self.url_path().endswith("/responses"):
            self.answer_other(rec)
            return
        rec["route"] = "responses"
        kind, agent = classify(body, rec["headers"])
        seq = rec["seq"]
        if kind == "guardian":
            g = dict(GUARDIAN_DEFAULT)
            g.update(STATE.script.get("guardian") or {})
            g.update(STATE.extra.get("guardian") or {})
            turn = text_turn(json.dumps(g))
            rec["reply"] = {"kind": "guardian", "guardian": g}
        elif kind == "compact":
            turn = text_turn(STATE.script.get("compact_text", "MOCK-COMPACTION-SUMMARY of the session so far."))
            rec["reply"] = {"kind": "compact"}
        elif kind == "side":
            turn = text_turn(STATE.script.get("side_text", "OK"))
            rec["reply"] = {"kind": "side"}
        else:
            idx = turn_index(agent, body)
            turn, overflow = pick_turn(agent, idx)
            rec["reply"] = {"kind": "agent", "agent": agent.get("name"), "turn": idx,
                            "overflow": overflow}
            if turn.get("guardian") is not None:
                with STATE.lock:
                    STATE.extra["guardian"] = turn["guardian"]
            if not overflow:
                br = STATE.before_reply((agent.get("name"), idx), turn)
                if br:
                    rec["before_reply"] = br
        if turn.get("http_status"):
            rec["reply"]["http_status"] = turn["http_status"]
            STATE.log(rec)
            self.send_json(int(turn["http_status"]), turn.get("error_body") or {
                "error": {"message": "mock error", "type": "invalid_request_error"}})
            return
        output = build_output(turn, seq, body)
        rec["reply"]["output"] = output
        STATE.log(rec)
        delay = float(turn.get("delay_s", 0) or 0)
        if delay:
            time.sleep(delay)
        resp_id = "resp_mock_%d_%s" % (seq, uuid.uuid4().hex[:8])
        u = usage_for(body, turn.get("usage"))
        if body.get("stream", True):
            self.send_responses_sse(resp_id, body.get("model", "mock-model"), output, u)
        else:
            self.send_json(200, {"id": resp_id, "object": "response", "status": "completed",
                                 "model": body.get("model", "mock-model"), "output": output,
                                 "usage": u})

    def send_responses_sse(self, resp_id, model, output, u):
        chunks = []
        n = [0]

        def add(data):
            data["sequence_number"] = n[0]
            n[0] += 1
            chunks.append("event: %s\ndata: %s\n\n" % (data["type"], json.dumps(data)))

        base = {"id": resp_id, "object": "response", "created_at": int(time.time()),
                "model": model, "output": []}
        add({"type": "response.created", "response": dict(base, status="in_progress")})
        add({"type": "response.in_progress", "response": dict(base, status="in_progress")})
        for i, item in enumerate(output):
            if item.get("type") == "message":
                start = dict(item, content=[], status="in_progress")
                add({"type": "response.output_item.added", "output_index": i, "item": start})
                for j, part in enumerate(item.get("content") or []):
                    txt = part.get("text", "")
                    add({"type": "response.content_part.added", "item_id": item.get("id"),
                         "output_index": i, "content_index": j,
                         "part": {"type": "output_text", "text": "", "annotations": []}})
                    for k in range(0, len(txt), 400):
                        add({"type": "response.output_text.delta", "item_id": item.get("id"),
                             "output_index": i, "content_index": j, "delta": txt[k:k + 400]})
                    add({"type": "response.output_text.done", "item_id": item.get("id"),
                         "output_index": i, "content_index": j, "text": txt})
                    add({"type": "response.content_part.done", "item_id": item.get("id"),
                         "output_index": i, "content_index": j, "part": part})
            elif item.get("type") == "function_call":
                add({"type": "response.output_item.added", "output_index": i,
                     "item": dict(item, arguments="", status="in_progress")})
                add({"type": "response.function_call_arguments.delta", "item_id": item.get("id"),
                     "output_index": i, "delta": item.get("arguments", "")})
                add({"type": "response.function_call_arguments.done", "item_id": item.get("id"),
                     "output_index": i, "arguments": item.get("arguments", "")})
            else:
                add({"type": "response.output_item.added", "output_index": i, "item": item})
            add({"type": "response.output_item.done", "output_index": i, "item": item})
        add({"type": "response.completed",
             "response": dict(base, status="completed", output=output, usage=u)})
        mc.Handler.send_sse(self, chunks)



if __name__ == "__main__":
    mc.main("mock_openai", Handler, __doc__, DEFAULT_SCRIPT)
