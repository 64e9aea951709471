"""Gemini CLI: its hook commands, where text lands in a generateContent body
(gemini_find_marker), what Gemini does to an additionalContext (gemini_escaped), and the
runner (GeminiRunner, mixed into Sandbox): settings.json and `gemini -p` runs.

Everything the kit knows about Gemini CLI is here (docs/contracts/gemini-cli.md)."""

import json
import os

from .common import HOOK_TIMEOUT_S, HarnessRunner, hook_binaries
from .landing import find_landings

__all__ = ["GEMINI_HOOK_BINARIES", "GEMINI_MODEL", "GeminiRunner", "gemini_escaped",
           "gemini_find_marker", "gemini_segments"]

GEMINI_MODEL = "gemini-2.5-flash"


GEMINI_HOOK_BINARIES = hook_binaries("gemini")


# --------------------------------------------------------------------------- marker search

def gemini_segments(body):
    """(content_index, role, kind, path, text) for every string of a generateContent body
    that can carry hook text: text parts of every content and of systemInstruction, and
    functionResponse.response.output / .error (where AfterTool context and BeforeTool
    denials land); functionCall args as JSON."""
    si = body.get("systemInstruction") or {}
    for j, p in enumerate(si.get("parts") or [] if isinstance(si, dict) else []):
        if isinstance(p, dict) and isinstance(p.get("text"), str):
            yield -1, "system", "system_instruction", "systemInstruction.parts[%d].text" % j, p["text"]
    for i, c in enumerate(body.get("contents") or []):
        if not isinstance(c, dict):
            continue
        role = c.get("role") or ""
        for j, p in enumerate(c.get("parts") or []):
            if not isinstance(p, dict):
                continue
            base = "contents[%d].parts[%d]" % (i, j)
            if isinstance(p.get("text"), str):
                yield i, role, "text", base + ".text", p["text"]
            fr = p.get("functionResponse")
            if isinstance(fr, dict):
                resp = fr.get("response") or {}
                for k in ("output", "error"):
                    if k in resp:
                        v = resp[k]
                        yield (i, role, "function_response_" + k, base + ".functionResponse.response." + k,
                               v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
            fc = p.get("functionCall")
            if isinstance(fc, dict):
                yield (i, role, "function_call", base + ".functionCall",
                       "%s %s" % (fc.get("name"), json.dumps(fc.get("args"), ensure_ascii=False)))


def gemini_find_marker(requests, marker):
    """[Landing] for every string of the Gemini request bodies that holds marker."""
    return find_landings(gemini_segments, requests, marker)


def gemini_escaped(s):
    """What Gemini does to an additionalContext: every < and > escaped, & and quotes kept."""
    return s.replace("<", "&lt;").replace(">", "&gt;")


# --------------------------------------------------------------------------- runs

class GeminiRunner(HarnessRunner):
    """Sandbox's Gemini CLI half (Sandbox provides _dir(), mock, _env(), _run() and
    _json_output())."""

    SLUG = "gemini"
    MAIN_REQUESTS = (("stream", "generate"), "kind", "main")
    SUMMARY = "summarize_gemini_requests"

    def gemini_dir(self):
        return self._dir("home", ".gemini")

    def installed_settings(self):
        """The file `preloop-hooks install --harness gemini --scope user` writes."""
        return os.path.join(self.gemini_dir(), "settings.json")

    def write_gemini_settings(self, hooks=None, extra=None):
        """$HOME/.gemini/settings.json: API-key auth (required with a base URL, docs/contracts/gemini-cli.md §1),
        no telemetry, no update checks, plus `hooks` (Gemini's {"<Event>": [groups]}) and
        `extra` (top-level keys, merged one level deep). `preloop-hooks install --harness
        gemini` is to add its hooks to this file."""
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}},
                    "privacy": {"usageStatisticsEnabled": False},
                    "telemetry": {"enabled": False},
                    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}}
        for k, v in (extra or {}).items():
            settings[k] = dict(settings.get(k) or {}, **v) if isinstance(v, dict) else v
        if hooks:
            settings["hooks"] = hooks
        self.settings_path = os.path.join(self.gemini_dir(), "settings.json")
        with open(self.settings_path, "w") as f:
            json.dump(settings, f, indent=1)
        return self.settings_path

    def write_gemini_hooks(self, commands, timeout_ms=HOOK_TIMEOUT_S * 1000, extra=None, hook_env=None):
        """Wire one command per Gemini event ({event: command}; "timeout" is in
        milliseconds) into $HOME/.gemini/settings.json, with the base settings; hook_env:
        each hook's "env" (merged over the environment Gemini passes, after its filter)."""
        hooks = {}
        for ev, cmd in commands.items():
            h = {"type": "command", "name": "e2e-%s" % ev, "command": cmd, "timeout": timeout_ms}
            if hook_env:
                h["env"] = dict(hook_env)
            hooks[ev] = [{"hooks": [h]}]
        return self.write_gemini_settings(hooks, extra)

    def gemini_env(self, env=None):
        return self._env({"GEMINI_API_KEY": "mock-key", "GOOGLE_GEMINI_BASE_URL": self.mock.url,
                          "GEMINI_CLI_TRUST_WORKSPACE": "true", "NO_BROWSER": "1"}, env)

    def run_gemini(self, gemini_bin, prompt, session_id=None, model=GEMINI_MODEL, env=None,
                   extra_args=(), during=None, timeout=None):
        """`gemini -p PROMPT -m MODEL --approval-mode yolo -o json` headless against
        mock_gemini.py (write_gemini_settings / write_gemini_hooks first: API-key auth is
        set there). `env` is added to Gemini's environment (e.g. {"GITHUB_SHA": ...});
        session_id (a UUID) is passed as --session-id, else read from the JSON output."""
        timeout = timeout or float(os.environ.get("PRELOOP_E2E_GEMINI_TIMEOUT", "120"))
        argv = [gemini_bin, "-p", prompt, "-m", model, "--approval-mode", "yolo", "-o", "json"]
        if session_id:
            argv += ["--session-id", session_id]
        argv += list(extra_args)
        run = self._run("gemini", argv, self.gemini_env(env), timeout, during)
        run.output, run.model = self._json_output(run.stdout), model
        run.session_id = session_id or (run.output or {}).get("session_id")
        return run


RUNNER = GeminiRunner
