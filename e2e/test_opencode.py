"""OpenCode 1.18.33 end to end: the REAL `opencode` binary (npm opencode-ai, pinned in
kit/harnesses.py) with our plugin as `preloop-hooks install --harness opencode` lays it down,
the shipped executable (PRELOOP_BIN_DIR) and mock_copilot.py (OpenCode talks Chat Completions
to a config provider on 127.0.0.1), local inbox. Each test checks where the note landed in the
model requests and what its receipt says. Every run is offline: npm's registry is a dead
loopback port, and the offline test runs OpenCode in a network namespace with loopback only.

The idle wake runs in `opencode serve`, driven over its HTTP API (OpenCodeServe); `opencode run`
disposes at the first idle, so there is nothing to wake there.

  python3 -m unittest e2e.test_opencode -v     (PRELOOP_BIN_DIR=<release dir>, PRELOOP_E2E_HARNESS_DIR)
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

E2E = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, E2E)

from kit import ensure_opencode  # noqa: E402
from kit.plugin_world import PluginWorld, texts, where  # noqa: E402

OPENCODE_TIMEOUT_S = 180


class OpenCodeWorld(PluginWorld):
    """A PluginWorld for OpenCode: a project with opencode.json for mock_copilot.py, our plugin
    in ~/.config/opencode/plugins/."""

    harness = "opencode"
    alias = "oc-e2e"
    mock = "mock_copilot.py"
    shim_log_name = "opencode-plugin.log"

    def harness_env(self):
        self.config = os.path.join(self.home, ".config", "opencode")
        return {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
                "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
                "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1",
                # A backstop: were OpenCode to run its npm install, it would fail at once.
                "npm_config_registry": "http://127.0.0.1:9/"}

    def configure(self, port):
        with open(os.path.join(self.proj, "opencode.json"), "w") as f:
            json.dump({"$schema": "https://opencode.ai/config.json",
                       "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                                             "options": {"baseURL": "http://127.0.0.1:%d/v1" % port,
                                                         "apiKey": "mock-key"},
                                             "models": {"mock-model": {"name": "Mock Model", "tool_call": True,
                                                                       "limit": {"context": 128000,
                                                                                 "output": 4096}}}}},
                       "model": "mock/mock-model", "small_model": "mock/mock-model",
                       "autoupdate": False, "share": "disabled"}, f)

    def run_opencode(self, prompt, wrap=()):
        """`opencode run` (optionally under `wrap`, e.g. a network namespace); (process, seconds)."""
        t = time.monotonic()
        p = subprocess.run([*wrap, ensure_opencode(), "run", "--format", "json", "--print-logs", prompt],
                           env=self.env, cwd=self.proj, capture_output=True, text=True,
                           timeout=OPENCODE_TIMEOUT_S, stdin=subprocess.DEVNULL)
        return p, time.monotonic() - t


# Run by the mock before the sub-agent's first reply: the conductor is the one live session
# of this world's project with no parent; send to its children.
SEND_TO_CHILDREN = r"""
import json, os, subprocess, sys
exe = sys.argv[1]
env = dict(os.environ)
if env.get("PRELOOP_E2E_USER_TOKEN"):  # server mode: operator commands take the human's token
    env["PRELOOP_USER_TOKEN"] = env["PRELOOP_E2E_USER_TOKEN"]
rows = json.loads(subprocess.run([exe, "sessions", "list", "--json"], capture_output=True, text=True,
                                 check=True, env=env).stdout)
rows = rows if isinstance(rows, list) else rows.get("sessions", [])
proj = sys.argv[2]
top = [r for r in rows if not r.get("parent_session_id") and not r.get("ended_at") and r.get("cwd") == proj]
assert len(top) == 1, rows
parent = top[0].get("runtime_session_id")
p = subprocess.run([exe, "notes", "send", "--children", "all", "--parent", parent,
                    "MARK-oc-children stop after this"], capture_output=True, text=True, env=env)
