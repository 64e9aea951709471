"""Helpers for the preloop-hooks end-to-end suite (Python 3.11 stdlib only).

The suite runs the real Claude Code CLI headless (`claude -p`) against
mock_anthropic.py, with the project's hook binaries wired into
$HOME/.claude/settings.json, and inspects what the model received.

Environment knobs (all optional):
  PRELOOP_E2E_HARNESS_DIR   where Claude Code is installed / cached
                            (default: e2e/.harness; npm-installed there when missing)
  PRELOOP_BIN_DIR           directory holding the already-built hook binaries and
                            preloop-hooks; when unset the kit runs `cargo build --workspace`
                            in the repository root and uses target/debug
  PRELOOP_E2E_CLAUDE_TIMEOUT  seconds one claude run may take (default 60)
  PRELOOP_E2E_KEEP=1        keep every run's temp dir (default: only failed runs are kept)
  PRELOOP_E2E_TMPDIR        parent for the temp dirs (default: the system temp dir)
  PRELOOP_E2E_SERVER_HOME, PRELOOP_E2E_SERVER_PORT, PRELOOP_E2E_PG_PORT, PRELOOP_E2E_VENV
                            the real Preloop server of test_real_server.py
                            (e2e/preloop_server/up.sh; see e2e/README.md)
"""

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
import time
import uuid
from dataclasses import dataclass

CLAUDE_CODE_VERSION = "2.1.328"
CLAUDE_CODE_PACKAGE = "@anthropic-ai/claude-code@" + CLAUDE_CODE_VERSION
E2E_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(E2E_DIR)
MOCK_SCRIPT = os.path.join(E2E_DIR, "mock_anthropic.py")
MOCK_OPENAI_SCRIPT = os.path.join(E2E_DIR, "mock_openai.py")   # Responses API, for Codex
MOCK_API_KEY = "sk-ant-mock-key"
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"

# The models that select each wire shape (contract §3).
MODEL_DEFAULT = None                                # claude-opus-5-5: role:"system" messages
MODEL_SONNET_45 = "claude-sonnet-4-5-20250929"      # <system-reminder> blocks in user messages

CLI_BINARY = "preloop-hooks"
HOOK_BINARIES = {
    "SessionStart": "preloop-claude-code-session-start",
    "UserPromptSubmit": "preloop-claude-code-user-prompt-submit",
    "PreToolUse": "preloop-claude-code-pre-tool-use",
    "Stop": "preloop-claude-code-stop",
    "SessionEnd": "preloop-claude-code-session-end",
}
HOOK_TIMEOUT_S = 10

LABEL_SESSION_START = "SessionStart hook additional context: "
LABEL_USER_PROMPT_SUBMIT = "UserPromptSubmit hook additional context: "
LABEL_PRE_TOOL_USE_BASH = "PreToolUse:Bash hook additional context: "
LABEL_STOP_CONTEXT = "Stop hook additional context: "
LABEL_STOP_FEEDBACK = "Stop hook feedback:"
LABEL_STOP_BLOCKING_PREFIX = "Stop hook blocking error from command: "

NOTES_BLOCK_RE = re.compile(
    r'<operator-notes count="(?P<count>\d+)" source="preloop-control-plane">\n'
    r'(?P<inner>.*?)\n</operator-notes>', re.S)
NOTE_ELEMENT_RE = re.compile(
    r'<operator-note id="(?P<id>[^"]*)" from="(?P<from>[^"]*)" auth="(?P<auth>[^"]*)" '
    r'at="(?P<at>[^"]*)">\n(?P<body>.*?)\n</operator-note>', re.S)

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


class KitError(RuntimeError):
    """The environment cannot run the suite (install/build failed, mock did not start...)."""


# --------------------------------------------------------------------------- setup

def _log(msg):
    sys.stderr.write("[e2e] %s\n" % msg)
    sys.stderr.flush()


def harness_dir():
    return os.path.abspath(os.environ.get("PRELOOP_E2E_HARNESS_DIR")
                           or os.path.join(E2E_DIR, ".harness"))


