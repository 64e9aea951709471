"""The pinned harness CLIs (Claude Code, Codex, Gemini CLI, Copilot CLI, Pi, OpenCode): ensure_<harness>()
returns the path of a working CLI of the pinned version, npm-installing it into the
harness directory first when it is missing (CI starts from a fresh machine).

The versions and npm packages are the registry's (shared/src/registry.rs, through the
generated e2e/kit/registry.json), because every contract in docs/contracts/ is proven
against exactly these builds."""

import os
import shutil
import subprocess
import tempfile

from .common import BASE_PATH, E2E_DIR, KitError, log, npm_spec, registry

CLAUDE_CODE_VERSION = registry()["claude-code"]["version"]
CLAUDE_CODE_PACKAGE = npm_spec("claude-code")
CODEX_VERSION = registry()["codex"]["version"]
CODEX_PACKAGE = npm_spec("codex")
GEMINI_VERSION = registry()["gemini"]["version"]
GEMINI_PACKAGE = npm_spec("gemini")
COPILOT_VERSION = registry()["copilot"]["version"]
COPILOT_PACKAGE = npm_spec("copilot")
PI_VERSION = registry()["pi"]["version"]
PI_PACKAGE = npm_spec("pi")
OPENCODE_VERSION = registry()["opencode"]["version"]
OPENCODE_PACKAGE = npm_spec("opencode")


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
    # Pi prints its version on stderr.
    return (p.stdout.strip() or p.stderr.strip()) if p.returncode == 0 else None


def _npm_install(d, package, name, found):
    """npm-install PACKAGE into the harness directory D (a private package.json
    is created first); raise KitError with npm's output when it fails."""
    npm = shutil.which("npm")
    if not npm:
        raise KitError("%s is not installed in %s and npm is not on PATH" % (name, d))
    log("installing %s into %s (found: %r)" % (package, d, found))
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
        log("`node install.cjs` exited %d:\n%s\n%s" % (q.returncode, q.stdout[-3000:], q.stderr[-3000:]))


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


def ensure_pi():
    """Path of a working Pi CLI of the pinned version (npm-installed when missing)."""
    env = {"PATH": BASE_PATH, "HOME": os.path.join(harness_dir(), "pi-home"), "PI_OFFLINE": "1",
           "PI_TELEMETRY": "0", "LANG": "C.UTF-8"}
    return _ensure_npm("pi", PI_PACKAGE, "Pi", lambda v: v == PI_VERSION, env=env)


def ensure_opencode():
    """Path of a working OpenCode CLI of the pinned version (npm-installed when missing).
    The package's optional dependency opencode-linux-x64 carries the native binary; npm may
    skip the postinstall, which is not needed (docs/contracts/opencode.md §1)."""
    env = {"PATH": BASE_PATH, "HOME": os.path.join(harness_dir(), "opencode-home"), "LANG": "C.UTF-8",
           "OPENCODE_DISABLE_AUTOUPDATE": "1"}
    return _ensure_npm("opencode", OPENCODE_PACKAGE, "OpenCode", lambda v: v == OPENCODE_VERSION, env=env)
