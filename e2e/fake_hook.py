#!/usr/bin/env python3
"""A stand-in hook for the kit's self-test (test_kit_plumbing.py): proves the mock,
the settings file and the marker search in both wire shapes without the project's
binaries.

  fake_hook.py EVENT [--stop-mode context|block]

Reads the hook JSON on stdin, appends it to $FAKE_HOOK_LOG (JSONL) if set, and prints
additionalContext "FAKE-MARKER-<EVENT> session=<session_id>" for SessionStart,
UserPromptSubmit and PreToolUse. For Stop, only while stop_hook_active is false: the
same marker as Stop additionalContext (default) or as decision:block reason.
SessionEnd prints nothing.
"""
import json
import os
import sys


def main():
    event = sys.argv[1]
    mode = "context"
    if "--stop-mode" in sys.argv:
        mode = sys.argv[sys.argv.index("--stop-mode") + 1]
    raw = sys.stdin.read()
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError:
        data = {"unparsed": raw}
    log = os.environ.get("FAKE_HOOK_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"event": event, "stdin": data}) + "\n")
    marker = "FAKE-MARKER-%s session=%s" % (event, data.get("session_id"))
    if event in ("SessionStart", "UserPromptSubmit", "PreToolUse"):
        print(json.dumps({"hookSpecificOutput": {"hookEventName": event,
                                                 "additionalContext": marker}}))
    elif event == "Stop" and not data.get("stop_hook_active"):
        if mode == "block":
            print(json.dumps({"decision": "block", "reason": marker}))
        else:
            print(json.dumps({"hookSpecificOutput": {"hookEventName": "Stop",
                                                     "additionalContext": marker}}))


if __name__ == "__main__":
    main()
