"""Claude Code: its hook commands and settings file, the labels it puts before hook text and
where that text lands in a /v1/messages body (find_marker), mock_anthropic turns, the
headless runner (ClaudeRunner, mixed into Sandbox) and the interactive one (PtyClaude).

Everything the kit knows about Claude Code is here, so a change of Claude Code's wire shape
or hook labels (docs/contracts/claude-code.md) is a change of this module."""

import json
import os
import re
import shlex
import signal
from dataclasses import dataclass

from .common import HOOK_TIMEOUT_S, HarnessRunner, hook_binaries, quote_path, shorten
from .mock import main_requests
from .tty import Tty

__all__ = ["DEBUG_HOOK_LINE_RE", "DEBUG_NOISE_RE", "HOOK_BINARIES", "LABEL_PRE_TOOL_USE_BASH",
           "LABEL_RE", "LABEL_SESSION_START", "LABEL_STOP_BLOCKING_PREFIX", "LABEL_STOP_CONTEXT",
           "LABEL_STOP_FEEDBACK", "MOCK_API_KEY", "MODEL_DEFAULT", "MODEL_SONNET_45",
           "STOP_LABELS", "SYSTEM_REMINDER_RE", "ClaudeRunner", "Hit", "PtyClaude", "bash_turn",
           "find_marker", "first_hit", "is_stop_label", "seed_claude_json", "text_turn"]

MOCK_API_KEY = "sk-ant-mock-key"

# The models that select each Claude Code wire shape (docs/contracts/claude-code.md §3).
MODEL_DEFAULT = None                                # claude-opus-5-5: role:"system" messages
MODEL_SONNET_45 = "claude-sonnet-4-5-20250929"      # <system-reminder> blocks in user messages

HOOK_BINARIES = hook_binaries("claude-code")

LABEL_SESSION_START = "SessionStart hook additional context: "
LABEL_PRE_TOOL_USE_BASH = "PreToolUse:Bash hook additional context: "
LABEL_STOP_CONTEXT = "Stop hook additional context: "
LABEL_STOP_FEEDBACK = "Stop hook feedback:"
LABEL_STOP_BLOCKING_PREFIX = "Stop hook blocking error from command: "
STOP_LABELS = {LABEL_STOP_CONTEXT, LABEL_STOP_FEEDBACK}


# Every label Claude Code 2.1.328 puts in front of hook-provided text.
LABEL_RE = re.compile(
    r'(?:[A-Za-z]+(?::[A-Za-z0-9_.-]+)? hook (?:additional context: |success: |error: '
    r'|blocking error from command: "[^"\n]*": ))'
    r'|(?:(?:Subagent)?Stop hook feedback:\n?)')
DEBUG_HOOK_LINE_RE = re.compile(
    r"Hooks: [A-Z]|Hook [A-Z][A-Za-z]+ \(|\] completed with status|hook JSON"
    r"|[Hh]ook.*(error|timed out|cancel|fail)")
DEBUG_NOISE_RE = re.compile(
    r"hooks module|Checking first line for async|not async, continuing|Successfully parsed")
SYSTEM_REMINDER_RE = re.compile(r"<system-reminder>\n?(.*?)\n?</system-reminder>", re.S)


# --------------------------------------------------------------------------- marker search

@dataclass
class Hit:
    request_index: int      # index among the main conversation's /v1/messages requests
    message_index: int      # index in body.messages (-1: top-level system prompt)
    role: str
    shape: str              # system_message | system_reminder | user_text | tool_result | system_prompt
    label: str | None       # e.g. "PreToolUse:Bash hook additional context: " (None: no label before it)
    text: str               # the segment holding the marker, from its label on

    def short(self, n=300):
        return "req#%d msg[%d] %s/%s label=%r text=%r" % (
            self.request_index, self.message_index, self.role, self.shape, self.label,
            shorten(self.text, n))


