"""Helpers for the preloop-hooks end-to-end suites (Python 3.11 stdlib only).

The suites run the real harness CLIs headless against the project's mock model APIs, with
hooks wired into a temporary HOME, and inspect what the model received:

  harness                    install            mock                 run              where hook text landed
  Claude Code 2.1.328        ensure_claude()    mock_anthropic.py    run_claude()     find_marker()
  Codex CLI 0.169.0          ensure_codex()     mock_openai.py       run_codex()      codex_find_marker()
  Gemini CLI 0.61.0          ensure_gemini()    mock_gemini.py       run_gemini()     gemini_find_marker()
  Copilot CLI 1.0.102        ensure_copilot()   mock_copilot.py      run_copilot()    copilot_find_marker()

A test makes a Sandbox (temp HOME, project dir, PRELOOP_HOME), starts the mock with a
script of turns (sb.start_mock(script, api)), wires the hooks (write_settings /
install_hooks / write_gemini_hooks / write_copilot_hooks), runs the harness (a RunResult:
rc, stdout, stderr, every mock record, the main agent's request bodies) and looks the
markers up. Scenario suites mix in Scenario (failure dumps, receipts, note helpers) with a
mode (LocalMode / ServerMode) and a harness (ClaudeScenarios / CodexScenarios /
GeminiScenarios / CopilotScenarios on NoteScenarios, which hold the scenarios a-d every mode
shares). A missing prerequisite (harness, binaries, server) makes every test that needs it
FAIL with the reason (Prereq), never skip.

Environment knobs (all optional):
  PRELOOP_E2E_HARNESS_DIR   where the harness CLIs are installed / cached
                            (default: e2e/.harness; npm-installed there when missing;
                            Copilot's ~235 MB unpack cache is <dir>/copilot-cache)
  PRELOOP_BIN_DIR           directory holding the already-built preloop-hooks executable (the
                            hook commands are laid out as links to it in its hook-commands/);
                            when unset the kit runs `cargo build --workspace` in the
                            repository root and uses target/debug
  PRELOOP_E2E_CLAUDE_TIMEOUT, PRELOOP_E2E_CODEX_TIMEOUT, PRELOOP_E2E_GEMINI_TIMEOUT,
  PRELOOP_E2E_COPILOT_TIMEOUT  seconds one harness run may take (60, 90, 120, 120)
  PRELOOP_E2E_KEEP=1        keep every run's temp dir (default: only failed runs are kept)
  PRELOOP_E2E_TMPDIR        parent for the temp dirs (default: the system temp dir)
  PRELOOP_E2E_SERVER_HOME, PRELOOP_E2E_SERVER_PORT, PRELOOP_E2E_PG_PORT, PRELOOP_E2E_VENV
                            the real Preloop server of test_real_server.py
                            (e2e/preloop_server/up.sh; see e2e/README.md)
"""

import html
import json
import os
import re
import urllib.error
import urllib.request
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field

E2E_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(E2E_DIR)
MOCK_API_KEY = "sk-ant-mock-key"
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"

CLAUDE_CODE_VERSION = "2.1.328"
CLAUDE_CODE_PACKAGE = "@anthropic-ai/claude-code@" + CLAUDE_CODE_VERSION
CODEX_VERSION = "0.169.0"
CODEX_PACKAGE = "@openai/codex@" + CODEX_VERSION
GEMINI_VERSION = "0.61.0"
GEMINI_PACKAGE = "@google/gemini-cli@" + GEMINI_VERSION
COPILOT_VERSION = "1.0.102"
COPILOT_PACKAGE = "@github/copilot@" + COPILOT_VERSION

# The mock model API of each harness (Sandbox.start_mock(script, api)).
MOCKS = {"anthropic": "mock_anthropic.py", "openai": "mock_openai.py",
         "gemini": "mock_gemini.py", "copilot": "mock_copilot.py"}
MOCK_SCRIPT = os.path.join(E2E_DIR, MOCKS["anthropic"])

# The models that select each Claude Code wire shape (docs/contracts/claude-code.md §3).
MODEL_DEFAULT = None                                # claude-opus-5-5: role:"system" messages
MODEL_SONNET_45 = "claude-sonnet-4-5-20250929"      # <system-reminder> blocks in user messages
GEMINI_MODEL = "gemini-2.5-flash"
COPILOT_MODEL = "gpt-4.1"

CLI_BINARY = "preloop-hooks"
HOOK_BINARIES = {
    "SessionStart": "preloop-claude-code-session-start",
    "UserPromptSubmit": "preloop-claude-code-user-prompt-submit",
    "PreToolUse": "preloop-claude-code-pre-tool-use",
    "Stop": "preloop-claude-code-stop",
    "SessionEnd": "preloop-claude-code-session-end",
}
CODEX_HOOK_BINARIES = ("preloop-codex-session-start", "preloop-codex-user-prompt-submit",
                       "preloop-codex-pre-tool-use", "preloop-codex-permission-request",
                       "preloop-codex-stop", "preloop-codex-session-end")
HOOK_TIMEOUT_S = 10

# Copilot CLI's two hook-file dialects (docs/contracts/copilot-cli.md §2): event names per style.
COPILOT_CAMEL_EVENTS = ("sessionStart", "sessionEnd", "userPromptSubmitted", "userPromptTransformed",
                        "preToolUse", "postToolUse", "postToolUseFailure", "errorOccurred",
                        "agentStop", "subagentStart", "subagentStop", "preCompact",
                        "permissionRequest", "notification", "preMcpToolCall")
COPILOT_PASCAL_EVENTS = ("SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse",
                         "PostToolUse", "PostToolUseFailure", "Stop", "SubagentStart",
                         "SubagentStop", "PreCompact", "PermissionRequest", "Notification",
                         "ErrorOccurred")

LABEL_SESSION_START = "SessionStart hook additional context: "
LABEL_USER_PROMPT_SUBMIT = "UserPromptSubmit hook additional context: "
LABEL_PRE_TOOL_USE_BASH = "PreToolUse:Bash hook additional context: "
LABEL_STOP_CONTEXT = "Stop hook additional context: "
LABEL_STOP_FEEDBACK = "Stop hook feedback:"
LABEL_STOP_BLOCKING_PREFIX = "Stop hook blocking error from command: "
STOP_LABELS = {LABEL_STOP_CONTEXT, LABEL_STOP_FEEDBACK}


def _notes_res(lt, gt, framing=""):
    """(block regex, element regex) of an operator-notes block framed by lt/gt: < > (the
    XML block) or [ ] (the bracket block the Gemini hooks write, its framing line apart)."""
    def tag(s):
        return re.escape(lt) + s + re.escape(gt)
    return (re.compile(tag(r'operator-notes count="(?P<count>\d+)" source="preloop-control-plane"') + r'\n'
                       + framing + r'(?P<inner>.*?)\n' + tag('/operator-notes'), re.S),
            re.compile(tag(r'operator-note id="(?P<id>[^"]*)" from="(?P<from>[^"]*)" auth="(?P<auth>[^"]*)" '
                           r'at="(?P<at>[^"]*)"') + r'\n(?P<body>.*?)\n' + tag('/operator-note'), re.S))


NOTES_BLOCK_RE, NOTE_ELEMENT_RE = _notes_res("<", ">")

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
TERMINAL_STATES = {"delivered", "expired", "cancelled", "undeliverable"}


class KitError(RuntimeError):
    """The environment cannot run the suite (install/build failed, mock did not start...)."""


# --------------------------------------------------------------------------- setup

def _log(msg):
    sys.stderr.write("[e2e] %s\n" % msg)
    sys.stderr.flush()


def harness_dir():
    return os.path.abspath(os.environ.get("PRELOOP_E2E_HARNESS_DIR")
                           or os.path.join(E2E_DIR, ".harness"))


def copilot_cache_dir():
    """XDG_CACHE_HOME of every Copilot run: the native CLI unpacks ~235 MB into
    copilot/pkg/linux-x64/<version>/ there on first use, so it is shared across runs."""
    return os.path.join(harness_dir(), "copilot-cache")


def _tool_version(path, env=None):
    """`path --version` (stripped stdout), or None when it does not run."""
    try:
        p = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def _npm_install(d, package, name, found):
    """npm-install PACKAGE into the harness directory D (a private package.json
    is created first); raise KitError with npm's output when it fails."""
    npm = shutil.which("npm")
    if not npm:
        raise KitError("%s is not installed in %s and npm is not on PATH" % (name, d))
    _log("installing %s into %s (found: %r)" % (package, d, found))
    os.makedirs(d, exist_ok=True)
    pkg = os.path.join(d, "package.json")
    if not os.path.exists(pkg):
        with open(pkg, "w") as f:
            f.write('{"private": true}\n')
    # A throwaway download cache: the packages stay in D, and npm's own cache
    # (~0.5 GB for the four harnesses) would only take disk a CI run lacks.
    with tempfile.TemporaryDirectory(prefix="preloop-npm-cache-") as cache:
        p = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--cache", cache, package],
                           cwd=d, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise KitError("npm install %s failed (rc %d):\n%s\n%s"
                       % (package, p.returncode, p.stdout[-3000:], p.stderr[-3000:]))


def _ensure_npm(bin_name, package, name, version_ok, env=None, repair=None):
    """The path of node_modules/.bin/BIN_NAME in harness_dir() once `--version` satisfies
    version_ok, npm-installing PACKAGE first when it does not (CI starts from a fresh
    machine); repair(harness_dir) may fix an install npm left half done."""
    d = harness_dir()
    path = os.path.join(d, "node_modules", ".bin", bin_name)
    v = _tool_version(path, env)
    if v and version_ok(v):
        return path
    _npm_install(d, package, name, v)
    v = _tool_version(path, env)
    if not v and repair:
        repair(d)
        v = _tool_version(path, env)
    if not (v and version_ok(v)):
        raise KitError("installed %s (%s) reports %r, want %s" % (name, path, v, package))
    return path


