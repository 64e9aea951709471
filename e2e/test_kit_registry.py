"""The e2e kit follows the registry: a new harness is picked up from registry.json and its
own kit module, with no line in the kit's shared files (docs/adding-a-harness.md).

Pure Python, no harness, no build: python3 -m unittest e2e/test_kit_registry.py"""

import ast
import importlib
import os
import re
import shutil
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kit  # noqa: E402
from kit import harnesses, sandbox  # noqa: E402

KIT_DIR = os.path.dirname(os.path.abspath(kit.__file__))

# The kit's files every harness shares: none of them may name a harness.
SHARED = ("__init__.py", "harnesses.py", "sandbox.py", "mock.py", "prereq.py")


def _words(s):
    """The lower-case words of an identifier or string: camelCase, snake_case, kebab-case."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", s)
    return [w for w in re.split(r"[^a-z0-9]+", s.lower()) if w]


def _code_words(path):
    """(word, line) of every identifier and string constant in the file's code (docstrings
    apart: they may give examples)."""
    with open(path) as f:
        tree = ast.parse(f.read())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield from ((w, node.lineno) for w in _words(node.value))
        elif isinstance(node, ast.Name):
            yield from ((w, node.lineno) for w in _words(node.id))
        elif isinstance(node, ast.Attribute):
            yield from ((w, node.lineno) for w in _words(node.attr))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            yield from ((w, node.lineno) for w in _words(node.name))
        elif isinstance(node, ast.alias):
            yield from ((w, node.lineno) for w in _words(node.asname or node.name))


class KitFollowsTheRegistry(unittest.TestCase):
    def test_the_shared_files_name_no_harness(self):
        names = set()
        for slug, h in kit.registry().items():
            names.update([slug, h["program"]] + _words(slug) + _words(h["program"]))
        names.discard("cli")   # "gemini-cli"-style slugs' second word is no harness
        names.discard("agent")
        for f in SHARED:
            found = sorted({(w, line) for w, line in _code_words(os.path.join(KIT_DIR, f)) if w in names})
            self.assertEqual(found, [], "e2e/kit/%s names a harness in its code (word, line): a new "
                             "harness would have to be added there; take it from the registry" % f)

    def test_every_module_is_reexported_from_its_all(self):
        seen = {}
        for pkg, d in (("kit", KIT_DIR), ("kit.scenarios", os.path.join(KIT_DIR, "scenarios"))):
            for f in sorted(os.listdir(d)):
                if not f.endswith(".py") or f == "__init__.py":
                    continue
                module = importlib.import_module("%s.%s" % (pkg, f[:-3]))
                self.assertTrue(hasattr(module, "__all__"), "%s has no __all__" % module.__name__)
                for name in module.__all__:
                    self.assertNotIn(name, seen, "%s and %s both export %s" % (seen.get(name), module.__name__, name))
                    seen[name] = module.__name__
                    self.assertIs(getattr(kit, name), getattr(module, name), name)
        self.assertEqual(sorted(kit.__all__), sorted(seen))

    def test_sandbox_is_made_of_every_harness_runner(self):
        want = []
        for slug in kit.registry():
            module = harnesses.harness_module(slug)
            if module is not None and hasattr(module, "RUNNER"):
                self.assertEqual(module.RUNNER.SLUG, slug)
                want.append(module.RUNNER)
        self.assertTrue(want, "no harness kit module has a RUNNER")
        self.assertEqual(kit.Sandbox.__bases__, tuple(want))
        self.assertEqual(sandbox.RUNNERS, tuple(want))

    def test_every_runnable_harness_has_its_ensure_alias(self):
        for slug in harnesses.cli_slugs():
            name = "ensure_" + kit.registry()[slug]["program"].replace("-", "_")
            with mock.patch.object(harnesses, "ensure", return_value="/x/" + slug) as ensure:
                self.assertEqual(getattr(kit, name)(), "/x/" + slug)
            ensure.assert_called_once_with(slug)
        # Those the suites call.
        for name in ("ensure_claude", "ensure_codex", "ensure_gemini", "ensure_copilot", "ensure_pi",
                     "ensure_opencode"):
            self.assertTrue(callable(getattr(kit, name)), name)
        with mock.patch.object(harnesses, "ensure", side_effect=lambda s: "/x/" + s):
            self.assertEqual(harnesses.ensure_all(), {s: "/x/" + s for s in harnesses.cli_slugs()})

    def test_main_requests_are_each_runners(self):
        # One record of each kind the mocks log; each harness's main agent's is its own.
        records = [
            {"route": "messages", "reply": {"kind": "main"}, "body": {"n": "messages-main"}},
            {"route": "messages", "reply": {"kind": "side"}, "body": {"n": "messages-side"}},
            {"route": "responses", "reply": {"kind": "agent"}, "body": {"n": "responses-agent"}},
            {"route": "stream", "reply": {"kind": "main"}, "body": {"n": "stream-main"}},
            {"route": "generate", "reply": {"kind": "main"}, "body": {"n": "generate-main"}},
            {"route": "agent", "reply": {"agent": "main"}, "body": {"n": "agent-main"}},
            {"route": "agent", "reply": {"agent": "worker"}, "body": {"n": "agent-worker"}},
        ]
        want = {"claude": ["messages-main"], "codex": ["responses-agent"],
                "gemini": ["stream-main", "generate-main"], "copilot": ["agent-main"]}
        got = {name: [b["n"] for b in kit.main_requests(name, records)] for name in want}
        self.assertEqual(got, want)
        self.assertEqual(kit.main_requests("claude-code", records), kit.main_requests("claude", records))
        with self.assertRaises(kit.KitError):
            kit.main_requests("no-such-harness", records)

    def test_every_runner_summarizes_its_runs_and_any_other_harness_gets_json(self):
        for runner in sandbox.RUNNERS:
            program = kit.registry()[runner.SLUG]["program"]
            self.assertIs(kit.SUMMARIZERS[program], getattr(kit, runner.SUMMARY), program)
        self.assertIs(kit.SUMMARIZERS["no-such-harness"], kit.summarize_json)
        self.assertIn("MARK-1", kit.summarize_json([{"x": "MARK-1"}], ["MARK-1"]))
        body = {"input": [{"type": "message", "role": "user", "content": "MARK-2"}]}
        self.assertIn("MARK-2", kit.SUMMARIZERS["codex"]([body], ["MARK-2"]))

    def test_the_mocks_are_found_on_disk(self):
        for api in ("anthropic", "openai", "gemini", "copilot"):
            self.assertEqual(kit.MOCKS[api], "mock_%s.py" % api)
        self.assertNotIn("common", kit.MOCKS)
        for f in kit.MOCKS.values():
            self.assertTrue(os.path.exists(os.path.join(kit.E2E_DIR, f)), f)

    def test_a_harness_without_a_package_cannot_be_ensured(self):
        missing = [s for s, h in kit.registry().items() if not h.get("npm_package")]
        for slug in missing + ["no-such-harness"]:
            with self.assertRaises(kit.KitError):
                kit.ensure(slug)

    def test_version_matches_each_form_of_version_output(self):
        for out in ("1.2.3", "1.2.3 (Some CLI)", "some-cli 1.2.3", "Some CLI 1.2.3.\nRun 'x update'.",
                    "WARNING: no aliases\nsome-cli 1.2.3"):
            self.assertTrue(harnesses.version_matches(out, "1.2.3"), out)
        for out in ("1.2.30", "1.2.3-beta", "v1.2.3x", "11.2.3", "", "1.2"):
            self.assertFalse(harnesses.version_matches(out, "1.2.3"), out)

    def test_install_hooks_takes_files_and_environment_from_the_runners(self):
        sb = kit.Sandbox("kit-registry-selftest", "/nonexistent")
        try:
            self.assertTrue(os.path.isdir(os.path.join(sb.home, ".claude")))
            env = {}
            for runner in sandbox.RUNNERS:
                if hasattr(runner, "install_env"):
                    env.update(runner.install_env(sb))
            self.assertEqual(env, {"CODEX_HOME": os.path.join(sb.root, "codex-home"),
                                   "COPILOT_HOME": os.path.join(sb.root, "home", ".copilot")})
            files = {r.SLUG: r.installed_settings(sb) for r in sandbox.RUNNERS
                     if hasattr(r, "installed_settings")}
            self.assertEqual(files, {"claude-code": os.path.join(sb.home, ".claude", "settings.json"),
                                     "codex": os.path.join(sb.root, "codex-home", "hooks.json"),
                                     "gemini": os.path.join(sb.home, ".gemini", "settings.json")})
        finally:
            root = sb.root
            sb.close()
            shutil.rmtree(root, ignore_errors=True)


class InstallHooksFollowsTheRunners(unittest.TestCase):
    """Sandbox.install_hooks against a stand-in preloop-hooks (a shell script that logs its
    arguments and the environment install needs): each harness's hook file is its own
    runner's, and install gets every runner's install_env."""

    def _fake_cli(self, with_install):
        d = tempfile.mkdtemp(prefix="preloop-kit-fake-cli-")
        self.addCleanup(shutil.rmtree, d, True)
        log = os.path.join(d, "calls.log")
        help_text = "  --harness <HARNESS>" if with_install else "no such command"
        with open(os.path.join(d, kit.CLI_BINARY), "w") as f:
            f.write("#!/bin/sh\n"
                    "if [ \"$2\" = --help ]; then echo '%s'; exit 0; fi\n"
                    "echo \"$* CODEX_HOME=$CODEX_HOME COPILOT_HOME=$COPILOT_HOME\" >> '%s'\n"
                    % (help_text, log))
        os.chmod(os.path.join(d, kit.CLI_BINARY), 0o755)
        return d, log

    def _sandbox(self, bin_dir):
        sb = kit.Sandbox("kit-registry-install", bin_dir)
        self.addCleanup(shutil.rmtree, sb.root, True)
        self.addCleanup(sb.close)
        return sb

    def test_install_sets_each_runners_hook_file(self):
        bin_dir, log = self._fake_cli(True)
        for runner in sandbox.RUNNERS:
            sb = self._sandbox(bin_dir)
            self.assertEqual(sb.install_hooks(runner.SLUG), "install")
            want = runner.installed_settings(sb) if hasattr(runner, "installed_settings") else None
            self.assertEqual(sb.settings_path, want, runner.SLUG)
            with open(log) as f:
                last = f.read().splitlines()[-1]
            self.assertIn("install --harness %s --scope user" % runner.SLUG, last)
            self.assertIn("CODEX_HOME=%s" % os.path.join(sb.root, "codex-home"), last)
            self.assertIn("COPILOT_HOME=%s" % os.path.join(sb.root, "home", ".copilot"), last)
        # What the suites read back after install (test_claude_idle_wake, the scenarios).
        sb = self._sandbox(bin_dir)
        sb.install_hooks("claude-code")
        self.assertEqual(sb.settings_path, os.path.join(sb.home, ".claude", "settings.json"))

    def test_without_install_only_a_runner_that_can_wire_itself_does(self):
        bin_dir, _ = self._fake_cli(False)
        sb = self._sandbox(bin_dir)
        self.assertEqual(sb.install_hooks("claude-code"), "kit")
        self.assertEqual(sb.settings_path, os.path.join(sb.home, ".claude", "settings.json"))
        self.assertTrue(os.path.exists(sb.settings_path))
        with self.assertRaises(kit.KitError):
            self._sandbox(bin_dir).install_hooks("codex")


if __name__ == "__main__":
    unittest.main()
