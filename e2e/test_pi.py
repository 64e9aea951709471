"""Pi 0.73.1 end to end: the REAL `pi` binary (npm @mariozechner/pi-coding-agent, pinned in
kit/harnesses.py) with our extension as `preloop-hooks install --harness pi` lays it down, the
shipped executable (PRELOOP_BIN_DIR) and mock_pi.py, local inbox. Each test checks where the
note landed in the model requests and what its receipt says.

  python3 -m unittest e2e.test_pi -v     (PRELOOP_BIN_DIR=<release dir>, PRELOOP_E2E_HARNESS_DIR)
"""

import json
import os
import subprocess
import sys
import time
import unittest

E2E = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, E2E)

from kit import ensure_pi  # noqa: E402
from kit.plugin_world import PluginWorld, texts, where  # noqa: E402
from pi_rpc import PiRpc  # noqa: E402

PI_TIMEOUT_S = 180


class PiWorld(PluginWorld):
    """A PluginWorld for Pi: Pi's agent dir with models.json for mock_pi.py, our extension in
    ~/.pi/agent/extensions/."""

    harness = "pi"
    alias = "pi-e2e"
    mock = "mock_pi.py"
    shim_log_name = "pi-extension.log"

    def harness_env(self):
        self.agent = os.path.join(self.home, ".pi", "agent")
        os.makedirs(self.agent)
        return {"PI_CODING_AGENT_DIR": self.agent, "PI_OFFLINE": "1", "PI_TELEMETRY": "0"}

    def configure(self, port):
        with open(os.path.join(self.agent, "models.json"), "w") as f:
            json.dump({"providers": {"mock": {"baseUrl": "http://127.0.0.1:%d/v1" % port,
                                              "api": "openai-completions", "apiKey": "mock-key",
                                              "models": [{"id": "mock-model", "name": "Mock Model"}]}}}, f)

    def run_pi(self, prompt, mode_args=("-p",), stdin=None):
        p = subprocess.run([ensure_pi(), *mode_args, "--provider", "mock", "--model", "mock-model", "--offline",
                            "--no-session", prompt], env=self.env, cwd=self.proj, capture_output=True, text=True,
                           timeout=PI_TIMEOUT_S, input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)
        return p

    def rpc(self, extra_env=None):
        """Pi in RPC mode (it stays alive between runs: `has_ui`), driven over stdin/stdout."""
        env = dict(self.env, **(extra_env or {}))
        return PiRpc([ensure_pi(), "--mode", "rpc", "--provider", "mock", "--model", "mock-model", "--offline",
                      "--no-session"], env, self.proj, os.path.join(self.root, "pi-stderr.txt"))


def worker_script():
    """The mock's script for a conductor whose bash tool starts a worker `pi -p` (the same agent
    dir, extension and mock; the mock answers it as its own agent, `worker`, by its prompt)."""
    worker = ("'%s' -p --provider mock --model mock-model --offline --no-session 'SUBAGENT-WORKER say hi' "
              "</dev/null >/dev/null 2>&1; echo worker-rc=$?" % ensure_pi())
    return {"turns": [{"calls": [{"name": "bash", "arguments": {"command": worker}}]}, {"text": "All done."}],
            "agents": [{"name": "worker", "match": "SUBAGENT-WORKER", "turns": [{"text": "Worker done."}]}]}


SHELL_THEN_DONE = {"turns": [{"calls": [{"name": "bash", "arguments": {"command": "echo one"}}]},
                             {"text": "All done."}]}


