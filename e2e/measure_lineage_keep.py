"""How often Preloop's spawn recipe keeps lineage by process ancestry (docs/guarantees.md,
"Lineage"): a measurement, not a test (it is not a test_*.py file, so discovery skips it).

One conductor run of a real harness whose shell tool does the recipe of the Preloop
"Operator notes" page ("Steering the runs you started") N times, one shell call each:

    SID=$(cat /proc/sys/kernel/random/uuid)     # the page says uuidgen; same thing on Linux
    nohup claude -p --session-id "$SID" "Fix the flaky test in api/" >"$LOGS/worker-$SID.log" 2>&1 &
    sleep 5
    jq -r .runtime_session_id "$PRELOOP_HOME/sessions/$SID.json"

with `nohup … &` exactly as written (no `setsid`): `--variant recipe`, the default. Two
variants show what breaks it: `bare`, the spawn line alone (the command, and so the shell,
ends right after it), and `setsid-bare`, the same with `setsid nohup` (the worker then
outlives the command in Codex, which ends the command's process group). The workers are real `claude -p` runs
(Claude Code 2.1.328) against their own mock model, which answers with text at once, with
the project's hooks; the conductor is Codex 0.169.0 (`--harness codex`, the default), Gemini
CLI 0.61.0 or Copilot CLI 1.0.102, against its own mock, local inbox. The recipe is in a
script the shell tool runs (Gemini refuses `$(...)` in a command line); the script's shell is
the worker's parent, as the shell tool's own shell is when the lines are typed there.

A worker keeps its lineage when its session file names the conductor as
`parent_session_id`. Printed per spawn: whether it registered, its parent, and how long after
the spawn its first hook registered it (the session file's started_at); then the keep rate.

  PRELOOP_BIN_DIR=<release dir> python3 e2e/measure_lineage_keep.py [-n 50] [--harness codex]
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

RECIPE = r"""#!/bin/sh
# Preloop's spawn recipe ("Operator notes", "Steering the runs you started"), from a conductor's shell tool. $1: the spawn's number.
export ANTHROPIC_BASE_URL=%(url)s ANTHROPIC_API_KEY=%(key)s IS_SANDBOX=1 DISABLE_TELEMETRY=1 \
  DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 PATH=%(path)s
