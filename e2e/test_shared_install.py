"""End-to-end: another HOME's `uninstall` cannot take the hooks out (red-team 4, P2;
docs/hardening.md, round four).

The executable sits in a shared bin dir (the tarball / `scripts/install --prefix` layout):
`preloop-hooks install` links the hook commands beside it and writes their absolute paths
into the user's harness config. The user's `~/.preloop/config.json` names a server whose
central policy denies every tool call. Then `preloop-hooks uninstall` runs from another
HOME (another account's shell, sudo, a sandbox) in which nothing was installed. Before
round four it deleted the hook commands beside the shared executable, and the real Claude
Code 2.1.328 then ran the denied Bash call with no hook at all. Now the commands stay, the
other HOME's uninstall says why, and the denied command does not run.

Run from the repository root:
  python3 -m unittest e2e.test_shared_install -v
"""

import http.server
import json
import os
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()


def setUpModule():
    PREREQ.get("bin_dir", kit.build_binaries)
    PREREQ.get("claude", kit.ensure_claude)


class DenyServer:
    """A minimal Preloop hook API that denies every permission check (counts them)."""

    def __init__(self):
        routes = self.routes = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _answer(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                route = self.path.split("/api/v1/agents/", 1)[-1]
                routes.append(route)
                body = {
                    "permission-check": {"decision": "deny", "reason": "central policy: e2e denies every tool call"},
                    "session-start": {"runtime_session_id": str(uuid.uuid4()), "created": True},
                    "notes/pending": {"notes": []},
                    "session-end": {"marked": 0},
                }.get(route.split("?")[0], {})
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_GET = do_PUT = _answer

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def checks(self):
        return sum(1 for r in self.routes if r.startswith("permission-check"))

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class TestAnotherHomesUninstall(unittest.TestCase):
    def setUp(self):
        self.deny = DenyServer()

    def tearDown(self):
        self.deny.stop()

    def test_the_denied_bash_does_not_run_after_another_homes_uninstall(self):
        shared_root = tempfile.mkdtemp(prefix="preloop-e2e-shared-bin-",
                                       dir=os.environ.get("PRELOOP_E2E_TMPDIR") or None)
        shared = os.path.join(shared_root, "bin")
        os.makedirs(shared)
        shutil.copy2(os.path.join(PREREQ["bin_dir"], kit.CLI_BINARY), shared)
        sb = kit.Sandbox("shared-uninstall", shared, claude_bin=PREREQ["claude"])
        self.addCleanup(sb.close)
        sb.preloop_home = os.path.join(sb.home, ".preloop")
        os.makedirs(sb.preloop_home, mode=0o700, exist_ok=True)
        sb.install_hooks("claude-code")
        fd = os.open(os.path.join(sb.preloop_home, "config.json"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"url": self.deny.url, "token": "agt_user_own", "pre_tool_use_on_error": "deny"}, f)
        with open(os.path.join(sb.home, ".claude", "settings.json")) as f:
            command = json.load(f)["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        self.assertTrue(command.startswith(shared + "/"), command)

        # Another HOME, same executable, nothing installed there.
        other = os.path.join(sb.root, "other-home")
        os.makedirs(other)
        u = subprocess.run([os.path.join(shared, kit.CLI_BINARY), "uninstall"],
                           env={"PATH": "/usr/bin:/bin", "HOME": other, "LANG": "C.UTF-8"},
                           cwd=other, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(u.returncode, 0, u.stdout + u.stderr)
        self.assertNotIn("removed the", u.stdout)
        self.assertIn("this HOME's install did not create them", u.stdout)
        self.assertTrue(os.path.exists(command), "the user's PreToolUse command is gone:\n" + u.stdout)

        marker = os.path.join(sb.root, "MARKER")
        sb.start_mock({"turns": [kit.bash_turn("touch " + marker), kit.text_turn("Done.")],
                       "overflow": kit.text_turn("Done.")})
        try:
            run = sb.run_claude(kit.RUN_PROMPT, str(uuid.uuid4()))
        finally:
            sb.mock.stop()
        why = "rc=%s timed_out=%s\nstdout: %s\nstderr: %s\nsandbox kept: %s" % (
            run.rc, run.timed_out, kit.shorten(run.stdout, 1500), kit.shorten(run.stderr, 1500), sb.root)
        sb.keep = True
        self.assertFalse(os.path.exists(marker), "the denied Bash call ran\n" + why)
        self.assertGreater(self.deny.checks(), 0, "the user's server was never asked\n" + why)
        sb.keep = False
        shutil.rmtree(shared_root, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
