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
            (Added for the preloop-hooks e2e suite, as in mock_anthropic.py.)

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

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"seq": 0, "counters": {}, "guardian": None, "ran_before_reply": set()}
ARGS = None
SCRIPT = {"agents": [{"name": "main", "turns": [{"text": "Hello from the mock."}]}]}
GUARDIAN_DEFAULT = {"outcome": "allow", "risk_level": "low", "user_authorization": "high",
                    "rationale": "MOCK-GUARDIAN reviewed the action"}
MODEL_ITEM_TYPES = ("function_call", "custom_tool_call", "local_shell_call", "reasoning",
                    "web_search_call", "tool_search_call")


def next_seq():
    with LOCK:
        STATE["seq"] += 1
        return STATE["seq"]


def log_record(rec):
    line = json.dumps(rec, ensure_ascii=False)
    with LOCK:
        with open(ARGS.log, "a") as f:
            f.write(line + "\n")


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
    n, prev = 0, False
    for it in items:
        cur = isinstance(it, dict) and is_model_item(it)
        if cur and not prev:
            n += 1
        prev = cur
    return n


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
    agents = SCRIPT.get("agents") or []
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
        with LOCK:
            n = STATE["counters"].get(agent.get("name"), 0)
            STATE["counters"][agent.get("name")] = n + 1
        return n
    return count_model_responses([i for i in (body.get("input") or []) if isinstance(i, dict)])


def pick_turn(agent, idx):
    turns = agent.get("turns") or []
    if idx < len(turns):
        return turns[idx], False
    ov = agent.get("overflow") or {"text": "Mock: nothing more scripted (turn %d)." % idx}
    return ov, True


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