def _repair_claude(d):
    # The package's postinstall puts the native binary in place; run it if npm skipped it.
    q = subprocess.run(["node", "install.cjs"], cwd=os.path.join(d, "node_modules", "@anthropic-ai",
                                                                 "claude-code"),
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if q.returncode != 0:
        _log("`node install.cjs` exited %d:\n%s\n%s" % (q.returncode, q.stdout[-3000:], q.stderr[-3000:]))


def ensure_claude():
    """Path of a working Claude Code CLI of the pinned version (npm-installed when missing)."""
    return _ensure_npm("claude", CLAUDE_CODE_PACKAGE, "Claude Code",
                       lambda v: v.startswith(CLAUDE_CODE_VERSION + " "), repair=_repair_claude)


def ensure_codex():
    """Path of a working Codex CLI of the pinned version (npm-installed when missing)."""
    return _ensure_npm("codex", CODEX_PACKAGE, "Codex", lambda v: v.endswith(" " + CODEX_VERSION))


def ensure_gemini():
    """Path of a working Gemini CLI of the pinned version (npm-installed when missing)."""
    return _ensure_npm("gemini", GEMINI_PACKAGE, "Gemini CLI", lambda v: v == GEMINI_VERSION)


def ensure_copilot():
    """Path of a working Copilot CLI of the pinned version (npm-installed when missing).
    Its first `--version` unpacks the native CLI into copilot_cache_dir()."""
    os.makedirs(copilot_cache_dir(), exist_ok=True)
    env = {"PATH": BASE_PATH, "HOME": os.path.join(copilot_cache_dir(), "home"),
           "XDG_CACHE_HOME": copilot_cache_dir(), "COPILOT_OFFLINE": "true",
           "COPILOT_AUTO_UPDATE": "false", "LANG": "C.UTF-8"}
    return _ensure_npm("copilot", COPILOT_PACKAGE, "Copilot CLI",
                       lambda v: v.startswith("GitHub Copilot CLI %s." % COPILOT_VERSION), env=env)


def build_binaries(required=()):
    """Return a directory holding preloop-hooks and every hook command: the one executable
    from PRELOOP_BIN_DIR when set, else target/debug after `cargo build --workspace` in the
    repository root, laid out as `preloop-hooks install` lays it out (`preloop-hooks links`:
    hard links to it, each hook started under its own name) in its hook-commands/ subdirectory.
    Raises KitError when preloop-hooks, a Claude Code hook or one of `required` is missing."""
    bin_dir = os.environ.get("PRELOOP_BIN_DIR")
    if bin_dir:
        bin_dir = os.path.abspath(bin_dir)
    else:
        _log("cargo build --workspace (in %s)" % REPO_ROOT)
        p = subprocess.run(["cargo", "build", "--workspace"], cwd=REPO_ROOT,
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise KitError("cargo build --workspace failed (rc %d):\n%s"
                           % (p.returncode, p.stderr[-6000:]))
        target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO_ROOT, "target")
        bin_dir = os.path.join(os.path.abspath(target), "debug")
    exe = os.path.join(bin_dir, CLI_BINARY)
    if not os.access(exe, os.X_OK):
        raise KitError("no %s executable in %s" % (CLI_BINARY, bin_dir))
    commands = os.path.join(bin_dir, "hook-commands")
    p = subprocess.run([exe, "links", commands], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise KitError("%s links %s failed (rc %d): %s" % (exe, commands, p.returncode, p.stderr))
    missing = [n for n in [CLI_BINARY] + list(HOOK_BINARIES.values()) + list(required)
               if not os.access(os.path.join(commands, n), os.X_OK)]
    if missing:
        raise KitError("missing commands in %s: %s" % (commands, ", ".join(missing)))
    return commands


def ensure_packages():
    """Return the directory holding what scripts/package writes (the release tarball with its
    .sha256, the npm tarballs): PRELOOP_PACKAGE_DIR when set (scripts/test packs once), else
    `scripts/package` into a fresh temp dir (builds the release profile: minutes when cold)."""
    out = os.environ.get("PRELOOP_PACKAGE_DIR")
    if not out:
        out = tempfile.mkdtemp(prefix="preloop-e2e-packages-", dir=os.environ.get("PRELOOP_E2E_TMPDIR"))
        _log("scripts/package %s" % out)
        p = subprocess.run([os.path.join(REPO_ROOT, "scripts", "package"), out], cwd=REPO_ROOT,
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise KitError("scripts/package failed (rc %d):\n%s" % (p.returncode, p.stderr[-6000:]))
    names = os.listdir(out)
    if not any(n.endswith(".tar.gz") for n in names) or not any(n.endswith(".tgz") for n in names):
        raise KitError("%s holds no release tarball or no npm tarball: %s" % (out, names))
    return os.path.abspath(out)


def npm_install_packages(package_dir):
    """`npm install -g --offline --prefix P` of every npm tarball in package_dir, as a user
    installs them with no registry; returns P (its bin/ holds the preloop-hooks command)."""
    prefix = tempfile.mkdtemp(prefix="preloop-e2e-npm-", dir=os.environ.get("PRELOOP_E2E_TMPDIR"))
    tgz = sorted(os.path.join(package_dir, n) for n in os.listdir(package_dir) if n.endswith(".tgz"))
    cache = tempfile.mkdtemp(prefix="preloop-e2e-npm-cache-", dir=os.environ.get("PRELOOP_E2E_TMPDIR"))
    try:
        p = subprocess.run(["npm", "install", "-g", "--offline", "--no-audit", "--no-fund",
                            "--cache", cache, "--prefix", prefix] + tgz,
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
                           env={"PATH": BASE_PATH, "HOME": prefix})
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if p.returncode != 0:
        raise KitError("npm install -g --offline %s failed (rc %d): %s"
                       % (" ".join(tgz), p.returncode, (p.stdout + p.stderr)[-3000:]))
    return prefix


def fail_setup(msg):
    """Raise KitError(msg): for Prereq.get(name, lambda: cond or fail_setup("why"))."""
    raise KitError(msg)


class Prereq:
    """What a test module needs (a harness CLI, the built binaries, a server), set up once
    in setUpModule with get(); a test that needs something that could not be had FAILS
    with the reason (require()), never skips. The first failure carries the whole error,
    later ones a pointer to it."""

    def __init__(self):
        self.values, self.errors, self.shown = {}, {}, set()

    def get(self, name, fn):
        try:
            self.values[name] = fn()
        except Exception as e:   # noqa: BLE001 -- reported by every test that needs it
            self.values[name] = None
            self.errors[name] = "%s: %s" % (type(e).__name__, e)
            _log("PREREQUISITE %s FAILED: every test that needs it fails: %s"
                 % (name, shorten(self.errors[name], 300)))
        return self.values[name]

    def __getitem__(self, name):
        return self.values.get(name)

    def set(self, name, value):
        self.values[name] = value

    def require(self, test, *names):
        for name in names or list(self.errors):
            if name in self.errors:
                if name in self.shown:
                    test.fail("SETUP: prerequisite %r is missing (its error is in the first "
                              "failure of this module)" % name)
                self.shown.add(name)
                test.fail("SETUP: prerequisite %r is missing: %s" % (name, self.errors[name]))
            if name not in self.values:
                test.fail("SETUP: prerequisite %r was never set up (setUpModule did not run?)" % name)


# --------------------------------------------------------------------------- mock

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
    """Bodies of the main agent's model requests among a mock's log records."""
    def main(r):
        route, reply = r.get("route"), r.get("reply") or {}
        if harness == "claude":
            return route == "messages" and reply.get("kind") == "main"
        if harness == "codex":
            return route == "responses" and reply.get("kind") == "agent"
        if harness == "gemini":
            return route in ("stream", "generate") and reply.get("kind") == "main"
        if harness == "copilot":
            return route == "agent" and reply.get("agent") == "main"
        raise KitError("unknown harness %r" % harness)
    return [r.get("body") or {} for r in records if main(r)]


def agent_requests(records, agent):
    """Bodies of one scripted agent's requests (mock_openai / mock_copilot "agents")."""
    return [r.get("body") or {} for r in records
            if (r.get("reply") or {}).get("agent") == agent and r.get("body")]


# --------------------------------------------------------------------------- Claude Code: marker search

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


def note_blocks(text):
    """Parse the <operator-notes> blocks in text: [(block_text, count, [element dicts])]."""
    out = []
    for mm in NOTES_BLOCK_RE.finditer(text):
        els = [dict(e.groupdict()) for e in NOTE_ELEMENT_RE.finditer(mm.group("inner"))]
        out.append((mm.group(0), int(mm.group("count")), els))
    return out


# --------------------------------------------------------------------------- Codex: marker search

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


def summarize_codex_requests(requests, markers=(), width=240, wide=1500):
    """Each request's input items after the previous request's (shortened)."""
    out, prev = [], 0
    for n, body in enumerate(requests):
        items = body.get("input") or []
        out.append("--- request #%d items=%d%s" % (n, len(items),
                   " (items[0:%d] as in request #%d)" % (prev, n - 1) if prev else ""))
        for i, it in enumerate(items):
            if i < prev or not isinstance(it, dict):
                continue
            t = it.get("type") or "message"
            if t == "function_call":
                s = "%s %s" % (it.get("name"), it.get("arguments"))
            else:
                seg = [x for x in codex_segments({"input": [it]})]
                s = seg[0][2] if seg else json.dumps(it)
            out.append("  [%d] %-20s %-10s %r" % (i, t, it.get("role") or "",
                                                 _excerpt(s, markers, width, wide)))
        prev = len(items)
    return "\n".join(out)


# --------------------------------------------------------------------------- Gemini / Copilot: marker search

@dataclass
class Landing:
    """Where a string landed in one Gemini or Copilot request body."""
    request_index: int      # index among the requests searched (e.g. RunResult.requests)
    index: int              # contents[index] (Gemini) / messages[index] (Copilot); -1: systemInstruction
    role: str               # user | model | system (Gemini); system | user | assistant | tool (Copilot)
    kind: str               # Gemini: text | function_response_output | function_response_error |
                            #         function_call | system_instruction; Copilot: content
    path: str               # JSON path in the body, e.g. contents[2].parts[0].functionResponse.response.output
    text: str               # the whole string at that path

    def short(self, n=300):
        return "req#%d %s (%s/%s) text=%r" % (self.request_index, self.path, self.role, self.kind,
                                             shorten(self.text, n))


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


def _find_landings(segments, requests, marker):
    return [Landing(n, i, role, kind, path, txt) for n, body in enumerate(requests)
            for i, role, kind, path, txt in segments(body) if marker in txt]


def gemini_find_marker(requests, marker):
    """[Landing] for every string of the Gemini request bodies that holds marker."""
    return _find_landings(gemini_segments, requests, marker)


def copilot_find_marker(requests, marker):
    """[Landing] for every Copilot message (messages[i].content) that holds marker."""
    return _find_landings(copilot_segments, requests, marker)


def first_landing(landings):
    """The earliest landing, or None; later requests repeat the history, so
    {(l.index, l.path) for l in landings} tells how many distinct places there are."""
    return min(landings, key=lambda h: (h.request_index, h.index)) if landings else None


def _summarize_landings(requests, segments, key, markers, width, wide):
    out, prev = [], 0
    for n, body in enumerate(requests):
        items = body.get(key) or []
        out.append("--- request #%d %s=%d%s" % (n, key, len(items),
                   " (%s[0:%d] as in request #%d)" % (key, prev, n - 1) if prev else ""))
        for i, role, kind, path, txt in segments(body):
            if i >= prev or (n == 0 and i < 0):
                out.append("  %-48s %-9s %r" % (path, role, _excerpt(txt, markers, width, wide)))
        prev = len(items)
    return "\n".join(out)


def summarize_gemini_requests(requests, markers=(), width=240, wide=1500):
    """Each request's new contents (systemInstruction once), shortened around markers."""
    return _summarize_landings(requests, gemini_segments, "contents", markers, width, wide)


def summarize_copilot_requests(requests, markers=(), width=240, wide=1500):
    """Each request's new messages, shortened around markers."""
    return _summarize_landings(requests, copilot_segments, "messages", markers, width, wide)


# --------------------------------------------------------------------------- dumps

def shorten(s, n=400):
    s = s if isinstance(s, str) else json.dumps(s, ensure_ascii=False)
    if len(s) <= n:
        return s
    return s[: n // 2] + " ...[%d chars cut]... " % (len(s) - n) + s[-n // 2:]


def _excerpt(s, markers, width, wide):
    """Shorten s; if it holds a marker, an <operator-note or a hook label, show a wide
    window starting a little before the first of them instead."""
    positions = [s.find(m) for m in markers if m and m in s]
    if "<operator-note" in s:
        positions.append(s.find("<operator-note"))
    mm = LABEL_RE.search(s)
    if mm:
        positions.append(mm.start())
    if not positions:
        return shorten(s, width)
    lo = max(0, min(positions) - 150)
    hi = min(len(s), lo + wide)
    return "%s%s%s" % ("[%d chars]..." % lo if lo else "", s[lo:hi],
                       "...[%d chars]" % (len(s) - hi) if hi < len(s) else "")


def summarize_request(i, body, markers=(), skip=0, width=240, wide=2000):
    """A short text rendering of one request body, block by block: messages before `skip`
    are left out (they repeat the previous request); blocks holding a marker, an
    <operator-note> or a hook label are shown widely around it, others shortened."""
    msgs = body.get("messages") or []
    lines = ["--- request #%d model=%s messages=%d%s" % (
        i, body.get("model"), len(msgs),
        (" (messages[0:%d] left out: as in request #%d)" % (skip, i - 1)) if skip else "")]
    for j, m in enumerate(msgs):
        if j < skip:
            continue
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
        for b in blocks:
            t = b.get("type")
            if t == "text":
                s = b.get("text", "")
            elif t == "tool_use":
                s = "%s %s" % (b.get("name"), json.dumps(b.get("input"), ensure_ascii=False))
            elif t == "tool_result":
                s = b.get("content")
                s = json.dumps(s, ensure_ascii=False) if not isinstance(s, str) else s
                if b.get("is_error"):
                    s = "[is_error] " + s
            else:
                s = json.dumps(b, ensure_ascii=False)
            lines.append("  [%d] %-9s %-11s %r" % (j, m.get("role"), t,
                                                    _excerpt(s, markers, width, wide)))
    return "\n".join(lines)


def summarize_requests(requests, markers=()):
    """summarize_request for a whole run, each request showing only its new messages."""
    out, prev = [], 0
    for i, body in enumerate(requests):
        out.append(summarize_request(i, body, markers, skip=prev))
        prev = len(body.get("messages") or [])
    return "\n".join(out)


SUMMARIZERS = {"claude": summarize_requests, "codex": summarize_codex_requests,
               "gemini": summarize_gemini_requests, "copilot": summarize_copilot_requests}


def before_reply_lines(run, width=400):
    """One line per before_reply_cmd the mock ran (or skipped) during a run."""
    out = []
    for br in run.before_reply():
        out.append("mock before_reply_cmd: argv=%s rc=%s stdout=%s stderr=%s%s" % (
            shorten(" ".join(str(a) for a in br.get("argv", [])), 300), br.get("rc"),
            shorten(br.get("stdout", ""), width), shorten(br.get("stderr", ""), 300),
            (" error=" + br["error"]) if br.get("error") else
            (" skipped=" + br["skipped"]) if br.get("skipped") else ""))
    return out


# --------------------------------------------------------------------------- runs

def poll_state(read, states, timeout):
    """Call read() (a receipt) every 0.2 s until its "state" is in `states` or `timeout`
    seconds have passed; the last answer."""
    deadline = time.time() + timeout
    while True:
        r = read()
        if r.get("state") in states or time.time() >= deadline:
            return r
        time.sleep(0.2)


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
    timed_out: bool = False
    harness: str = "claude"
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


class Sandbox:
    """One scenario's world: temp HOME, project dir, PRELOOP_HOME, mock, hook config, runs."""

    def __init__(self, name, bin_dir, claude_bin=None):
        self.name = name
        self.bin_dir = bin_dir
        self.claude_bin = claude_bin
        parent = os.environ.get("PRELOOP_E2E_TMPDIR") or None
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:60]
        self.root = tempfile.mkdtemp(prefix="preloop-e2e-%s-" % slug, dir=parent)
        self.home = os.path.join(self.root, "home")
        self.proj = os.path.join(self.root, "proj")
        self.preloop_home = os.path.join(self.root, "preloop-home")
        for d in (self.home, os.path.join(self.home, ".claude"), self.proj, self.preloop_home):
            os.makedirs(d, exist_ok=True)
        self.keep = os.environ.get("PRELOOP_E2E_KEEP") == "1"
        self.mock = None
        self.settings_path = None
        self.hook_env = {}     # added to the harness's env (so its hooks get it): server mode
        self.mock_env = {}     # added to the mock's env (its before_reply_cmd get it)
        self.install_output = None

    # -- paths / env ---------------------------------------------------------
    def bin(self, name):
        return os.path.join(self.bin_dir, name)

    def base_env(self):
        """The clean environment of everything the suite starts (env -i style): no
        PRELOOP_URL / PRELOOP_TOKEN, so the binaries run in local mode."""
        return {"PATH": BASE_PATH, "HOME": self.home, "LANG": "C.UTF-8", "TERM": "dumb",
                "PRELOOP_HOME": self.preloop_home}

    def codex_home(self):
        return self._dir("codex-home")

    def gemini_dir(self):
        return self._dir("home", ".gemini")

    def copilot_home(self):
        return self._dir("home", ".copilot")

    def _dir(self, *parts):
        d = os.path.join(self.root, *parts)
        os.makedirs(d, exist_ok=True)
        return d

    # -- hook wiring ---------------------------------------------------------
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

    def install_hooks(self, harness="claude-code"):
        """Wire the hooks into this sandbox's HOME the way a user does:
        `preloop-hooks install --harness HARNESS --scope user`, when this build of
        preloop-hooks has the command. Returns "install" or, when it has not (yet) and
        HARNESS is claude-code, "kit" after writing the settings file with
        write_settings(). Codex: write_codex_config() first; Gemini: write_gemini_settings()
        first (install adds to those files)."""
        if not has_install_command(self.bin(CLI_BINARY)):
            if harness != "claude-code":
                raise KitError("preloop-hooks has no `install` command; cannot wire %s" % harness)
            self.write_settings()
            return "kit"
        env = self.base_env()
        env.update(CODEX_HOME=self.codex_home(), COPILOT_HOME=self.copilot_home())
        p = subprocess.run(self.cli_argv("install", "--harness", harness, "--scope", "user"),
                           env=env, cwd=self.proj, capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        self.install_output = "rc=%s\nstdout: %s\nstderr: %s" % (p.returncode, p.stdout, p.stderr)
        if p.returncode != 0:
            raise KitError("`preloop-hooks install --harness %s --scope user` (HOME=%s) exited %d\n"
                           "stdout: %s\nstderr: %s" % (harness, self.home, p.returncode,
                                                       p.stdout[-3000:], p.stderr[-3000:]))
        self.settings_path = {"claude-code": os.path.join(self.home, ".claude", "settings.json"),
                              "codex": os.path.join(self.codex_home(), "hooks.json"),
                              "gemini": os.path.join(self.gemini_dir(), "settings.json")}.get(harness)
        return "install"

    # -- operator CLI ----------------------------------------------------------
    def cli_argv(self, *args):
        return [self.bin(CLI_BINARY)] + [str(a) for a in args]

    def cli(self, *args, timeout=30):
        return subprocess.run(self.cli_argv(*args), env=self.base_env(), cwd=self.root,
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def cli_json(self, *args):
        """Run preloop-hooks with the args and parse stdout as one JSON document;
        raises KitError with the exact command and output otherwise."""
        p = self.cli(*args)
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

    def start_codex_mock(self, script):
        return self.start_mock(script, "openai")

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

    # -- failure dumps -----------------------------------------------------------
    def debug_log_hook_lines(self, limit=60):
        """Lines of claude's debug log that mention hooks (for failure dumps)."""
        path = os.path.join(self.root, "claude.debug.log")
        if not os.path.exists(path):
            return []
        with open(path, errors="replace") as f:
            lines = [l.rstrip("\n") for l in f
                     if DEBUG_HOOK_LINE_RE.search(l) and not DEBUG_NOISE_RE.search(l)]
        return [shorten(l, 400) for l in lines[-limit:]]

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


# --------------------------------------------------------------------------- scenario base
# A scenario TestCase is   class T(<Harness>Scenarios, <Mode>, unittest.TestCase)
# (the mode mixins derive from Scenario, so both override its defaults)
#   Harness: ClaudeScenarios | CodexScenarios  -- how the harness is wired and run, where
#            a note lands, and the scenarios a-d every mode shares
#   Mode:    LocalMode (local inbox, `preloop-hooks notes ...`) | ServerMode (the real
#            Preloop server: PREREQ "creds" and "server")  -- how a note is sent and
#            its receipt read, what binds it to the run
# Scenario (below) holds the rest: state, check(), the failure dump, receipts, blocks.


class ScenarioFailure(AssertionError):
    pass


class Scenario:
    """Mixed into a unittest.TestCase (see the comment above). Subclasses set:
    HARNESS ("claude" | "codex" | "gemini" | "copilot"), PREREQ (a Prereq) and PREREQS
    (names it needs)."""

    HARNESS = None
    MODE = None                 # "local" | "real server" (set by the mode mixin)
    EXPECT_AUTH = None          # the auth attribute a delivered note's block must carry
    TOKEN_PREFIX = "E2E"
    PREREQ = None
    PREREQS = ()
    ARTIFACTS = "requests.jsonl, cmdline.txt, home/, preloop-home/"

    # ------------------------------------------------------------------ state
    def setUp(self):
        if self.PREREQ is not None:
            self.PREREQ.require(self, *self.PREREQS)
        self.sb = None
        self.scenario = None
        self.run_result = None
        self.receipts = {}
        self.sent = {}          # note id -> what sending it answered
        self.note_ids = []
        self.markers = []
        self.extra = []         # further lines for the failure dump
        self.wiring = None
        self.sid = None         # the run's session id when the test picks it (Claude Code)

    def bin_dir(self):
        return self.PREREQ["bin_dir"]

    def label(self):
        return self.MODE

    def new_sandbox(self, scenario):
        self.scenario = "%s %s [%s]" % (self.HARNESS, scenario, self.label())
        slug = "%s-%s-%s" % ("srv" if self.MODE != "local" else "loc", self.HARNESS,
                             scenario.split(":")[0])
        self.sb = Sandbox(slug, self.bin_dir(), self.PREREQ["claude"] if self.HARNESS == "claude" else None)
        self.addCleanup(self.sb.close)
        try:
            self.prepare_mode(self.sb)
        except KitError as e:
            raise ScenarioFailure(self.report("setup failed: %s" % e))
        return self.sb

    def prepare_mode(self, sb):
        """Mode hook: server mode mints an agent and sets hook_env / mock_env."""

    # ------------------------------------------------------------------ checks + dump
    def check(self, cond, msg):
        if not cond:
            raise ScenarioFailure(self.report(msg))

    def token(self, tag):
        """A unique marker to put in a note body (listed in failure dumps)."""
        t = "%s-%s-%s" % (self.TOKEN_PREFIX, tag, uuid.uuid4().hex[:10])
        self.markers.append(t)
        return t

    def report(self, msg):
        sb, run = self.sb, self.run_result
        out = ["", "SCENARIO %s: %s" % (self.scenario, msg)]
        if sb:
            sb.keep = True
            out.append("artifacts kept in %s (%s)" % (sb.root, self.ARTIFACTS))
            if self.wiring:
                out.append("hooks wired by: %s" % self.wiring)
            if sb.install_output:
                out.append("install: " + shorten(sb.install_output, 800))
        out.extend(self.mode_lines())
        out.extend(self.extra)
        if run:
            out.append(run.headline())
            out.extend(self.run_lines(run))
            if run.during:
                out.append("during the run: " + shorten(json.dumps(run.during, ensure_ascii=False), 1500))
            out.extend(before_reply_lines(run))
        for nid in self.note_ids:
            try:
                r = self.receipt_now(nid)   # fresh: the state now, not when last checked
            except Exception as e:   # noqa: BLE001 -- a dump must not hide the failure
                r = self.receipts.get(nid) or "unreadable: %s" % e
            out.append("receipt %s: %s" % (self.receipt_where(nid), json.dumps(r, ensure_ascii=False)))
        if run:
            out.append("model requests (new messages/items only; markers: %s):" % ", ".join(self.markers))
            out.append(SUMMARIZERS[run.harness](run.requests, self.markers))
        if sb:
            out.extend(self.harness_log_lines())
            lines = sb.preloop_log_lines()
            if lines:
                out.append("PRELOOP_HOME/log:")
                out.extend("  " + l for l in lines)
        out.extend(self.mode_tail())
        return "\n".join(out)

    def run_lines(self, run):
        """Harness hook: what of the harness's own output goes into a failure dump."""
        return ["stdout: " + shorten(run.stdout, 600), "stderr: " + shorten(run.stderr, 600)]

    def harness_log_lines(self):
        return []

    def mode_lines(self):
        return []

    def mode_tail(self):
        return []

    # ------------------------------------------------------------------ notes + receipts
    def add_sent(self, sent, what):
        self.check(isinstance(sent, dict) and sent.get("note_id"),
                   "%s answered no note_id: %r" % (what, sent))
        if sent["note_id"] not in self.note_ids:
            self.note_ids.append(sent["note_id"])
        self.sent[sent["note_id"]] = sent
        return sent

    def send_before_start(self, body, **target):
        """Send a note before the harness starts (mode: to this run's session, the
        harness's next session, or the agent)."""
        try:
            sent = self.note_before_start(body, **target)
        except KitError as e:
            raise ScenarioFailure(self.report("sending the note failed: %s" % e))
        return self.add_sent(sent, "sending the note before the run")

    def sent_in_turn(self, run, turn, agent=None):
        """What the before_reply_cmd the mock ran before answering `turn` (of `agent`, if
        given) printed: the JSON of the note it sent."""
        recs = [r for r in run.records if r.get("before_reply")
                and r.get("reply", {}).get("turn") == turn and not r["before_reply"].get("skipped")
                and (agent is None or r.get("reply", {}).get("agent") == agent)]
        self.check(recs, "the mock never ran the before_reply_cmd of turn %d (the conversation "
                         "did not reach that turn)" % turn)
        br = recs[0]["before_reply"]
        try:
            sent = json.loads(br.get("stdout", ""))
        except ValueError:
            sent = None
        if isinstance(sent, dict) and sent.get("note_id"):
            self.add_sent(sent, "")
        self.check(br.get("rc") == 0, "`%s` (run by the mock before answering turn %d) exited %s: "
                   "stdout=%r stderr=%r" % (" ".join(map(str, br.get("argv", []))), turn, br.get("rc"),
                                            br.get("stdout"), br.get("stderr")))
        self.add_sent(sent, "`%s`" % " ".join(map(str, br.get("argv", []))))
        self.check_sent_to_run(sent)
        return sent

    def check_receipt(self, note_id, state, event=None, reason=None):
        """Wait for a terminal state; check state, delivery event/channel/time or the
        undeliverable reason, and (mode) what the note is bound to."""
        try:
            r = self.wait_receipt(note_id, TERMINAL_STATES)
        except KitError as e:
            raise ScenarioFailure(self.report("reading the receipt failed: %s" % e))
        self.receipts[note_id] = r
        where = "receipt %s = %s" % (self.receipt_where(note_id), json.dumps(r, ensure_ascii=False))
        self.check(r.get("note_id") == note_id, "note_id mismatch in %s" % where)
        self.check(r.get("state") == state, "state is %r, want %r; %s" % (r.get("state"), state, where))
        if event is not None:
            self.check(r.get("delivery_event") == event and r.get("delivery_channel") == "hook",
                       "delivery_event/channel are %r/%r, want %r/'hook'; %s"
                       % (r.get("delivery_event"), r.get("delivery_channel"), event, where))
            self.check(r.get("delivered_at"), "no delivered_at; %s" % where)
        if reason is not None:
            self.check(r.get("undeliverable_reason") == reason,
                       "undeliverable_reason is %r, want %r; %s" % (r.get("undeliverable_reason"), reason, where))
            self.check(r.get("delivered_at") is None, "an undeliverable note has delivered_at; %s" % where)
        self.check_binding(r, where)
        return r

    def check_block(self, text, note_id, body):
        """The text holds a full <operator-notes count="1" source="preloop-control-plane">
        block with exactly this note (id attribute = the note id, body verbatim, the
        mode's auth); returns (block, element)."""
        blocks = [b for b in note_blocks(text) if any(e["id"] == note_id for e in b[2])]
        self.check(blocks, "no complete <operator-notes count=.. source=\"preloop-control-plane\">"
                           "...</operator-notes> block holding note %s found in: %r"
                   % (note_id, shorten(text, 1500)))
        block, count, elements = blocks[0]
        self.check(count == 1 and len(elements) == 1,
                   "block has count=%d and %d <operator-note> elements, want 1 and 1: %r"
                   % (count, len(elements), shorten(block, 1500)))
        self.check(elements[0]["body"] == body, "note body in the block is %r, want %r"
                   % (elements[0]["body"], body))
        if self.EXPECT_AUTH:
            self.check(elements[0]["auth"] == self.EXPECT_AUTH, "auth=%r in the block, want %r: %r"
                       % (elements[0]["auth"], self.EXPECT_AUTH, shorten(block, 800)))
        return block, elements[0]


class LocalMode(Scenario):
    """Local mode: no PRELOOP_URL / PRELOOP_TOKEN, the local inbox under the sandbox's
    PRELOOP_HOME; notes with `preloop-hooks notes send`, receipts with `notes status`."""

    MODE = "local"
    EXPECT_AUTH = "local"

    def note_before_start(self, body, **target):
        if target:
            raise KitError("local notes go to this run's session or the next one, not %r" % target)
        if self.sid:
            # The run has not started: its full id, and --not-started (an id no known
            # session has is refused otherwise).
            return self.sb.cli_json("notes", "send", "--session", self.sid, "--not-started", "--json", body)
        return self.sb.cli_json("notes", "send", "--next", self.HARNESS, "--json", body)

    def note_to_run_argv(self, body):
        """before_reply_cmd sending a note to this run: `notes send --session <id>`; when
        the harness picks its own id, through with_session.py ("@@SESSION@@" = the id the
        SessionStart hook registered)."""
        if self.sid:
            return self.sb.send_note_argv(self.sid, body)
        return [sys.executable, os.path.join(E2E_DIR, "with_session.py")] + self.sb.send_note_argv(
            "@@SESSION@@", body)

    def check_sent_to_run(self, sent):
        session = (sent.get("target") or {}).get("session")
        self.check(session == self.run_result.session_id,
                   "the note was addressed to session %r, want this run's %r: %r"
                   % (session, self.run_result.session_id, sent))

    def receipt_now(self, note_id):
        return self.sb.note_status(note_id)

    def wait_receipt(self, note_id, states):
        return self.sb.wait_note_state(note_id, states, timeout=8.0)

    def receipt_where(self, note_id):
        return "`notes status %s --json`" % note_id

    def check_binding(self, r, where):
        self.check(r.get("external_session_id") == self.run_result.session_id,
                   "bound to session %r, want this run's %r; %s"
                   % (r.get("external_session_id"), self.run_result.session_id, where))


class ServerMode(Scenario):
    """Server mode against the real Preloop server: a fresh managed agent per scenario
    (its agt_ token as PRELOOP_TOKEN in the harness's, so the hooks', environment), notes
    sent as the human operator (PREREQ["server"], a ServerClient), receipts read from the
    server; PREREQ["creds"] is kit.ensure_server()'s creds.json."""

    MODE = "real server"
    EXPECT_AUTH = "api_key"
    AGENT_KINDS = {"claude": "claude_code", "gemini": "gemini_cli", "copilot": "copilot_cli"}

    def server(self):
        return getattr(self, "server_override", None) or self.PREREQ["server"]

    def deny_account(self, tool):
        """A new account with `tool` disabled for agents (a central deny rule no other
        scenario, nor another test run on this server, sees): start(..., server=it)."""
        try:
            other = self.PREREQ["server"].new_account("e2edeny")
            other.disable_tool(other.account_id, tool)
        except KitError as e:
            self.scenario = "%s e: central deny rule [%s]" % (self.HARNESS, self.label())
            raise ScenarioFailure(self.report("setting up the deny rule failed: %s" % e))
        return other

    def run_denied_shell(self, tool):
        """e: the harness's shell tool (`tool`) disabled by a central deny rule; the run,
        after checking that the denied command did not run."""
        other = self.deny_account(tool)
        self.start("e: central deny rule (%s disabled)" % tool, server=other)
        ran = os.path.join(self.sb.proj, "ran.txt")
        run = self.run_turns([self.shell_turn("echo ran > %s" % quote_path(ran)),
                              self.text_turn("Understood, it was blocked.")])
        self.check(not os.path.exists(ran), "the denied %s command ran (%s exists)" % (tool, ran))
        return run

    def prepare_mode(self, sb):
        self.agent = None
        self.agent = self.server().new_agent(kind=self.AGENT_KINDS.get(self.HARNESS, self.HARNESS))
        sb.hook_env = {"PRELOOP_URL": self.PREREQ["creds"]["base_url"], "PRELOOP_TOKEN": self.agent["agent_token"]}
        sb.mock_env = self.server().server_note_env()

    def note_before_start(self, body, **target):
        sent = self.server().send_note(body, **(target or {"agent_id": self.agent["agent_id"]}))
        self.check(isinstance(sent, dict) and sent.get("state") == "pending",
                   "POST /api/v1/operator-notes answered %r, want a pending note" % (sent,))
        return sent

    def note_to_run_argv(self, body):
        """before_reply_cmd sending a note to this run (external_session_id; "@@SESSION@@"
        when the harness picks its id: server_note.py reads it from the session file)."""
        return self.server().send_note_argv(body, external_session_id=self.sid or "@@SESSION@@")

    def check_sent_to_run(self, sent):
        self.check(sent.get("runtime_session_id"), "the note sent by external_session_id is bound to "
                   "no session (was the session registered by SessionStart?): %r" % sent)

    def receipt_now(self, note_id):
        return self.server().receipt(note_id)

    def wait_receipt(self, note_id, states):
        return self.server().wait_receipt(note_id, states, timeout=10.0)

    def receipt_where(self, note_id):
        return "GET /api/v1/operator-notes/%s" % note_id

    def check_binding(self, r, where):
        self.check(r.get("runtime_session_id"), "the note is bound to no runtime session; %s" % where)
        self.check(r.get("managed_agent_id") == self.agent["agent_id"],
                   "managed_agent_id is %r, want this scenario's agent %s; %s"
                   % (r.get("managed_agent_id"), self.agent["agent_id"], where))
        sent = self.sent.get(r.get("note_id")) or {}
        if sent.get("runtime_session_id"):
            self.check(r.get("runtime_session_id") == sent["runtime_session_id"],
                       "bound to session %r, sending answered %r; %s"
                       % (r.get("runtime_session_id"), sent["runtime_session_id"], where))

    def mode_lines(self):
        agent = getattr(self, "agent", None)
        return ["server %s, agent %s" % (self.PREREQ["creds"]["base_url"], agent["agent_id"])] if agent else []

    def mode_tail(self):
        lines = server_log_tail(15)
        return (["tail of the server log (%s/server.log):" % server_home()]
                + ["  " + l for l in lines]) if lines else []


# --------------------------------------------------------------------------- the scenarios a-d

class NoteScenarios(Scenario):
    """The four conversations every harness runs, in every mode:
      a  a note sent before the run starts (then a shell call and a text turn)
      b  a note to the run sent while the mock answers request #0 with a shell call
      c  a note to the run sent while the mock answers the final text turn: the harness's
         stop hook (RESCUER) rescues it with one extra request
      d  as c, plus a note sent during that rescue turn: no second rescue, the second note
         reaches no request and ends undeliverable / session_ended
    run_scenario_a/b/c set a-c up and run them; where the note must land is the harness's
    own test (test_a_..., test_b_..., test_c_...). d is the same for every harness and runs
    here. A harness's class states its turns (shell_turn, text_turn, run_turns) and how a
    marker is found (FIND_MARKER)."""

    RESCUER = "Stop"            # the hook that rescues a note still pending at the end
    FIND_MARKER = None          # staticmethod (requests, marker) -> [hit], e.g. find_marker
    OVERFLOW = "Nothing more to do."
    PICKS_SESSION = True        # the test picks the run's session id (--session-id)

    def start(self, scenario, server=None):
        """A sandbox for `scenario` (server: ServerMode's client of another account); the
        run's session id is picked here when the harness takes one (PICKS_SESSION)."""
        self.server_override = server
        self.new_sandbox(scenario)
        if self.PICKS_SESSION:
            self.sid = new_session_id()
        return self.sb

    def shell_turn(self, command="echo hi", **extra):
        """A mock turn answering with the harness's shell tool running `command`."""
        raise NotImplementedError

    def text_turn(self, text, **extra):
        """A text-only mock turn (the mock's script shape for the harness)."""
        return dict({"text": text}, **extra)

    def run_turns(self, turns):
        """Run the harness against a mock answering `turns` (then OVERFLOW)."""
        raise NotImplementedError

    def landings(self, requests, marker):
        return self.FIND_MARKER(requests, marker)

    def describe_hits(self, hits):
        return "; ".join(h.short(160) if hasattr(h, "short") else shorten(repr(h), 200)
                         for h in hits) or "nowhere"

    def run_scenario_a(self):
        """a: (run, marker, note_id, body)."""
        self.start("a: note sent before the run starts")
        tok = self.token("A")
        body = "%s Before you start, print the working directory too." % tok
        note_id = self.send_before_start(body)["note_id"]
        return self.run_turns([self.shell_turn(), self.text_turn("All done.")]), tok, note_id, body

    def run_scenario_b(self, shell=None):
        """b, the note sent while the mock answers `shell` (default shell_turn()):
        (run, marker, note_id, body)."""
        self.start("b: note to the run sent mid-run")
        tok = self.token("B")
        body = "%s Mid-run: after this command, stop and summarise." % tok
        run = self.run_turns([dict(shell or self.shell_turn(), before_reply_cmd=self.note_to_run_argv(body)),
                              self.text_turn("All done.")])
        return run, tok, self.sent_in_turn(run, 0)["note_id"], body

    def run_scenario_c(self):
        """c: (run, hits, first hit, note_id, body), after checking that the note reached
        the model and that there was exactly one extra request."""
        self.start("c: note to the run sent after the last tool call")
        tok = self.token("C")
        body = "%s Late note: also mention the exit code." % tok
        run = self.run_turns([
            self.shell_turn(),
            self.text_turn("All done.", before_reply_cmd=self.note_to_run_argv(body)),
            self.text_turn("Noted the operator note.")])
        note_id = self.sent_in_turn(run, 1)["note_id"]
        hits = self.landings(run.requests, tok)
        self.check(hits, "the note never reached the model (no %s rescue)" % self.RESCUER)
        self.check(len(run.requests) == 3, "%d model requests, want 3 (exactly one extra request from "
                                           "the %s rescue)" % (len(run.requests), self.RESCUER))
        return run, hits, min(hits, key=_landing_order), note_id, body

    def test_d_note_pending_at_end_is_undeliverable_session_ended(self):
        self.start("d: note to the run still pending when the run ends")
        tok_a, tok_b = self.token("D1"), self.token("D2")
        body_a = "%s Late note that %s rescues." % (tok_a, self.RESCUER)
        body_b = "%s Note sent during the rescue turn, too late." % tok_b
        run = self.run_turns([
            self.shell_turn(),
            self.text_turn("All done.", before_reply_cmd=self.note_to_run_argv(body_a)),
            self.text_turn("Noted.", before_reply_cmd=self.note_to_run_argv(body_b))])
        note_a = self.sent_in_turn(run, 1)["note_id"]
        note_b = self.sent_in_turn(run, 2)["note_id"]   # fails if there was no rescue turn
        self.check(len(run.requests) == 3, "%d model requests, want 3 (one %s rescue, then "
                                           "stop_hook_active ends the run)" % (len(run.requests), self.RESCUER))
        hits_b = self.landings(run.requests, tok_b)
        self.check(not hits_b, "the note sent during the rescue turn reached the model: %s"
                   % self.describe_hits(hits_b))
        self.check(self.landings(run.requests, tok_a), "the rescued note (prerequisite) is in no request")
        self.check_receipt(note_a, "delivered", event="stop")
        self.check_receipt(note_b, "undeliverable", reason="session_ended")


def _landing_order(h):
    """Earliest first: a Hit, a Landing or a Codex (request, item, role, text) tuple."""
    if isinstance(h, tuple):
        return h[:2]
    return (h.request_index, getattr(h, "message_index", getattr(h, "index", 0)))


# --------------------------------------------------------------------------- Claude Code scenarios

RUN_PROMPT = "Run echo hi"           # the prompt of the Claude Code, Gemini and Copilot runs


def bash_turn(command="echo hi", text="Running it.", **extra):
    """A mock_anthropic turn: some text, then a Bash call running `command`."""
    return dict({"content": [{"type": "text", "text": text},
                             {"type": "tool_use", "name": "Bash",
                              "input": {"command": command, "description": "say hi"}}]}, **extra)


BASH_TURN = bash_turn()


def text_turn(text, **extra):
    """A text-only mock_anthropic turn."""
    return dict({"content": [{"type": "text", "text": text}]}, **extra)


class ClaudeScenarios(NoteScenarios):
    """Claude Code 2.1.328 `claude -p` against mock_anthropic.py, one TestCase per model
    (wire shape: MODEL, MODEL_NAME, CONTEXT_SHAPE), with the scenarios a-d:
      a  note before start -> request #0 under the SessionStart label, once
      b  note sent while the mock answers request #0 (a Bash call) -> request #1 under
         the PreToolUse:Bash label
      c  note sent while the mock answers the final text turn -> one Stop rescue request
      d  as c, plus a note during the rescue turn -> never delivered, session_ended
    WIRING: "settings" (kit.Sandbox.write_settings) or "install" (`preloop-hooks install`)."""

    HARNESS = "claude"
    MODEL = None
    MODEL_NAME = "default"
    CONTEXT_SHAPE = None
    WIRING = "settings"
    PREREQS = ("claude", "bin_dir")
    ARTIFACTS = "requests.jsonl, claude.debug.log, cmdline.txt, home/, preloop-home/"
    FIND_MARKER = staticmethod(find_marker)

    def label(self):
        return "%s, model=%s" % (self.MODE, self.MODEL_NAME)

    def start(self, scenario, server=None):
        sb = NoteScenarios.start(self, scenario, server)
        try:
            if self.WIRING == "install":
                how = sb.install_hooks("claude-code")
                self.wiring = {"install": "preloop-hooks install --harness claude-code --scope user",
                               "kit": "kit.Sandbox.write_settings (no `install` in this build)"}[how]
            else:
                sb.write_settings()
                self.wiring = "kit.Sandbox.write_settings"
        except KitError as e:
            raise ScenarioFailure(self.report("setup failed: %s" % e))
        return sb

    def shell_turn(self, command="echo hi", **extra):
        return bash_turn(command, **extra)

    def text_turn(self, text, **extra):
        return text_turn(text, **extra)

    def run_turns(self, turns):
        return self.run_claude({"turns": turns, "overflow": text_turn(self.OVERFLOW)})

    def run_claude(self, script):
        self.sb.start_mock(script)
        try:
            self.run_result = self.sb.run_claude(RUN_PROMPT, self.sid, model=self.MODEL)
        finally:
            self.sb.mock.stop()
        run = self.run_result
        self.check(not run.timed_out and run.rc == 0,
                   "claude -p did not finish cleanly (rc=%s, timed out=%s)" % (run.rc, run.timed_out))
        self.check(isinstance(run.output, dict) and not run.output.get("is_error"),
                   "claude -p --output-format json did not report success")
        return run

    def harness_log_lines(self):
        lines = self.sb.debug_log_hook_lines()
        return ["hook lines from claude.debug.log:"] + ["  " + l for l in lines] if lines else []

    def expect_delivered_once(self, run, tok, note_id, body, request_index, label):
        """The note is first seen in request #request_index under `label`, in this
        model's wire shape, nowhere under another label, as a full block; 2 requests."""
        hits = self.landings(run.requests, tok)
        first = first_hit(hits)
        self.check(first is not None, "the note never reached the model")
        self.check(first.request_index == request_index, "first seen in request #%d, want #%d: %s"
                   % (first.request_index, request_index, first.short()))
        self.check(first.label == label, "label is %r, want %r" % (first.label, label))
        self.check(first.shape == self.CONTEXT_SHAPE,
                   "wire shape is %r, want %r for this model" % (first.shape, self.CONTEXT_SHAPE))
        others = [h for h in hits if h.label != label]
        self.check(not others, "delivered more than once / under another label: %s"
                   % self.describe_hits(others))
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no Stop rescue when "
                                           "nothing is pending)" % len(run.requests))
        self.check_block(first.text, note_id, body)
        return first

    # ------------------------------------------------------------------ scenarios a-c (d: NoteScenarios)
    def test_a_note_before_start_reaches_first_request(self):
        run, tok, note_id, body = self.run_scenario_a()
        self.expect_delivered_once(run, tok, note_id, body, 0, LABEL_SESSION_START)
        self.check_receipt(note_id, "delivered", event="session_start")

    def test_b_note_mid_run_reaches_request_after_tool_call(self):
        run, tok, note_id, body = self.run_scenario_b()
        self.expect_delivered_once(run, tok, note_id, body, 1, LABEL_PRE_TOOL_USE_BASH)
        self.check_receipt(note_id, "delivered", event="pre_tool_use")

    def test_c_note_after_last_tool_call_rescued_by_stop(self):
        run, hits, first, note_id, body = self.run_scenario_c()
        self.check(first.request_index == 2,
                   "first seen in request #%d, want #2: %s" % (first.request_index, first.short()))
        stop_hits = [h for h in hits if is_stop_label(h.label)]
        self.check(stop_hits, "not under a Stop label (%s): %s"
                   % (sorted(STOP_LABELS), self.describe_hits(hits)))
        others = [h for h in hits if not is_stop_label(h.label)]
        self.check(not others, "also delivered under another label: %s" % self.describe_hits(others))
        self.check_block(stop_hits[0].text, note_id, body)
        self.check_receipt(note_id, "delivered", event="stop")


# --------------------------------------------------------------------------- Codex scenarios

CODEX_PROMPT = "say hi"


class CodexScenarios(NoteScenarios):
    """Codex 0.169.0 `codex exec` against mock_openai.py, hooks wired by `preloop-hooks
    install --harness codex --scope user` (hooks.json + trust entries in config.toml).
    Codex picks its own session id: notes to the run go through "@@SESSION@@" (the id the
    SessionStart hook registered). Scenarios a-d as for Claude Code:
      a  note before start -> request #0, a developer message before the user prompt
      b  note mid-run -> request #1, a developer message between the function_call and
         its output
      c  note after the last tool call -> request #2 ends with a user <hook_prompt
         hook_run_id="stop:..."> message (Codex HTML-escapes it)
      d  a note during the rescue turn -> in no request; undeliverable / session_ended"""

    HARNESS = "codex"
    PREREQS = ("codex", "bin_dir")
    ARTIFACTS = "requests.jsonl, codex.stdout, codex.stderr, cmdline.txt, codex-home/, preloop-home/"
    PICKS_SESSION = False
    FIND_MARKER = staticmethod(codex_find_marker)

    def shell_turn(self, command="echo hi", **extra):
        return dict({"calls": [{"cmd": command}]}, **extra)

    def run_turns(self, turns):
        return self.run_codex({"agents": [{"name": "main", "turns": turns,
                                           "overflow": {"text": self.OVERFLOW}}]})

    def run_codex(self, script, prompt=CODEX_PROMPT, approve_for_me=False, **kw):
        try:
            self.sb.start_mock(script, "openai")
            self.sb.write_codex_config(approve_for_me=approve_for_me)
            self.sb.install_hooks("codex")
            self.wiring = "preloop-hooks install --harness codex --scope user"
        except KitError as e:
            raise ScenarioFailure(self.report("setup failed: %s" % e))
        try:
            self.run_result = self.sb.run_codex(self.PREREQ["codex"], prompt,
                                                approve_for_me=approve_for_me, **kw)
        finally:
            self.sb.mock.stop()
        run = self.run_result
        self.check(not run.timed_out and run.rc == 0,
                   "codex exec did not finish cleanly (rc=%s, timed out=%s)" % (run.rc, run.timed_out))
        self.check(run.session_id, "no session file in PRELOOP_HOME/sessions: SessionStart registered nothing")
        return run

    def run_lines(self, run):
        hook_lines = [l for l in run.stderr.splitlines()
                      if l.startswith("hook: ") or "warning" in l.lower() or "error" in l.lower()]
        return ["codex stderr (hook status lines): " + " | ".join(hook_lines[-30:]),
                "codex stdout: " + shorten(run.stdout, 400)]

    def check_block(self, text, note_id, body):
        return Scenario.check_block(self, html.unescape(text), note_id, body)   # Codex escapes a Stop reason

    def first_hit(self, run, tok):
        hits = codex_find_marker(run.requests, tok)
        self.check(hits, "the note (%s) never reached the model" % tok)
        return hits[0], hits

    def check_once(self, hits):
        """Present in one input item only (later requests repeat the history)."""
        self.check(len({i for _, i, _, _ in hits}) == 1,
                   "delivered more than once: at (request, item, role) %s"
                   % [(n, i, role) for n, i, role, _ in hits])

    # ------------------------------------------------------------------ scenarios a-c (d: NoteScenarios)
    def test_a_note_before_start_reaches_first_request(self):
        run, tok, note_id, body = self.run_scenario_a()
        (n, i, role, txt), hits = self.first_hit(run, tok)
        self.check(n == 0 and role == "developer",
                   "first seen in request #%d item %d role %s, want request #0 in a developer message"
                   % (n, i, role))
        prompt_at = [j for j, r, t in codex_segments(run.requests[0])
                     if r == "user" and t.strip() == CODEX_PROMPT]
        self.check(prompt_at and i < prompt_at[0], "the SessionStart context (item %d) is not before "
                   "the user prompt (items %s)" % (i, prompt_at))
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no Stop rescue when nothing "
                                           "is pending)" % len(run.requests))
        self.check_block(txt, note_id, body)
        self.check_receipt(note_id, "delivered", event="session_start")

    def test_b_note_mid_run_reaches_request_after_tool_call(self):
        run, tok, note_id, body = self.run_scenario_b()
        (n, i, role, txt), hits = self.first_hit(run, tok)
        items = run.requests[n].get("input") or []
        self.check(n == 1 and role == "developer",
                   "first seen in request #%d role %s, want request #1 (after the tool ran), developer"
                   % (n, role))
        self.check(items[i - 1].get("type") == "function_call"
                   and any(it.get("type") == "function_call_output" for it in items[i + 1:]),
                   "the PreToolUse context (item %d) is not between the function_call and its output" % i)
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no Stop rescue)" % len(run.requests))
        self.check_block(txt, note_id, body)
        self.check_receipt(note_id, "delivered", event="pre_tool_use")

    def test_c_note_after_last_tool_call_rescued_by_stop(self):
        run, hits, (n, i, role, txt), note_id, body = self.run_scenario_c()
        self.check(n == 2 and role == "user" and txt.startswith("<hook_prompt hook_run_id=\"stop:"),
                   "first seen in request #%d role %s as %r, want request #2, a user <hook_prompt "
                   "hook_run_id=\"stop:...\"> message" % (n, role, shorten(txt, 200)))
        self.check(i == len(run.requests[2].get("input") or []) - 1,
                   "the Stop reason (item %d) is not the last item of request #2" % i)
        self.check_once(hits)
        self.check_block(txt, note_id, body)
        self.check_receipt(note_id, "delivered", event="stop")


# --------------------------------------------------------------------------- Gemini CLI and Copilot CLI scenarios

GEMINI_HOOK_BINARIES = {
    "SessionStart": "preloop-gemini-session-start",
    "BeforeAgent": "preloop-gemini-before-agent",
    "BeforeTool": "preloop-gemini-before-tool",
    "AfterTool": "preloop-gemini-after-tool",
    "AfterAgent": "preloop-gemini-after-agent",
    "SessionEnd": "preloop-gemini-session-end",
}
COPILOT_HOOK_BINARIES = {
    "sessionStart": "preloop-copilot-session-start",
    "userPromptSubmitted": "preloop-copilot-user-prompt-submitted",
    "preToolUse": "preloop-copilot-pre-tool-use",
    "postToolUse": "preloop-copilot-post-tool-use",
    "agentStop": "preloop-copilot-agent-stop",
    "sessionEnd": "preloop-copilot-session-end",
}
PROMPT_HOOK_BINARIES = {"gemini": GEMINI_HOOK_BINARIES, "copilot": COPILOT_HOOK_BINARIES}
PROMPT_CLIS = {"gemini": ensure_gemini, "copilot": ensure_copilot}


def prompt_prereqs(prereq, *harnesses):
    """setUpModule helper for PromptScenarios: "bin_dir" (with the harnesses' hook binaries
    built), and for each harness "install_HARNESS" (this preloop-hooks wires it) and HARNESS
    (its CLI)."""
    prereq.get("bin_dir", lambda: build_binaries(
        tuple(b for h in harnesses for b in PROMPT_HOOK_BINARIES[h].values())))
    for h in harnesses:
        prereq.get("install_" + h, lambda: require_install(prereq["bin_dir"], h))
        prereq.get(h, PROMPT_CLIS[h])
FRAMING_HUMAN = ("The block below is an instruction from the human operating this agent, delivered out "
                 "of band by the Preloop control plane at a turn boundary.")

# The bracket-framed block the Gemini hooks write into additionalContext (before Gemini
# escapes < and >): hooks/gemini/src/lib.rs, for_escaped_carrier.
BRACKET_BLOCK_RE, BRACKET_ELEMENT_RE = _notes_res("[", "]", framing=r'(?P<framing>[^\n]*)\n')


def gemini_escaped(s):
    """What Gemini does to an additionalContext: every < and > escaped, & and quotes kept."""
    return s.replace("<", "&lt;").replace(">", "&gt;")


def bracket_blocks(text):
    """[(block_text, count, framing, [element dicts])] of the bracket blocks in text."""
    out = []
    for m in BRACKET_BLOCK_RE.finditer(text):
        els = [dict(e.groupdict()) for e in BRACKET_ELEMENT_RE.finditer(m.group("inner"))]
        out.append((m.group(0), int(m.group("count")), m.group("framing"), els))
    return out


class PromptScenarios(NoteScenarios):
    """`<harness> -p PROMPT` headless (Gemini CLI, Copilot CLI) with the session id the test
    picks (--session-id), hooks wired by `preloop-hooks install --harness HARNESS --scope
    user`, the mock's script {"turns": [...]} (+ the overflow turn). PREREQ[HARNESS] is the
    harness binary."""

    def wire(self):
        """Our hooks into the sandbox's HOME the way a user wires them."""
        self.sb.install_hooks(self.HARNESS)
        self.wiring = "preloop-hooks install --harness %s --scope user" % self.HARNESS

    def run_turns(self, turns):
        return self.run_script({"turns": turns})

    def run_script(self, script, env=None, expect_rc=0):
        """Start the mock with `script`, wire, run (env: added to the harness's environment)."""
        try:
            self.sb.start_mock(dict({"overflow": {"text": self.OVERFLOW}}, **script), self.HARNESS)
            self.wire()
        except KitError as e:
            raise ScenarioFailure(self.report("setup failed: %s" % e))
        try:
            self.run_result = getattr(self.sb, "run_" + self.HARNESS)(
                self.PREREQ[self.HARNESS], RUN_PROMPT, session_id=self.sid, env=env)
        finally:
            self.sb.mock.stop()
        run = self.run_result
        self.check(not run.timed_out and run.rc == expect_rc,
                   "%s -p did not finish as expected (rc=%s, want %s, timed out=%s)"
                   % (self.HARNESS, run.rc, expect_rc, run.timed_out))
        return run

    def run_lines(self, run):
        return ["%s %s: %s" % (self.HARNESS, name, shorten(text, n))
                for name, text, n in (("stdout", run.stdout, 600), ("stderr", run.stderr, 900))]

    def check_delivered_first(self, hits, where, want, why):
        """The earliest landing is at `where(first)` == want (else: `why`, and where it was)."""
        first = first_landing(hits)
        self.check(first is not None, "the note never reached the model")
        self.check(where(first) == want, "first seen at %s, want %s" % (first.short(), why))
        return first


class PromptLocalMode(LocalMode):
    """Local mode for PromptScenarios: i, our own stop-hook block coming back as the
    prompt hook's prompt (a continuation), does not title the session."""

    def test_i_continuation_prompt_does_not_title_the_session(self):
        self.start("i: our %s block comes back as the prompt hook's prompt" % self.RESCUER)
        body = "%s Late note." % self.token("I")
        run = self.run_turns([self.text_turn("All done.", before_reply_cmd=self.note_to_run_argv(body)),
                              self.text_turn("Noted.")])
        note_id = self.sent_in_turn(run, 0)["note_id"]
        self.check(len(run.requests) == 2, "%d requests, want 2 (one rescue)" % len(run.requests))
        self.check_receipt(note_id, "delivered", event="stop")
        with open(os.path.join(self.sb.preloop_home, "sessions", "%s.json" % self.sid)) as f:
            sess = json.load(f)
        self.check(sess.get("title") == RUN_PROMPT,
                   "session title is %r, want the prompt %r" % (sess.get("title"), RUN_PROMPT))


class GeminiScenarios(PromptScenarios):
    """Gemini CLI 0.61.0 `gemini -p` against mock_gemini.py with our hooks; scenarios a, c
    and d for every mode (b differs: local AfterTool carries the note, the server's
    BeforeTool holds the call)."""

    HARNESS = "gemini"
    PREREQS = ("bin_dir", "install_gemini", "gemini")
    ARTIFACTS = "requests.jsonl, gemini.stdout, gemini.stderr, cmdline.txt, home/.gemini/, preloop-home/"
    RESCUER = "AfterAgent"
    FIND_MARKER = staticmethod(gemini_find_marker)

    def shell_turn(self, command="echo hi", **extra):
        return dict({"calls": [{"name": "run_shell_command", "args": {"command": command}}]}, **extra)

    def wire(self):
        """After the kit's base settings (API-key auth for the mock)."""
        self.sb.write_gemini_settings()
        PromptScenarios.wire(self)

    def run_script(self, script, env=None, expect_rc=0):
        run = PromptScenarios.run_script(self, script, env, expect_rc)
        self.check((run.output or {}).get("session_id") == self.sid, "gemini did not use --session-id")
        return run

    def check_once(self, hits):
        places = sorted({(h.index, h.path) for h in hits})
        self.check(len(places) == 1, "delivered in more than one place: %s" % [h.short(120) for h in hits])

    def check_bracket_block(self, text, note_id, body):
        """text (as the model got it) holds exactly one bracket block with this note, the
        body as Gemini passes it (< and > escaped), the mode's auth; returns the element."""
        blocks = [b for b in bracket_blocks(text) if any(e["id"] == note_id for e in b[3])]
        self.check(blocks, "no [operator-notes ...] block holding note %s in %r" % (note_id, shorten(text, 1500)))
        block, count, framing, els = blocks[0]
        self.check(count == 1 and len(els) == 1, "count=%d, %d elements, want 1 and 1: %r" % (count, len(els), block))
        self.check(framing.startswith(FRAMING_HUMAN), "framing sentence is %r" % framing)
        self.check(els[0]["body"] == gemini_escaped(body), "body in the block is %r, want %r"
                   % (els[0]["body"], gemini_escaped(body)))
        if self.EXPECT_AUTH:
            self.check(els[0]["auth"] == self.EXPECT_AUTH, "auth=%r, want %r" % (els[0]["auth"], self.EXPECT_AUTH))
        self.check("&lt;operator-note" not in text and "&lt;/operator-note" not in text.replace(
            gemini_escaped(body), ""), "an escaped XML frame reached the model: %r" % shorten(text, 600))
        return els[0]

    # ------------------------------------------------------------------ scenarios a, c (d: NoteScenarios)
    def test_a_note_before_start_reaches_first_request(self):
        run, tok, note_id, body = self.run_scenario_a()
        hits = self.landings(run.requests, tok)
        first = self.check_delivered_first(hits, lambda h: (h.request_index, h.path), (0, "contents[0].parts[1].text"),
                                           "request #0 contents[0].parts[1].text (SessionStart)")
        self.check(first.text.startswith("<hook_context>[operator-notes count=\"1\"")
                   and first.text.endswith("[/operator-notes]</hook_context>\n\n" + RUN_PROMPT),
                   "SessionStart context is not <hook_context>[bracket block]</hook_context> before the "
                   "prompt: %r" % shorten(first.text, 600))
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no rescue when nothing is pending)"
                   % len(run.requests))
        self.check_bracket_block(first.text, note_id, body)
        self.check_receipt(note_id, "delivered", event="session_start")

    def test_c_note_after_last_tool_call_rescued_by_after_agent(self):
        run, hits, first, note_id, body = self.run_scenario_c()
        last = len(run.requests[2]["contents"]) - 1
        self.check((first.request_index, first.index, first.role, first.kind) == (2, last, "user", "text")
                   and first.path == "contents[%d].parts[0].text" % last,
                   "first seen at %s, want request #2, the last (user) content's first part" % first.short())
        self.check(first.text.startswith("<operator-notes count=\"1\""),
                   "the AfterAgent reason is not the XML block verbatim: %r" % shorten(first.text, 300))
        self.check_once(hits)
        self.check_block(first.text, note_id, body)
        self.check_receipt(note_id, "delivered", event="stop")


