"""Helpers for the preloop-hooks end-to-end suites (Python 3.11 stdlib only).

The suites run the real harness CLIs headless against the project's mock model APIs, with
hooks wired into a temporary HOME, and inspect what the model received. Which harnesses,
at which versions, from which npm packages, with which hook commands: the registry's
(shared/src/registry.rs, generated into kit/registry.json), never this package's. For each
harness the kit can run, kit.ensure(slug) (alias ensure_<program>(): ensure_claude(),
ensure_codex(), ...) installs and returns its pinned CLI, and its own module,
kit/<program>.py, holds its hook commands, where text lands in its model requests
(<program>_find_marker(); Claude Code's is find_marker()) and the runner mixin that gives
Sandbox its run_<program>(). A plugin-carried harness's world is a kit.PluginWorld in its
suite (e2e/test_pi.py: PiWorld).

A test makes a Sandbox (temp HOME, project dir, PRELOOP_HOME), starts the mock with a
script of turns (sb.start_mock(script, api)), wires the hooks (write_settings /
install_hooks / write_gemini_hooks / write_copilot_hooks), runs the harness (a RunResult:
rc, stdout, stderr, every mock record, the main agent's request bodies) and looks the
markers up. Scenario suites mix in Scenario (failure dumps, receipts, note helpers) with a
mode (LocalMode / ServerMode) and a harness (ClaudeScenarios / CodexScenarios /
GeminiScenarios / CopilotScenarios on NoteScenarios, which hold the scenarios a-d every mode
shares). A missing prerequisite (harness, binaries, server) makes every test that needs it
FAIL with the reason (Prereq), never skip.

The package, bottom up (each module imports only those above it; the suites use the names
re-exported here, `kit.Sandbox`, never the modules; what is re-exported is each module's
`__all__`, found on disk, so a new module needs no line here):

  common.py      paths, command names, KitError, shorten/poll_state/quote_path/...
  harnesses.py   the pinned harness CLIs: ensure(slug), ensure_all(), ensure_<program>()
  mock.py        the mock model APIs as child processes; main_requests()
  blocks.py      the operator-notes blocks (XML and Gemini's bracket form), parsed
  landing.py     Landing: where a string landed in a Gemini or Copilot request body
  claude.py      Claude Code: hook commands, labels, find_marker, turns, runner, PtyClaude
  tty.py         Tty: a TUI on a pseudo-terminal (PtyClaude's base; e2e/test_tui.py)
  plugin_world.py  PluginWorld: a plugin-carried harness's world (PiWorld, OpenCodeWorld)
  <program>.py   each harness's own module (claude.py above, codex.py, gemini.py, ...):
                 hook commands, marker search, its runner (RUNNER, a Sandbox mixin) and
                 what its CLI needs beyond the registry (cli_env())
  binaries.py    the preloop-hooks build, its hook-command links, the release packages
  prereq.py      Prereq and the setUpModule helpers of the install-wired suites
  report.py      failure dumps: request summaries per harness, the mock's commands
  sandbox.py     Sandbox (one scenario's world: its bases are the harnesses' RUNNERs) and
                 RunResult
  server.py      the real Preloop server: up/down and ServerClient
  scenarios/     the TestCase mixins: Scenario, the modes, the scenarios a-d, one module
                 per harness

Environment knobs (all optional):
  PRELOOP_E2E_HARNESS_DIR   where the harness CLIs are installed / cached
                            (default: e2e/.harness; npm-installed there when missing;
                            Copilot's ~235 MB unpack cache is <dir>/copilot-cache)
  PRELOOP_BIN_DIR           directory holding the already-built preloop-hooks executable (the
                            hook commands are laid out as links to it in its hook-commands/);
                            when unset the kit runs `cargo build --workspace` in the
                            repository root and uses target/debug
  PRELOOP_PACKAGE_DIR       what scripts/package wrote (test_packages.py); when unset the kit
                            runs scripts/package into a temp dir
  PRELOOP_E2E_CLAUDE_TIMEOUT, PRELOOP_E2E_CODEX_TIMEOUT, PRELOOP_E2E_GEMINI_TIMEOUT,
  PRELOOP_E2E_COPILOT_TIMEOUT  seconds one harness run may take (60, 90, 120, 120)
  PRELOOP_E2E_KEEP=1        keep every run's temp dir (default: only failed runs are kept)
  PRELOOP_E2E_TMPDIR        parent for the temp dirs (default: the system temp dir)
  PRELOOP_E2E_SERVER_HOME, PRELOOP_E2E_SERVER_PORT, PRELOOP_E2E_PG_PORT, PRELOOP_E2E_VENV
                            the real Preloop server of test_real_server.py
                            (e2e/preloop_server/up.sh; see e2e/README.md)
"""

import importlib as _importlib
import pkgutil as _pkgutil


def _reexport():
    """Every kit module's public names (its `__all__`), here: the kit's modules and those of
    kit/scenarios/, found on disk, so a new harness's kit module is picked up as it is.
    A module without `__all__`, or two modules exporting one name, stop the import."""
    names = {}
    for pkg in (__name__, __name__ + ".scenarios"):
        package = _importlib.import_module(pkg)
        for info in sorted(_pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            if info.ispkg:
                continue
            module = _importlib.import_module("%s.%s" % (pkg, info.name))
            exported = getattr(module, "__all__", None)
            if exported is None:
                raise ImportError("%s has no __all__: say which of its names the kit re-exports"
                                  % module.__name__)
            for name in exported:
                if name in names and names[name] is not module:
                    raise ImportError("%s and %s both export %s" % (names[name].__name__,
                                                                    module.__name__, name))
                names[name] = module
                globals()[name] = getattr(module, name)
    return sorted(names)


__all__ = _reexport()
