#!/usr/bin/env python3
"""M5: can a PreToolUse hook rewrite an MCP tool's input on Claude Code without granting?

The model calls `mcp__preloop__send_note` (served by e2e/mcp_recorder.py, which records the
arguments it receives) with a forged `preloop_caller_session_id`. The hook (probe_hook.py)
answers per OUTPUT, under each permission MODE of `claude -p`:

  OUTPUT  none      no output
          upd       updatedInput only (no permissionDecision)
          ask       permissionDecision "ask" + updatedInput
          allow     permissionDecision "allow" + updatedInput
  MODE    default   no permission flag (the tool is not pre-allowed: headless refuses it)
          allowed   --allowedTools mcp__preloop__send_note
          bypass    --dangerously-skip-permissions
          denied    --disallowedTools mcp__preloop__send_note

Per run: did the tool run, with which arguments (the MCP server's record), what the model
was told in the tool_result.

  python3 e2e/experiments/q5_send_note_rewrite.py [OUTPUT ...] [MODE ...]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xrun  # noqa: E402
import kit  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.dirname(HERE)
TOOL = "mcp__preloop__send_note"
FORGED = {"text": "hello child", "runtime_session_id": "rt-1", "preloop_caller_session_id": "FORGED"}
REWRITTEN = dict(FORGED, preloop_caller_session_id="HOOK-SET")
SCRIPT = {"agents": [{"name": "main", "turns": [
    {"content": [{"type": "tool_use", "name": TOOL, "input": FORGED}]},
    {"content": [{"type": "text", "text": "Done."}]}],
    "overflow": {"content": [{"type": "text", "text": "Done again."}]}}]}
OUTPUTS = ["none", "upd", "ask", "allow"]
MODES = {"default": [], "allowed": ["--allowedTools", TOOL], "bypass": ["--dangerously-skip-permissions"],
         "denied": ["--dangerously-skip-permissions", "--disallowedTools", TOOL]}


def hook_output(kind):
    body = {"hookEventName": "PreToolUse", "updatedInput": REWRITTEN}
    if kind == "ask":
        body.update(permissionDecision="ask", permissionDecisionReason="caller id added")
    elif kind == "allow":
        body.update(permissionDecision="allow", permissionDecisionReason="caller id added")
    return {"hookSpecificOutput": body}


def run(out, kind, mode):
    claude = kit.ensure_claude()
    xrun._fresh(out)
    os.makedirs(os.path.join(out, "home", ".claude"))
    rules = [{"event": "PreToolUse", "out": "none" if kind == "none" else "raw", "raw": hook_output(kind)}]
    with open(os.path.join(out, "rules.json"), "w") as f:
        json.dump(rules, f)
    settings = {"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": xrun.HOOK}]}]}}
    with open(os.path.join(out, "home", ".claude", "settings.json"), "w") as f:
        json.dump(settings, f)
    record = os.path.join(out, "mcp.jsonl")
    mcp = os.path.join(out, "mcp.json")
    with open(mcp, "w") as f:
        json.dump({"mcpServers": {"preloop": {"type": "stdio", "command": "python3",
                                              "args": [os.path.join(E2E, "mcp_recorder.py")],
                                              "env": {"MCP_RECORD": record}}}}, f)
    mock, port = xrun._start_mock(out, os.path.join(HERE, "xmock_anthropic.py"), SCRIPT)
    env = {"PATH": xrun.PATH, "HOME": os.path.join(out, "home"), "TERM": "dumb", "LANG": "C.UTF-8",
           "ANTHROPIC_BASE_URL": "http://127.0.0.1:%d" % port, "ANTHROPIC_API_KEY": kit.MOCK_API_KEY,
           "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "IS_SANDBOX": "1",
           "PROBE_DIR": os.path.join(out, "cap"), "PROBE_RULES": os.path.join(out, "rules.json")}
    argv = [claude, "-p", "go", "--output-format", "json", "--mcp-config", mcp, "--strict-mcp-config",
            "--debug-file", os.path.join(out, "claude.debug.log")] + MODES[mode]
    r = xrun._run(out, argv, env, mock, 120, "messages")
    calls = [json.loads(ln) for ln in open(record)] if os.path.exists(record) else []
    return r, calls


def main():
    args = sys.argv[1:]
    kinds = [a for a in args if a in OUTPUTS] or OUTPUTS
    modes = [a for a in args if a in MODES] or list(MODES)
    for mode in modes:
        for kind in kinds:
            out = "/tmp/q5/claude-%s-%s" % (mode, kind)
            r, calls = run(out, kind, mode)
            got = [c["arguments"].get("preloop_caller_session_id") for c in calls]
            result = ""
            for q in r["requests"][1:2]:
                for loc, t in xrun.claude_texts(q["body"]):
                    if "tool_result" in loc:
                        result = t[:140]
            print("== mode=%-8s output=%-6s rc=%s hooks=%d tool ran=%s caller ids=%s result=%r" % (
                mode, kind, r["rc"], len(r["captures"]), bool(calls), got, result))


if __name__ == "__main__":
    main()
