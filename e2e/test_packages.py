"""What a user installs, proven from the packages, not the build tree (issue 22).

scripts/package writes the release tarball (with its .sha256) and the npm tarballs
(kit.ensure_packages: PRELOOP_PACKAGE_DIR, which scripts/test sets, else a fresh
scripts/package run). Each test starts in a fresh HOME whose PATH holds no cargo and no
rustc (kit.BASE_PATH), as a user who has Node but no Rust toolchain:

  tarball  sha256 checks; unpack; bin/preloop-hooks install --harness all wires all five
           harnesses; every command in every config is an absolute path to a hook command
           beside the executable, a hard link to it (one file on disk), and a hook runs.
  npm      npm install -g --offline --prefix P of every *.tgz (no registry); the installed
           tree is at most 15 MB; P/bin/preloop-hooks (the JS launcher) install --harness all
           wires all five harnesses with the NATIVE executable's path ($PRELOOP_HOME/bin,
           never node, never node_modules), and a hook runs.
  server   the real Claude Code 2.1.328 carries notes on the real Preloop server 0.17.1 with
           hooks installed by the npm-installed preloop-hooks (kit.ClaudeScenarios b and c:
           a note mid-run through PreToolUse, a late note rescued by Stop; receipts
           `delivered`).

Run alone, from the repository root: python3 -m unittest -v e2e/test_packages.py
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()
HARNESS_CONFIGS = {
    "claude-code": (".claude", "settings.json"),
    "codex": (".codex", "hooks.json"),
    "cursor": (".cursor", "hooks.json"),
    "gemini": (".gemini", "settings.json"),
    "copilot": (".copilot", "hooks", "preloop.json"),
}
MAX_NPM_TREE = 15 * 1000 * 1000


def setUpModule():
    PREREQ.get("packages", kit.ensure_packages)
    PREREQ.get("npm_prefix", lambda: kit.npm_install_packages(PREREQ["packages"]))
    PREREQ.get("claude", kit.ensure_claude)
    kit.require_server(PREREQ, wiring="the npm-installed `preloop-hooks install --harness claude-code`")


def tearDownModule():
    kit.release_server(PREREQ)


def commands_in(value):
    """Every hook command string in a harness config (`command`, Copilot's `bash`)."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("command", "bash") and isinstance(v, str):
                out.append(v)
            else:
                out.extend(commands_in(v))
    elif isinstance(value, list):
        for v in value:
            out.extend(commands_in(v))
    return out


class _FreshHome(unittest.TestCase):
    PREREQ = PREREQ

    def setUp(self):
        self.PREREQ.require(self, "packages")
        self.root = tempfile.mkdtemp(prefix="preloop-e2e-pkg-", dir=os.environ.get("PRELOOP_E2E_TMPDIR"))
        self.addCleanup(shutil.rmtree, self.root, True)
        self.home = os.path.join(self.root, "home")
        os.makedirs(self.home)
        self.env = {"PATH": kit.BASE_PATH, "HOME": self.home, "LANG": "C.UTF-8",
                    "CODEX_HOME": os.path.join(self.home, ".codex")}
        for tool in ("cargo", "rustc"):
            self.assertIsNone(shutil.which(tool, path=kit.BASE_PATH),
                              "%s is on the test's PATH %s: the install would not prove a machine without Rust"
                              % (tool, kit.BASE_PATH))

    def run_cmd(self, argv, **kw):
        p = subprocess.run(argv, env=self.env, cwd=self.root, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=kw.pop("timeout", 120), **kw)
        return p

    def check_wired(self, hook_dir):
        """All five harness configs hold our hooks; every command is a hook command in
        hook_dir that is a hard link to hook_dir/preloop-hooks."""
        exe = os.path.join(hook_dir, kit.CLI_BINARY)
        st = os.stat(exe)
        for harness, parts in HARNESS_CONFIGS.items():
            path = os.path.join(self.home, *parts)
            self.assertTrue(os.path.exists(path), "%s: no %s after install" % (harness, path))
            with open(path) as f:
                text = f.read()
            if harness == "gemini":
                text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))
            cmds = [c for c in commands_in(json.loads(text)) if "preloop-" in c]
            self.assertGreaterEqual(len(cmds), 6, "%s: %d hook commands in %s" % (harness, len(cmds), path))
            for c in cmds:
                prog = c.strip("'\"")
                self.assertTrue(os.path.isabs(prog), "%s: %r is not an absolute path" % (harness, c))
                self.assertEqual(os.path.dirname(prog), hook_dir, "%s: %r is not in %s" % (harness, c, hook_dir))
                self.assertNotIn("node", prog, "%s: %r runs through node" % (harness, c))
                hs = os.stat(prog)
                self.assertEqual((hs.st_dev, hs.st_ino), (st.st_dev, st.st_ino),
                                 "%s: %s is not a link to %s" % (harness, prog, exe))

    def check_a_hook_runs(self, hook_dir):
        """A Claude Code SessionStart and PreToolUse through the installed commands (local
        inbox): exit 0, stdout nothing or one JSON object, one log line each."""
        env = dict(self.env, PRELOOP_HOME=os.path.join(self.home, ".preloop"))
        for event in ("SessionStart", "PreToolUse"):
            with open(os.path.join(kit.REPO_ROOT, "fixtures", "claude-code-2.1.328", event + ".json")) as f:
                payload = json.load(f)
            payload["session_id"] = "pkg-e2e-session"
            name = {"SessionStart": "preloop-claude-code-session-start",
                    "PreToolUse": "preloop-claude-code-pre-tool-use"}[event]
            p = subprocess.run([os.path.join(hook_dir, name)], input=json.dumps(payload), env=env,
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 0, "%s exited %d: %s" % (name, p.returncode, p.stderr))
            if p.stdout.strip():
                self.assertIsInstance(json.loads(p.stdout), dict)
        with open(os.path.join(env["PRELOOP_HOME"], "log", "hooks.log")) as f:
            log = f.read()
        self.assertIn("claude-code SessionStart", log)
        self.assertIn("claude-code PreToolUse", log)


