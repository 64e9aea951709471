"""Run the real Claude Code / Codex once against a local mock with probe_hook.py on chosen
events, and read back what the model was sent (stdlib only).

  r = claude_run(out, script, rules, events=[...], prompt=..., model=None,
                 output_format="json", extra_args=[], hook_timeout=None, debug=True)
  r = codex_run(out, script, rules, events=[...], prompt=..., json_output=False,
                hook_extra={}, hook_timeout=None)
  r["rc"], r["stdout"], r["stderr"], r["requests"] (log records of model requests, in order),
  r["captures"] (hook invocations, in order), r["out"]

The harnesses come from e2e/.harness (kit.ensure_claude / kit.ensure_codex install them).
Codex hooks are trusted the way `preloop-hooks install` does it (config.toml
[hooks.state] with the computed trusted_hash), so no bypass flag is needed.
"""
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.dirname(HERE)
sys.path.insert(0, E2E)
import kit  # noqa: E402

HOOK = "python3 " + os.path.join(HERE, "probe_hook.py")
PATH = "/usr/local/bin:/usr/bin:/bin"


def _start_mock(out, program, script):
    with open(os.path.join(out, "script.json"), "w") as f:
        json.dump(script, f, indent=1, ensure_ascii=False)
    pf = os.path.join(out, "mock.port")
    log = os.path.join(out, "requests.jsonl")
    open(log, "a").close()
    p = subprocess.Popen([sys.executable, program, "--script", os.path.join(out, "script.json"),
                          "--log", log, "--port-file", pf],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(out, "mock.stderr"), "a"))
    for _ in range(200):
        if os.path.exists(pf):
            return p, int(open(pf).read())
        time.sleep(0.05)
    p.kill()
    raise RuntimeError("mock did not start")


def _fresh(out):
    if os.path.exists(out):
        shutil.rmtree(out)
    for d in ("home", "proj", "cap"):
        os.makedirs(os.path.join(out, d))


def _collect(out, rc, so, se, t0, t1, route):
    reqs = []
    for line in open(os.path.join(out, "requests.jsonl")):
        if line.strip():
            r = json.loads(line)
            if r.get("route") == route or (route == "responses" and r.get("path", "").endswith("/responses")):
                reqs.append(r)
    caps = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "cap", "*.json")))]
    with open(os.path.join(out, "stdout.txt"), "w") as f:
        f.write(so)
    with open(os.path.join(out, "stderr.txt"), "w") as f:
        f.write(se)
    return {"out": out, "rc": rc, "stdout": so, "stderr": se, "requests": reqs, "captures": caps,
            "duration": round(t1 - t0, 2)}


def claude_run(out, script, rules, events, prompt="go", model=None, output_format="json",
               extra_args=(), hook_timeout=None, debug=True, timeout=180, verbose=None,
               env_extra=None):
    claude = kit.ensure_claude()
    _fresh(out)
    os.makedirs(os.path.join(out, "home", ".claude"))
    with open(os.path.join(out, "rules.json"), "w") as f:
        json.dump(rules, f, indent=1, ensure_ascii=False)
    entry = {"type": "command", "command": HOOK}
    if hook_timeout:
        entry["timeout"] = hook_timeout
    settings = {"hooks": {ev: [{"hooks": [dict(entry)]}] for ev in events}}
    with open(os.path.join(out, "home", ".claude", "settings.json"), "w") as f:
        json.dump(settings, f, indent=1)
    mock, port = _start_mock(out, os.path.join(HERE, "xmock_anthropic.py"), script)
    env = {"PATH": PATH, "HOME": os.path.join(out, "home"), "TERM": "dumb", "LANG": "C.UTF-8",
           "ANTHROPIC_BASE_URL": "http://127.0.0.1:%d" % port, "ANTHROPIC_API_KEY": kit.MOCK_API_KEY,
           "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "IS_SANDBOX": "1",
           "PROBE_DIR": os.path.join(out, "cap"), "PROBE_RULES": os.path.join(out, "rules.json")}
    env.update(env_extra or {})
    argv = [claude, "-p", prompt, "--output-format", output_format, "--dangerously-skip-permissions"]
    if output_format == "stream-json" and verbose is not False:
        argv.append("--verbose")
    if model:
        argv += ["--model", model]
    if debug:
        argv += ["--debug-file", os.path.join(out, "claude.debug.log")]
    argv += list(extra_args)
    return _run(out, argv, env, mock, timeout, "messages")


