#!/usr/bin/env python3
"""M3: where do a headless run's ids (and a hook's own output) show up?

A SessionStart hook prints `preloop runtime_session_id=RID-STDERR-MARK` on stderr and
{"hookSpecificOutput": {..., "additionalContext": "SS-CTX-MARK"}} on stdout, exit 0.
Claude Code: `claude -p` with --output-format text / json / stream-json --verbose /
stream-json --verbose --include-hook-events, and once with --session-id <uuid>.
Codex: `codex exec` plain and with --json.
For each run prints where the harness session id and the two markers occur: claude's / codex's
stdout, stderr, the --debug-file (Claude), and the stream's hook events.

  python3 e2e/experiments/q3_headless_ids.py
"""
import json
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xrun  # noqa: E402

RULES = [{"event": "SessionStart", "out": "ctx", "text": "SS-CTX-MARK",
          "stderr": "preloop runtime_session_id=RID-STDERR-MARK\n"}]
C_SCRIPT = {"agents": [{"name": "main", "turns": [{"content": [{"type": "text", "text": "Hi."}]}]}]}
X_SCRIPT = {"agents": [{"name": "main", "turns": [{"text": "Hi."}]}]}
MARKS = ["RID-STDERR-MARK", "SS-CTX-MARK"]


def places(r, sid, debug=None):
    out = {}
    srcs = {"stdout": r["stdout"], "stderr": r["stderr"]}
    if debug and os.path.exists(debug):
        srcs["debug-file"] = open(debug, errors="replace").read()
    for name, s in srcs.items():
        found = [m for m in MARKS + ([sid] if sid else []) if m in s]
        out[name] = ["session_id" if f == sid else f for f in found]
    return out


def lines_with(s, needle, n=3, width=300):
    return [ln[:width] for ln in s.splitlines() if needle in ln][:n]


def main():
    base = "/tmp/r1/q3"
    print("== Claude Code 2.1.328")
    runs = [("text", [], None), ("json", [], None), ("stream-json", [], None),
            ("stream-json", ["--include-hook-events"], None),
            ("json", [], str(uuid.uuid4()))]
    for fmt, extra, fixed in runs:
        args = list(extra) + (["--session-id", fixed] if fixed else [])
        name = "claude-%s%s%s" % (fmt, "-hookevents" if extra else "", "-sessionid" if fixed else "")
        r = xrun.claude_run(os.path.join(base, name), C_SCRIPT, RULES, ["SessionStart"],
                            prompt="hi", output_format=fmt, extra_args=args)
        sid = r["captures"][0]["stdin"]["session_id"] if r["captures"] else None
        print("-- %s %s: rc=%s hook session_id=%s%s" % (fmt, " ".join(args), r["rc"], sid,
                                                        " (= --session-id)" if fixed == sid else ""))
        for k, v in places(r, sid, os.path.join(r["out"], "claude.debug.log")).items():
            print("   %-10s holds: %s" % (k, v))
        if fmt == "stream-json":
            for ln in r["stdout"].splitlines():
                try:
                    ev = json.loads(ln)
                except ValueError:
                    continue
                if ev.get("type") == "system":
                    keep = {k: ev[k] for k in ev if k in ("type", "subtype", "session_id", "hook_name",
                                                          "hook_event", "stdout", "stderr", "output",
                                                          "exit_code", "outcome")}
                    print("   stream event: %s" % json.dumps(keep)[:400])
            print("   last line type:", json.loads(r["stdout"].splitlines()[-1]).get("type"))
        elif fmt == "json":
            j = json.loads(r["stdout"])
            print("   result keys: %s; session_id=%s" % (sorted(j), j.get("session_id")))
        else:
            print("   stdout: %r" % r["stdout"][:200])
        print("   stderr: %r" % r["stderr"][:300])
        dbg = os.path.join(r["out"], "claude.debug.log")
        if os.path.exists(dbg):
            for ln in lines_with(open(dbg, errors="replace").read(), "runtime_session_id", 2):
                print("   debug-file: %s" % ln)
    # which hook events a stream carries, and what the debug file redacts
    variants = ["preloop runtime_session_id=RIDA-1", "preloop runtime-session-id RIDB-2",
                "preloop: runtime session RIDC-3", "PRELOOP_RUNTIME_SESSION_ID=RIDD-4",
                "preloop session=RIDE-5", "preloop id=RIDF-6", "preloop token=RIDG-7"]
    rules = [{"event": "SessionStart", "out": "none", "stderr": "\n".join(variants) + "\n"},
             {"event": "*", "out": "none", "stderr": "STDERR-OF-{event}\n"}]
    script = {"agents": [{"name": "main", "turns": [
        {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "echo hi"}}]},
        {"content": [{"type": "text", "text": "Done."}]}]}]}
    evs = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"]
    for extra in ([], ["--include-hook-events"]):
        r = xrun.claude_run(os.path.join(base, "claude-events%s" % ("-hookevents" if extra else "")),
                            script, rules, evs, prompt="hi", output_format="stream-json",
                            extra_args=extra)
        seen = []
        for ln in r["stdout"].splitlines():
            ev = json.loads(ln)
            if ev.get("type") == "system" and ev.get("subtype", "").startswith("hook_"):
                seen.append("%s:%s" % (ev["subtype"], ev.get("hook_event")))
        print("-- stream-json --verbose %s: hook events in the stream: %s" % (" ".join(extra), seen))
        dbg = open(os.path.join(r["out"], "claude.debug.log"), errors="replace").read()
        k = dbg.find("preloop runtime_session_id")
        print("   debug-file SessionStart stderr: %r" % dbg[k:k + 260])
        print("   STDERR-OF-PreToolUse in debug-file: %s, in claude stderr: %s" % (
            "STDERR-OF-PreToolUse" in dbg, "STDERR-OF-PreToolUse" in r["stderr"]))

    print("\n== Codex 0.169.0")
    for js in (False, True):
        r = xrun.codex_run(os.path.join(base, "codex-%s" % ("json" if js else "plain")), X_SCRIPT,
                           RULES, ["SessionStart"], prompt="hi", json_output=js)
        sid = r["captures"][0]["stdin"]["session_id"] if r["captures"] else None
        print("-- codex exec%s: rc=%s hook session_id=%s" % (" --json" if js else "", r["rc"], sid))
        for k, v in places(r, sid).items():
            print("   %-10s holds: %s" % (k, v))
        for src in ("stdout", "stderr"):
            for ln in lines_with(r[src], sid or "@@", 3):
                print("   %s line with the id: %s" % (src, ln))
            for ln in lines_with(r[src], "RID-STDERR-MARK", 2):
                print("   %s line with the hook stderr: %s" % (src, ln))
        if js:
            print("   stdout: %s" % r["stdout"][:600].replace("\n", "\n           "))


if __name__ == "__main__":
    main()
