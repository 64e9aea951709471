"""Paths, the command names every suite shares, KitError, and the small helpers every kit
module and every suite uses (shortening text for messages, polling a receipt, quoting a
path for a hook command, session ids, reading JSONL, finding live processes).

Nothing here imports the rest of the kit: this is the bottom of the package's import
graph, so any module can use it without a cycle."""

import json
import os
import sys
import time
import uuid

__all__ = ["BASE_PATH", "CLI_BINARY", "E2E_DIR", "FAKE_HOOK", "HOOK_TIMEOUT_S", "HarnessRunner", "REPO_ROOT",
           "KitError", "fake_hook_command", "hook_binaries", "new_session_id", "npm_spec",
           "poll_state", "processes_with", "quote_path", "read_jsonl", "read_text", "registry",
           "shorten"]

E2E_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(E2E_DIR)
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"

CLI_BINARY = "preloop-hooks"
HOOK_TIMEOUT_S = 10


class HarnessRunner:
    """The base of every harness's runner mixin (a Sandbox base): what tells a harness's runs
    apart is data its runner declares. SLUG: its registry slug. MAIN_REQUESTS: (the mock
    routes of its model requests, a key of the mock's reply, its value for the main agent).
    SUMMARY: the name of its failure dump in report.py (None: report.summarize_json)."""

    SLUG = None
    MAIN_REQUESTS = ((), None, None)
    SUMMARY = None

    @classmethod
    def is_main_request(cls, record):
        """Whether a mock log record is one of the main agent's model requests."""
        routes, key, value = cls.MAIN_REQUESTS
        return record.get("route") in routes and (record.get("reply") or {}).get(key) == value


class KitError(RuntimeError):
    """The environment cannot run the suite (install/build failed, mock did not start...)."""


def registry():
    """e2e/kit/registry.json, generated from shared/src/registry.rs (a test there fails
    when they differ): {slug: {"name", "version", "npm_package", "hooks": {event: hook
    command}, "watch"}} in registry order. The kit takes every version, npm package and
    hook command from it."""
    global _REGISTRY
    if _REGISTRY is None:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "registry.json")) as f:
            data = json.load(f)
        _REGISTRY = {h["slug"]: dict(h, hooks=dict(h["hooks"])) for h in data["harnesses"]}
    return _REGISTRY


_REGISTRY = None


def hook_binaries(slug, events=None):
    """{event: hook command} of the harness SLUG from the registry: every hook (the watcher
    apart), or those of EVENTS; KitError for an event the registry does not have."""
    hooks = registry()[slug]["hooks"]
    if events is None:
        return dict(hooks)
    unknown = [e for e in events if e not in hooks]
    if unknown:
        raise KitError("%s has no hook on %s in shared/src/registry.rs" % (slug, ", ".join(unknown)))
    return {e: hooks[e] for e in events}


def npm_spec(slug):
    """`package@version` the kit installs for the harness SLUG (the registry's)."""
    h = registry()[slug]
    return "%s@%s" % (h["npm_package"], h["version"])


def read_text(path):
    """A file's text ("" when it cannot be read: not written yet)."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def log(msg):
    sys.stderr.write("[e2e] %s\n" % msg)
    sys.stderr.flush()


def shorten(s, n=400):
    s = s if isinstance(s, str) else json.dumps(s, ensure_ascii=False)
    if len(s) <= n:
        return s
    return s[: n // 2] + " ...[%d chars cut]... " % (len(s) - n) + s[-n // 2:]


def poll_state(read, states, timeout):
    """Call read() (a receipt) every 0.2 s until its "state" is in `states` or `timeout`
    seconds have passed; the last answer."""
    deadline = time.time() + timeout
    while True:
        r = read()
        if r.get("state") in states or time.time() >= deadline:
            return r
        time.sleep(0.2)


def quote_path(path):
    """Single-quote a path for the shell Claude Code runs hook commands with."""
    return "'%s'" % path.replace("'", "'\\''")


def new_session_id():
    return str(uuid.uuid4())


def read_jsonl(path):
    """The JSON objects of a JSONL file ([] when it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


# --------------------------------------------------------------------------- the rig's own tests

FAKE_HOOK = os.path.join(E2E_DIR, "fake_hook.py")


def fake_hook_command(log_path, event, harness="claude", *flags):
    """The shell command line of e2e/fake_hook.py for one event (the rig's self-tests):
    FAKE_HOOK_LOG is set inside the command, so it survives a harness that filters the
    environment of its hooks."""
    return " ".join(["FAKE_HOOK_LOG=%s" % quote_path(log_path), quote_path(sys.executable),
                     quote_path(FAKE_HOOK), quote_path(event), "--harness", harness]
                    + [quote_path(f) for f in flags])


def processes_with(needle, env_has=None):
    """[(pid, cmdline)] of live processes whose command line contains needle and, when
    env_has ("NAME=value") is given, whose environment holds exactly that (Linux /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            with open("/proc/%s/stat" % d) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if needle not in cmd or state == "Z":
                continue
            if env_has is not None:
                with open("/proc/%s/environ" % d, "rb") as f:
                    if env_has.encode() not in f.read().split(b"\0"):
                        continue
        except OSError:
            continue
        out.append((int(d), cmd))
    return out
