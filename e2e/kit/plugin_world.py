"""PluginWorld: one scenario's world for a plugin-carried harness (Pi, OpenCode; their suites
e2e/test_pi.py and e2e/test_opencode.py subclass it): a temp HOME and project, PRELOOP_HOME,
the shipped executable (PRELOOP_BIN_DIR), the harness's mock model on 127.0.0.1 (started with
this world's environment, so a turn's before_reply_cmd sends notes into this world's inbox),
the harness configured for the mock, and our plugin installed as `preloop-hooks install` lays it
down (user scope). A subclass names its harness, its session alias, its mock and its extra
environment, and writes the harness's config for the mock's port (`configure`).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from .common import BASE_PATH, E2E_DIR

__all__ = ["PluginWorld"]


def bin_dir():
    """The directory of the release preloop-hooks (PRELOOP_BIN_DIR); fails loudly without it."""
    d = os.environ.get("PRELOOP_BIN_DIR")
    if not d or not os.path.isfile(os.path.join(d, "preloop-hooks")):
        raise RuntimeError("set PRELOOP_BIN_DIR to the directory of the release preloop-hooks "
                           "(scripts/build-release -p preloop-hooks --bin preloop-hooks prints it)")
    return os.path.abspath(d)


def texts(message):
    """The text of a Chat Completions message (a string, or its text parts joined)."""
    c = message.get("content")
    if isinstance(c, list):
        return "\n".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


def where(request, marker):
    """(index, role) of every message of a request body that holds `marker`."""
    return [(i, m["role"]) for i, m in enumerate(request["body"]["messages"]) if marker in texts(m)]


class PluginWorld:
    harness = None   # the registry slug: what `install --harness` takes
    alias = None     # PRELOOP_SESSION_ALIAS of the world's sessions
    mock = None      # the mock model's script in e2e/
    shim_log_name = None  # the plugin's own log, under ~/.preloop/log/

    def __init__(self, name, script, extra_env=None):
        """`script`: the mock's script, or a function of this world that returns it (to name
        this world's executable in a turn's before_reply_cmd). `extra_env`: more environment
        for the harness, its hooks and the mock (server mode: PRELOOP_URL, PRELOOP_TOKEN)."""
        self.root = tempfile.mkdtemp(prefix="preloop-%s-e2e-%s-" % (self.harness, name))
        self.home = os.path.join(self.root, "home")
        self.proj = os.path.join(self.root, "proj")
        os.makedirs(self.home)
        os.makedirs(self.proj)
        self.exe = os.path.join(bin_dir(), "preloop-hooks")
        self.env = {"PATH": BASE_PATH, "HOME": self.home, "PRELOOP_HOME": os.path.join(self.home, ".preloop"),
                    "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1", "PRELOOP_SESSION_ALIAS": self.alias,
                    **self.harness_env(), **(extra_env or {})}
        self.log = os.path.join(self.root, "mock.jsonl")
        port_file = os.path.join(self.root, "port")
        with open(os.path.join(self.root, "script.json"), "w") as f:
            json.dump(script(self) if callable(script) else script, f)
        self.mock_proc = subprocess.Popen(
            [sys.executable, os.path.join(E2E_DIR, self.mock), "--port", "0", "--port-file", port_file,
             "--script", os.path.join(self.root, "script.json"), "--log", self.log],
            env=self.env, cwd=self.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(port_file) and os.path.getsize(port_file):
                break
            time.sleep(0.05)
        with open(port_file) as f:
            self.port = int(f.read())
        self.configure(self.port)
        self.cli("install", "--harness", self.harness, "--bin-dir", bin_dir())

    def harness_env(self):
        """The harness's own environment (offline, no telemetry, its config folders)."""
        return {}

    def configure(self, port):
        """Point the harness at the mock on `port`."""
        raise NotImplementedError

    def close(self):
        self.mock_proc.kill()
        self.mock_proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    def cli(self, *args, check=True):
        p = subprocess.run([self.exe, *args], env=self.env, cwd=self.proj, capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        if check and p.returncode != 0:
            raise AssertionError("preloop-hooks %s: rc %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
        return p

    def send_cmd(self, text):
        """argv that sends `text` to this world's live session (by its alias)."""
        return [self.exe, "notes", "send", "--alias", self.alias, text]

    def send_note(self, text):
        """Send `text` to this world's live session now (by its alias); its note id."""
        return json.loads(self.cli("notes", "send", "--alias", self.alias, text, "--json").stdout)["note_id"]

    def receipt(self, note_id):
        return json.loads(self.cli("notes", "status", note_id, "--json").stdout)

    def wait_receipt(self, note_id, states, secs=15):
        """The note's receipt once its state is one of `states`, or as it is after `secs`."""
        deadline = time.monotonic() + secs
        while True:
            r = self.receipt(note_id)
            if r["state"] in states or time.monotonic() > deadline:
                return r
            time.sleep(0.2)

    def requests(self):
        """The mock's model requests so far (none before the mock logged one)."""
        try:
            with open(self.log) as f:
                return [r for r in map(json.loads, f) if r.get("route") == "agent"]
        except FileNotFoundError:
            return []

    def session_files(self):
        """The session files our hooks wrote (~/.preloop/sessions/*.json), by name."""
        sessions = os.path.join(self.home, ".preloop", "sessions")
        files = []
        for n in sorted(os.listdir(sessions)):
            if n.endswith(".json"):
                with open(os.path.join(sessions, n)) as f:
                    files.append(json.load(f))
        return files

    def conductor_and_child(self):
        """(conductor, child) session files of a world with two sessions, one the other's child;
        AssertionError naming the files otherwise."""
        files = self.session_files()
        children = [f for f in files if f.get("parent_session_id")]
        if (len(files), len(children)) != (2, 1):
            raise AssertionError("not one conductor and one child: %s" % files)
        conductor = [f for f in files if f is not children[0]][0]
        if children[0]["parent_session_id"] != conductor["runtime_session_id"]:
            raise AssertionError("the child's parent is not the conductor: %s" % files)
        return conductor, children[0]

    def listed_sessions(self):
        """The rows of `preloop-hooks sessions list --json` (a list, or the list under
        "sessions")."""
        rows = json.loads(self.cli("sessions", "list", "--json").stdout)
        return rows if isinstance(rows, list) else rows.get("sessions", [])

    def listed_conductor_and_child(self):
        """(conductor, child) rows of `sessions list` for a world with two sessions, one
        the other's child; AssertionError naming the rows otherwise."""
        rows = self.listed_sessions()
        children = [r for r in rows if r.get("parent_session_id")]
        if (len(rows), len(children)) != (2, 1):
            raise AssertionError("not one conductor and one child: %s" % rows)
        return [r for r in rows if r is not children[0]][0], children[0]

    def _log(self, name):
        try:
            with open(os.path.join(self.home, ".preloop", "log", name)) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def hook_log(self):
        return self._log("hooks.log")

    def shim_log(self):
        return self._log(self.shim_log_name)