def _segments(body):
    """Yield (message_index, role, shape, text) for every place hook text can land."""
    sysp = body.get("system")
    if sysp:
        if isinstance(sysp, str):
            yield -1, "system", "system_prompt", sysp
        else:
            for b in sysp:
                if isinstance(b, dict) and b.get("type") == "text":
                    yield -1, "system", "system_prompt", b.get("text", "")
    for j, m in enumerate(body.get("messages") or []):
        role = m.get("role")
        if role == "assistant":
            continue
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
        for b in blocks:
            if not isinstance(b, dict):
                continue
            t = b.get("type")
            if t == "text":
                txt = b.get("text", "")
                if role == "system":
                    yield j, role, "system_message", txt
                    continue
                rest, pos = [], 0
                for mm in SYSTEM_REMINDER_RE.finditer(txt):
                    yield j, role, "system_reminder", mm.group(1)
                    rest.append(txt[pos:mm.start()])
                    pos = mm.end()
                rest.append(txt[pos:])
                other = "".join(rest)
                if other.strip():
                    yield j, role, "user_text", other
            elif t == "tool_result":
                c = b.get("content")
                if isinstance(c, list):
                    c = "\n".join(x.get("text", "") for x in c if isinstance(x, dict))
                yield j, role, "tool_result", str(c or "")


def _label_at(text, pos):
    """The last hook label ending at or before pos, and the text from that label on."""
    last = None
    for mm in LABEL_RE.finditer(text, 0, pos):
        last = mm
    if last is None:
        return None, text
    return last.group(0).rstrip("\n"), text[last.start():]


def find_marker(requests, marker):
    """All places `marker` occurs in the given request bodies, in both wire shapes.
    One Hit per segment (system message text block, <system-reminder> block, plain user
    text, tool_result), labelled with the hook label preceding the marker."""
    hits = []
    for i, body in enumerate(requests):
        for j, role, shape, txt in _segments(body):
            k = txt.find(marker)
            if k < 0:
                continue
            label, seg = _label_at(txt, k)
            hits.append(Hit(i, j, role, shape, label, seg))
    return hits


def first_hit(hits):
    return min(hits, key=lambda h: (h.request_index, h.message_index)) if hits else None


def is_stop_label(label):
    return label in STOP_LABELS or (label or "").startswith(LABEL_STOP_BLOCKING_PREFIX)


# --------------------------------------------------------------------------- mock_anthropic turns

def bash_turn(command="echo hi", text="Running it.", **extra):
    """A mock_anthropic turn: some text, then a Bash call running `command`."""
    return dict({"content": [{"type": "text", "text": text},
                             {"type": "tool_use", "name": "Bash",
                              "input": {"command": command, "description": "say hi"}}]}, **extra)


def text_turn(text, **extra):
    """A text-only mock_anthropic turn."""
    return dict({"content": [{"type": "text", "text": text}]}, **extra)


# --------------------------------------------------------------------------- headless runs

class ClaudeRunner(HarnessRunner):
    """Sandbox's Claude Code half: the settings file and `claude -p` runs (Sandbox provides
    home, root, proj, claude_bin, bin(), mock, _env(), _run() and _json_output())."""

    SLUG = "claude-code"
    MAIN_REQUESTS = (("messages",), "kind", "main")
    SUMMARY = "summarize_requests"

    claude_bin = None   # the CLI run_claude() runs: Sandbox(..., claude_bin=PATH)

    def prepare(self):
        """A new sandbox's $HOME/.claude."""
        os.makedirs(os.path.join(self.home, ".claude"), exist_ok=True)

    def installed_settings(self):
        """The file `preloop-hooks install --harness claude-code --scope user` writes."""
        return os.path.join(self.home, ".claude", "settings.json")

    def wire_without_install(self):
        """Sandbox.install_hooks() under a preloop-hooks without `install`: the settings
        file written by the kit."""
        self.write_settings()

    def write_settings(self, commands=None, extra_hooks=None):
        """Write $HOME/.claude/settings.json wiring one command per event. `commands`
        maps event -> command line; default: the project's hook binaries. `extra_hooks`
        maps event -> a list of further hook entries (dicts, e.g. an async watcher)
        appended after that event's command."""
        if commands is None:
            commands = {ev: quote_path(self.bin(b)) for ev, b in HOOK_BINARIES.items()}
        hooks = {}
        for ev, cmd in commands.items():
            group = {"hooks": [{"type": "command", "command": cmd, "timeout": HOOK_TIMEOUT_S}]
                     + list((extra_hooks or {}).get(ev, []))}
            if ev in ("PreToolUse", "PostToolUse"):
                group = {"matcher": "*", **group}
            hooks[ev] = [group]
        self.settings_path = os.path.join(self.home, ".claude", "settings.json")
        with open(self.settings_path, "w") as f:
            json.dump({"hooks": hooks}, f, indent=1)
        return self.settings_path

    def claude_env(self):
        return self._env({
            "ANTHROPIC_BASE_URL": self.mock.url,
            "ANTHROPIC_API_KEY": MOCK_API_KEY,
            "IS_SANDBOX": "1",   # --dangerously-skip-permissions refuses root otherwise
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        })

    def run_claude(self, prompt, session_id, model=None, timeout=None, extra_args=()):
        """`claude -p` headless (--output-format json) against mock_anthropic.py."""
        timeout = timeout or float(os.environ.get("PRELOOP_E2E_CLAUDE_TIMEOUT", "60"))
        argv = [self.claude_bin, "-p", prompt, "--output-format", "json",
                "--dangerously-skip-permissions", "--session-id", session_id,
                "--debug-file", os.path.join(self.root, "claude.debug.log")]
        if model:
            argv += ["--model", model]
        argv += list(extra_args)
        run = self._run("claude", argv, self.claude_env(), timeout)
        run.output, run.model, run.session_id = self._json_output(run.stdout), model, session_id
        return run

    def debug_log_hook_lines(self, limit=60):
        """Lines of claude's debug log that mention hooks (for failure dumps)."""
        path = os.path.join(self.root, "claude.debug.log")
        if not os.path.exists(path):
            return []
        with open(path, errors="replace") as f:
            lines = [l.rstrip("\n") for l in f
                     if DEBUG_HOOK_LINE_RE.search(l) and not DEBUG_NOISE_RE.search(l)]
        return [shorten(l, 400) for l in lines[-limit:]]


