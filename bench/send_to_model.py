#!/usr/bin/env python3
"""Send to model, measured (issue 34 item 2): the time from `preloop-hooks notes send`
returning to the first model request that carries the note, for the real harness CLIs
against the e2e mock model servers (every request is logged with its arrival time), in
local-inbox mode and against the real Preloop 0.17.1 server (the e2e kit's up.sh).

  cadence  the mock model answers turn after turn with one shell call that takes
           --tool-s seconds (`sleep`); a note is sent at a random offset into a tool
           call, then the script waits until a model request carries it, and sends
           the next one (Claude Code, Codex, Gemini CLI, Copilot CLI)
  idle     Claude Code interactive (a pseudo-terminal) after its turn ended: the
           watcher `preloop-claude-code-watch` wakes it; a note is sent at a random
           moment of an idle stretch and the woken turn's request is timed; plus the
           requests an idle session costs the server per minute (counted in the
           server's access log: POST /api/v1/agents/notes/pending)

Usage (from the repository root; the harnesses installed, a release build):
  PRELOOP_E2E_HARNESS_DIR=/path/to/harness \\
  PRELOOP_BIN_DIR=$(scripts/build-release -p preloop-hooks --bin preloop-hooks) \\
  python3 bench/send_to_model.py [--quick] [--samples N] [--harness claude,codex,...]
                                 [--mode local,server] [--idle-samples N] [--json out.json]
Server mode also needs the e2e kit's server settings (PRELOOP_E2E_VENV,
PRELOOP_E2E_SERVER_HOME, PRELOOP_E2E_SERVER_PORT, PRELOOP_E2E_PG_PORT; e2e/README.md).

The pure helpers (percentile, summarize, first_carrier, count_pending_polls) have unit
tests: python3 -m unittest bench/test_send_to_model.py
"""

import argparse
import json
import os
import random
import re
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# ---------------------------------------------------------------------------- pure helpers


def percentile(values, p):
    """The p-th percentile (0-100) of `values`, linear between closest ranks (numpy's
    default); None for no values."""
    xs = sorted(values)
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summarize(values):
    """{n, p50, p95, mean, max} of `values` (seconds), rounded to ms; n only when empty."""
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50": round(percentile(values, 50), 3),
            "p95": round(percentile(values, 95), 3),
            "mean": round(sum(values) / len(values), 3), "max": round(max(values), 3)}


def record_text(rec):
    """What of a mock log record a note can be in: its body, as JSON (or the raw body)."""
    if "body" in rec:
        return json.dumps(rec["body"], ensure_ascii=False)
    return rec.get("body_raw") or ""


def first_carrier(records, marker, is_model=None):
    """The earliest record (by arrival `ts`, then `seq`) whose body carries `marker`,
    among the records `is_model(rec)` accepts (default: every record with a body); None
    when no request carries it. A later request carries it too (the conversation grows),
    so the earliest is the delivery."""
    hits = [r for r in records
            if (is_model is None or is_model(r)) and marker in record_text(r)]
    return min(hits, key=lambda r: (r.get("ts", 0.0), r.get("seq", 0))) if hits else None


PENDING_LINE = re.compile(r'"POST /api/v1/agents/notes/pending[ ?][^"]*"')


def count_pending_polls(lines):
    """How many of the server's access-log `lines` are a notes/pending call."""
    return sum(1 for l in lines if PENDING_LINE.search(l))


def per_minute(count, seconds):
    return round(count * 60.0 / seconds, 2) if seconds > 0 else None


# ---------------------------------------------------------------------------- the runs