COPILOT_DATETIME_RE = r"<current_datetime>[^<]*</current_datetime>\n\n"
COPILOT_POST_LABEL = '\n\nTool "bash" succeeded. Additional guidance from postToolUse hooks:\n'


class CopilotScenarios(PromptScenarios):
    """Copilot CLI 1.0.102 `copilot -p` against mock_copilot.py with our hooks; scenarios
    a-d and s for every mode."""

    HARNESS = "copilot"
    PREREQS = ("bin_dir", "install_copilot", "copilot")
    ARTIFACTS = ("requests.jsonl, copilot.stdout, copilot.stderr, copilot-logs/, cmdline.txt, home/.copilot/, "
                 "preloop-home/")
    RESCUER = "agentStop"
    FIND_MARKER = staticmethod(copilot_find_marker)

    def shell_turn(self, command="echo hi", **extra):
        return dict({"calls": [{"name": "bash", "arguments": {"command": command, "description": "say hi"}}]}, **extra)

    def check_once(self, hits):
        self.check(len({h.index for h in hits}) == 1, "delivered in more than one message: %s"
                   % [h.short(120) for h in hits])

    def expect_block_only(self, text, note_id, body):
        """The text is exactly one block holding the note (Copilot passes it verbatim)."""
        block, _ = self.check_block(text, note_id, body)
        return block

    def subagent_script(self, body, sub_cmd="echo sub"):
        return {
            "turns": [{"calls": [{"name": "task", "arguments": {
                "name": "helper", "description": "run a helper", "prompt": "SUBAGENT-TASK: run %s" % sub_cmd,
                "agent_type": "general-purpose", "mode": "sync"}}]}, {"text": "Main done."}],
            "agents": [{"name": "sub", "match": "SUBAGENT-TASK", "turns": [
                {"calls": [{"name": "bash", "arguments": {"command": sub_cmd, "description": "sub"}}],
                 "before_reply_cmd": self.note_to_run_argv(body)},
                {"text": "Sub done."}], "overflow": {"text": "Sub continued."}}]}

    # ------------------------------------------------------------------ scenarios a-c, s (d: NoteScenarios)
    def test_a_note_before_start_reaches_first_request(self):
        run, tok, note_id, body = self.run_scenario_a()
        hits = self.landings(run.requests, tok)
        first = self.check_delivered_first(hits, lambda h: (h.request_index, h.index, h.role), (0, 1, "user"),
                                           "request #0 messages[1] (sessionStart)")
        block = self.expect_block_only(first.text, note_id, body)
        self.check(first.text == block, "messages[1] is not exactly the block: %r" % shorten(first.text, 400))
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2" % len(run.requests))
        self.check_receipt(note_id, "delivered", event="session_start")

    def test_b_note_mid_run_reaches_request_after_tool_call(self):
        run, tok, note_id, body = self.run_scenario_b()
        hits = self.landings(run.requests, tok)
        first = self.check_delivered_first(hits, lambda h: (h.request_index, h.role), (1, "tool"),
                                           "request #1 in the bash tool message (postToolUse)")
        self.check(first.text.startswith("hi\n") and COPILOT_POST_LABEL in first.text,
                   "the tool message is not <output> + the postToolUse label + block: %r"
                   % shorten(first.text, 500))
        block = self.expect_block_only(first.text.split(COPILOT_POST_LABEL, 1)[1], note_id, body)
        self.check(first.text.endswith(COPILOT_POST_LABEL + block), "the block is not the tool message's end")
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2" % len(run.requests))
        self.check_receipt(note_id, "delivered", event="pre_tool_use")

    def test_c_note_after_last_tool_call_rescued_by_agent_stop(self):
        run, hits, first, note_id, body = self.run_scenario_c()
        last = len(run.requests[2]["messages"]) - 1
        self.check((first.request_index, first.index, first.role) == (2, last, "user"),
                   "first seen at %s, want request #2, its last (user) message" % first.short())
        m = re.match(COPILOT_DATETIME_RE, first.text)
        self.check(m, "the continuation message does not start with <current_datetime>: %r" % first.text[:200])
        block = self.expect_block_only(first.text[m.end():], note_id, body)
        self.check(first.text == m.group(0) + block,
                   "the continuation is not <current_datetime> + the block (and nothing else): %r"
                   % shorten(first.text, 500))
        self.check_once(hits)
        self.check_receipt(note_id, "delivered", event="stop")

    def test_s_note_during_a_subagent_reaches_the_main_agent(self):
        self.start("s: a note arrives while a sub-agent runs")
        tok = self.token("S")
        body = "%s Note for the main agent, sent while its sub-agent works." % tok
        run = self.run_script(self.subagent_script(body))
        note_id = self.sent_in_turn(run, 0, agent="sub")["note_id"]
        sub = run.agent_requests("sub")
        self.check(len(sub) == 2, "%d sub-agent requests, want 2 (no continuation of the sub-agent)" % len(sub))
        self.check(not self.landings(sub, tok), "the note reached the sub-agent: %s"
                   % [h.short(120) for h in self.landings(sub, tok)])
        hits = self.landings(run.requests, tok)
        self.check_delivered_first(hits, lambda h: (h.request_index, h.role), (1, "tool"),
                                   "main request #1 in the task's tool message")
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d main requests, want 2" % len(run.requests))
        self.check_receipt(note_id, "delivered", event="pre_tool_use")


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