sys.stdout.write(p.stdout)
sys.stderr.write(p.stderr)
sys.exit(p.returncode)
"""

def subagent_script(helper):
    """The mock's script (a function of the world) for a conductor whose `task` tool runs a
    sub-agent (answered as agent `sub`) whose bash call is preceded by `helper`
    (SEND_TO_CHILDREN written to a file): the conductor's children get a note mid-task."""
    def script(w):
        return {"turns": [{"calls": [{"name": "task", "arguments": {
                              "description": "sub work", "prompt": "SUBAGENT-TASK run echo sub",
                              "subagent_type": "general"}}]},
                          {"text": "All done."}],
                "overflow": {"text": "Again."},
                "agents": [{"name": "sub", "match": "SUBAGENT-TASK",
                            "turns": [{"calls": [{"name": "bash", "arguments": {"command": "echo sub",
                                                                                "description": "say sub"}}],
                                       "before_reply_cmd": [sys.executable, helper, w.exe, w.proj]},
                                      {"text": "Sub done."}],
                            "overflow": {"text": "Sub again."}}]}
    return script


SHELL_THEN_DONE = {"turns": [{"calls": [{"name": "bash", "arguments": {"command": "echo one",
                                                                       "description": "say one"}}]},
                             {"text": "All done."}]}