LOGS=%(logs)s
SID=$(cat /proc/sys/kernel/random/uuid)
echo "$1 $SID $(date +%%s.%%N)" >>"$LOGS/spawned"
%(setsid)snohup claude -p --session-id "$SID" "Fix the flaky test in api/" >"$LOGS/worker-$SID.log" 2>&1 &
%(tail)s"""
TAIL = 'sleep 5\njq -r .runtime_session_id "$PRELOOP_HOME/sessions/$SID.json"\n'
VARIANTS = {"recipe": ("", TAIL), "bare": ("", ""), "setsid-bare": ("setsid ", "")}


def parse_time(s):
    """Seconds since the epoch of an RFC 3339 UTC time (the session file's started_at)."""
    from datetime import datetime
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def turns_for(harness, n, cmd, delay_s):
    """The conductor's script: N shell calls, each answered after delay_s (the bare variants
    return at once: the pause keeps the workers from piling up on the machine)."""
    def turn(i):
        if harness == "codex":
            call = {"cmd": cmd % i, "yield_time_ms": 60000}
        elif harness == "gemini":
            call = {"name": "run_shell_command", "args": {"command": cmd % i}}
        else:
            call = {"name": "bash", "arguments": {"command": cmd % i, "description": "start a worker",
                                                  "mode": "sync", "initial_wait": 60}}
        return {"calls": [call], "delay_s": delay_s if i else 0}
    turns = [turn(i) for i in range(n)] + [{"text": "All started.", "delay_s": delay_s}]
    if harness == "codex":
        return {"agents": [{"name": "main", "turns": turns, "overflow": {"text": "Nothing more."}}]}
    return {"turns": turns, "overflow": {"text": "Nothing more."}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=50, help="spawns (default 50)")
    ap.add_argument("--harness", choices=("codex", "gemini", "copilot"), default="codex")
    ap.add_argument("--variant", choices=sorted(VARIANTS), default="recipe")
    ap.add_argument("--json", help="write the per-spawn results here")
    a = ap.parse_args()

    bin_dir = kit.build_binaries()
    claude = kit.ensure_claude()
    conductor_bin = {"codex": kit.ensure_codex, "gemini": kit.ensure_gemini, "copilot": kit.ensure_copilot}[a.harness]()
    sb = kit.Sandbox("keep-%s" % a.harness, bin_dir, claude_bin=claude)
    logs = os.path.join(sb.root, "logs")
    os.makedirs(logs)
    sb.claude_bin = claude
    sb.write_settings()   # the workers' Claude Code hooks
    wdir = os.path.join(sb.root, "worker-mock")
    os.makedirs(wdir)
    wmock = kit.Mock(wdir, {"turns": [], "overflow": kit.text_turn("Fixed.")}, sb.base_env())
    recipe = os.path.join(sb.root, "recipe.sh")
    with open(recipe, "w") as f:
        setsid, tail = VARIANTS[a.variant]
        f.write(RECIPE % {"url": wmock.url, "key": kit.MOCK_API_KEY, "logs": kit.quote_path(logs),
                          "path": kit.quote_path(os.path.dirname(claude) + ":" + kit.BASE_PATH),
                          "setsid": setsid, "tail": tail})
    cmd = "sh %s %%d" % kit.quote_path(recipe)
    sb.start_mock(turns_for(a.harness, a.n, cmd, 0 if tail else 5), {"codex": "openai"}.get(a.harness, a.harness))
    if a.harness == "codex":
        sb.write_codex_config()
    elif a.harness == "gemini":
        sb.write_gemini_settings()
    sb.install_hooks(a.harness)
    cond_sid = None if a.harness == "codex" else kit.new_session_id()
    t0 = time.time()
    timeout = 60 + 15 * a.n
    try:
        if a.harness == "codex":
            run = sb.run_codex(conductor_bin, "Start the workers.", timeout=timeout)
        elif a.harness == "gemini":
            run = sb.run_gemini(conductor_bin, "Start the workers.", session_id=cond_sid, timeout=timeout)
        else:
            run = sb.run_copilot(conductor_bin, "Start the workers.", session_id=cond_sid, timeout=timeout)
    finally:
        sb.mock.stop()
    time.sleep(3)   # the last workers' SessionEnd
    wmock.stop()
    sessions = {}
    sdir = os.path.join(sb.preloop_home, "sessions")
    for name in os.listdir(sdir):
        with open(os.path.join(sdir, name)) as f:
            s = json.load(f)
        sessions[s["external_session_id"]] = s
    kind = {"codex": "codex_cli", "gemini": "gemini_cli", "copilot": "copilot_cli"}[a.harness]
    conductors = [s for s in sessions.values() if s.get("agent_kind") == kind]
    if run.rc != 0 or run.timed_out or len(conductors) != 1:
        sys.exit("the conductor run failed (rc=%s, timed out %s, %d conductor sessions); kept in %s"
                 % (run.rc, run.timed_out, len(conductors), sb.root))
    conductor = conductors[0]["runtime_session_id"]
    spawned = []
    with open(os.path.join(logs, "spawned")) as f:
        for line in f:
            i, sid, at = line.split()
            spawned.append((int(i), sid, float(at)))
    rows = []
    for i, sid, at in spawned:
        s = sessions.get(sid)
        rows.append({"spawn": i, "session": sid, "registered": s is not None,
                     "parent": (s or {}).get("parent_session_id"),
                     "kept": bool(s) and s.get("parent_session_id") == conductor,
                     "first_hook_after_s": round(parse_time(s["started_at"]) - at, 3) if s else None})
        print("%3d %s registered=%-5s kept=%-5s first hook after %s s" % (
            i, sid, rows[-1]["registered"], rows[-1]["kept"], rows[-1]["first_hook_after_s"]))
    kept = sum(r["kept"] for r in rows)
    lags = [r["first_hook_after_s"] for r in rows if r["first_hook_after_s"] is not None]
    print("\n%s conductor, variant %s, %d spawns (%d asked), %.0f s: lineage kept by %d/%d (%.0f%%); registered %d; "
          "first hook after the spawn: median %.2f s, max %.2f s"
          % (a.harness, a.variant, len(rows), a.n, time.time() - t0, kept, len(rows), 100.0 * kept / max(len(rows), 1),
             sum(r["registered"] for r in rows),
             statistics.median(lags) if lags else float("nan"), max(lags) if lags else float("nan")))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"harness": a.harness, "variant": a.variant, "spawns": rows, "kept": kept}, f, indent=1)
    sb.close()


if __name__ == "__main__":
    main()
