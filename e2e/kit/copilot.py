"""Copilot CLI: its hook commands and its two hook-file dialects, where text lands in a Chat
Completions body (copilot_find_marker), and the runner (CopilotRunner, mixed into Sandbox):
the hooks file and `copilot -p` runs in BYOK + offline mode.

Everything the kit knows about Copilot CLI is here (docs/contracts/copilot-cli.md)."""

import json
import os
import re

from .common import BASE_PATH, HOOK_TIMEOUT_S, HarnessRunner, KitError, hook_binaries
from .harnesses import harness_dir
from .landing import find_landings

__all__ = ["COPILOT_CAMEL_EVENTS", "COPILOT_DATETIME_RE", "COPILOT_HOOK_BINARIES",
           "COPILOT_MODEL", "COPILOT_PASCAL_EVENTS", "COPILOT_POST_LABEL", "CopilotRunner",
           "copilot_cache_dir", "copilot_find_marker", "copilot_segments"]

COPILOT_MODEL = "gpt-4.1"


COPILOT_HOOK_BINARIES = hook_binaries("copilot")


def copilot_cache_dir():
    """XDG_CACHE_HOME of every Copilot run: the native CLI unpacks ~235 MB into
    copilot/pkg/linux-x64/<version>/ there on first use, so it is shared across runs."""
    return os.path.join(harness_dir(), "copilot-cache")


def cli_env():
    """The environment of `copilot --version` (kit.ensure): offline, no auto-update; its
    first run unpacks the native CLI into copilot_cache_dir()."""
    os.makedirs(copilot_cache_dir(), exist_ok=True)
    return {"PATH": BASE_PATH, "HOME": os.path.join(copilot_cache_dir(), "home"),
            "XDG_CACHE_HOME": copilot_cache_dir(), "COPILOT_OFFLINE": "true",
            "COPILOT_AUTO_UPDATE": "false", "LANG": "C.UTF-8"}


# Copilot CLI's two hook-file dialects (docs/contracts/copilot-cli.md §2): event names per style.
COPILOT_CAMEL_EVENTS = ("sessionStart", "sessionEnd", "userPromptSubmitted", "userPromptTransformed",
                        "preToolUse", "postToolUse", "postToolUseFailure", "errorOccurred",
                        "agentStop", "subagentStart", "subagentStop", "preCompact",
                        "permissionRequest", "notification", "preMcpToolCall")
COPILOT_PASCAL_EVENTS = ("SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse",
                         "PostToolUse", "PostToolUseFailure", "Stop", "SubagentStart",
                         "SubagentStop", "PreCompact", "PermissionRequest", "Notification",
                         "ErrorOccurred")


# What Copilot puts around hook text (scenario checks).
COPILOT_DATETIME_RE = r"<current_datetime>[^<]*</current_datetime>\n\n"
COPILOT_POST_LABEL = '\n\nTool "bash" succeeded. Additional guidance from postToolUse hooks:\n'


# --------------------------------------------------------------------------- marker search

def copilot_segments(body):
    """(message_index, role, "content", path, text) for every Chat Completions message of
    a request body (string content, or the text parts of a content list)."""
    for i, m in enumerate(body.get("messages") or []):
        if not isinstance(m, dict):
            continue
        c = m.get("content")
        if isinstance(c, list):
            for j, p in enumerate(c):
                if isinstance(p, dict) and isinstance(p.get("text"), str):
                    yield i, m.get("role"), "content", "messages[%d].content[%d].text" % (i, j), p["text"]
        elif isinstance(c, str):
            yield i, m.get("role"), "content", "messages[%d].content" % i, c
        for k, tc in enumerate(m.get("tool_calls") or []):
            fn = (tc or {}).get("function") or {}
            yield (i, m.get("role"), "tool_call", "messages[%d].tool_calls[%d]" % (i, k),
                   "%s %s" % (fn.get("name"), fn.get("arguments")))