class PtyClaude:
    """An interactive (TTY) Claude Code session on a pseudo-terminal (120x40), driven
    by typing: sandbox.start_mock() first. Everything the terminal shows is appended
    to <root>/screen.log; close() ends it (and kills it if it does not go)."""

    def __init__(self, sandbox, session_id, model=None, extra_args=(), env=None):
        import pty
        import threading
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
        self._screen = open(self.screen_path, "ab")
        self.t0 = time.time()
        self.exit_status = None
        pid, fd = pty.fork()
        if pid == 0:   # child: a session leader with the pty as its terminal
            try:
                os.chdir(sandbox.proj)
                os.execve(self.argv[0], self.argv, self.env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        import fcntl
        import struct
        import termios
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self):
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self._screen.write(data)
                self._screen.flush()

    def mark(self, what):
        with self._lock:
            self._screen.write(("\n<<<%s at +%.2fs>>>\n" % (what, time.time() - self.t0)).encode())
            self._screen.flush()

    def type(self, text, enter=True):
        """Type text (one key at a time), then Enter."""
        for ch in text:
            os.write(self.fd, ch.encode())
            time.sleep(0.01)
        if enter:
            time.sleep(0.4)
            os.write(self.fd, b"\r")
        self.mark("TYPED %r" % text)

    def alive(self):
        if self.exit_status is not None:
            return False
        wp, st = os.waitpid(self.pid, os.WNOHANG)
        if wp == self.pid:
            self.exit_status = os.waitstatus_to_exitcode(st)
            return False
        return True

    def wait_until(self, pred, timeout, step=0.1):
        """Poll pred() until it is truthy (returned) or timeout (None)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = pred()
            if v:
                return v
            time.sleep(step)
        return None

    def screen(self):
        with open(self.screen_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def exit(self, timeout=20):
        """Leave with /exit (then Ctrl-C twice if it lingers); the exit status or None."""
        if not self.alive():
            return self.exit_status
        self.type("/exit")
        if self.wait_until(lambda: not self.alive(), timeout / 2):
            return self.exit_status
        for _ in range(2):
            os.write(self.fd, b"\x03")
            time.sleep(0.3)
        self.mark("CTRL-C")
        self.wait_until(lambda: not self.alive(), timeout / 2)
        return self.exit_status

    def close(self):
        if self.alive():
            self.mark("KILL")
            try:
                os.killpg(self.pid, 9)
            except OSError:
                pass
            try:
                _, st = os.waitpid(self.pid, 0)
                self.exit_status = os.waitstatus_to_exitcode(st)
            except ChildProcessError:
                pass
        try:
            os.close(self.fd)
        except OSError:
            pass
        self._reader.join(2)
        self._screen.close()

    def requests(self):
        """Bodies of the main conversation's /v1/messages requests so far."""
        return main_requests("claude", self.sb.mock.records())


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