def run_before_reply(argv, timeout):
    t0 = time.time()
    res = {"argv": argv, "started": t0}
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
        res.update(rc=p.returncode, stdout=p.stdout, stderr=p.stderr)
    except subprocess.TimeoutExpired as e:
        res.update(rc=None, error="timeout after %ss" % timeout,
                   stdout=e.stdout.decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or ""),
                   stderr=e.stderr.decode("utf-8", "replace") if isinstance(e.stderr, bytes) else (e.stderr or ""))
    except OSError as e:
        res.update(rc=None, error="%s: %s" % (type(e).__name__, e), stdout="", stderr="")
    res["duration_s"] = round(time.time() - t0, 3)
    return res


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


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mock-openai/1.0"

    def log_message(self, fmt, *a):  # quiet
        if ARGS.verbose:
            sys.stderr.write("mock: " + fmt % a + "\n")

    # ---- helpers -------------------------------------------------------
    def read_body(self):
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            data = b""
            while True:
                line = self.rfile.readline().strip()
                size = int(line.split(b";")[0], 16)
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
            import zlib
            data = zlib.decompress(data, 16 + zlib.MAX_WBITS if enc == "gzip" else zlib.MAX_WBITS)
        elif enc == "zstd":
            raise ValueError("zstd request bodies are not supported by this mock")
        return data

    def send_json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", "req_mock_%s" % uuid.uuid4().hex[:16])
        self.end_headers()
        self.wfile.write(data)

    def base_record(self, raw):
        rec = {"seq": next_seq(), "ts": time.time(), "method": self.command,
               "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
        for k in ("authorization",):
            if k in rec["headers"]:
                rec["headers"][k] = rec["headers"][k][:12] + "..."
        if raw:
            try:
                rec["body"] = json.loads(raw)
            except Exception:
                rec["body_raw"] = raw.decode("utf-8", "replace")
        return rec

    # ---- verbs ---------------------------------------------------------
    def do_GET(self):
        rec = self.base_record(b"")
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/models"):
            rec["route"] = "models"
            log_record(rec)
            self.send_json(200, {"object": "list", "data": [
                {"id": "mock-model", "object": "model", "created": 0, "owned_by": "mock"}],
                "models": []})
            return
        rec["route"] = "other"
        log_record(rec)
        self.send_json(200, {})

    def do_POST(self):
        try:
            raw = self.read_body()
        except Exception as e:  # noqa: BLE001
            rec = self.base_record(b"")
            rec["route"] = "bad_body"
            rec["error"] = str(e)
            log_record(rec)
            self.send_json(400, {"error": {"message": str(e)}})
            return
        rec = self.base_record(raw)
        path = self.path.split("?")[0].rstrip("/")
        body = rec.get("body") if isinstance(rec.get("body"), dict) else {}
        if not path.endswith("/responses"):
            rec["route"] = "other"
            log_record(rec)
            self.send_json(200, {})
            return
        rec["route"] = "responses"
        kind, agent = classify(body, rec["headers"])
        seq = rec["seq"]
        if kind == "guardian":
            g = dict(GUARDIAN_DEFAULT)
            g.update(SCRIPT.get("guardian") or {})
            g.update(STATE.get("guardian") or {})
            turn = text_turn(json.dumps(g))
            rec["reply"] = {"kind": "guardian", "guardian": g}
        elif kind == "compact":
            turn = text_turn(SCRIPT.get("compact_text", "MOCK-COMPACTION-SUMMARY of the session so far."))
            rec["reply"] = {"kind": "compact"}
        elif kind == "side":
            turn = text_turn(SCRIPT.get("side_text", "OK"))
            rec["reply"] = {"kind": "side"}
        else:
            idx = turn_index(agent, body)
            turn, overflow = pick_turn(agent, idx)
            rec["reply"] = {"kind": "agent", "agent": agent.get("name"), "turn": idx,
                            "overflow": overflow}
            if turn.get("guardian") is not None:
                with LOCK:
                    STATE["guardian"] = turn["guardian"]
            if turn.get("before_reply_cmd") and not overflow:
                key = (agent.get("name"), idx)
                with LOCK:
                    first = key not in STATE["ran_before_reply"]
                    STATE["ran_before_reply"].add(key)
                if first:
                    rec["before_reply"] = run_before_reply(
                        turn["before_reply_cmd"], float(turn.get("before_reply_timeout_s", 30)))
                else:
                    rec["before_reply"] = {"skipped": "already ran for this turn"}
        if turn.get("http_status"):
            rec["reply"]["http_status"] = turn["http_status"]
            log_record(rec)
            self.send_json(int(turn["http_status"]), turn.get("error_body") or {
                "error": {"message": "mock error", "type": "invalid_request_error"}})
            return
        output = build_output(turn, seq, body)
        rec["reply"]["output"] = output
        log_record(rec)
        delay = float(turn.get("delay_s", 0) or 0)
        if delay:
            time.sleep(delay)
        resp_id = "resp_mock_%d_%s" % (seq, uuid.uuid4().hex[:8])
        u = usage_for(body, turn.get("usage"))
        if body.get("stream", True):
            self.send_sse(resp_id, body.get("model", "mock-model"), output, u)
        else:
            self.send_json(200, {"id": resp_id, "object": "response", "status": "completed",
                                 "model": body.get("model", "mock-model"), "output": output,
                                 "usage": u})

    def send_sse(self, resp_id, model, output, u):
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
        data = "".join(chunks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", "req_mock_%s" % uuid.uuid4().hex[:16])
        self.end_headers()
        self.wfile.write(data)


def main():
    global ARGS, SCRIPT
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    p.add_argument("--port-file", help="write the bound port here once listening")
    p.add_argument("--script", help="scripted conversation JSON")
    p.add_argument("--log", required=True, help="JSONL request log (appended)")
    p.add_argument("--verbose", action="store_true")
    ARGS = p.parse_args()
    if ARGS.script:
        with open(ARGS.script) as f:
            SCRIPT = json.load(f)
    if os.path.exists(ARGS.log):  # continue numbering when a log is reused (REUSE=1 runs)
        with open(ARGS.log) as f:
            STATE["seq"] = sum(1 for line in f if line.strip())
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    if ARGS.port_file:
        tmp = ARGS.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, ARGS.port_file)
    sys.stderr.write("mock_openai listening on 127.0.0.1:%d\n" % port)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