class OpenCodeLocal(unittest.TestCase):
    def world(self, name, script, extra_env=None):
        w = OpenCodeWorld(name, script, extra_env)
        self.addCleanup(w.close)
        return w

    def assertRan(self, p):
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])

    def test_a_note_before_the_run_goes_with_the_first_prompt(self):
        w = self.world("before", SHELL_THEN_DONE)
        note = w.cli("notes", "send", "--next", "opencode", "MARK-oc-before deploy to eu-west-1", "--json")
        note_id = json.loads(note.stdout)["note_id"]
        p, _ = w.run_opencode("Run echo one")
        self.assertRan(p)
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, [r["reply"] for r in reqs])
        # A text part of the prompt's own user message (its 2nd content item), in every request.
        for r in reqs:
            self.assertEqual(where(r, "MARK-oc-before"), [(1, "user")])
            content = r["body"]["messages"][1]["content"]
            self.assertIn("Run echo one", content[0]["text"])
            self.assertIn("MARK-oc-before", content[1]["text"])
        rc = w.receipt(note_id)
        self.assertEqual((rc["state"], rc["delivery_event"]), ("delivered", "session_start"), rc)

    def test_a_note_mid_run_reaches_the_model_at_the_next_tool_boundary(self):
        def script(w):
            s = json.loads(json.dumps(SHELL_THEN_DONE))
            s["turns"][0]["before_reply_cmd"] = w.send_cmd("MARK-oc-mid stop after this")
            return s
        w = self.world("mid", script)
        p, _ = w.run_opencode("Run echo one")
        self.assertRan(p)
        reqs = w.requests()
        sent = reqs[0].get("before_reply") or {}
        self.assertEqual(sent.get("rc"), 0, sent)
        self.assertEqual(where(reqs[0], "MARK-oc-mid"), [], "not before the tool ran")
        second = reqs[1]["body"]["messages"]
        hits = where(reqs[1], "MARK-oc-mid")
        self.assertEqual(len(hits), 1, [m["role"] for m in second])
        # Appended to the tool's own result.
        i, role = hits[0]
        self.assertEqual(role, "tool")
        self.assertTrue(texts(second[i]).startswith("one\n"), texts(second[i]))
        note_id = sent["stdout"].split()[0]
        rc = w.receipt(note_id)
        self.assertEqual((rc["state"], rc["delivery_event"]), ("delivered", "pre_tool_use"), rc)

    def test_a_deny_stops_the_tool_and_the_model_gets_the_reason(self):
        # No central policy in local mode: the gate's own fail policy is the deny here (a
        # server that cannot be reached, pre_tool_use_on_error = deny); the real-server suite
        # has the policy deny. The tool must not run, and its result must be the reason.
        marker = os.path.join(tempfile.gettempdir(), "preloop-oc-denied-%d" % os.getpid())
        script = {"turns": [{"calls": [{"name": "bash", "arguments": {"command": "touch " + marker,
                                                                      "description": "touch"}}]},
                            {"text": "Understood."}]}
        w = self.world("deny", script, {"PRELOOP_URL": "http://127.0.0.1:9", "PRELOOP_TOKEN": "agt_e2e_dead",
                                        "PRELOOP_PRE_TOOL_USE_ON_ERROR": "deny",
                                        "PRELOOP_CONNECT_TIMEOUT_MS": "200"})
        p, _ = w.run_opencode("Touch the file")
        self.assertRan(p)
        self.assertFalse(os.path.exists(marker), "the denied tool ran")
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, [r["reply"] for r in reqs])
        tool = [m for m in reqs[1]["body"]["messages"] if m["role"] == "tool"]
        self.assertEqual(len(tool), 1)
        # The hook's own reason, thrown by the plugin: the tool's whole result.
        self.assertTrue(texts(tool[0]).startswith("Preloop could not check this tool call"), texts(tool[0]))

    def test_a_late_note_continues_the_turn_once_and_the_next_waits_for_the_end(self):
        # The first reply's text completes with note A pending: one continuation (a user message
        # the loop answers). The continuation's own stop claims nothing (one per stop), so note B,
        # sent during that request, is pending when `opencode run` disposes: undeliverable.
        def script(w):
            return {"turns": [{"text": "All done.", "before_reply_cmd": w.send_cmd("MARK-oc-late-A tag v2")},
                              {"text": "Tagged.", "before_reply_cmd": w.send_cmd("MARK-oc-late-B too late")}],
                    "overflow": {"text": "Again."}}
        w = self.world("late", script)
        p, _ = w.run_opencode("Say hi")
        self.assertRan(p)
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, "one continuation, not more: %s" % [r["reply"] for r in reqs])
        last = reqs[1]["body"]["messages"][-1]
        self.assertEqual(last["role"], "user")
        self.assertIn("MARK-oc-late-A", texts(last))
        a = reqs[0]["before_reply"]["stdout"].split()[0]
        b = reqs[1]["before_reply"]["stdout"].split()[0]
        ra, rb = w.receipt(a), w.receipt(b)
        self.assertEqual((ra["state"], ra["delivery_event"]), ("delivered", "stop"), ra)
        self.assertEqual((rb["state"], rb.get("undeliverable_reason")), ("undeliverable", "session_ended"), rb)

    def test_offline_start_runs_no_npm_install(self):
        # With a plugin configured OpenCode runs `npm install` in each config folder and waits for
        # it (over a minute without a registry) unless the folder is laid out as install does.
        # Here OpenCode has no network at all: a user and network namespace with only loopback,
        # where the mock runs too (on the port opencode.json names).
        if subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode != 0:
            self.fail("`unshare -rn` (a user and network namespace) is needed for the offline test")
        w = self.world("offline", {"turns": [{"text": "Hello."}]})
        w.mock_proc.kill()
        w.mock_proc.wait()
        port_file = os.path.join(w.root, "port-offline")
        inside = ('py=$0 mock=$1 port=$2 pf=$3 sc=$4 lg=$5; shift 5; ip link set lo up; '
                  '"$py" "$mock" --port "$port" --port-file "$pf" --script "$sc" --log "$lg" & m=$!; '
                  'for i in $(seq 200); do [ -s "$pf" ] && break; sleep 0.05; done; "$@"; rc=$?; kill $m; exit $rc')
        wrap = ("unshare", "-rn", "sh", "-c", inside, sys.executable, os.path.join(E2E, "mock_copilot.py"),
                str(w.port), port_file, os.path.join(w.root, "script.json"), w.log)
        p, secs = w.run_opencode("Say hi", wrap=wrap)
        self.assertRan(p)
        self.assertEqual(len(w.requests()), 1)
        self.assertNotIn("dependency install", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(w.config, "node_modules", "@opencode-ai")),
                         "OpenCode installed its plugin package")
        self.assertLess(secs, 45, "the run took %.1f s (the npm trap takes over 70)" % secs)
        # The plugin ran: the session registered and its end was reported.
        listed = w.cli("sessions", "list", "--json").stdout
        self.assertIn("opencode", listed)

    def test_a_worker_started_from_bash_finds_its_conductor(self):
        # Lineage by process ancestry: the conductor's bash tool starts a worker `opencode run`
        # (its own plugin, the same mock, chosen by its prompt); the worker's first hook finds
        # the conductor's live session among its ancestors (docs/guarantees.md, "Lineage").
        def script(w):
            worker = "'%s' run 'SUBAGENT-WORKER say hi' </dev/null >/dev/null 2>&1; echo worker-rc=$?" % ensure_opencode()
            return {"turns": [{"calls": [{"name": "bash", "arguments": {"command": worker,
                                                                        "description": "start a worker"}}]},
                              {"text": "All done."}],
                    "agents": [{"name": "worker", "match": "SUBAGENT-WORKER", "turns": [{"text": "Worker done."}]}]}
        w = self.world("lineage", script)
        p, _ = w.run_opencode("Start the worker")
        self.assertRan(p)
        reqs = w.requests()
        main = [r for r in reqs if r["reply"].get("agent") != "worker"]
        tool = [m for m in main[-1]["body"]["messages"] if m["role"] == "tool"]
        self.assertTrue(tool and "worker-rc=0" in texts(tool[0]), [texts(m) for m in tool])
        conductor, child = w.listed_conductor_and_child()
        ids = {conductor.get("runtime_session_id"), conductor.get("session_id"), conductor.get("id")} - {None}
        self.assertIn(child["parent_session_id"], ids, (conductor, child))

    def test_a_sub_agents_session_is_its_parents_child_and_children_reach_it(self):
        # The task tool runs a sub-agent in a child session of the conductor's (session.created
        # with parentID), in the same OpenCode process. It is registered as the conductor's
        # child, so `notes send --children all --parent <conductor>`, sent while the sub-agent
        # works, reaches it at its next tool boundary (issue 32).
        helper = os.path.join(self.tmp(), "send_children.py")
        with open(helper, "w") as f:
            f.write(SEND_TO_CHILDREN)

        script = subagent_script(helper)
        w = self.world("subagent", script)
        p, _ = w.run_opencode("Delegate the work")
        self.assertRan(p)
        reqs = w.requests()
        sub = [r for r in reqs if r["reply"].get("agent") == "sub"]
        self.assertGreaterEqual(len(sub), 2, [r["reply"] for r in reqs])
        sent = sub[0].get("before_reply") or {}
        self.assertEqual(sent.get("rc"), 0, sent)
        note_id = sent["stdout"].split()[0]
        # In the sub-agent's own context: appended to its bash result.
        hits = where(sub[1], "MARK-oc-children")
        self.assertEqual([role for _, role in hits], ["tool"], [texts(m) for m in sub[1]["body"]["messages"]])
        rc = w.receipt(note_id)
        self.assertEqual(rc["state"], "delivered", rc)
        main = [r for r in reqs if r["reply"].get("agent") != "sub"]
        self.assertFalse(any(where(r, "MARK-oc-children") for r in main), "not the conductor's")
        conductor, child = w.listed_conductor_and_child()
        self.assertEqual(child["parent_session_id"], conductor.get("runtime_session_id"), (conductor, child))
        self.assertEqual(w.shim_log(), "", "the plugin logged a failure")

    def tmp(self):
        d = tempfile.mkdtemp(prefix="preloop-oc-helper-")
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def test_a_missing_executable_never_stops_opencode(self):
        w = self.world("missing", SHELL_THEN_DONE)
        manifest = os.path.join(w.config, "plugins", "preloop.json")
        with open(manifest) as f:
            m = json.load(f)
        for entries in m["hooks"].values():
            entries[0]["argv"][0] = "/nonexistent/preloop-hooks"
        with open(manifest, "w") as f:
            json.dump(m, f)
        p, _ = w.run_opencode("Run echo one")
        self.assertRan(p)
        self.assertEqual(len(w.requests()), 2)
        self.assertIn("tool.execute.before shim cannot run /nonexistent/preloop-hooks: ENOENT", w.shim_log())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OpenCodeServer:
    """`opencode serve` on 127.0.0.1 in a world, driven over its HTTP API (stopped by `stop`)."""

    def __init__(self, world):
        self.w = world
        port = free_port()
        self.url = "http://127.0.0.1:%d" % port
        self.log_path = os.path.join(world.root, "serve.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [ensure_opencode(), "serve", "--hostname", "127.0.0.1", "--port", str(port), "--print-logs"],
                env=world.env, cwd=world.proj, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.call("GET", "/session", timeout=5)
                break
            except Exception:  # noqa: BLE001
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise AssertionError("opencode serve did not come up: %s" % self.log()[-3000:])
                time.sleep(0.25)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def call(self, method, path, body=None, timeout=120):
        import urllib.request
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return json.loads(raw) if raw else None

    def prompted_session(self, text="Say hi"):
        """A new session, one prompt answered (the call returns at the turn's end); its id."""
        sid = self.call("POST", "/session", {})["id"]
        self.call("POST", "/session/%s/message" % sid, {"parts": [{"type": "text", "text": text}]}, timeout=180)
        return sid

    def wait_requests(self, n, secs):
        deadline = time.monotonic() + secs
        while time.monotonic() < deadline:
            if len(self.w.requests()) >= n:
                break
            time.sleep(0.1)
        return self.w.requests()


IDLE_SCRIPT = {"turns": [{"text": "Hello."}, {"text": "Noted."}], "overflow": {"text": "Again."}}


class OpenCodeServe(unittest.TestCase):
    """`opencode serve`, driven over its HTTP API: a session, a prompt, then idle."""

    def test_a_note_wakes_the_idle_session_and_is_delivered(self):
        w = OpenCodeWorld("serve", IDLE_SCRIPT)
        self.addCleanup(w.close)
        srv = OpenCodeServer(w)
        self.addCleanup(srv.stop)
        srv.prompted_session()
        self.assertEqual(len(w.requests()), 1)
        # Idle with no note: the watcher wakes nothing.
        time.sleep(3)
        self.assertEqual(len(w.requests()), 1, "woken with no note pending")
        note_id = w.send_note("MARK-oc-idle deploy to eu-west-1")
        t = time.monotonic()
        reqs = srv.wait_requests(2, 20)
        self.assertEqual(len(reqs), 2, "no new turn: %s\n%s" % (w.shim_log(), srv.log()[-2000:]))
        woke = time.monotonic() - t
        last = reqs[1]["body"]["messages"][-1]
        self.assertEqual(last["role"], "user")
        self.assertIn("MARK-oc-idle", texts(last))
        self.assertEqual(len(where(reqs[1], "MARK-oc-idle")), 1, "the note once")
        self.assertLess(woke, 10, "the wake took %.1f s (a 1 s poll)" % woke)
        rc = w.wait_receipt(note_id, ("delivered",), 10)
        self.assertEqual((rc["state"], rc["delivery_event"]), ("delivered", "stop"), rc)
        # The woken turn ends idle again with nothing pending: no further turn.
        time.sleep(3)
        self.assertEqual(len(w.requests()), 2, [r["reply"] for r in w.requests()])
        self.assertEqual(w.shim_log(), "", "the plugin logged a failure")


class OpenCodeServeSignals(unittest.TestCase):
    """`opencode serve` stopped by a signal runs no `dispose` of its own: our plugin ends every
    session it saw (bounded), then raises the signal again with its default action, so OpenCode
    dies of it as it did before (status -SIG), and a note still pending becomes undeliverable.
    SIGKILL runs nothing in OpenCode: an idle session's watcher, finding OpenCode gone, ends it."""

    def stop_with(self, sig, group):
        w = OpenCodeWorld("serve-%s" % sig.name.lower(), IDLE_SCRIPT)
        self.addCleanup(w.close)
        # No idle watcher here: a note sent to the idle session stays pending (no wake).
        manifest = os.path.join(w.config, "plugins", "preloop.json")
        with open(manifest) as f:
            m = json.load(f)
        m["hooks"].pop("idle", None)
        with open(manifest, "w") as f:
            json.dump(m, f)
        srv = OpenCodeServer(w)
        self.addCleanup(srv.stop)
        sid = srv.prompted_session()
        note_id = w.send_note("MARK-oc-sig never read")
        self.assertEqual(w.receipt(note_id)["state"], "pending")
        t = time.monotonic()
        (os.killpg if group else os.kill)(srv.proc.pid, sig)
        rc = srv.proc.wait(timeout=20)
        secs = time.monotonic() - t
        self.assertEqual(rc, -sig, "OpenCode died of the signal, as without our plugin")
        self.assertLess(secs, 4, "OpenCode took %.1f s to exit (the plugin's grace is 2 s)" % secs)
        deadline = time.monotonic() + 15
        while True:
            rc_ = w.receipt(note_id)
            if rc_["state"] != "pending" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual((rc_["state"], rc_.get("undeliverable_reason")), ("undeliverable", "session_ended"), rc_)
        rows = w.listed_sessions()
        mine = [r for r in rows if sid in (r.get("id"), r.get("external_session_id"))]
        self.assertEqual(len(mine), 1, rows)
        self.assertTrue(mine[0].get("ended_at"), mine[0])
        self.assertEqual(w.shim_log(), "", "the plugin logged a failure")

    def test_sigterm_to_the_process_group_ends_the_sessions(self):
        self.stop_with(signal.SIGTERM, group=True)

    def test_sigterm_to_opencode_alone_ends_the_sessions(self):
        self.stop_with(signal.SIGTERM, group=False)

    def test_sigint_ends_the_sessions(self):
        self.stop_with(signal.SIGINT, group=False)

    def test_sighup_ends_the_sessions(self):
        self.stop_with(signal.SIGHUP, group=False)

    def test_sigkill_the_idle_watcher_ends_the_session(self):
        # SIGKILL runs nothing in OpenCode. The idle session's watcher (OpenCode's child, left
        # alive by a kill of OpenCode alone) finds its parent gone and ends the session.
        w = OpenCodeWorld("serve-sigkill", IDLE_SCRIPT)
        self.addCleanup(w.close)
        srv = OpenCodeServer(w)
        self.addCleanup(srv.stop)
        sid = srv.prompted_session()
        time.sleep(1.5)  # the session.idle event starts the watcher
        os.kill(srv.proc.pid, signal.SIGKILL)
        self.assertEqual(srv.proc.wait(timeout=20), -signal.SIGKILL)
        deadline = time.monotonic() + 15
        while True:
            mine = [r for r in w.listed_sessions() if sid in (r.get("id"), r.get("external_session_id"))]
            if (mine and mine[0].get("ended_at")) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        self.assertTrue(mine and mine[0].get("ended_at"), "%s\nhooks.log: %s" % (mine, self.hooks_log(w)))
        self.assertIn("parent process gone: session ended", self.hooks_log(w))

    def hooks_log(self, w):
        return w.hook_log()[-3000:]


if __name__ == "__main__":
    unittest.main()
