"""The mock model APIs (e2e/mock_*.py) as child processes, and the main agent's or a
scripted sub-agent's request bodies among what a mock logged.

Every suite runs the real harness against one of these, so what the model received can be
read back request by request."""

import json
import os
import subprocess
import sys
import time

from .common import E2E_DIR, KitError
from .harnesses import runner_of

__all__ = ["MOCKS", "Mock", "agent_requests", "main_requests"]

# The mock model API of each harness (Sandbox.start_mock(script, api)).
MOCKS = {f[len("mock_"):-len(".py")]: f for f in sorted(os.listdir(E2E_DIR))
         if f.startswith("mock_") and f.endswith(".py") and f != "mock_common.py"}


class Mock:
    """One of the mock model APIs (MOCKS) as a child process on a free 127.0.0.1 port."""

    def __init__(self, workdir, script, env, api="anthropic"):
        self.workdir = workdir
        self.api = api
        program = os.path.join(E2E_DIR, MOCKS[api])
        self.script_path = os.path.join(workdir, "mock-script.json")
        self.log_path = os.path.join(workdir, "requests.jsonl")
        self.stderr_path = os.path.join(workdir, "mock.stderr")
        port_file = os.path.join(workdir, "mock.port")
        with open(self.script_path, "w") as f:
            json.dump(script, f, indent=1)
        open(self.log_path, "a").close()
        for p in (port_file, port_file + ".tmp"):
            if os.path.exists(p):
                os.unlink(p)
        self._stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, program, "--script", self.script_path, "--log", self.log_path,
             "--port-file", port_file],
            cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=self._stderr,
            stderr=self._stderr)
        deadline = time.time() + 15
        while time.time() < deadline:
            if os.path.exists(port_file):
                with open(port_file) as f:
                    self.port = int(f.read().strip())
                self.url = "http://127.0.0.1:%d" % self.port
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        with open(self.stderr_path, errors="replace") as f:
            raise KitError("mock did not start:\n" + f.read()[-3000:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._stderr.close()

    def records(self):
        out = []
        with open(self.log_path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    out.append(json.loads(line))
        return out


def main_requests(harness, records):
    """Bodies of the main agent's model requests among a mock's log records: those the
    runner of HARNESS (its slug or program) calls main, is_main_request(record)."""
    runner = runner_of(harness)
    if runner is None or not hasattr(runner, "is_main_request"):
        raise KitError("unknown harness %r: no runner in e2e/kit says which requests are its "
                       "main agent's" % harness)
    return [r.get("body") or {} for r in records if runner.is_main_request(r)]


def agent_requests(records, agent):
    """Bodies of one scripted agent's requests (mock_openai / mock_copilot "agents")."""
    return [r.get("body") or {} for r in records
            if (r.get("reply") or {}).get("agent") == agent and r.get("body")]
