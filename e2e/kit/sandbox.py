"""Sandbox, one scenario's world (temp HOME, project dir, PRELOOP_HOME, the mock, the hook
configuration, the operator CLI, harness runs), and RunResult, what one run left.

The harness-specific halves (settings files, environments, `run_<harness>()`) are runner
mixins in each harness's own kit module, found from the registry (kit.runners()):
e2e/kit/<program>.py's `RUNNER`, a `common.HarnessRunner` declaring `SLUG` (the harness's
registry slug), `MAIN_REQUESTS` (which mock records are its main agent's requests:
RunResult.requests, through `is_main_request(record)`) and optionally `SUMMARY` (its failure
dump in report.py; else JSON), and defining
`prepare()` (run when a sandbox is made), `install_env()` (what `preloop-hooks install`
needs in its environment), `installed_settings()` (the file `install --harness SLUG --scope
user` writes) and `wire_without_install()`. The kit calls those on the runner class, never
through a Sandbox (every runner has them, so a Sandbox's own would be the first runner's).
This module names no harness; it holds what every harness shares."""

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

from .binaries import has_install_command
from .common import BASE_PATH, CLI_BINARY, KitError, poll_state, shorten
from .harnesses import runners
from .mock import Mock, agent_requests, main_requests

__all__ = ["RUNNERS", "RunResult", "Sandbox"]


# Sandbox's bases: each harness's runner mixin, in registry order.
RUNNERS = runners()


@dataclass
class RunResult:
    rc: int | None
    duration_s: float
    stdout: str
    stderr: str
    output: dict | None            # parsed JSON output (claude/gemini -o json), if any
    records: list                  # every mock log record
    requests: list                 # bodies of the main agent's model requests
    model: str | None
    session_id: str | None
    cmdline: str
    harness: str                   # the runner's name for it (run_<harness>())
    timed_out: bool = False
    during: dict = field(default_factory=dict)   # run_*(during=fn): {"value"} or {"error"}

    def before_reply(self):
        return [r["before_reply"] for r in self.records if r.get("before_reply")]

    def agent_requests(self, agent):
        """Bodies of a scripted sub-agent's requests (Codex / Copilot scripts' "agents")."""
        return agent_requests(self.records, agent)

    def headline(self):
        return ("%s rc=%s timed_out=%s duration=%ss session=%s model requests=%d (mock records: %d)"
                % (self.harness, self.rc, self.timed_out, self.duration_s, self.session_id,
                   len(self.requests), len(self.records)))