def _run(out, argv, env, mock, timeout, route):
    """Run the harness in out/proj (argv, env recorded in cmdline.json), stop the mock,
    collect the run (_collect) with the model requests of `route`."""
    with open(os.path.join(out, "cmdline.json"), "w") as f:
        json.dump({"argv": argv, "env": env, "cwd": os.path.join(out, "proj")}, f, indent=1)
    t0 = time.time()
    try:
        p = subprocess.run(argv, cwd=os.path.join(out, "proj"), env=env, capture_output=True,
                           text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, so, se = "timeout", (e.stdout or b"").decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), ""
    t1 = time.time()
    time.sleep(0.5)
    mock.terminate()
    mock.wait()
    return _collect(out, rc, so, se, t0, t1, route)


def pop_option(args, name):
    """The value of `name VALUE` in args (both removed), or None."""
    if name not in args:
        return None
    k = args.index(name)
    value = args[k + 1]
    del args[k:k + 2]
    return value


def stop_rules(out):
    """probe_hook rules: Stop and SubagentStop answer `out` once (stop_hook_active false),
    then nothing; SessionEnd nothing; every other event a context."""
    return [
        {"event": "SessionEnd", "out": "none"},
        {"event": "Stop", "match": {"stop_hook_active": False}, "out": out},
        {"event": "Stop", "out": "none"},
        {"event": "SubagentStop", "match": {"stop_hook_active": False}, "out": out},
        {"event": "SubagentStop", "out": "none"},
        {"event": "*", "out": "ctx"},
    ]


def _snake(ev):
    return "".join(("_" + c.lower()) if c.isupper() and i else c.lower() for i, c in enumerate(ev))


def _canon(v):
    if isinstance(v, dict):
        return {k: _canon(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_canon(x) for x in v]
    return v


def codex_trust_lines(hooks_path, hooks):
    lines = []
    for ev, groups in hooks.items():
        for gi, g in enumerate(groups):
            for hi, h in enumerate(g["hooks"]):
                t = h.get("timeout") or (1 if ev == "SessionEnd" else 600)
                if ev == "SessionEnd":
                    t = min(t, 3)
                hh = {"type": h.get("type", "command"), "command": h["command"], "timeout": t,
                      "async": h.get("async", False), "statusMessage": h.get("statusMessage"),
                      "additionalContextLimit": h.get("additionalContextLimit")}
                d = _canon({"event_name": _snake(ev), "matcher": g.get("matcher"), "hooks": [hh]})
                digest = hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":"),
                                                   ensure_ascii=False).encode()).hexdigest()
                lines += ['[hooks.state."%s:%s:%d:%d"]' % (hooks_path, _snake(ev), gi, hi),
                          'trusted_hash = "sha256:%s"' % digest, ""]
    return lines


