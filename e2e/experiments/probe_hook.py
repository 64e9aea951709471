#!/usr/bin/env python3
"""Capture-and-answer hook for Claude Code / Codex measurements (stdlib only).

Saves every invocation to $PROBE_DIR/<seq>-<Event>.json (stdin, times, the rule used) and
answers per the first matching rule of the JSON list in $PROBE_RULES:
  {"event": "PreToolUse" | "*",
   "who": "main" | "sub",                 # sub = stdin carries agent_id
   "match": {"stop_hook_active": false},  # equality on top-level stdin fields
   "nth": [1],                            # per-event invocation counter (1-based)
   "out": "ctx" | "block" | "deny" | "raw" | "none",
        # ctx  {"hookSpecificOutput": {"hookEventName": <event>, "additionalContext": TEXT}}
        # block {"decision": "block", "reason": TEXT}
        # deny {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
        #       "permissionDecisionReason": TEXT}}
        # raw  "raw" printed verbatim (a dict is JSON-encoded)
   "text": "MARK-{event}-{who}-{n}",      # {event} {who} {n} {tool} {agent} substituted
   "size": {"n": 15000, "unit": "chars", "alpha": "ascii", "frame": 0},
        # TEXT = xfill.make_text(text, n, unit, alpha), preceded by `frame` ASCII chars if set
   "stderr": "...", "exit": 0, "sleep_before": 0, "sleep_after": 0}   # sleep_after: print,
                                                                        # flush, then sleep
"""
import fcntl
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xfill  # noqa: E402

T0 = time.time()
DIR = os.environ.get("PROBE_DIR") or "/tmp/probe-captures"


def counter(name):
    os.makedirs(DIR, exist_ok=True)
    with open(os.path.join(DIR, ".n-" + name), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = int(f.read().strip() or 0) + 1
        f.seek(0)
        f.truncate()
        f.write(str(n))
        return n


def main():
    raw = sys.stdin.read()
    try:
        data = json.loads(raw)
    except ValueError:
        data = {}
    ev = data.get("hook_event_name", "Unknown")
    who = "sub" if data.get("agent_id") else "main"
    seq, n = counter("all"), counter(ev)
    rule = None
    rules = json.load(open(os.environ["PROBE_RULES"])) if os.environ.get("PROBE_RULES") else []
    for r in rules:
        if r.get("event") not in ("*", ev) or (r.get("who") and r["who"] != who):
            continue
        if r.get("nth") and n not in r["nth"]:
            continue
        if any(data.get(k) != v for k, v in (r.get("match") or {}).items()):
            continue
        rule = r
        break
    rec = {"seq": seq, "event": ev, "n": n, "who": who, "stdin": data, "t_start": T0,
           "pid": os.getpid(), "rule": rule}
    path = os.path.join(DIR, "%04d-%s.json" % (seq, ev))

    def save():
        with open(path + ".tmp", "w") as f:
            json.dump(rec, f, ensure_ascii=False)
        os.replace(path + ".tmp", path)
    save()
    code = 0
    if rule:
        sub = {"event": ev, "who": who, "n": n, "tool": data.get("tool_name", ""),
               "agent": data.get("agent_id", "")}
        text = rule.get("text", "MARK-{event}-{who}-{n}").format(**sub)
        if rule.get("size"):
            z = rule["size"]
            text = xfill.make_text(text, z["n"], z.get("unit", "chars"), z.get("alpha", "ascii"))
            if z.get("frame"):  # an ASCII head of this many chars in front (a note's framing)
                text = "~" * (z["frame"] - 1) + "\n" + text
        if rule.get("sleep_before"):
            time.sleep(rule["sleep_before"])
        out = rule.get("out", "ctx")
        obj = None
        if out == "ctx":
            obj = {"hookSpecificOutput": {"hookEventName": ev, "additionalContext": text}}
        elif out == "block":
            obj = {"decision": "block", "reason": text}
        elif out == "deny":
            obj = {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                          "permissionDecision": "deny",
                                          "permissionDecisionReason": text}}
        elif out == "raw":
            obj = rule.get("raw")
        if obj is not None:
            s = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
            sys.stdout.write(s)
            sys.stdout.flush()
            rec["stdout_len"] = len(s)
            rec["text"] = text
        if rule.get("stderr"):
            sys.stderr.write(rule["stderr"].format(**sub))
            sys.stderr.flush()
        code = int(rule.get("exit", 0))
        rec["t_printed"] = time.time()
        save()
        if rule.get("sleep_after"):
            time.sleep(rule["sleep_after"])
    rec["t_end"] = time.time()
    rec["exit"] = code
    save()
    sys.exit(code)


if __name__ == "__main__":
    main()