def log(msg):
    sys.stderr.write("[send-to-model %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def _kit():
    sys.path.insert(0, os.path.join(ROOT, "e2e"))
    import kit  # noqa: E402 -- the e2e kit, on demand (the helpers above need none of it)
    return kit


IS_MAIN = {
    "claude": lambda r: r.get("route") == "messages" and (r.get("reply") or {}).get("kind") == "main",
    "codex": lambda r: r.get("route") == "responses" and (r.get("reply") or {}).get("kind") == "agent",
    "gemini": lambda r: r.get("route") in ("stream", "generate") and (r.get("reply") or {}).get("kind") == "main",
    "copilot": lambda r: r.get("route") == "agent" and (r.get("reply") or {}).get("agent") == "main",
}


def read_records(path):
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass   # a line being written
    except OSError:
        pass
    return out


def scenario_class(kit, harness, mode, prereq):
    base = {"claude": kit.ClaudeScenarios, "codex": kit.CodexScenarios,
            "gemini": kit.GeminiScenarios, "copilot": kit.CopilotScenarios}[harness]
    m = {"local": kit.LocalMode, "server": kit.ServerMode}[mode]
    import unittest

    attrs = {"PREREQ": prereq, "TOKEN_PREFIX": "BENCH", "runTest": lambda self: None}
    if harness == "claude":
        attrs["WIRING"] = "install"
    return type("Bench_%s_%s" % (harness, mode), (base, m, unittest.TestCase), attrs)


def cadence(kit, prereq, harness, mode, samples, tool_s):
    """One run of `harness` whose model calls `sleep tool_s` turn after turn; `samples`
    notes sent one at a time at random offsets. Returns (latencies, details)."""
    cls = scenario_class(kit, harness, mode, prereq)
    t = cls()
    t.setUp()
    try:
        t.start("bench: send to model at a %ss tool cadence" % tool_s)
        sb = t.sb
        turns_needed = samples * 2 + 6
        env = t.operator_env()
        sent = []          # (marker, t_returned, note_id)
        errors = []

        def sender(proc):
            deadline = time.time() + 120
            sid = t.sid
            while time.time() < deadline and proc.poll() is None:
                ids = [sid] if sid else sb.session_ids()
                n_main = sum(1 for r in read_records(sb.mock.log_path) if IS_MAIN[harness](r))
                if ids and n_main >= 1:
                    sid = ids[0]
                    break
                time.sleep(0.05)
            else:
                errors.append("the run never registered its session and made its first request")
                return
            while len(sent) < samples and proc.poll() is None:
                n_main = sum(1 for r in read_records(sb.mock.log_path) if IS_MAIN[harness](r))
                if n_main >= turns_needed - 3:
                    errors.append("ran out of scripted turns after %d samples" % len(sent))
                    return
                time.sleep(random.uniform(0, tool_s))
                marker = "BENCH-%s" % uuid.uuid4().hex[:12]
                p = sb.cli("notes", "send", "--session", sid, "--json",
                           "%s Operator note for the benchmark; no action needed." % marker, env=env)
                t_ret = time.time()
                if p.returncode != 0:
                    errors.append("notes send exited %d: %s" % (p.returncode, p.stderr[-300:]))
                    return
                note_id = json.loads(p.stdout).get("note_id")
                sent.append((marker, t_ret, note_id))
                wait_until = time.time() + max(30, 4 * tool_s)
                while time.time() < wait_until:
                    if first_carrier(read_records(sb.mock.log_path), marker, IS_MAIN[harness]):
                        break
                    time.sleep(0.05)
                else:
                    errors.append("note %s reached no request within %ds" % (note_id, max(30, 4 * tool_s)))
                    return
            # Done: the remaining shell calls return at once (the run ends at its last turn).
            open(stop_file, "w").close()

        stop_file = os.path.join(sb.root, "bench-done")
        # Each call differs (`: turn N`): Gemini CLI stops a run that repeats one tool
        # call five times in a row (its loop detection).
        turns = [t.shell_turn("test -e %s || sleep %s; : turn %d" % (stop_file, tool_s, i))
                 for i in range(turns_needed)] + [t.text_turn("Done.")]
        orig_run = sb._run

        def run_with_sender(h, argv, env_, timeout, during=None):
            return orig_run(h, argv, env_, max(timeout, turns_needed * (tool_s + 10) + 60), during=sender)

        sb._run = run_with_sender
        try:
            t.run_turns(turns)
        except AssertionError as e:   # the run's own checks; the samples stand on their own
            errors.append("run check: %s" % str(e).strip().splitlines()[0][:300])
        records = sb.mock.records()
        lat = []
        for marker, t_ret, note_id in sent:
            hit = first_carrier(records, marker, IS_MAIN[harness])
            if hit:
                lat.append(hit["ts"] - t_ret)
        if len(lat) < len(sent):
            errors.append("%d of %d notes in no main-agent request" % (len(sent) - len(lat), len(sent)))
        return lat, {"sent": len(sent), "errors": errors}
    finally:
        t.doCleanups()


def server_log_path(kit):
    return os.path.join(kit.server_home(), "server.log")


def count_log_polls_since(path, offset):
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read().decode("utf-8", "replace")
    return count_pending_polls(data.splitlines())


def log_size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def claude_idle(kit, prereq, mode, samples, idle_max_s, rate_window_s):
    """Claude Code interactive, idle after each turn; a note at a random moment of
    [1, idle_max_s] s into the idle stretch wakes it through the watcher. Returns
    (latencies, details) with details["polls_per_min"] (server mode: counted in the
    server's access log over rate_window_s s of idling, before the first note)."""
    cls = scenario_class(kit, "claude", mode, prereq)
    t = cls()
    t.setUp()
    details = {"errors": []}
    lat = []
    try:
        t.start("bench: idle wake")
        sb = t.sb
        sb.start_mock({"turns": [{"content": [{"type": "text", "text": "Hello. Done."}]}],
                       "overflow": {"content": [{"type": "text", "text": "Noted, thanks."}]},
                       "side_text": "OK"})
        sid = t.sid
        p = kit.PtyClaude(sb, sid)
        try:
            main = IS_MAIN["claude"]

            def n_main():
                return sum(1 for r in sb.mock.records() if main(r))

            session_file = os.path.join(sb.preloop_home, "sessions", sid + ".json")
            if not p.wait_until(lambda: os.path.exists(session_file), 60):
                details["errors"].append("SessionStart never registered the session")
                return lat, details
            time.sleep(2.0)
            p.type("Say hello.")
            if not p.wait_until(lambda: n_main() >= 1, 60):
                details["errors"].append("the first turn never reached the model")
                return lat, details
            time.sleep(1.0)
            env = t.operator_env()
            if mode == "server" and rate_window_s > 0:
                path = server_log_path(kit)
                off = log_size(path)
                t0 = time.time()
                time.sleep(rate_window_s)
                polls = count_log_polls_since(path, off)
                details["polls"] = polls
                details["poll_window_s"] = round(time.time() - t0, 1)
                details["polls_per_min"] = per_minute(polls, time.time() - t0)
            for i in range(samples):
                before = n_main()
                time.sleep(random.uniform(1.0, idle_max_s))
                marker = "BENCH-IDLE-%s" % uuid.uuid4().hex[:12]
                q = sb.cli("notes", "send", "--session", sid, "--json",
                           "%s Operator note for the benchmark; no action needed." % marker, env=env)
                t_ret = time.time()
                if q.returncode != 0:
                    details["errors"].append("notes send exited %d: %s" % (q.returncode, q.stderr[-300:]))
                    break
                if not p.wait_until(lambda: first_carrier(sb.mock.records(), marker, main), 90):
                    details["errors"].append("note %d never woke the session" % i)
                    break
                hit = first_carrier(sb.mock.records(), marker, main)
                lat.append(hit["ts"] - t_ret)
                # The woken turn ends (Stop): wait for the next watcher to be up again.
                p.wait_until(lambda: n_main() > before, 10)
                time.sleep(1.5)
        finally:
            try:
                p.exit()
            except Exception:   # noqa: BLE001 -- best effort; close() kills it
                pass
            p.close()
        return lat, details
    finally:
        t.doCleanups()



# ---------------------------------------------------------------------------- Pi and OpenCode
# Their e2e worlds (e2e/test_pi.py PiWorld, e2e/test_opencode.py OpenCodeWorld) install the
# extension / plugin with `preloop-hooks install` and start their mock; `pi -p` and
# `opencode run` carry the cadence, Pi's RPC mode and `opencode serve` the idle wake.

WORLD_KIND = {"pi": "pi", "opencode": "opencode"}


def world_session_ids(preloop_home):
    d = os.path.join(preloop_home, "sessions")
    out = []
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        try:
            with open(os.path.join(d, name)) as f:
                out.append(json.load(f)["external_session_id"])
        except (OSError, ValueError, KeyError):
            pass
    return out


def new_world(kit, prereq, harness, mode, name, script):
    """(world, cli_env): a Pi or OpenCode world, in server mode with a fresh managed agent;
    cli_env is the operator CLI's environment (the user token in server mode)."""
    sys.path.insert(0, os.path.join(ROOT, "e2e"))
    extra = {}
    if mode == "server":
        server = prereq["server"]
        agent = server.new_agent(kind=WORLD_KIND[harness])
        extra = {"PRELOOP_URL": prereq["creds"]["base_url"], "PRELOOP_TOKEN": agent["agent_token"]}
    if harness == "pi":
        from test_pi import PiWorld as World  # noqa: E402
    else:
        from test_opencode import OpenCodeWorld as World  # noqa: E402
    w = World("bench-" + name, script, extra)
    cli_env = {k: v for k, v in w.env.items() if k != "PRELOOP_TOKEN"}
    if mode == "server":
        cli_env.update({"PRELOOP_URL": prereq["creds"]["base_url"],
                        "PRELOOP_USER_TOKEN": prereq["server"].user_token})
    return w, cli_env


def world_send(w, cli_env, sid, marker):
    """Send a note carrying `marker` to session `sid`: (note id or None, the time the CLI
    returned, an error or None)."""
    import subprocess

    p = subprocess.run([w.exe, "notes", "send", "--session", sid, "--json",
                        "%s Operator note for the benchmark; no action needed." % marker],
                       env=cli_env, cwd=w.proj, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    t_ret = time.time()
    if p.returncode != 0:
        return None, t_ret, "notes send exited %d: %s" % (p.returncode, p.stderr[-300:])
    return json.loads(p.stdout).get("note_id"), t_ret, None


def is_agent(r):
    return r.get("route") == "agent"


def world_cadence(kit, prereq, harness, mode, samples, tool_s):
    import subprocess

    turns_needed = samples * 2 + 6
    holder = {}

    def script(w):
        stop = os.path.join(w.root, "bench-done")
        holder["stop"] = stop
        def args(i):
            a = {"command": "test -e %s || sleep %s; : turn %d" % (stop, tool_s, i)}
            if harness == "opencode":
                a["description"] = "wait"
            return a
        return {"turns": [{"calls": [{"name": "bash", "arguments": args(i)}]} for i in range(turns_needed)]
                + [{"text": "Done."}], "overflow": {"text": "Done."}}

    w, cli_env = new_world(kit, prereq, harness, mode, "cadence-%s-%s" % (harness, mode), script)
    errors, sent = [], []
    try:
        if harness == "pi":
            argv = [kit.ensure_pi(), "-p", "--provider", "mock", "--model", "mock-model", "--offline",
                    "--no-session", "Run the waits"]
        else:
            argv = [kit.ensure_opencode(), "run", "--format", "json", "Run the waits"]
        proc = subprocess.Popen(argv, env=w.env, cwd=w.proj, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.time() + 120
            sid = None
            while time.time() < deadline and proc.poll() is None:
                ids = world_session_ids(w.env["PRELOOP_HOME"])
                if ids and any(is_agent(r) for r in read_records(w.log)):
                    sid = ids[0]
                    break
                time.sleep(0.05)
            if not sid:
                errors.append("the run never registered its session and made its first request")
            while sid and len(sent) < samples and proc.poll() is None:
                if sum(1 for r in read_records(w.log) if is_agent(r)) >= turns_needed - 3:
                    errors.append("ran out of scripted turns after %d samples" % len(sent))
                    break
                time.sleep(random.uniform(0, tool_s))
                marker = "BENCH-%s" % uuid.uuid4().hex[:12]
                note_id, t_ret, err = world_send(w, cli_env, sid, marker)
                if err:
                    errors.append(err)
                    break
                sent.append((marker, t_ret, note_id))
                limit = time.time() + max(30, 4 * tool_s)
                while time.time() < limit and not first_carrier(read_records(w.log), marker, is_agent):
                    time.sleep(0.05)
                if not first_carrier(read_records(w.log), marker, is_agent):
                    errors.append("note %s reached no request within %ds" % (note_id, max(30, 4 * tool_s)))
                    break
            open(holder["stop"], "w").close()
            try:
                proc.wait(timeout=turns_needed * 5 + 60)
            except subprocess.TimeoutExpired:
                errors.append("the run did not end")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
        records = read_records(w.log)
        lat = [first_carrier(records, m, is_agent)["ts"] - t for m, t, _ in sent
               if first_carrier(records, m, is_agent)]
        if len(lat) < len(sent):
            errors.append("%d of %d notes in no model request" % (len(sent) - len(lat), len(sent)))
        return lat, {"sent": len(sent), "errors": errors}
    finally:
        w.close()


def world_idle(kit, prereq, harness, mode, samples, idle_max_s, rate_window_s):
    """Pi in RPC mode / `opencode serve`: one prompt, then idle; a note at a random moment
    of [1, idle_max_s] s into each idle stretch; the woken turn's request is timed."""
    script = {"turns": [{"text": "Hello."}], "overflow": {"text": "Noted."}}
    w, cli_env = new_world(kit, prereq, harness, mode, "idle-%s-%s" % (harness, mode), script)
    details, lat = {"errors": []}, []
    host = None
    try:
        if harness == "pi":
            host = w.rpc()
            host.send({"type": "prompt", "message": "Say hi"})
            host.wait(type="agent_end", timeout=120)
        else:
            sys.path.insert(0, os.path.join(ROOT, "e2e"))
            from test_opencode import OpenCodeServer  # noqa: E402
            host = OpenCodeServer(w)
            host.prompted_session()
        ids = world_session_ids(w.env["PRELOOP_HOME"])
        if not ids:
            details["errors"].append("no session registered")
            return lat, details
        sid = ids[-1]
        time.sleep(1.0)
        if mode == "server" and rate_window_s > 0:
            path = server_log_path(kit)
            off, t0 = log_size(path), time.time()
            time.sleep(rate_window_s)
            polls = count_log_polls_since(path, off)
            details.update(polls=polls, poll_window_s=round(time.time() - t0, 1),
                           polls_per_min=per_minute(polls, time.time() - t0))
        for i in range(samples):
            time.sleep(random.uniform(1.0, idle_max_s))
            marker = "BENCH-IDLE-%s" % uuid.uuid4().hex[:12]
            note_id, t_ret, err = world_send(w, cli_env, sid, marker)
            if err:
                details["errors"].append(err)
                break
            limit = time.time() + 90
            while time.time() < limit and not first_carrier(read_records(w.log), marker, is_agent):
                time.sleep(0.05)
            hit = first_carrier(read_records(w.log), marker, is_agent)
            if not hit:
                details["errors"].append("note %d (%s) never woke the session" % (i, note_id))
                break
            lat.append(hit["ts"] - t_ret)
            time.sleep(3.0)   # the woken turn ends; the next watcher starts
        return lat, details
    finally:
        if host is not None:
            try:
                host.kill() if harness == "pi" else host.stop()
            except Exception:   # noqa: BLE001 -- best effort
                pass
        w.close()


SERVER_NOTE_CAP = 19
IDLE_HARNESSES = {"claude": "idle (preloop-claude-code-watch)", "pi": "idle (RPC mode, preloop-pi-watch)",
                  "opencode": "idle (opencode serve, preloop-opencode-watch)"}


def git_head():
    import subprocess

    p = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return p.stdout.strip() or "unknown"


def fmt(s, key):
    v = s.get(key)
    return "%.2f" % v if isinstance(v, (int, float)) else "-"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 samples per cadence row, 2 idle, 30 s rate window")
    ap.add_argument("--samples", type=int, default=20, help="notes per cadence row (default 20)")
    ap.add_argument("--idle-samples", type=int, default=10, help="notes per idle row (default 10)")
    ap.add_argument("--idle-max-s", type=float, default=40.0,
                    help="a note is sent 1..this many seconds into an idle stretch (default 40: past "
                         "the watcher's backoff to its ceiling)")
    ap.add_argument("--rate-window-s", type=float, default=120.0,
                    help="seconds of idling whose notes/pending calls are counted (server mode)")
    ap.add_argument("--tool-s", type=float, default=3.0, help="seconds each shell call takes (default 3)")
    ap.add_argument("--harness", default="claude,codex,gemini,copilot,pi,opencode")
    ap.add_argument("--mode", default="local,server")
    ap.add_argument("--no-idle", action="store_true")
    ap.add_argument("--no-cadence", action="store_true")
    ap.add_argument("--json", help="write every row as JSON here")
    a = ap.parse_args(argv)
    if a.quick:
        a.samples, a.idle_samples, a.rate_window_s, a.idle_max_s = 3, 2, 30.0, 20.0
    if not os.environ.get("PRELOOP_BIN_DIR") or not os.environ.get("PRELOOP_E2E_HARNESS_DIR"):
        sys.stderr.write("send_to_model: set PRELOOP_BIN_DIR (a release build: scripts/build-release -p "
                         "preloop-hooks --bin preloop-hooks) and PRELOOP_E2E_HARNESS_DIR (the harness CLIs)\n")
        return 2
    kit = _kit()
    harnesses = [h for h in a.harness.split(",") if h]
    modes = [m for m in a.mode.split(",") if m]
    prereq = kit.Prereq()
    prereq.get("bin_dir", kit.build_binaries)
    ensure = {"claude": kit.ensure_claude, "codex": kit.ensure_codex,
              "gemini": kit.ensure_gemini, "copilot": kit.ensure_copilot,
              "pi": kit.ensure_pi, "opencode": kit.ensure_opencode}
    for h in harnesses:
        prereq.get(h, ensure[h])
    for h in ("codex", "gemini", "copilot"):
        if h in harnesses:
            prereq.get("install" if h == "codex" else "install_" + h,
                       lambda h=h: kit.require_install(prereq["bin_dir"], h))
    if "server" in modes:
        kit.require_server(prereq)
    if prereq.errors:
        sys.stderr.write("send_to_model: prerequisites missing: %s\n" % json.dumps(prereq.errors))
        return 1
    exe = os.path.join(prereq["bin_dir"], "preloop-hooks")
    with open(exe, "rb") as f:
        import hashlib

        exe_sum = hashlib.sha256(f.read()).hexdigest()
    rows = []
    try:
        for mode in modes:
            # The server rate-limits notes to 20 an hour per author and agent: each row
            # mints its own agent, and stays below that.
            n = min(a.samples, SERVER_NOTE_CAP) if mode == "server" else a.samples
            for h in harnesses if not a.no_cadence else []:
                log("cadence: %s, %s mode, %d samples, %ss tool calls" % (h, mode, n, a.tool_s))
                run = world_cadence if h in WORLD_KIND else cadence
                lat, det = run(kit, prereq, h, mode, n, a.tool_s)
                row = dict(harness=h, mode=mode, kind="cadence %gs" % a.tool_s, **summarize(lat), **det,
                           samples_s=[round(x, 3) for x in lat])
                log(json.dumps(row))
                rows.append(row)
            for h in [h for h in IDLE_HARNESSES if h in harnesses] if not a.no_idle else []:
                k = min(a.idle_samples, SERVER_NOTE_CAP) if mode == "server" else a.idle_samples
                log("idle: %s, %s mode, %d samples" % (h, mode, k))
                window = a.rate_window_s if mode == "server" else 0
                if h == "claude":
                    lat, det = claude_idle(kit, prereq, mode, k, a.idle_max_s, window)
                else:
                    lat, det = world_idle(kit, prereq, h, mode, k, a.idle_max_s, window)
                if mode == "local":
                    det["polls_per_min"] = 0.0   # the local inbox is a file: no server request
                row = dict(harness=h, mode=mode, kind=IDLE_HARNESSES[h], **summarize(lat), **det,
                           samples_s=[round(x, 3) for x in lat])
                log(json.dumps(row))
                rows.append(row)
    finally:
        if "server" in modes:
            kit.release_server(prereq)
    print("Send to model, %s, commit %s, executable %s (sha256 %s), tool calls of %ss"
          % (time.strftime("%Y-%m-%d"), git_head(), exe, exe_sum[:12], a.tool_s))
    print()
    print("| harness | mode | cadence / idle | p50 s | p95 s | max s | samples | idle server requests/min |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        ppm = r.get("polls_per_min")
        print("| %s | %s | %s | %s | %s | %s | %d | %s |" % (
            r["harness"], r["mode"], r["kind"], fmt(r, "p50"), fmt(r, "p95"), fmt(r, "max"), r["n"],
            ("%.1f" % ppm) if isinstance(ppm, (int, float)) else "-"))
    for r in rows:
        for e in r.get("errors") or []:
            print("* %s %s %s: %s" % (r["harness"], r["mode"], r["kind"], e))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d"), "commit": git_head(), "executable": exe,
                       "sha256": exe_sum, "tool_s": a.tool_s, "rows": rows}, f, indent=1)
    return 0 if all(r["n"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