def codex_run(out, script, rules, events, prompt="go", json_output=False, hook_extra=None,
              hook_timeout=None, timeout=180, extra_args=(), per_event_extra=None, env_extra=None):
    codex = kit.ensure_codex()
    _fresh(out)
    with open(os.path.join(out, "rules.json"), "w") as f:
        json.dump(rules, f, indent=1, ensure_ascii=False)
    home = os.path.realpath(os.path.join(out, "home"))
    hooks = {}
    for ev in events:
        h = {"type": "command", "command": HOOK}
        if hook_timeout:
            h["timeout"] = hook_timeout
        h.update(hook_extra or {})
        h.update((per_event_extra or {}).get(ev, {}))
        hooks[ev] = [{"hooks": [h]}]
    hp = os.path.join(home, "hooks.json")
    with open(hp, "w") as f:
        json.dump({"hooks": hooks}, f, indent=1)
    mock, port = _start_mock(out, os.path.join(E2E, "mock_openai.py"), script)
    cfg = ['model = "mock-model"', 'model_provider = "mock"', 'approval_policy = "never"',
           'sandbox_mode = "danger-full-access"', 'check_for_update_on_startup = false', "",
           "[model_providers.mock]", 'name = "mock"',
           'base_url = "http://127.0.0.1:%d/v1"' % port, 'wire_api = "responses"',
           'env_key = "MOCK_API_KEY"', "request_max_retries = 0", "stream_max_retries = 0", ""]
    cfg += codex_trust_lines(hp, hooks)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("\n".join(cfg))
    env = {"PATH": PATH, "HOME": os.path.join(out, "userhome"), "CODEX_HOME": home, "TERM": "dumb",
           "LANG": "C.UTF-8", "MOCK_API_KEY": "mock-key",
           "PROBE_DIR": os.path.join(out, "cap"), "PROBE_RULES": os.path.join(out, "rules.json")}
    env.update(env_extra or {})
    os.makedirs(env["HOME"], exist_ok=True)
    argv = [codex, "exec", "--skip-git-repo-check", "-C", os.path.join(out, "proj"),
            "--color", "never"]
    if json_output:
        argv.append("--json")
    argv += list(extra_args) + [prompt]
    return _run(out, argv, env, mock, timeout, "responses")


# ---------------------------------------------------------------- reading requests

def claude_texts(body):
    """(where, text) for every text the model is sent: system blocks, and per message each
    text / tool_result block (where = 'm<i>:<role>:<blocktype>')."""
    out = []
    sysp = body.get("system")
    if isinstance(sysp, str):
        out.append(("system", sysp))
    for b in sysp or []:
        if isinstance(b, dict) and b.get("type") == "text":
            out.append(("system", b.get("text", "")))
    for i, m in enumerate(body.get("messages") or []):
        c = m.get("content")
        if isinstance(c, str):
            out.append(("m%d:%s:str" % (i, m.get("role")), c))
            continue
        for b in c or []:
            t = b.get("type")
            if t == "text":
                out.append(("m%d:%s:text" % (i, m.get("role")), b.get("text", "")))
            elif t == "tool_result":
                cc = b.get("content")
                if isinstance(cc, list):
                    cc = "".join(x.get("text", "") for x in cc if isinstance(x, dict))
                out.append(("m%d:%s:tool_result" % (i, m.get("role")), str(cc)))
            elif t == "tool_use":
                out.append(("m%d:%s:tool_use" % (i, m.get("role")), json.dumps(b.get("input"))))
    return out


def codex_texts(body):
    return [("i%d:%s" % (i, role), txt) for i, role, txt in kit.codex_segments(body)]


def where(requests, marker, texts=claude_texts):
    """[(request_index, agent, location)] of every text block containing marker."""
    hits = []
    for n, r in enumerate(requests):
        for loc, txt in texts(r["body"]):
            if marker in txt:
                hits.append((n, (r.get("reply") or {}).get("agent") or (r.get("reply") or {}).get("kind"), loc))
    return hits


def block_with(requests, marker, texts=claude_texts):
    """The first text block (any request) holding marker, or None."""
    for r in requests:
        for loc, txt in texts(r["body"]):
            if marker in txt:
                return txt
    return None


def print_hook_calls(captures, extra=()):
    """One line per captured hook call (who = sub when its stdin has agent_id), then the
    distinct session ids; `extra` names more stdin keys to show. Returns those ids."""
    sids = set()
    for c in captures:
        s = c["stdin"]
        sids.add(s.get("session_id"))
        more = "".join(" %s=%s" % (k, s.get(k)) for k in extra)
        print("  hook %-3d %-16s who=%-4s session_id=%s agent_id=%s tool=%s%s" % (
            c["seq"], c["event"], c["who"], s.get("session_id"), s.get("agent_id"),
            s.get("tool_name"), more))
    print("  distinct session_ids:", sids)
    return sids