def _claude_version(path):
    try:
        p = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
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
    p = subprocess.run([npm, "install", "--no-audit", "--no-fund", package],
                       cwd=d, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise KitError("npm install %s failed (rc %d):\n%s\n%s"
                       % (package, p.returncode, p.stdout[-3000:], p.stderr[-3000:]))


def ensure_claude():
    """Return the path of a working Claude Code CLI of the pinned version, installing it
    with npm into harness_dir() when it is missing (CI starts from a fresh machine)."""
    d = harness_dir()
    claude = os.path.join(d, "node_modules", ".bin", "claude")
    v = _claude_version(claude)
    if v and v.startswith(CLAUDE_CODE_VERSION + " "):
        return claude
    _npm_install(d, CLAUDE_CODE_PACKAGE, "Claude Code", v)
    v = _claude_version(claude)
    if not v:
        # The package's postinstall puts the native binary in place; run it if npm skipped it.
        pkg_dir = os.path.join(d, "node_modules", "@anthropic-ai", "claude-code")
        q = subprocess.run(["node", "install.cjs"], cwd=pkg_dir, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL)
        v = _claude_version(claude)
        if not v:
            raise KitError("claude --version still fails after `node install.cjs` (rc %d):\n%s\n%s"
                           % (q.returncode, q.stdout[-3000:], q.stderr[-3000:]))
    if not v.startswith(CLAUDE_CODE_VERSION + " "):
        raise KitError("installed claude reports %r, want %s" % (v, CLAUDE_CODE_VERSION))
    return claude


CODEX_VERSION = "0.169.0"
CODEX_PACKAGE = "@openai/codex@" + CODEX_VERSION


def ensure_codex():
    """Return the path of a working Codex CLI of the pinned version, npm-installing it into
    harness_dir() when missing (like ensure_claude)."""
    d = harness_dir()
    codex = os.path.join(d, "node_modules", ".bin", "codex")
    v = _claude_version(codex)
    if v and v.strip().endswith(" " + CODEX_VERSION):
        return codex
    _npm_install(d, CODEX_PACKAGE, "Codex", v)
    v = _claude_version(codex)
    if not (v and v.strip().endswith(" " + CODEX_VERSION)):
        raise KitError("installed codex reports %r, want %s" % (v, CODEX_VERSION))
    return codex


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


def build_binaries():
    """Return the directory holding preloop-hooks and the hook binaries: PRELOOP_BIN_DIR
    when set, else target/debug after `cargo build --workspace` in the repository root."""
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
    missing = [n for n in [CLI_BINARY] + list(HOOK_BINARIES.values())
               if not os.access(os.path.join(bin_dir, n), os.X_OK)]
    if missing:
        raise KitError("missing binaries in %s: %s" % (bin_dir, ", ".join(missing)))
    return bin_dir


# --------------------------------------------------------------------------- mock

class Mock:
    """mock_anthropic.py as a child process on a free 127.0.0.1 port."""

    def __init__(self, workdir, script, env, program=None):
        self.workdir = workdir
        program = program or MOCK_SCRIPT
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


def note_blocks(text):
    """Parse the <operator-notes> blocks in text: [(block_text, count, [element dicts])]."""
    out = []
    for mm in NOTES_BLOCK_RE.finditer(text):
        els = [dict(e.groupdict()) for e in NOTE_ELEMENT_RE.finditer(mm.group("inner"))]
        out.append((mm.group(0), int(mm.group("count")), els))
    return out


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


# --------------------------------------------------------------------------- runs

@dataclass
class RunResult:
    rc: int | None
    duration_s: float
    stdout: str
    stderr: str
    output: dict | None            # parsed --output-format json result, if any
    records: list                  # every mock log record
    requests: list                 # bodies of the main conversation's /v1/messages requests
    model: str | None
    session_id: str
    cmdline: str
    timed_out: bool = False

    def before_reply(self):
        return [r["before_reply"] for r in self.records if r.get("before_reply")]


class Sandbox:
    """One scenario's world: temp HOME, project dir, PRELOOP_HOME, mock, settings, runs."""

    def __init__(self, name, bin_dir, claude_bin):
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
        self.hook_env = {}     # added to claude's env (so its hooks get it): server mode
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

    # -- settings ------------------------------------------------------------
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

    def install_hooks(self, harness="claude-code"):
        """Wire the hooks into this sandbox's HOME the way a user does:
        `preloop-hooks install --harness HARNESS --scope user`, when this build of
        preloop-hooks has the command. Returns "install" or, when it has not (yet),
        "kit" after writing the settings file with write_settings()."""
        if not has_install_command(self.bin(CLI_BINARY)):
            if harness != "claude-code":
                raise KitError("preloop-hooks has no `install` command; cannot wire %s" % harness)
            self.write_settings()
            return "kit"
        env = self.base_env()
        if harness == "codex":
            env["CODEX_HOME"] = self.codex_home()
        p = subprocess.run(self.cli_argv("install", "--harness", harness, "--scope", "user"),
                           env=env, cwd=self.proj, capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        self.install_output = "rc=%s\nstdout: %s\nstderr: %s" % (p.returncode, p.stdout, p.stderr)
        if p.returncode != 0:
            raise KitError("`preloop-hooks install --harness %s --scope user` (HOME=%s) exited %d\n"
                           "stdout: %s\nstderr: %s" % (harness, self.home, p.returncode,
                                                       p.stdout[-3000:], p.stderr[-3000:]))
        if harness == "claude-code":
            self.settings_path = os.path.join(self.home, ".claude", "settings.json")
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
        finishing after claude exits); returns the last receipt seen."""
        deadline = time.time() + timeout
        while True:
            r = self.note_status(note_id)
            if r.get("state") in states or time.time() >= deadline:
                return r
            time.sleep(0.2)

    # -- mock + claude ---------------------------------------------------------
    def start_mock(self, script):
        if self.mock:
            self.mock.stop()
        self.mock = Mock(self.root, script, dict(self.base_env(), **self.mock_env))
        return self.mock

    def claude_env(self):
        env = self.base_env()
        env.update({
            "ANTHROPIC_BASE_URL": self.mock.url,
            "ANTHROPIC_API_KEY": MOCK_API_KEY,
            "IS_SANDBOX": "1",   # --dangerously-skip-permissions refuses root otherwise
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        })
        env.update(self.hook_env)
        return env

    def run_claude(self, prompt, session_id, model=None, timeout=None, extra_args=()):
        assert self.mock, "start_mock() first"
        timeout = timeout or float(os.environ.get("PRELOOP_E2E_CLAUDE_TIMEOUT", "60"))
        argv = [self.claude_bin, "-p", prompt, "--output-format", "json",
                "--dangerously-skip-permissions", "--session-id", session_id,
                "--debug-file", os.path.join(self.root, "claude.debug.log")]
        if model:
            argv += ["--model", model]
        argv += list(extra_args)
        env = self.claude_env()
        cmdline = "cd %s && env -i %s %s" % (
            shlex.quote(self.proj), " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in env.items()),
            " ".join(shlex.quote(a) for a in argv))
        with open(os.path.join(self.root, "cmdline.txt"), "w") as f:
            f.write(cmdline + "\n")
        t0 = time.time()
        timed_out = False
        p = subprocess.Popen(argv, cwd=self.proj, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(p.pid, 9)
            except OSError:
                p.kill()
            out, err = p.communicate()
        dur = round(time.time() - t0, 2)
        for name, data in (("claude.stdout", out), ("claude.stderr", err)):
            with open(os.path.join(self.root, name), "w") as f:
                f.write(data or "")
        try:
            output = json.loads(out) if out.strip() else None
        except ValueError:
            output = None
        records = self.mock.records()
        reqs = [r.get("body") or {} for r in records
                if r.get("route") == "messages" and r.get("reply", {}).get("kind") == "main"]
        return RunResult(rc=p.returncode, duration_s=dur, stdout=out, stderr=err, output=output,
                         records=records, requests=reqs, model=model, session_id=session_id,
                         cmdline=cmdline, timed_out=timed_out)

    # -- Codex ----------------------------------------------------------------
    def codex_home(self):
        d = os.path.join(self.root, "codex-home")
        os.makedirs(d, exist_ok=True)
        return d

    def start_codex_mock(self, script):
        """mock_openai.py (Responses API) instead of the Anthropic mock."""
        if self.mock:
            self.mock.stop()
        self.mock = Mock(self.root, script, dict(self.base_env(), **self.mock_env),
                         program=MOCK_OPENAI_SCRIPT)
        return self.mock

    def write_codex_config(self, approve_for_me=False):
        """$CODEX_HOME/config.toml: the mock as the model provider (no retries). Written
        before `preloop-hooks install --harness codex`, which adds the hooks' trust
        entries to this same file."""
        assert self.mock, "start_codex_mock() first"
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
        env = self.base_env()
        env.update({"CODEX_HOME": self.codex_home(), "MOCK_API_KEY": "mock-key"})
        env.update(self.hook_env)
        return env

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

    def run_codex(self, codex_bin, prompt, approve_for_me=False, during=None, timeout=None):
        """`codex exec` headless against the mock; `during(proc)` (optional) runs in a thread
        while Codex runs (e.g. a human approving a request). RunResult.requests are the
        main agent's /v1/responses bodies; session_id is read from the hooks' session file."""
        import threading
        assert self.mock, "start_codex_mock() first"
        timeout = timeout or float(os.environ.get("PRELOOP_E2E_CODEX_TIMEOUT", "90"))
        argv = [codex_bin, "exec", "--skip-git-repo-check", "-C", self.proj, "--color", "never"]
        if approve_for_me:
            argv.append("--approve-for-me")
        argv.append(prompt)
        env = self.codex_env()
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
        during_result = {}
        th = None
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
        for name, data in (("codex.stdout", out), ("codex.stderr", err)):
            with open(os.path.join(self.root, name), "w") as f:
                f.write(data or "")
        time.sleep(0.3)   # SessionEnd may outlive codex by a moment
        records = self.mock.records()
        reqs = [r.get("body") or {} for r in records
                if r.get("route") == "responses" and r.get("reply", {}).get("kind") == "agent"]
        sids = self.session_ids()
        res = RunResult(rc=p.returncode, duration_s=dur, stdout=out, stderr=err, output=None,
                        records=records, requests=reqs, model="mock-model",
                        session_id=sids[-1] if sids else None, cmdline=cmdline,
                        timed_out=timed_out)
        res.during = during_result
        return res

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


# --------------------------------------------------------------------------- interactive

def seed_claude_json(home, proj, api_key=MOCK_API_KEY):
    """Pre-seed $HOME/.claude.json so interactive Claude Code starts straight at its
    prompt (no onboarding, theme, API-key or trust dialog; contract section 1)."""
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
        return [r.get("body") or {} for r in self.sb.mock.records()
                if r.get("route") == "messages" and r.get("reply", {}).get("kind") == "main"]


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


_INSTALL_CMD = {}


def has_install_command(cli_path):
    """True when this preloop-hooks build has `install` (probed once per binary)."""
    if cli_path not in _INSTALL_CMD:
        try:
            p = subprocess.run([cli_path, "install", "--help"], capture_output=True, text=True,
                               timeout=30, stdin=subprocess.DEVNULL,
                               env={"PATH": BASE_PATH, "HOME": tempfile.gettempdir()})
            _INSTALL_CMD[cli_path] = p.returncode == 0 and "--harness" in p.stdout
        except OSError:
            _INSTALL_CMD[cli_path] = False
    return _INSTALL_CMD[cli_path]


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
        deadline = time.time() + timeout
        while True:
            r = self.receipt(note_id)
            if r.get("state") in states or time.time() >= deadline:
                return r
            time.sleep(0.2)

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