class TestReleaseTarball(_FreshHome):
    def test_the_tarball_installs_every_harness_without_a_rust_toolchain(self):
        pkg = self.PREREQ["packages"]
        tarballs = [n for n in os.listdir(pkg) if n.endswith(".tar.gz")]
        self.assertEqual(len(tarballs), 1, tarballs)
        tarball = os.path.join(pkg, tarballs[0])
        with open(tarball + ".sha256") as f:
            want = f.read().split()[0]
        with open(tarball, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), want, "the .sha256 beside it")
        unpack = os.path.join(self.root, "opt")
        with tarfile.open(tarball) as t:
            names = t.getnames()
            top = tarballs[0][: -len(".tar.gz")]
            for want_name in ("bin/preloop-hooks", "share/doc/preloop-hooks/README.md",
                              "share/doc/preloop-hooks/LICENSE"):
                self.assertIn("%s/%s" % (top, want_name), names)
            t.extractall(unpack)
        bin_dir = os.path.join(unpack, top, "bin")
        p = self.run_cmd([os.path.join(bin_dir, kit.CLI_BINARY), "--version"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"^preloop-hooks \d+\.\d+\.\d+ \(commit [0-9a-f]{7,}\)")
        p = self.run_cmd([os.path.join(bin_dir, kit.CLI_BINARY), "install", "--harness", "all"])
        self.assertEqual(p.returncode, 0, "install exited %d\n%s\n%s" % (p.returncode, p.stdout, p.stderr))
        self.assertIn("linked", p.stdout)
        self.check_wired(bin_dir)
        self.check_a_hook_runs(bin_dir)
        # One file on disk: the executable and its links, nothing else in bin/.
        files = os.listdir(bin_dir)
        inodes = {os.stat(os.path.join(bin_dir, n)).st_ino for n in files}
        self.assertEqual(len(inodes), 1, "bin/ holds more than one file: %s" % files)
        # README's size sentences say what `ls -l` says (newcomer-ux-4 P14).
        size = os.path.getsize(os.path.join(bin_dir, kit.CLI_BINARY))
        for said in readme_sizes():
            self.assertLess(abs(said - size / 1e6), 0.5,
                            "README says about %s MB; the shipped preloop-hooks is %d bytes" % (said, size))


def readme_sizes():
    """The sizes (MB) README.md gives the shipped executable: "`preloop-hooks` (about N MB"
    and "for every hook holds N MB on disk"."""
    import re
    with open(os.path.join(kit.REPO_ROOT, "README.md")) as f:
        text = " ".join(f.read().split())
    found = [float(m) for m in re.findall(r"`preloop-hooks` \(about (\d+(?:\.\d+)?) MB", text)]
    found += [float(m) for m in re.findall(r"for every hook holds (\d+(?:\.\d+)?) MB on disk", text)]
    assert len(found) == 2, "README's two size sentences not found: %s" % found
    return found


def readme_block(after):
    """The first ```sh block of README.md after the line that starts with `after`."""
    with open(os.path.join(kit.REPO_ROOT, "README.md")) as f:
        text = f.read()
    at = text.index("\n" + after)
    start = text.index("```sh\n", at) + len("```sh\n")
    return text[start:text.index("```", start)]


class TestReadmeInstallRunsAsWritten(_FreshHome):
    """README's Install blocks, run as written in a fresh HOME (newcomer-ux-4 P3): the
    tarball block in the folder that holds the two downloaded files, and the checkout's
    npm block with OUTDIR the folder scripts/package wrote (npm's global prefix is the
    user's own, as `npm config set prefix ~/.npm-global` makes it)."""

    def run_block(self, block, cwd, env=None):
        p = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env or self.env, cwd=cwd,
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
        self.assertEqual(p.returncode, 0, "README's block exited %d:\n%s\n%s\n%s"
                         % (p.returncode, block, p.stdout, p.stderr))
        return p

    def test_the_tarball_block(self):
        block = readme_block("**From a release tarball**")
        pkg = self.PREREQ["packages"]
        downloads = os.path.join(self.home, "Downloads")
        os.makedirs(downloads)
        for n in os.listdir(pkg):
            if n.endswith((".tar.gz", ".tar.gz.sha256")):
                shutil.copy2(os.path.join(pkg, n), downloads)
                self.assertIn(n, block, "README names the file scripts/package writes")
        self.assertFalse(os.path.exists(os.path.join(self.home, ".local")), "a fresh HOME has no ~/.local")
        p = self.run_block(block, downloads)
        local = os.path.join(self.home, ".local")
        bin_dir = os.path.join(local, "bin")
        self.assertEqual(sorted(n for n in os.listdir(local)), ["bin", "share"],
                         "only bin/ and share/ land in ~/.local")
        self.assertTrue(os.path.exists(os.path.join(local, "share", "doc", "preloop-hooks", "README.md")))
        self.check_wired(bin_dir)
        self.assertIn("not on PATH", p.stdout + p.stderr, "install says that ~/.local/bin is not on PATH")
        self.assertIn('export PATH="%s:$PATH"' % bin_dir, p.stdout + p.stderr)

    def test_the_checkout_npm_block(self):
        block = readme_block("**Today, from a checkout**")
        self.assertIn("OUTDIR", block)
        block = block.replace("OUTDIR", self.PREREQ["packages"])
        prefix = os.path.join(self.home, ".npm-global")
        env = dict(self.env, NPM_CONFIG_PREFIX=prefix, NPM_CONFIG_CACHE=os.path.join(self.root, "npm-cache"))
        self.run_block(block, self.home, env)
        cli = os.path.join(prefix, "bin", kit.CLI_BINARY)
        p = self.run_cmd([cli, "--version"])
        self.assertEqual(p.returncode, 0, p.stderr)


class TestNpmPackages(_FreshHome):
    def test_npm_install_offline_wires_every_harness_with_the_native_executable(self):
        self.PREREQ.require(self, "npm_prefix")
        prefix = self.PREREQ["npm_prefix"]
        size = sum(os.lstat(os.path.join(d, f)).st_size
                   for d, _, fs in os.walk(prefix) for f in fs)
        self.assertLessEqual(size, MAX_NPM_TREE, "the installed npm tree is %d bytes" % size)
        cli = os.path.join(prefix, "bin", kit.CLI_BINARY)
        self.assertTrue(os.path.realpath(cli).endswith(".js"), "the npm command is the JS launcher")
        p = self.run_cmd([cli, "--version"])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = self.run_cmd([cli, "install", "--harness", "all"])
        self.assertEqual(p.returncode, 0, "install exited %d\n%s\n%s" % (p.returncode, p.stdout, p.stderr))
        hook_dir = os.path.join(self.home, ".preloop", "bin")
        self.check_wired(hook_dir)
        self.check_a_hook_runs(hook_dir)
        # The launcher passes exit codes and stderr through: a usage error is 2.
        p = self.run_cmd([cli, "notes", "send"])
        self.assertEqual(p.returncode, 2, p.stderr)
        # uninstall takes the hook commands and the copy out again.
        p = self.run_cmd([cli, "uninstall"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(os.path.exists(os.path.join(hook_dir, "preloop-claude-code-stop")))
        self.assertIn("npm uninstall -g preloop-hooks", p.stdout)


class TestNpmInstalledHooksOnTheRealServer(kit.ClaudeScenarios, kit.ServerMode, unittest.TestCase):
    """kit.ClaudeScenarios against the real server, hooks wired by the npm-installed
    preloop-hooks (WIRING "install" runs `P/bin/preloop-hooks install --harness claude-code
    --scope user` in the sandbox's HOME): b (PreToolUse) and c (Stop rescue)."""

    PREREQ = PREREQ
    PREREQS = ("creds", "claude", "npm_prefix")
    TOKEN_PREFIX = "E2E-NPM"
    WIRING = "install"
    MODEL = kit.MODEL_DEFAULT
    MODEL_NAME = "default"
    CONTEXT_SHAPE = "system_message"
    # a and d are the same hooks as b and c; test_real_server.py runs them on the build.
    test_a_note_before_start_reaches_first_request = None
    test_d_note_pending_at_end_is_undeliverable_session_ended = None

    def bin_dir(self):
        return os.path.join(self.PREREQ["npm_prefix"], "bin")

    def start(self, scenario, server=None):
        sb = super().start(scenario, server)
        settings = os.path.join(sb.home, ".claude", "settings.json")
        with open(settings) as f:
            text = f.read()
        self.check("node_modules" not in text and os.path.join(sb.preloop_home, "bin") in text,
                   "the npm-installed preloop-hooks wired %s with commands outside $PRELOOP_HOME/bin"
                   % settings)
        return sb


if __name__ == "__main__":
    unittest.main()
