"""Codex CLI: its hook commands, where text lands in a /v1/responses body
(codex_find_marker), and the runner (CodexRunner, mixed into Sandbox): config.toml with the
mock as the model provider and `codex exec` runs.

Everything the kit knows about Codex is here (docs/contracts/codex.md)."""

import json
import os

from .common import HarnessRunner, hook_binaries

__all__ = ["CODEX_HOOK_BINARIES", "CodexRunner", "codex_find_marker", "codex_segments"]

CODEX_HOOK_BINARIES = tuple(hook_binaries("codex").values())


# --------------------------------------------------------------------------- marker search

def codex_segments(body):
    """(item_index, role or type, text) for every input item of a /v1/responses body that
    can carry text: messages (any role) and function_call_output."""
    for i, it in enumerate(body.get("input") or []):
        if not isinstance(it, dict):
            continue
        t = it.get("type")
        if t == "message" or (t is None and it.get("role")):
            c = it.get("content")
            if isinstance(c, str):
                txt = c
            else:
                txt = "".join(x.get("text", "") for x in c or [] if isinstance(x, dict))
            yield i, it.get("role"), txt
        elif t == "function_call_output":
            o = it.get("output")
            yield i, "function_call_output", o if isinstance(o, str) else json.dumps(o)


def codex_find_marker(requests, marker):
    """[(request_index, item_index, role, text)] for every input item holding marker."""
    return [(n, i, role, txt) for n, body in enumerate(requests)
            for i, role, txt in codex_segments(body) if marker in txt]


# --------------------------------------------------------------------------- runs

class CodexRunner(HarnessRunner):
    """Sandbox's Codex half (Sandbox provides _dir(), proj, mock, session_ids(), _env() and
    _run())."""

    SLUG = "codex"
    MAIN_REQUESTS = (("responses",), "kind", "agent")
    SUMMARY = "summarize_codex_requests"

    def codex_home(self):
        return self._dir("codex-home")

    def install_env(self):
        """What `preloop-hooks install` needs to find Codex's files in this sandbox."""
        return {"CODEX_HOME": self.codex_home()}

    def installed_settings(self):
        """The file `preloop-hooks install --harness codex --scope user` writes."""
        return os.path.join(self.codex_home(), "hooks.json")

    def write_codex_config(self, approve_for_me=False):
        """$CODEX_HOME/config.toml: the mock as the model provider (no retries). Written
        before `preloop-hooks install --harness codex`, which adds the hooks' trust
        entries to this same file."""
        assert self.mock, "start_mock(script, 'openai') first"
        lines = ['model = "mock-model"', 'model_provider = "mock"',
                 'approval_policy = "%s"' % ("on-request" if approve_for_me else "never"),
                 'sandbox_mode = "%s"' % ("workspace-write" if approve_for_me else "danger-full-access"),
                 "check_for_update_on_startup = false", "",
                 "[model_providers.mock]", 'name = "mock"',
                 'base_url = "%s/v1"' % self.mock.url, 'wire_api = "responses"',
                 'env_key = "MOCK_API_KEY"', "request_max_retries = 0", "stream_max_retries = 0", ""]
        path = os.path.join(self.codex_home(), "config.toml")
        with open(path, "w") as f:
            f.write("\n".join(lines))
        return path

    def codex_env(self):
        return self._env({"CODEX_HOME": self.codex_home(), "MOCK_API_KEY": "mock-key"})

    def run_codex(self, codex_bin, prompt, approve_for_me=False, during=None, timeout=None):
        """`codex exec` headless against mock_openai.py; `during(proc)` (optional) runs in a
        thread while Codex runs (e.g. a human approving a request). RunResult.requests are
        the agents' /v1/responses bodies; session_id is read from the hooks' session file."""
        timeout = timeout or float(os.environ.get("PRELOOP_E2E_CODEX_TIMEOUT", "90"))
        argv = [codex_bin, "exec", "--skip-git-repo-check", "-C", self.proj, "--color", "never"]
        if approve_for_me:
            argv.append("--approve-for-me")
        argv.append(prompt)
        run = self._run("codex", argv, self.codex_env(), timeout, during)
        sids = self.session_ids()
        run.model, run.session_id = "mock-model", sids[-1] if sids else None
        return run


RUNNER = CodexRunner
