"""The pinned harness CLIs: ensure(slug) returns the path of a working CLI of the pinned
version, npm-installing it into the harness directory first when it is missing (CI starts
from a fresh machine); ensure_all() does it for every harness the kit can run.

Everything comes from the registry (shared/src/registry.rs, through the generated
e2e/kit/registry.json): the version, the npm package and the program, because every
contract in docs/contracts/ is proven against exactly these builds. No harness is named
here: what one genuinely needs beyond that (an environment of its own for `--version`: no
update check, no telemetry, a HOME of its own) is in its own kit module,
e2e/kit/<program>.py, as `cli_env()`. ensure_<program>() (ensure_claude(), ensure_codex(),
...) are aliases made from the registry for the suites."""

import importlib
import json
import os
import shutil
import subprocess
import tempfile

from .common import E2E_DIR, KitError, log, npm_spec, registry


def harness_dir():
    return os.path.abspath(os.environ.get("PRELOOP_E2E_HARNESS_DIR")
                           or os.path.join(E2E_DIR, ".harness"))


def cli_slugs():
    """The slugs of the harnesses the kit can run (an npm package in the registry), in
    registry order."""
    return [slug for slug, h in registry().items() if h.get("npm_package")]


def harness_module(slug):
    """The harness's own kit module, e2e/kit/<program>.py (imported; a `-` in the program
    is a `_` in the module's name), or None when it has none."""
    name = registry()[slug]["program"].replace("-", "_")
    if not os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")):
        return None
    return importlib.import_module("." + name, __package__)


def runners():
    """The runner mixin (RUNNER) of every harness whose kit module has one, in registry
    order: Sandbox's bases. KitError when a RUNNER's SLUG is not its harness's."""
    out = []
    for slug in registry():
        runner = getattr(harness_module(slug), "RUNNER", None)
        if runner is not None:
            if getattr(runner, "SLUG", None) != slug:
                raise KitError("%s.SLUG is %r, not the registry's %r"
                               % (runner.__name__, getattr(runner, "SLUG", None), slug))
            out.append(runner)
    return tuple(out)


def runner_of(name):
    """The runner of the harness NAME (its slug, or its program: the name its runs carry,
    RunResult.harness), or None."""
    for runner in runners():
        if name in (runner.SLUG, registry()[runner.SLUG]["program"]):
            return runner
    return None


def version_matches(output, version):
    """Whether `--version`'s OUTPUT names VERSION as a word of its own (a trailing period
    apart): `X.Y.Z`, `X.Y.Z (Name)`, `name-cli X.Y.Z` and `Name CLI X.Y.Z.` all do; a warning
    line before it does no harm."""
    return version in (w.rstrip(".") for w in output.split())


def _tool_version(path, env=None):
    """`path --version` (stripped stdout, or stderr when stdout is empty: Pi prints its
    version there), or None when it does not run."""
    try:
        p = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
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


def _run_postinstall(d, npm_package):
    """Run the package's own postinstall script in its folder (npm may skip it; Claude
    Code's puts its native binary in place), logging a failure."""
    folder = os.path.join(d, "node_modules", *npm_package.split("/"))
    try:
        with open(os.path.join(folder, "package.json")) as f:
            script = (json.load(f).get("scripts") or {}).get("postinstall")
    except (OSError, ValueError):
        return
    if not script:
        return
    q = subprocess.run(["sh", "-c", script], cwd=folder, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if q.returncode != 0:
        log("`%s` (postinstall of %s) exited %d:\n%s\n%s"
            % (script, npm_package, q.returncode, q.stdout[-3000:], q.stderr[-3000:]))


def ensure(slug):
    """Path of a working CLI of the harness SLUG at the registry's version: the path of
    node_modules/.bin/<program> in harness_dir() once its `--version` names that version,
    npm-installing the package first when it does not; when the installed CLI does not run
    at all, its package's postinstall is run once (an install npm left half done)."""
    h = registry().get(slug)
    if not h or not h.get("npm_package"):
        raise KitError("the registry (shared/src/registry.rs) has no npm package for %r: the kit "
                       "cannot run it" % slug)
    module = harness_module(slug)
    cli_env = getattr(module, "cli_env", None)
    env = cli_env() if cli_env else None
    d = harness_dir()
    path = os.path.join(d, "node_modules", ".bin", h["program"])
    want = h["version"]
    v = _tool_version(path, env)
    if v and version_matches(v, want):
        return path
    _npm_install(d, npm_spec(slug), h["name"], v)
    v = _tool_version(path, env)
    if not v:
        _run_postinstall(d, h["npm_package"])
        v = _tool_version(path, env)
    if not (v and version_matches(v, want)):
        raise KitError("installed %s (%s) reports %r, want %s" % (h["name"], path, v, npm_spec(slug)))
    return path


def ensure_all():
    """{slug: path} of every harness the kit can run (ensure() each, in registry order)."""
    return {slug: ensure(slug) for slug in cli_slugs()}


def _alias(slug):
    def ensure_one():
        return ensure(slug)
    h = registry()[slug]
    ensure_one.__name__ = ensure_one.__qualname__ = "ensure_" + h["program"].replace("-", "_")
    ensure_one.__doc__ = ("Path of a working %s CLI of the pinned version (npm-installed when "
                          "missing): ensure(%r)." % (h["name"], slug))
    return ensure_one


# ensure_<program>() for each harness the kit can run: ensure_claude(), ensure_codex(), ...
ALIASES = {f.__name__: f for f in map(_alias, cli_slugs())}
globals().update(ALIASES)

__all__ = ["cli_slugs", "ensure", "ensure_all", "harness_dir", "harness_module", "runner_of",
           "runners", "version_matches"] + list(ALIASES)