# --------------------------------------------------------------------------- interactive

def seed_claude_json(home, proj, api_key=MOCK_API_KEY):
    """Pre-seed $HOME/.claude.json so interactive Claude Code starts straight at its
    prompt (no onboarding, theme, API-key or trust dialog; docs/contracts/claude-code.md §1)."""
    path = os.path.join(home, ".claude.json")
    data = {"hasCompletedOnboarding": True, "theme": "dark",
            "bypassPermissionsModeAccepted": True,
            "customApiKeyResponses": {"approved": [api_key[-20:]], "rejected": []},
            "projects": {proj: {"hasTrustDialogAccepted": True,
                                "hasCompletedProjectOnboarding": True}}}
    with open(path, "w") as f:
        json.dump(data, f)
    return path


class PtyClaude(Tty):
    """An interactive (TTY) Claude Code session on a pseudo-terminal (kit.tty.Tty, 120x40),
    driven by typing: sandbox.start_mock() first. Everything the terminal shows is appended
    to <root>/screen.log; close() ends it (and kills it if it does not go)."""

    def __init__(self, sandbox, session_id, model=None, extra_args=(), env=None):
        assert sandbox.mock, "start_mock() first"
        self.sb = sandbox
        seed_claude_json(sandbox.home, sandbox.proj)
        self.argv = [sandbox.claude_bin, "--dangerously-skip-permissions",
                     "--session-id", session_id,
                     "--debug-file", os.path.join(sandbox.root, "claude.debug.log")]
        if model:
            self.argv += ["--model", model]
        self.argv += list(extra_args)
        self.env = dict(sandbox.claude_env(), TERM="xterm-256color", **(env or {}))
        with open(os.path.join(sandbox.root, "cmdline.txt"), "w") as f:
            f.write("cd %s && env -i %s %s\n" % (
                shlex.quote(sandbox.proj),
                " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in self.env.items()),
                " ".join(shlex.quote(a) for a in self.argv)))
        self.screen_path = os.path.join(sandbox.root, "screen.log")
        super().__init__(self.argv, self.env, sandbox.proj, log_path=self.screen_path)

    def exit(self, timeout=20):
        """Leave with /exit (then Ctrl-C twice if it lingers); the exit status or None."""
        if not self.alive():
            return self.exit_status
        self.type("/exit")
        if self.wait_until(lambda: not self.alive(), timeout / 2):
            return self.exit_status
        self.ctrl_c(2)
        self.wait_until(lambda: not self.alive(), timeout / 2)
        return self.exit_status

    def close(self):
        super().close(sig=signal.SIGKILL, secs=10)

    def requests(self):
        """Bodies of the main conversation's /v1/messages requests so far."""
        return main_requests("claude", self.sb.mock.records())


RUNNER = ClaudeRunner