def quote_path(path):
    """Single-quote a path for the shell Claude Code runs hook commands with."""
    return "'%s'" % path.replace("'", "'\\''")


def new_session_id():
    return str(uuid.uuid4())


FAKE_HOOK = os.path.join(E2E_DIR, "fake_hook.py")


def fake_hook_command(log_path, event, harness="claude", *flags):
    """The shell command line of e2e/fake_hook.py for one event (the rig's self-tests):
    FAKE_HOOK_LOG is set inside the command, so it survives a harness that filters the
    environment of its hooks."""
    return " ".join(["FAKE_HOOK_LOG=%s" % quote_path(log_path), quote_path(sys.executable),
                     quote_path(FAKE_HOOK), quote_path(event), "--harness", harness]
                    + [quote_path(f) for f in flags])


def read_jsonl(path):
    """The JSON objects of a JSONL file ([] when it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


_INSTALL_HELP = {}


def has_install_command(cli_path, harness=None):
    """True when this preloop-hooks build has `install --harness` (and, when given, names
    `harness` among its values: the installer's support for a harness may land after its
    hooks); `install --help` is probed once per binary."""
    if cli_path not in _INSTALL_HELP:
        try:
            p = subprocess.run([cli_path, "install", "--help"], capture_output=True, text=True,
                               timeout=30, stdin=subprocess.DEVNULL,
                               env={"PATH": BASE_PATH, "HOME": tempfile.gettempdir()})
            _INSTALL_HELP[cli_path] = p.stdout if p.returncode == 0 and "--harness" in p.stdout else None
        except (OSError, subprocess.SubprocessError):
            _INSTALL_HELP[cli_path] = None
    out = _INSTALL_HELP[cli_path]
    return out is not None and (harness is None or re.search(r"\b%s\b" % re.escape(harness), out) is not None)


def require_install(bin_dir, harness):
    """setUpModule helper (Prereq.get): the preloop-hooks in bin_dir must wire `harness`
    (`install --harness HARNESS`), the way every e2e suite but Claude Code's wires hooks."""
    cli = os.path.join(bin_dir or "/nonexistent", CLI_BINARY)
    return has_install_command(cli, harness) or fail_setup(
        "`%s install --help` does not offer --harness %s: the e2e suites wire the hooks with it" % (cli, harness))


