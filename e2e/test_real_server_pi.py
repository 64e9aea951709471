"""Pi 0.73.1 end to end against the REAL Preloop server (PyPI preloop==0.17.1,
e2e/preloop_server/up.sh): the real `pi` with our extension as `preloop-hooks install --harness
pi` lays it down, in SERVER mode (a fresh managed agent per test, its agt_ token as
PRELOOP_URL / PRELOOP_TOKEN in Pi's, so the hooks', environment), notes sent as the human
operator (POST /api/v1/operator-notes), receipts read from GET /api/v1/operator-notes/{id}.

  before    a note sent to the managed agent before the run goes with the first prompt;
            the receipt on the server is `delivered` by session_start
  deny      a central deny rule (bash disabled in an account of its own): the tool does not
            run, the model's tool message is the server's reason
  note      a note mid-run (sent by external_session_id while the mock answers with a bash
            call) is pulled by tool_result and steered in after the tool result; the receipt
            on the server is `delivered`, only after the extension applied it
  late      RPC mode: a note sent while the model gives its final answer continues the run
            (agent_end); receipt `delivered` / stop
  idle      RPC mode: a note sent while Pi sits idle starts a turn that carries it (the idle
            watcher, polling faster than its defaults here); receipt `delivered`
  end       -p: a note pending when the session ends becomes `undeliverable` (session_ended)

  python3 -m unittest -v e2e.test_real_server_pi
  (PRELOOP_BIN_DIR, PRELOOP_E2E_HARNESS_DIR, PRELOOP_E2E_VENV, PRELOOP_E2E_SERVER_HOME/PORT,
   PRELOOP_E2E_PG_PORT)
"""

import json
import os
import sys
import time
import unittest

E2E = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, E2E)

import kit  # noqa: E402
from test_pi import PiWorld, last_user, texts, where, worker_script  # noqa: E402

PREREQ = kit.Prereq()
DENY_REASON = "Tool blocked in Preloop"


def setUpModule():
    kit.require_server(PREREQ)


def tearDownModule():
    kit.release_server(PREREQ)


