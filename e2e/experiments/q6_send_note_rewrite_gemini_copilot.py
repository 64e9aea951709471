#!/usr/bin/env python3
"""M6: can a tool hook rewrite an MCP tool's input on Gemini CLI 0.61.0 / Copilot CLI 1.0.102
without granting anything? (issue 33; docs/event-matrix.md "send_note caller session")

The model calls Preloop's `send_note` (served by e2e/mcp_recorder.py as MCP server
"preloop", which records the arguments it receives) with a forged
`preloop_caller_session_id`. A probe hook (this file, run as `hook`) saves its stdin and
answers per OUTPUT, under each permission MODE:

  OUTPUT  none     no output
          upd      the rewrite alone (Gemini: hookSpecificOutput.tool_input;
                   Copilot: modifiedArgs), no decision
          allow    the rewrite + an allow (Gemini decision "allow"; Copilot
                   permissionDecision "allow")
  MODE    default  no permission flag (headless refuses what it would ask about)
          allowed  the tool is pre-allowed (Gemini --allowed-tools; Copilot --allow-tool preloop)
          yolo     everything allowed (Gemini --approval-mode yolo; Copilot --allow-all)

Per run: did the tool run, with which caller id (the MCP server's record), and the hook's
stdin (tool name as the harness spells it, mcp_context).

  python3 e2e/experiments/q6_send_note_rewrite_gemini_copilot.py gemini|copilot [OUTPUT ...] [MODE ...]
"""
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.dirname(HERE)
sys.path.insert(0, E2E)

FORGED = {"text": "hello child", "runtime_session_id": "rt-1", "preloop_caller_session_id": "FORGED"}
REWRITTEN = dict(FORGED, preloop_caller_session_id="HOOK-SET")
OUTPUTS = ["none", "upd", "allow"]
TOOL = {"gemini": "mcp_preloop_send_note", "copilot": "preloop-send_note"}


def hook():
    raw = sys.stdin.read()
    d = os.environ["PROBE_DIR"]
    os.makedirs(d, exist_ok=True)
    n = len(os.listdir(d))
    with open(os.path.join(d, "%02d.json" % n), "w") as f:
        f.write(raw)
    kind, harness = os.environ["PROBE_OUT"], os.environ["PROBE_HARNESS"]
    if kind == "none":
        return
    if harness == "gemini":
        body = {"hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": REWRITTEN}}
        if kind == "allow":
            body["decision"] = "allow"
    else:
        body = {"modifiedArgs": REWRITTEN}
        if kind == "allow":
            body["permissionDecision"] = "allow"
    print(json.dumps(body))


def run(harness, kind, mode):
    import kit
    out = "/tmp/q6/%s-%s-%s" % (harness, mode, kind)
    shutil.rmtree(out, ignore_errors=True)
    sb = kit.Sandbox("q6-%s-%s-%s" % (harness, mode, kind), "/nonexistent")
    record = os.path.join(sb.root, "mcp.jsonl")
    server = {"command": "python3", "args": [os.path.join(E2E, "mcp_recorder.py")], "env": {"MCP_RECORD": record}}
    hook_cmd = "PROBE_DIR=%s PROBE_OUT=%s PROBE_HARNESS=%s python3 %s hook" % (
        os.path.join(out, "cap"), kind, harness, os.path.abspath(__file__))
    if harness == "gemini":
        sb.start_mock({"turns": [{"calls": [{"name": TOOL["gemini"], "args": FORGED}]}, {"text": "Done."}],
                       "overflow": {"text": "Done again."}}, api="gemini")
        sb.write_gemini_settings({"BeforeTool": [{"hooks": [{"type": "command", "name": "probe",
                                                             "command": hook_cmd, "timeout": 20000}]}]},
                                 extra={"mcpServers": {"preloop": server}})
        argv = [kit.ensure_gemini(), "-p", "send the note", "-m", kit.GEMINI_MODEL, "-o", "json"]
        argv += {"default": [], "allowed": ["--allowed-tools", TOOL["gemini"]],
                 "yolo": ["--approval-mode", "yolo"]}[mode]
        r = sb._run("gemini", argv, sb.gemini_env(), 120)
    else:
        sb.start_mock({"turns": [{"calls": [{"name": TOOL["copilot"], "arguments": FORGED}]}, {"text": "Done."}],
                       "overflow": {"text": "Done again."}}, api="copilot")
        sb.write_copilot_hooks({"preToolUse": hook_cmd}, timeout_s=20)
        mcp = os.path.join(sb.root, "mcp.json")
        with open(mcp, "w") as f:
            json.dump({"mcpServers": {"preloop": dict(server, type="local", tools=["*"])}}, f)
        argv = [kit.ensure_copilot(), "-p", "send the note", "--no-auto-update", "--no-ask-user", "--no-color",
                "--log-dir", os.path.join(sb.root, "copilot-logs"), "--additional-mcp-config", "@" + mcp]
        argv += {"default": [], "allowed": ["--allow-tool", "preloop"], "yolo": ["--allow-all"]}[mode]
        r = sb._run("copilot", argv, sb.copilot_env(), 120)
    calls = [json.loads(ln) for ln in open(record)] if os.path.exists(record) else []
    caps = []
    capdir = os.path.join(out, "cap")
    for name in sorted(os.listdir(capdir)) if os.path.isdir(capdir) else []:
        try:
            caps.append(json.load(open(os.path.join(capdir, name))))
        except ValueError:
            pass
    print("== %s mode=%-8s output=%-6s rc=%s hooks=%d tool ran=%s caller ids=%s sandbox=%s" % (
        harness, mode, kind, r.rc, len(caps), bool(calls),
        [c["arguments"].get("preloop_caller_session_id") for c in calls], sb.root))
    for c in caps:
        print("   hook stdin: %s" % json.dumps({k: c.get(k) for k in (
            "hook_event_name", "tool_name", "toolName", "mcp_context", "tool_input", "toolArgs", "sessionId",
            "session_id")}))
    if not caps:
        tools = []
        for rec in r.records[:1]:
            body = rec.get("body") or {}
            tools = [t.get("function", {}).get("name") for t in body.get("tools") or []] or \
                [fd.get("name") for t in body.get("tools") or [] for fd in t.get("functionDeclarations") or []]
        print("   first request's tools: %s" % tools)
    print("   stdout: %s" % r.stdout[-600:].replace("\n", " "))
    print("   stderr: %s" % r.stderr[-600:].replace("\n", " "))


def main():
    if sys.argv[1:2] == ["hook"]:
        return hook()
    harness = sys.argv[1]
    args = sys.argv[2:]
    kinds = [a for a in args if a in OUTPUTS] or OUTPUTS
    modes = [a for a in args if a in ("default", "allowed", "yolo")] or ["default", "allowed", "yolo"]
    for mode in modes:
        for kind in kinds:
            run(harness, kind, mode)


if __name__ == "__main__":
    main()
