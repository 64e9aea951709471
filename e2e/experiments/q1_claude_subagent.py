#!/usr/bin/env python3
"""M1: Claude Code 2.1.328 sub-agents: where does a hook's additionalContext land?

Main agent: Agent tool (sub-agent), then Bash `echo main-after`, then a final text.
Sub-agent (its requests are recognised by SUBTASK-Q1 in messages[0]): Bash `echo sub`,
then a final text that does NOT repeat any marker.
Every hook event answers additionalContext "MARK-<Event>-<main|sub>-<n>" (Stop and
SubagentStop only while stop_hook_active is false). Prints, per hook call, the ids it
carried, and per marker the requests (agent main/sub) that hold it.

  python3 e2e/experiments/q1_claude_subagent.py [OUTDIR] [--model MODEL] [--bg false|true|omit]

--bg sets the Agent tool's run_in_background input (default false; "omit" leaves it out,
which Claude Code 2.1.328 in -p runs as a background agent).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xrun  # noqa: E402

EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
          "SubagentStart", "SubagentStop", "SessionEnd"]
SCRIPT = {"agents": [
    {"name": "main", "turns": [
        {"content": [{"type": "text", "text": "Delegating."},
                     {"type": "tool_use", "name": "Agent", "input": {
                         "description": "sub task", "subagent_type": "general-purpose",
                         "prompt": "SUBTASK-Q1: run echo sub and report"}}]},
        {"content": [{"type": "tool_use", "name": "Bash",
                      "input": {"command": "echo main-after", "description": "main echo"}}]},
        {"content": [{"type": "text", "text": "Main done."}]}],
     "overflow": {"content": [{"type": "text", "text": "Main done again."}]}},
    {"name": "sub", "match": "SUBTASK-Q1", "turns": [
        {"content": [{"type": "text", "text": "Sub running."},
                     {"type": "tool_use", "name": "Bash",
                      "input": {"command": "echo sub", "description": "sub echo"}}]},
        {"content": [{"type": "text", "text": "Sub finished: the output was sub."}]}],
     "overflow": {"content": [{"type": "text", "text": "Sub finished again."}]}}],
    "side_text": "OK"}
RULES = xrun.stop_rules("ctx")


def main():
    args = sys.argv[1:]
    model = xrun.pop_option(args, "--model")
    bg = xrun.pop_option(args, "--bg") or "false"
    if bg != "omit":
        SCRIPT["agents"][0]["turns"][0]["content"][1]["input"]["run_in_background"] = bg == "true"
    out = args[0] if args else "/tmp/r1/q1-%s-bg-%s" % (model or "default", bg)
    r = xrun.claude_run(out, SCRIPT, RULES, EVENTS, prompt="Delegate the echo to a sub-agent.",
                        model=model)
    print("rc=%s duration=%ss requests=%d hook calls=%d  (%s)" % (
        r["rc"], r["duration"], len(r["requests"]), len(r["captures"]), out))
    print("\nrequests:")
    for n, q in enumerate(r["requests"]):
        rep = q.get("reply") or {}
        print("  #%d agent=%s turn=%s x-claude-code-session-id=%s" % (
            n, rep.get("agent"), rep.get("turn"), q["headers"].get("x-claude-code-session-id")))
    print("\nhook calls (who = sub when stdin has agent_id):")
    xrun.print_hook_calls(r["captures"], extra=("agent_type", "transcript_path"))
    print("\nmarkers -> (request #, agent, location):")
    for c in r["captures"]:
        m = c.get("text")
        if not m:
            continue
        hits = xrun.where(r["requests"], m)
        agents = sorted({h[1] for h in hits})
        print("  %-32s agents=%s first=%s" % (m, agents, hits[:1]))
        for h in hits[:1]:
            blk = xrun.block_with(r["requests"][h[0]:h[0] + 1], m)
            k = blk.find(m)
            print("      ...%r" % blk[max(0, k - 90):k + len(m) + 10])
    print("\nmain agent requests: tool_result of the Agent tool:")
    for n, q in enumerate(r["requests"]):
        if (q.get("reply") or {}).get("agent") != "main":
            continue
        for loc, txt in xrun.claude_texts(q["body"]):
            if "tool_result" in loc and ("Sub finished" in txt or "agent" in txt.lower()):
                print("  #%d %s %r" % (n, loc, txt[:300]))
                break
    print("\nresult:", r["stdout"][:300])


if __name__ == "__main__":
    main()
