#!/usr/bin/env python3
"""M1b: Codex 0.169.0 sub-agents (for comparison with M1): where does a hook's context land?

Main agent: spawn_agent (sub-agent task SUBTASK-Q1B), wait_agent, shell `echo main-after`,
final text. Sub-agent: shell `echo sub`, final text "SUB-DONE". Every event answers
additionalContext "MARK-<Event>-<main|sub>-<n>"; Stop and SubagentStop answer
decision:block with that marker while stop_hook_active is false.

  python3 e2e/experiments/q1b_codex_subagent.py [OUTDIR]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xrun  # noqa: E402

EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
          "SubagentStart", "SubagentStop", "SessionEnd"]
SCRIPT = {"agents": [
    {"name": "main", "turns": [
        {"calls": [{"name": "spawn_agent", "namespace": "multi_agent_v1",
                    "arguments": {"message": "SUBTASK-Q1B please echo sub"}}]},
        {"calls": [{"name": "wait_agent", "namespace": "multi_agent_v1",
                    "arguments": {"targets": ["@@AGENT_ID@@"], "timeout_ms": 30000}}]},
        {"calls": [{"cmd": "echo main-after"}]},
        {"text": "Main done."}],
     "overflow": {"text": "Main done again."}},
    {"name": "sub", "match": "SUBTASK-Q1B", "turns": [
        {"calls": [{"cmd": "echo sub"}]},
        {"text": "SUB-DONE"}],
     "overflow": {"text": "SUB-DONE again"}}]}
RULES = xrun.stop_rules("block")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/r1/q1b-codex"
    r = xrun.codex_run(out, SCRIPT, RULES, EVENTS, prompt="Delegate the echo to a sub-agent.")
    print("rc=%s duration=%ss requests=%d hook calls=%d  (%s)" % (
        r["rc"], r["duration"], len(r["requests"]), len(r["captures"]), out))
    for n, q in enumerate(r["requests"]):
        rep = q.get("reply") or {}
        print("  request #%d kind=%s agent=%s turn=%s" % (n, rep.get("kind"), rep.get("agent"),
                                                         rep.get("turn")))
    xrun.print_hook_calls(r["captures"])
    for c in r["captures"]:
        m = c.get("text")
        if m:
            hits = xrun.where(r["requests"], m, xrun.codex_texts)
            print("  %-32s agents=%s first=%s" % (m, sorted({h[1] for h in hits}), hits[:1]))
    print("  hook status lines:", [l for l in r["stderr"].splitlines() if l.startswith("hook:")])


if __name__ == "__main__":
    main()