def copilot_find_marker(requests, marker):
    """[Landing] for every Copilot message (messages[i].content) that holds marker."""
    return find_landings(copilot_segments, requests, marker)


# --------------------------------------------------------------------------- runs

class CopilotRunner(HarnessRunner):
    """Sandbox's Copilot CLI half (Sandbox provides _dir(), root, mock, _env() and
    _run())."""

    SLUG = "copilot"
    MAIN_REQUESTS = (("agent",), "agent", "main")
    SUMMARY = "summarize_copilot_requests"

    def copilot_home(self):
        return self._dir("home", ".copilot")

    def install_env(self):
        """What `preloop-hooks install` needs to find Copilot's files in this sandbox."""
        return {"COPILOT_HOME": self.copilot_home()}

    def write_copilot_hooks(self, commands, style="camel", timeout_s=HOOK_TIMEOUT_S, name="preloop"):
        """Wire one command per Copilot event ({event: command}) into
        $COPILOT_HOME/hooks/<name>.json, user hooks (no trust needed). style "camel":
        {"version": 1, "hooks": {"sessionStart": [{"type": "command", "bash": CMD,
        "timeoutSec": N}]}} (Copilot's own event names, camelCase stdin); "pascal": the
        Claude-style {"hooks": {"SessionStart": [{"hooks": [{"type": "command",
        "command": CMD, "timeout": N}]}]}} (matcher "*" on tool events; snake_case stdin)."""
        known = COPILOT_CAMEL_EVENTS if style == "camel" else COPILOT_PASCAL_EVENTS
        unknown = [ev for ev in commands if ev not in known]
        if unknown:
            raise KitError("not %s Copilot events: %s" % (style, unknown))
        if style == "camel":
            doc = {"version": 1, "hooks": {ev: [{"type": "command", "bash": cmd, "timeoutSec": timeout_s}]
                                           for ev, cmd in commands.items()}}
        else:
            doc = {"hooks": {}}
            for ev, cmd in commands.items():
                group = {"hooks": [{"type": "command", "command": cmd, "timeout": timeout_s}]}
                if ev in ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest"):
                    group = {"matcher": "*", **group}
                doc["hooks"][ev] = [group]
        self.settings_path = os.path.join(self._dir("home", ".copilot", "hooks"), name + ".json")
        with open(self.settings_path, "w") as f:
            json.dump(doc, f, indent=1)
        return self.settings_path

    def copilot_env(self, model=COPILOT_MODEL, env=None):
        return self._env({"COPILOT_HOME": self.copilot_home(), "XDG_CACHE_HOME": copilot_cache_dir(),
                          "NO_COLOR": "1", "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
                          "COPILOT_PROVIDER_BASE_URL": self.mock.url + "/v1",
                          "COPILOT_PROVIDER_API_KEY": "mock-key", "COPILOT_MODEL": model}, env)

    def run_copilot(self, copilot_bin, prompt, session_id=None, model=COPILOT_MODEL, env=None,
                    extra_args=(), during=None, timeout=None):
        """`copilot -p PROMPT --allow-all --no-auto-update --no-ask-user` headless in BYOK +
        offline mode against mock_copilot.py (Chat Completions). session_id (a UUID) is
        passed as --session-id, else read from the `--resume=<id>` hint on stderr."""
        timeout = timeout or float(os.environ.get("PRELOOP_E2E_COPILOT_TIMEOUT", "120"))
        argv = [copilot_bin, "-p", prompt, "--allow-all", "--no-auto-update", "--no-ask-user",
                "--no-color", "--log-dir", os.path.join(self.root, "copilot-logs")]
        if session_id:
            argv += ["--session-id", session_id]
        argv += list(extra_args)
        run = self._run("copilot", argv, self.copilot_env(model, env), timeout, during)
        m = re.search(r"--resume[= ]([0-9a-fA-F-]{36})", run.stderr + run.stdout)
        run.model, run.session_id = model, session_id or (m.group(1) if m else None)
        return run


RUNNER = CopilotRunner