class PiLocal(unittest.TestCase):
    def world(self, name, script):
        w = PiWorld(name, script)
        self.addCleanup(w.close)
        return w

    def test_a_note_before_the_run_goes_with_the_first_prompt(self):
        w = self.world("before", SHELL_THEN_DONE)
        note = w.cli("notes", "send", "--next", "pi", "MARK-pi-before deploy to eu-west-1", "--json")
        note_id = json.loads(note.stdout)["note_id"]
        p = w.run_pi("Run echo one")
        self.assertEqual(p.returncode, 0, p.stderr)
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, [r["reply"] for r in reqs])
        first = reqs[0]["body"]["messages"]
        self.assertIn("Run echo one", texts(first[1]))
        # Its own user message right after the prompt's, in every request of the run.
        self.assertEqual(where(reqs[0], "MARK-pi-before"), [(2, "user")])
        self.assertEqual(where(reqs[1], "MARK-pi-before"), [(2, "user")])
        r = w.receipt(note_id)
        self.assertEqual((r["state"], r["delivery_event"]), ("delivered", "session_start"), r)

    def test_a_note_mid_run_reaches_the_model_at_the_next_tool_boundary(self):
        def script(w):
            s = json.loads(json.dumps(SHELL_THEN_DONE))
            s["turns"][0]["before_reply_cmd"] = w.send_cmd("MARK-pi-mid stop after this")
            return s
        w2 = self.world("mid", script)
        p = w2.run_pi("Run echo one")
        self.assertEqual(p.returncode, 0, p.stderr)
        reqs = w2.requests()
        sent = reqs[0].get("before_reply") or {}
        self.assertEqual(sent.get("rc"), 0, sent)
        self.assertEqual(where(reqs[0], "MARK-pi-mid"), [], "not before the tool ran")
        second = reqs[1]["body"]["messages"]
        roles = [m["role"] for m in second]
        hits = where(reqs[1], "MARK-pi-mid")
        self.assertEqual(len(hits), 1, roles)
        # A steer: its own user message after the tool result of this batch.
        self.assertEqual(hits[0][1], "user")
        self.assertEqual(roles[hits[0][0] - 1], "tool", roles)
        note_id = sent["stdout"].split()[0]
        r = w2.receipt(note_id)
        self.assertEqual((r["state"], r["delivery_event"]), ("delivered", "pre_tool_use"), r)

    def test_a_note_pending_at_the_end_of_a_print_run_becomes_undeliverable(self):
        # -p cannot continue a finished run (docs/contracts/pi.md §5): agent_end claims nothing
        # and session_shutdown makes the note undeliverable, never a false `delivered`.
        w = self.world("end", lambda w: {"turns": [{"text": "All done.",
                                                     "before_reply_cmd": w.send_cmd("MARK-pi-late too late")}]})
        p = w.run_pi("Say hi")
        self.assertEqual(p.returncode, 0, p.stderr)
        reqs = w.requests()
        self.assertEqual(len(reqs), 1, "no continuation in -p")
        note_id = reqs[0]["before_reply"]["stdout"].split()[0]
        r = w.receipt(note_id)
        self.assertEqual((r["state"], r.get("undeliverable_reason")), ("undeliverable", "session_ended"), r)

    def test_a_worker_started_from_bash_finds_its_conductor(self):
        # Lineage by process ancestry: the conductor's bash tool starts a worker `pi -p` (the
        # same agent dir, extension and mock; the mock answers it as its own agent, chosen by
        # its prompt); the worker's first hook finds the conductor's live session among its
        # ancestors (docs/guarantees.md, "Lineage").
        w = self.world("lineage", worker_script())
        p = w.run_pi("Start the worker")
        self.assertEqual(p.returncode, 0, p.stderr)
        reqs = w.requests()
        main = [r for r in reqs if r["reply"].get("agent") != "worker"]
        self.assertEqual(len(main), 2, [r["reply"] for r in reqs])
        self.assertEqual(len(reqs) - len(main), 1, [r["reply"] for r in reqs])
        tool = [m for m in main[-1]["body"]["messages"] if m["role"] == "tool"]
        self.assertTrue(tool and "worker-rc=0" in texts(tool[0]), [texts(m) for m in tool])
        conductor, child = w.listed_conductor_and_child()
        ids = {conductor.get("runtime_session_id"), conductor.get("session_id"), conductor.get("id")} - {None}
        self.assertIn(child["parent_session_id"], ids, (conductor, child))

    def test_a_missing_executable_never_stops_pi(self):
        w = self.world("missing", SHELL_THEN_DONE)
        manifest = os.path.join(w.agent, "extensions", "preloop.json")
        with open(manifest) as f:
            m = json.load(f)
        for entries in m["hooks"].values():
            entries[0]["argv"][0] = "/nonexistent/preloop-hooks"
        with open(manifest, "w") as f:
            json.dump(m, f)
        p = w.run_pi("Run echo one")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(w.requests()), 2)
        with open(m["log"]) as f:
            log = f.read()
        self.assertIn("tool_call shim cannot run /nonexistent/preloop-hooks: ENOENT", log)


def note_id_of(request):
    sent = request.get("before_reply") or {}
    assert sent.get("rc") == 0, sent
    return sent["stdout"].split()[0]


def last_user(request):
    return texts(request["body"]["messages"][-1])