class Sandbox(*RUNNERS):
    """One scenario's world: temp HOME, project dir, PRELOOP_HOME, mock, hook config, runs.

    Its bases are the harnesses' runner mixins (RUNNERS). A plugin-carried harness has
    none: its suite (e2e/test_pi.py: PiWorld) installs our plugin with `preloop-hooks
    install` into a world of its own (kit.PluginWorld)."""

    def __init__(self, name, bin_dir, **clis):
        """CLIS: the paths of harness CLIs a runner reads as attributes (claude_bin=...)."""
        self.name = name
        self.bin_dir = bin_dir
        for attr, path in clis.items():
            if not any(attr in vars(r) for r in RUNNERS):
                raise TypeError("Sandbox() got %s=, which no runner reads" % attr)
            setattr(self, attr, path)
        parent = os.environ.get("PRELOOP_E2E_TMPDIR") or None
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:60]
        self.root = tempfile.mkdtemp(prefix="preloop-e2e-%s-" % slug, dir=parent)
        self.home = os.path.join(self.root, "home")
        self.proj = os.path.join(self.root, "proj")
        self.preloop_home = os.path.join(self.root, "preloop-home")
        for d in (self.home, self.proj, self.preloop_home):
            os.makedirs(d, exist_ok=True)
        self.keep = os.environ.get("PRELOOP_E2E_KEEP") == "1"
        self.mock = None
        self.settings_path = None
        self.hook_env = {}     # added to the harness's env (so its hooks get it): server mode
        self.mock_env = {}     # added to the mock's env (its before_reply_cmd get it)
        self.install_output = None
        for runner in RUNNERS:
            if hasattr(runner, "prepare"):
                runner.prepare(self)

    # -- paths / env ---------------------------------------------------------
    def bin(self, name):
        return os.path.join(self.bin_dir, name)

    def base_env(self):
        """The clean environment of everything the suite starts (env -i style): no
        PRELOOP_URL / PRELOOP_TOKEN, so the binaries run in local mode."""
        return {"PATH": BASE_PATH, "HOME": self.home, "LANG": "C.UTF-8", "TERM": "dumb",
                "PRELOOP_HOME": self.preloop_home}

    def _dir(self, *parts):
        d = os.path.join(self.root, *parts)
        os.makedirs(d, exist_ok=True)
        return d

    # -- hook wiring (each harness's own files: its runner mixin) --------------
    def install_hooks(self, harness):
        """Wire the hooks into this sandbox's HOME the way a user does:
        `preloop-hooks install --harness HARNESS --scope user`, when this build of
        preloop-hooks has the command. Returns "install" or, when it has not (yet) and
        HARNESS's runner can wire its hooks itself (wire_without_install(): Claude Code's
        write_settings()), "kit" after doing so. Codex: write_codex_config() first; Gemini:
        write_gemini_settings() first (install adds to those files). settings_path is then
        the runner's installed_settings(), when it has one."""
        runner = next((r for r in RUNNERS if r.SLUG == harness), None)
        if not has_install_command(self.bin(CLI_BINARY)):
            if not hasattr(runner, "wire_without_install"):
                raise KitError("preloop-hooks has no `install` command; cannot wire %s" % harness)
            runner.wire_without_install(self)
            return "kit"
        env = self.base_env()
        for other in RUNNERS:
            if hasattr(other, "install_env"):
                env.update(other.install_env(self))
        p = subprocess.run(self.cli_argv("install", "--harness", harness, "--scope", "user"),
                           env=env, cwd=self.proj, capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        self.install_output = "rc=%s\nstdout: %s\nstderr: %s" % (p.returncode, p.stdout, p.stderr)
        if p.returncode != 0:
            raise KitError("`preloop-hooks install --harness %s --scope user` (HOME=%s) exited %d\n"
                           "stdout: %s\nstderr: %s" % (harness, self.home, p.returncode,
                                                       p.stdout[-3000:], p.stderr[-3000:]))
        self.settings_path = (runner.installed_settings(self)
                              if hasattr(runner, "installed_settings") else None)
        return "install"

    # -- operator CLI ----------------------------------------------------------
    def cli_argv(self, *args):
        return [self.bin(CLI_BINARY)] + [str(a) for a in args]

    def cli(self, *args, timeout=30, env=None):
        """Run preloop-hooks with the args; `env` adds to base_env() (a server URL and a
        user token for the operator commands in server mode)."""
        full = self.base_env()
        full.update(env or {})
        return subprocess.run(self.cli_argv(*args), env=full, cwd=self.root,
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def cli_json(self, *args, env=None):
        """Run preloop-hooks with the args and parse stdout as one JSON document;
        raises KitError with the exact command and output otherwise."""
        p = self.cli(*args, env=env)
        cmd = " ".join(shlex.quote(a) for a in self.cli_argv(*args))
        if p.returncode != 0:
            raise KitError("`%s` exited %d\nstdout: %s\nstderr: %s"
                           % (cmd, p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
        try:
            return json.loads(p.stdout)
        except ValueError:
            raise KitError("`%s` did not print one JSON document\nstdout: %r\nstderr: %s"
                           % (cmd, p.stdout[-2000:], p.stderr[-2000:]))

    def send_note_argv(self, session_id, text):
        return self.cli_argv("notes", "send", "--session", session_id, "--json", text)

    def send_note(self, session_id, text):
        return self.cli_json("notes", "send", "--session", session_id, "--json", text)

    def note_status(self, note_id):
        return self.cli_json("notes", "status", note_id, "--json")

    def wait_note_state(self, note_id, states, timeout=8.0):
        """Poll the receipt until its state is in `states` (SessionEnd hooks may still be
        finishing after the harness exits); returns the last receipt seen."""
        return poll_state(lambda: self.note_status(note_id), states, timeout)

    def session_ids(self):
        """External session ids the hooks registered (PRELOOP_HOME/sessions/*.json)."""
        d = os.path.join(self.preloop_home, "sessions")
        out = []
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            try:
                with open(os.path.join(d, name)) as f:
                    out.append(json.load(f)["external_session_id"])
            except (OSError, ValueError, KeyError):
                pass
        return out

    # -- mock + harness runs -----------------------------------------------------
    def start_mock(self, script, api="anthropic"):
        """Start the mock model API `api` (MOCKS) with this script; it gets base_env()
        plus mock_env (its before_reply_cmd run with that)."""
        if self.mock:
            self.mock.stop()
        self.mock = Mock(self.root, script, dict(self.base_env(), **self.mock_env), api=api)
        return self.mock

    def _run(self, harness, argv, env, timeout, during=None):
        """Run one harness CLI headless in the project dir (own process group, killed on
        timeout); `during(proc)` runs in a thread meanwhile. Writes cmdline.txt and
        <harness>.stdout/.stderr into the sandbox; returns a RunResult without the
        harness-specific fields (output, session_id, model)."""
        assert self.mock, "start_mock() first"
        cmdline = "cd %s && env -i %s %s </dev/null" % (
            shlex.quote(self.proj), " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in env.items()),
            " ".join(shlex.quote(a) for a in argv))
        with open(os.path.join(self.root, "cmdline.txt"), "w") as f:
            f.write(cmdline + "\n")
        t0 = time.time()
        timed_out = False
        p = subprocess.Popen(argv, cwd=self.proj, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        during_result, th = {}, None
        if during:
            def _during():
                try:
                    during_result["value"] = during(p)
                except Exception as e:   # noqa: BLE001 -- reported by the test
                    during_result["error"] = "%s: %s" % (type(e).__name__, e)
            th = threading.Thread(target=_during, daemon=True)
            th.start()
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(p.pid, 9)
            except OSError:
                p.kill()
            out, err = p.communicate()
        if th:
            th.join(30)
        dur = round(time.time() - t0, 2)
        for name, data in (("%s.stdout" % harness, out), ("%s.stderr" % harness, err)):
            with open(os.path.join(self.root, name), "w") as f:
                f.write(data or "")
        time.sleep(0.3)   # a SessionEnd hook may outlive the harness by a moment
        records = self.mock.records()
        return RunResult(rc=p.returncode, duration_s=dur, stdout=out or "", stderr=err or "",
                         output=None, records=records, requests=main_requests(harness, records),
                         model=None, session_id=None, cmdline=cmdline, timed_out=timed_out,
                         harness=harness, during=during_result)

    def _env(self, extra, env=None):
        e = self.base_env()
        e.update(extra)
        e.update(self.hook_env)
        e.update(env or {})
        return e

    @staticmethod
    def _json_output(out):
        try:
            v = json.loads(out) if out.strip() else None
        except ValueError:
            return None
        return v if isinstance(v, dict) else None

    # -- failure dumps -----------------------------------------------------------
    def preloop_log_lines(self, limit=40):
        """The tail of the hooks' own logs under PRELOOP_HOME/log (for failure dumps)."""
        out = []
        logdir = os.path.join(self.preloop_home, "log")
        for name in sorted(os.listdir(logdir)) if os.path.isdir(logdir) else []:
            with open(os.path.join(logdir, name), errors="replace") as f:
                out += ["%s: %s" % (name, shorten(l.rstrip("\n"), 400)) for l in f]
        return out[-limit:]

    def close(self):
        if self.mock:
            self.mock.stop()
            self.mock = None
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)
