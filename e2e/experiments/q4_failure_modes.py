#!/usr/bin/env python3
"""M4: is a hook's JSON applied when the hook exits non-zero or is killed by its timeout?

Per mode, one run of each harness where SessionStart, UserPromptSubmit, PreToolUse and the
first Stop answer with a marker (additionalContext; Codex Stop: decision block + reason),
and the hook then:
  exit1        prints the JSON, exits 1
  exit3        prints the JSON, exits 3
  late         prints + flushes the JSON, then sleeps 4 s past its 2 s "timeout" (killed)
  slow         sleeps 4 s first (killed before printing anything)
  deny-exit1   PreToolUse prints permissionDecision "deny" and exits 1
  deny-late    PreToolUse prints "deny", flushes, then is killed by the timeout
The tool is Bash/shell `touch ran.txt; echo TOOL-RAN`: "tool ran" = proj/ran.txt exists.

  python3 e2e/experiments/q4_failure_modes.py [claude|codex] [MODE ...]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xrun  # noqa: E402

MODES = ["exit1", "exit3", "late", "slow", "deny-exit1", "deny-late"]
EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "Stop"]
CMD = "touch ran.txt; echo TOOL-RAN"
C_SCRIPT = {"agents": [{"name": "main", "turns": [
    {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": CMD, "description": "t"}}]},
    {"content": [{"type": "text", "text": "Done."}]}],
    "overflow": {"content": [{"type": "text", "text": "Done again."}]}}]}
X_SCRIPT = {"agents": [{"name": "main", "turns": [{"calls": [{"cmd": CMD}]}, {"text": "Done."}],
                        "overflow": {"text": "Done again."}}]}


def rules_for(mode, harness):
    rules = [{"event": "Stop", "match": {"stop_hook_active": True}, "out": "none"}]
    for ev in EVENTS:
        out = "block" if (harness == "codex" and ev == "Stop") else "ctx"
        r = {"event": ev, "out": out, "text": "M4-%s-{event}" % mode, "stderr": "M4-STDERR-{event}\n"}
        if ev == "PreToolUse" and mode.startswith("deny"):
            r["out"] = "deny"
        if mode in ("exit1", "deny-exit1"):
            r["exit"] = 1
        elif mode == "exit3":
            r["exit"] = 3
        elif mode in ("late", "deny-late"):
            r["sleep_after"] = 4
        elif mode == "slow":
            r["sleep_before"] = 4
        rules.append(r)
    return rules


def main():
    args = sys.argv[1:]
    harnesses = [a for a in args if a in ("claude", "codex")] or ["claude", "codex"]
    modes = [a for a in args if a in MODES] or MODES
    for h in harnesses:
        for mode in modes:
            out = "/tmp/r1/q4-%s-%s" % (h, mode)
            if h == "claude":
                r = xrun.claude_run(out, C_SCRIPT, rules_for(mode, h), EVENTS, prompt="go",
                                    hook_timeout=2)
                texts = xrun.claude_texts
            else:
                r = xrun.codex_run(out, X_SCRIPT, rules_for(mode, h), EVENTS, prompt="go",
                                   hook_timeout=2)
                texts = xrun.codex_texts
            ran = os.path.exists(os.path.join(out, "proj", "ran.txt"))
            print("== %s %s: rc=%s %.1fs requests=%d tool ran: %s" % (
                h, mode, r["rc"], r["duration"], len(r["requests"]), ran))
            for ev in EVENTS:
                m = "M4-%s-%s" % (mode, ev)
                hits = xrun.where(r["requests"], m, texts)
                cap = [c for c in r["captures"] if c["event"] == ev]
                dur = ["%.1f" % ((c.get("t_end") or 0) - c["t_start"]) if c.get("t_end") else "killed"
                       for c in cap]
                print("   %-17s marker reached the model: %-5s (hook runs: %s)" % (
                    ev, bool(hits), ", ".join(dur)))
            # what the model got back for the tool call
            for q in r["requests"][1:2]:
                for loc, t in texts(q["body"]):
                    if ("tool_result" in loc or "function_call_output" in loc) and "touch" not in t:
                        print("   request #1 %s: %r" % (loc, t[:160]))
            err = [ln for ln in r["stderr"].splitlines()
                   if "hook" in ln.lower() or "M4-" in ln]
            print("   harness stderr hook lines: %s" % err[:12])


if __name__ == "__main__":
    main()