class PiRpcMode(unittest.TestCase):
    """Pi driven in RPC mode, where it stays alive after a run as in interactive mode: the
    late-note continuation at agent_end and the idle wake (docs/contracts/pi.md §5, §8)."""

    def world(self, name, script, extra_env=None):
        w = PiWorld(name, script)
        self.addCleanup(w.close)
        rpc = w.rpc(extra_env)
        self.addCleanup(rpc.kill)
        return w, rpc

    def test_a_late_note_continues_the_finished_run(self):
        w, rpc = self.world("late", lambda w: {"turns": [
            {"text": "All done.", "before_reply_cmd": w.send_cmd("MARK-pi-late check the logs too")},
            {"text": "Checked the logs."}]})
        rpc.send({"type": "prompt", "message": "Say hi"})
        rpc.wait(type="agent_end")
        # The continuation is a new run of its own, ending with the note.
        rpc.wait(type="agent_start", timeout=30)
        rpc.wait(type="agent_end", timeout=60)
        self.assertEqual(rpc.close(), 0)
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, [r["reply"] for r in reqs])
        self.assertEqual(where(reqs[0], "MARK-pi-late"), [])
        msgs = reqs[1]["body"]["messages"]
        self.assertIn("MARK-pi-late", last_user(reqs[1]))
        self.assertEqual((msgs[-1]["role"], msgs[-2]["role"]), ("user", "assistant"), [m["role"] for m in msgs])
        self.assertIn("All done.", texts(msgs[-2]))
        r = w.receipt(note_id_of(reqs[0]))
        self.assertEqual((r["state"], r["delivery_event"]), ("delivered", "stop"), r)

    def test_late_notes_continue_at_most_three_times(self):
        # Every reply comes with a new late note: the rescue cap (stop_rescue_cap, 3) is the
        # only brake (Pi has none). The watcher is off, so the fourth note stays pending until
        # the session ends and becomes undeliverable, never a false `delivered`.
        def script(w):
            return {"turns": [{"text": "Reply %d." % i, "before_reply_cmd": w.send_cmd("MARK-pi-cap-%d" % i)}
                              for i in range(4)] + [{"text": "Reply 4."}]}
        w, rpc = self.world("cap", script, {"PRELOOP_WATCH": "off"})
        rpc.send({"type": "prompt", "message": "Say hi"})
        for _ in range(4):
            rpc.wait(type="agent_end", timeout=60)
        time.sleep(3)  # a fifth run would have started by now
        self.assertEqual(rpc.count(type="agent_start"), 4)
        self.assertEqual(rpc.close(), 0)
        reqs = w.requests()
        self.assertEqual(len(reqs), 4, [r["reply"] for r in reqs])
        for i in range(1, 4):
            self.assertIn("MARK-pi-cap-%d" % (i - 1), last_user(reqs[i]))
        ids = [note_id_of(r) for r in reqs]
        for i in range(3):
            r = w.receipt(ids[i])
            self.assertEqual((r["state"], r["delivery_event"]), ("delivered", "stop"), r)
        r = w.receipt(ids[3])
        self.assertEqual((r["state"], r.get("undeliverable_reason")), ("undeliverable", "session_ended"), r)

    def test_a_note_sent_while_pi_sits_idle_starts_a_turn(self):
        w, rpc = self.world("idle", {"turns": [{"text": "All done."}, {"text": "Woken and noted."}]},
                            {"PRELOOP_WATCH_POLL_MS": "200"})
        rpc.send({"type": "prompt", "message": "Say hi"})
        rpc.wait(type="agent_end")
        # Idle with nothing pending: nothing is woken.
        time.sleep(2.5)
        self.assertEqual(len(w.requests()), 1)
        self.assertEqual(rpc.count(type="agent_start"), 1)
        sent_at = time.monotonic()
        note_id = w.send_note("MARK-pi-idle deploy is frozen")
        rpc.wait(type="agent_start", timeout=15)
        rpc.wait(type="agent_end", timeout=60)
        woke_in = time.monotonic() - sent_at
        self.assertLess(woke_in, 10, "the watcher polls every 200 ms here")
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, [r["reply"] for r in reqs])
        self.assertIn("MARK-pi-idle", last_user(reqs[1]))
        r = w.receipt(note_id)
        self.assertEqual((r["state"], r["delivery_event"]), ("delivered", "stop"), r)
        # Idle again with nothing pending: no third request.
        time.sleep(2)
        self.assertEqual(len(w.requests()), 2)
        self.assertEqual(rpc.close(), 0)
        log = w.hook_log()
        self.assertIn("pi Watch mode=local", log)
        self.assertIn("outcome=notes notes=%s" % note_id, log)
        # The watcher of the last idle spell left at session_shutdown: no process of ours is left.
        time.sleep(1)
        left = subprocess.run(["pgrep", "-f", "preloop-pi-watch.*"], capture_output=True, text=True).stdout.split()
        mine = []
        for pid in left:
            try:
                with open("/proc/%s/environ" % pid, "rb") as f:
                    if w.root.encode() in f.read():
                        mine.append(pid)
            except OSError:
                pass
        self.assertEqual(mine, [])


if __name__ == "__main__":
    unittest.main()