class PiRealServer(unittest.TestCase):
    def setUp(self):
        PREREQ.require(self, "creds", "server")
        self.server = PREREQ["server"]

    def world(self, name, script, server=None):
        server = server or self.server
        agent = server.new_agent(kind="pi")
        env = {"PRELOOP_URL": PREREQ["creds"]["base_url"], "PRELOOP_TOKEN": agent["agent_token"],
               **server.server_note_env()}
        w = PiWorld("srv-" + name, script, env)
        self.addCleanup(w.close)
        w.agent = agent
        w.server = server
        return w

    def note_argv(self, w, text):
        """A before_reply_cmd that sends `text` to this world's live session (its id is read
        from the session file our session_start hook wrote)."""
        return self.server.send_note_argv(text, external_session_id="@@SESSION@@")

    def note_id(self, request):
        sent = request.get("before_reply") or {}
        self.assertEqual(sent.get("rc"), 0, sent)
        return json.loads(sent["stdout"])["note_id"]

    def test_before_a_note_sent_before_the_run_goes_with_the_first_prompt(self):
        agent = self.server.new_agent(kind="pi")
        before = self.server.send_note("MARK-pi-srv-before deploy to eu-west-1", agent_id=agent["agent_id"])
        self.assertEqual(before.get("state"), "pending", before)
        env = {"PRELOOP_URL": PREREQ["creds"]["base_url"], "PRELOOP_TOKEN": agent["agent_token"],
               **self.server.server_note_env()}
        w = PiWorld("srv-before", {"turns": [{"calls": [{"name": "bash", "arguments": {"command": "echo one"}}]},
                                             {"text": "All done."}]}, env)
        self.addCleanup(w.close)
        p = w.run_pi("Run echo one")
        self.assertEqual(p.returncode, 0, p.stderr)
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, [r["reply"] for r in reqs])
        self.assertIn("Run echo one", texts(reqs[0]["body"]["messages"][1]))
        # Its own user message right after the prompt's, in every request of the run.
        self.assertEqual(where(reqs[0], "MARK-pi-srv-before"), [(2, "user")])
        self.assertEqual(where(reqs[1], "MARK-pi-srv-before"), [(2, "user")])
        r = self.server.wait_receipt(before["note_id"], ("delivered",))
        self.assertEqual((r["state"], r.get("delivery_event")), ("delivered", "session_start"), r)
        self.assertEqual(r.get("managed_agent_id"), agent["agent_id"], r)

    def test_deny_a_central_deny_stops_the_tool_and_shows_the_reason(self):
        other = self.server.new_account("e2epideny")
        other.disable_tool(other.account_id, "bash")
        w = self.world("deny", lambda w: {"turns": [
            {"calls": [{"name": "bash", "arguments": {"command": "echo ran > ran.txt"}}]},
            {"text": "Understood, it was blocked."}]}, server=other)
        p = w.run_pi("Run echo ran > ran.txt")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(os.path.exists(os.path.join(w.proj, "ran.txt")), "the denied command ran")
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, [r["reply"] for r in reqs])
        tool = [m for m in reqs[1]["body"]["messages"] if m["role"] == "tool"]
        self.assertEqual(len(tool), 1)
        self.assertIn(DENY_REASON, texts(tool[0]))

    def test_note_mid_run_is_delivered_and_the_receipt_says_so(self):
        w = self.world("note", lambda w: {"turns": [
            {"calls": [{"name": "bash", "arguments": {"command": "echo one"}}],
             "before_reply_cmd": self.note_to(w, "MARK-pi-srv-mid stop after this")},
            {"text": "All done."}]})
        p = w.run_pi("Run echo one")
        self.assertEqual(p.returncode, 0, p.stderr)
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, [r["reply"] for r in reqs])
        hits = where(reqs[1], "MARK-pi-srv-mid")
        self.assertEqual(len(hits), 1)
        roles = [m["role"] for m in reqs[1]["body"]["messages"]]
        self.assertEqual((hits[0][1], roles[hits[0][0] - 1]), ("user", "tool"), roles)
        r = w.server.wait_receipt(self.note_id(reqs[0]), ("delivered",))
        self.assertEqual(r["state"], "delivered", r)
        self.assertEqual(r.get("managed_agent_id"), w.agent["agent_id"], r)

    def test_late_note_in_rpc_mode_continues_the_run(self):
        w = self.world("late", lambda w: {"turns": [
            {"text": "All done.", "before_reply_cmd": self.note_to(w, "MARK-pi-srv-late check the logs")},
            {"text": "Checked the logs."}]})
        rpc = w.rpc()
        self.addCleanup(rpc.kill)
        rpc.send({"type": "prompt", "message": "Say hi"})
        rpc.wait(type="agent_end")
        rpc.wait(type="agent_start", timeout=30)
        rpc.wait(type="agent_end", timeout=60)
        self.assertEqual(rpc.close(), 0)
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, [r["reply"] for r in reqs])
        self.assertIn("MARK-pi-srv-late", last_user(reqs[1]))
        r = w.server.wait_receipt(self.note_id(reqs[0]), ("delivered",))
        self.assertEqual(r["state"], "delivered", r)

    def test_end_a_pending_note_becomes_undeliverable_at_session_end(self):
        w = self.world("end", lambda w: {"turns": [
            {"text": "All done.", "before_reply_cmd": self.note_to(w, "MARK-pi-srv-end too late")}]})
        p = w.run_pi("Say hi")
        self.assertEqual(p.returncode, 0, p.stderr)
        reqs = w.requests()
        self.assertEqual(len(reqs), 1, "no continuation in -p")
        r = w.server.wait_receipt(self.note_id(reqs[0]), ("undeliverable",), timeout=15.0)
        self.assertEqual((r["state"], r.get("undeliverable_reason")), ("undeliverable", "session_ended"), r)

    def test_lineage_a_worker_started_from_bash_is_the_conductors_child_on_the_server(self):
        # The conductor's bash tool starts a worker `pi -p` (same extension, same agent token,
        # answered by the mock as its own agent); the worker's session_start finds the
        # conductor among its ancestors and registers as its child, on the server too.
        w = self.world("lineage", worker_script())
        p = w.run_pi("Start the worker")
        self.assertEqual(p.returncode, 0, p.stderr)
        main = [r for r in w.requests() if r["reply"].get("agent") != "worker"]
        tool = [m for m in main[-1]["body"]["messages"] if m["role"] == "tool"]
        self.assertTrue(tool and "worker-rc=0" in texts(tool[0]), [texts(m) for m in tool])
        conductor, child = w.conductor_and_child()
        self.assertEqual(self.server.parent_of(child["runtime_session_id"]), conductor["runtime_session_id"])

    def test_idle_a_note_sent_while_pi_sits_idle_starts_a_turn(self):
        w = self.world("idle", {"turns": [{"text": "All done."}, {"text": "Woken and noted."}]})
        rpc = w.rpc({"PRELOOP_WATCH_SERVER_POLL_MS": "300", "PRELOOP_WATCH_SERVER_POLL_MAX_MS": "1000"})
        self.addCleanup(rpc.kill)
        rpc.send({"type": "prompt", "message": "Say hi"})
        rpc.wait(type="agent_end")
        time.sleep(2.5)
        self.assertEqual(len(w.requests()), 1, "nothing is woken while nothing is pending")
        files = w.session_files()
        self.assertEqual(len(files), 1, files)
        sid = files[0]["external_session_id"]
        sent = self.server.send_note("MARK-pi-srv-idle deploy is frozen", external_session_id=sid)
        self.assertTrue(sent.get("runtime_session_id"), sent)
        rpc.wait(type="agent_start", timeout=15)
        rpc.wait(type="agent_end", timeout=60)
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, [r["reply"] for r in reqs])
        self.assertIn("MARK-pi-srv-idle", last_user(reqs[1]))
        r = self.server.wait_receipt(sent["note_id"], ("delivered",))
        self.assertEqual(r["state"], "delivered", r)
        self.assertEqual(rpc.close(), 0)

    note_to = note_argv


if __name__ == "__main__":
    unittest.main()
