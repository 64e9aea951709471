#!/usr/bin/env python3
"""A stand-in hook for the kit's self-tests (test_kit_plumbing*.py): proves the mocks, the
hook config files and the marker search of every harness without the project's binaries.

  fake_hook.py EVENT [--harness claude|gemini|copilot] [--stop-mode context|block]
                     [--deny] [--extra TEXT]

Reads the hook JSON on stdin and appends {"event", "argv", "stdin", "env", "printed"} to
$FAKE_HOOK_LOG (JSONL) if set (`env`: the hook's environment, FAKE_HOOK_LOG left out).
The marker is "FAKE-MARKER-<EVENT> session=<id>", plus " agent=<agent id>" when the payload
names an agent (Copilot sub-agents) and " <TEXT>" with --extra. What it prints:

  claude   SessionStart, UserPromptSubmit, PreToolUse: hookSpecificOutput.additionalContext;
           Stop (stop_hook_active false): the marker as Stop additionalContext
           (--stop-mode context, default) or as decision:block reason (block)
  gemini   SessionStart, BeforeAgent, AfterTool: hookSpecificOutput.additionalContext;
           AfterAgent (stop_hook_active false): decision:block + reason;
           BeforeTool with --deny: decision:deny + reason "FAKE-DENY-BeforeTool session=<id>"
  copilot  (either dialect: camelCase or PascalCase event names) sessionStart/SessionStart,
           userPromptSubmitted/UserPromptSubmit, preToolUse/PreToolUse,
           postToolUse/PostToolUse: top-level additionalContext; preToolUse with --deny
           also permissionDecision:deny + permissionDecisionReason "FAKE-DENY-<EVENT> ...";
           agentStop/Stop (stop_hook_active false): decision:block + reason
Anything else prints nothing.
"""
import argparse
import json
import os
import sys

CONTEXT_EVENTS = {
    "claude": {"SessionStart", "UserPromptSubmit", "PreToolUse"},
    "gemini": {"SessionStart", "BeforeAgent", "AfterTool"},
    "copilot": {"sessionStart", "SessionStart", "userPromptSubmitted", "UserPromptSubmit",
                "preToolUse", "PreToolUse", "postToolUse", "PostToolUse"},
}
STOP_EVENTS = {"claude": {"Stop"}, "gemini": {"AfterAgent"}, "copilot": {"agentStop", "Stop"}}
DENY_EVENTS = {"claude": set(), "gemini": {"BeforeTool"}, "copilot": {"preToolUse", "PreToolUse"}}


def answer(a, data):
    """The JSON object to print for this event and payload, or None."""
    sid = data.get("session_id") or data.get("sessionId")
    agent = data.get("agentId") or data.get("agent_id")
    tail = (" agent=%s" % agent if agent else "") + (" " + a.extra if a.extra else "")
    marker = "FAKE-MARKER-%s session=%s%s" % (a.event, sid, tail)
    deny = "FAKE-DENY-%s session=%s%s" % (a.event, sid, tail)
    h, ev = a.harness, a.event
    out = None
    if ev in CONTEXT_EVENTS[h]:
        out = ({"additionalContext": marker} if h == "copilot" else
               {"hookSpecificOutput": {"hookEventName": ev, "additionalContext": marker}})
    if ev in STOP_EVENTS[h] and not data.get("stop_hook_active"):
        if h == "claude" and a.stop_mode != "block":
            out = {"hookSpecificOutput": {"hookEventName": ev, "additionalContext": marker}}
        else:
            out = {"decision": "block", "reason": marker}
    if a.deny and ev in DENY_EVENTS[h]:
        if h == "gemini":
            out = {"decision": "deny", "reason": deny}
        else:
            out = dict(out or {}, permissionDecision="deny", permissionDecisionReason=deny)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("event")
    ap.add_argument("--harness", default="claude", choices=sorted(CONTEXT_EVENTS))
    ap.add_argument("--stop-mode", default="context", choices=["context", "block"])
    ap.add_argument("--deny", action="store_true")
    ap.add_argument("--extra", default="")
    a = ap.parse_args()
    raw = sys.stdin.read()
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError:
        data = {"unparsed": raw}
    out = answer(a, data if isinstance(data, dict) else {})
    log = os.environ.get("FAKE_HOOK_LOG")
    if log:
        env = {k: v for k, v in os.environ.items() if k != "FAKE_HOOK_LOG"}
        with open(log, "a") as f:
            f.write(json.dumps({"event": a.event, "argv": sys.argv[1:], "stdin": data, "env": env,
                                "printed": out}) + "\n")
    if out is not None:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
