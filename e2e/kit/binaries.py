"""The project's own executables under test: the preloop-hooks build with its hook commands
laid out as links (build_binaries), the release packages (ensure_packages) and an offline
npm install of them (npm_install_packages), and whether a build offers
`install --harness H` (has_install_command).

Kept apart from the harness CLIs (harnesses.py): these are what the suites test, those are
what they test it with."""

import os
import re
import shutil
import subprocess
import tempfile

from .claude import HOOK_BINARIES
from .common import BASE_PATH, CLI_BINARY, REPO_ROOT, KitError, log

__all__ = ["build_binaries", "ensure_packages", "has_install_command", "npm_install_packages"]


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
        log("cargo build --workspace (in %s)" % REPO_ROOT)
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
        log("scripts/package %s" % out)
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