# --------------------------------------------------------------------------- real Preloop server
# e2e/preloop_server/up.sh stands PyPI preloop==0.17.1 up on 127.0.0.1 (its own
# PostgreSQL 16 + pgvector), migrates it and seeds a user (personal API key), a managed
# agent and its agt_ runtime token into creds.json. ServerClient talks to its REST API.

PRELOOP_SERVER_VERSION = "0.17.1"
SERVER_DIR = os.path.join(E2E_DIR, "preloop_server")


def server_home():
    return (os.environ.get("PRELOOP_E2E_SERVER_HOME") or "/tmp/preloop-e2e-server").rstrip("/")


def ensure_server(timeout=None):
    """Run e2e/preloop_server/up.sh (idempotent: seconds when already up, ~2 min cold) and
    return creds.json as a dict, plus "up_log" (the script's output) and "up_s".
    Raises KitError holding the script's output and the server log's tail on failure."""
    timeout = timeout or float(os.environ.get("PRELOOP_E2E_SERVER_TIMEOUT", "1200"))
    up = os.path.join(SERVER_DIR, "up.sh")
    _log("bringing up the real Preloop server: %s" % up)
    t0 = time.time()
    env = dict(os.environ)
    for k in ("PRELOOP_URL", "PRELOOP_TOKEN", "PRELOOP_HOME"):
        env.pop(k, None)
    try:
        p = subprocess.run(["bash", up], capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, env=env)
        rc, out = p.returncode, (p.stdout or "") + (p.stderr or "")
    except subprocess.TimeoutExpired as e:
        rc = None
        out = "%s%s\n[up.sh killed after %ss]" % (
            e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""),
            e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or ""),
            timeout)
    dur = round(time.time() - t0, 1)
    home = server_home()
    if rc != 0:
        tail = ""
        log_path = os.path.join(home, "server.log")
        if os.path.exists(log_path):
            with open(log_path, errors="replace") as f:
                tail = "".join(f.readlines()[-40:])
        raise KitError("the real Preloop server did not come up: `bash %s` exited %s after %ss\n"
                       "--- up.sh output ---\n%s\n--- tail of %s ---\n%s"
                       % (up, rc, dur, out[-8000:], log_path, tail[-6000:]))
    with open(os.path.join(home, "creds.json")) as f:
        creds = json.load(f)
    creds["up_log"] = out
    creds["up_s"] = dur
    # Whether this call started the API server (then stop_server() may stop it again).
    creds["started_server"] = bool(re.search(r"server_start: started", out))
    _log("Preloop server up in %ss at %s" % (dur, creds.get("base_url")))
    return creds


def stop_server():
    """e2e/preloop_server/down.sh: stop the API server, then Postgres, by their PID files
    (keeps the database and the venv, so the next start is warm). Returns its output."""
    p = subprocess.run(["bash", os.path.join(SERVER_DIR, "down.sh")], capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    return p.returncode, (p.stdout or "") + (p.stderr or "")


def require_server(prereq, wiring=None):
    """setUpModule helper: the real server up (ensure_server, as prereq "creds") and
    prereq "server", a ServerClient as the human operator. Returns the creds, or None when
    the server could not come up (every test that needs it then fails with the reason)."""
    creds = prereq.get("creds", ensure_server)
    if creds:
        prereq.set("server", ServerClient(creds["base_url"], creds["user_token"]))
        sys.stderr.write("[e2e] real server: preloop %s at %s (up.sh took %ss)%s\n"
                         % (creds.get("preloop_version"), creds["base_url"], creds["up_s"],
                            "; hooks wired by %s" % wiring if wiring else ""))
    return creds


def release_server(prereq):
    """tearDownModule helper: leave the server as this module found it: stop it (down.sh,
    by PID) only when this run started it, unless PRELOOP_E2E_SERVER_KEEP=1 (then the next
    run finds it up: ~2 s)."""
    creds = prereq["creds"]
    if creds and creds.get("started_server") and os.environ.get("PRELOOP_E2E_SERVER_KEEP") != "1":
        rc, out = stop_server()
        sys.stderr.write("[e2e] stopped the Preloop server this run started (down.sh rc=%s)\n" % rc)
        if rc != 0:
            sys.stderr.write(out[-3000:] + "\n")


class ServerError(KitError):
    pass


class ServerClient:
    """The Preloop REST API as a human uses it (user token: personal API key or JWT);
    never through a proxy."""

    _opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def __init__(self, base_url, user_token=None):
        self.base_url = base_url.rstrip("/")
        self.api = self.base_url + "/api/v1"
        self.user_token = user_token

    def call(self, method, path, body=None, token=None, timeout=30.0):
        """(status, parsed JSON or text) of one request; token defaults to the user's."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.api + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        tok = self.user_token if token is None else token   # "" = no Authorization header
        if tok:
            req.add_header("Authorization", "Bearer " + tok)
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except (urllib.error.URLError, OSError) as e:
            raise ServerError("%s %s: cannot reach %s: %s" % (method, path, self.base_url, e))
        try:
            payload = json.loads(raw) if raw else None
        except ValueError:
            payload = raw.decode(errors="replace")
        return status, payload

    def must(self, expected, method, path, body=None, token=None):
        status, payload = self.call(method, path, body, token)
        if status not in expected:
            raise ServerError("%s %s%s -> %s, want %s: %s" % (
                method, self.api, path, status, expected,
                shorten(json.dumps(payload, ensure_ascii=False), 1500)))
        return payload

    # -- accounts and agents ---------------------------------------------------
    def new_agent(self, name=None, kind="claude_code"):
        """A fresh managed agent with a durable agt_ credential (sending is rate limited
        to 20 notes per hour per author and agent: mint one per scenario)."""
        name = name or "e2e %s %s" % (kind, uuid.uuid4().hex[:8])
        agent = self.must((201,), "POST", "/agents", {"display_name": name, "agent_kind": kind})
        cred = self.must((201,), "POST", "/agents/%s/credentials" % agent["id"],
                         {"name": "e2e", "expires_in_days": 30})
        return {"agent_id": agent["id"], "agent_token": cred["token"], "display_name": name,
                "agent_kind": kind}

    def new_account(self, tag="e2e"):
        """Register a brand-new user (and with it a new account); return a ServerClient
        authenticated with its personal API key, with .account_id / .user_id set."""
        username = "%s%s" % (re.sub(r"[^a-z0-9]", "", tag.lower())[:20] or "e2e", uuid.uuid4().hex[:10])
        password = "e2e-pass-" + uuid.uuid4().hex[:12]
        self.must((201,), "POST", "/auth/register", {
            "username": username, "email": "%s@example.com" % username, "password": password,
            "full_name": "E2E Operator %s" % tag}, token="")
        tok = self.must((200,), "POST", "/auth/token/json",
                        {"username": username, "password": password}, token="")["access_token"]
        me = self.must((200,), "GET", "/auth/users/me", token=tok)
        key = self.must((201,), "POST", "/auth/api-keys", {"name": "e2e-%s" % tag}, token=tok)["key"]
        c = ServerClient(self.base_url, key)
        c.account_id, c.user_id, c.username = me["account_id"], me["id"], username
        return c

    def disable_tool(self, account_id, tool_name):
        """An account-wide agent tool configuration that is disabled: every
        permission-check for that tool name answers deny, `Tool blocked in Preloop`."""
        return self.must((201,), "POST", "/tool-configurations", {
            "tool_name": tool_name, "tool_source": "agent", "account_id": account_id,
            "is_enabled": False})

    # -- notes -------------------------------------------------------------------
    def send_note(self, text, **target):
        body = dict(target, text=text)
        return self.must((201,), "POST", "/operator-notes", body)

    def receipt(self, note_id):
        return self.must((200,), "GET", "/operator-notes/%s" % note_id)

    def wait_receipt(self, note_id, states, timeout=8.0):
        """Poll GET /operator-notes/{id} until its state is in `states`; the last one."""
        return poll_state(lambda: self.receipt(note_id), states, timeout)

    def send_note_argv(self, text, **target):
        """argv for a mock before_reply_cmd that sends this note (server_note.py; it reads
        the API base and user token from the environment, see server_note_env())."""
        body = dict(target, text=text)
        return [sys.executable, os.path.join(E2E_DIR, "server_note.py"),
                json.dumps(body, ensure_ascii=False)]

    def receipt_argv(self, note_id_or_file):
        """argv for a before_reply_cmd that prints the receipt at that moment of the run
        ("@FILE": the note id is read from FILE when the command runs)."""
        return [sys.executable, os.path.join(E2E_DIR, "server_note.py"), "--receipt",
                note_id_or_file]

    def server_note_env(self):
        return {"PRELOOP_E2E_API": self.api, "PRELOOP_E2E_USER_TOKEN": self.user_token}

    # -- approvals ---------------------------------------------------------------
    def pending_approvals(self, agent_id=None):
        items = self.must((200,), "GET", "/approval-requests?status=pending&limit=50") or []
        if isinstance(items, dict):
            items = items.get("items") or items.get("approval_requests") or []
        return [a for a in items if agent_id is None or a.get("managed_agent_id") == agent_id]

    def approve(self, request_id, comment=""):
        return self.must((200,), "POST", "/approval-requests/%s/approve" % request_id,
                         {"comment": comment})


def server_log_tail(lines=30):
    path = os.path.join(server_home(), "server.log")
    if not os.path.exists(path):
        return []
    with open(path, errors="replace") as f:
        return [shorten(l.rstrip("\n"), 400) for l in f.readlines()[-lines:]]
