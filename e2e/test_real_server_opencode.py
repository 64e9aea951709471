"""OpenCode 1.18.33 end to end against the REAL Preloop server (PyPI preloop==0.17.1,
e2e/preloop_server/up.sh): the real `opencode` headless against mock_copilot.py, our plugin
installed by `preloop-hooks install --harness opencode`, the hooks in SERVER mode (a fresh
managed agent per test, its agt_ token as PRELOOP_URL/PRELOOP_TOKEN in OpenCode's environment,
which its plugin's spawns inherit), notes sent as the human operator, receipts read from
GET /api/v1/operator-notes/{id}.

  deny   a central deny rule (bash disabled in an account of its own): the tool does not run,
         the model gets the server's reason as the tool's result
  notes  a note sent to the agent before the run reaches the first prompt (delivered /
         session_start); a note sent to the run's session mid-run reaches the tool result
         (delivered / pre_tool_use): the receipts are the server's
  late   a note sent during the final answer continues the turn once (delivered / stop); one
         sent during the continuation's answer is pending when `opencode run` disposes:
         undeliverable / session_ended on the server
  sub    the task tool's sub-agent: its child session is the conductor's child on the server,
         and the conductor's `notes send --children all` reaches it
  idle   `opencode serve`: a note sent by the operator while the session sits idle starts a
         turn that carries it (the idle watcher, polling faster than its defaults here);
         receipt `delivered` / stop on the server

  python3 -m unittest -v e2e.test_real_server_opencode   (PRELOOP_BIN_DIR, PRELOOP_E2E_HARNESS_DIR,
      PRELOOP_E2E_SERVER_HOME / _PORT / PG_PORT, PRELOOP_E2E_VENV)
"""

import json
import os
import shutil
import sys
import tempfile
import time
import unittest

E2E = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, E2E)

import kit  # noqa: E402
from test_opencode import (IDLE_SCRIPT, SEND_TO_CHILDREN, OpenCodeServer, OpenCodeWorld,  # noqa: E402
                           subagent_script, texts, where)

PREREQ = kit.Prereq()
DENY_REASON = "Tool blocked in Preloop"


def setUpModule():
    kit.require_server(PREREQ, "install --harness opencode")


def tearDownModule():
    kit.release_server(PREREQ)


class OpenCodeRealServer(unittest.TestCase):
    def server(self):
        PREREQ.require(self, "creds")
        return PREREQ["server"]

    def world(self, name, script, client, agent, extra_env=None):
        env = {"PRELOOP_URL": client.base_url, "PRELOOP_TOKEN": agent["agent_token"]}
        env.update(client.server_note_env())
        env.update(extra_env or {})
        w = OpenCodeWorld(name, script, env)
        self.addCleanup(w.close)
        return w

    def test_a_central_deny_stops_the_tool_with_the_server_reason(self):
        other = self.server().new_account("ocdeny")
        other.disable_tool(other.account_id, "bash")
        agent = other.new_agent(kind="opencode")
        marker = os.path.join(tempfile.gettempdir(), "preloop-oc-server-denied-%d" % os.getpid())
        script = {"turns": [{"calls": [{"name": "bash", "arguments": {"command": "touch " + marker,
                                                                      "description": "touch"}}]},
                            {"text": "Understood."}]}
        w = self.world("srv-deny", script, other, agent)
        p, _ = w.run_opencode("Touch the file")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertFalse(os.path.exists(marker), "the denied tool ran")
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, [r["reply"] for r in reqs])
        tool = [m for m in reqs[1]["body"]["messages"] if m["role"] == "tool"]
        self.assertEqual(len(tool), 1)
        self.assertIn(DENY_REASON, texts(tool[0]))

    def test_a_worker_started_from_bash_is_the_conductors_child_on_the_server(self):
        # The conductor's bash tool starts a worker `opencode run` (same plugin, same agent
        # token, answered by the mock as its own agent); the worker's first hook finds the
        # conductor among its ancestors and registers as its child, on the server too.
        server = self.server()
        agent = server.new_agent(kind="opencode")
        worker = "'%s' run 'SUBAGENT-WORKER say hi' </dev/null >/dev/null 2>&1; echo worker-rc=$?" % kit.ensure_opencode()
        script = {"turns": [{"calls": [{"name": "bash", "arguments": {"command": worker,
                                                                      "description": "start a worker"}}]},
                            {"text": "All done."}],
                  "agents": [{"name": "worker", "match": "SUBAGENT-WORKER", "turns": [{"text": "Worker done."}]}]}
        w = self.world("srv-lineage", script, server, agent)
        p, _ = w.run_opencode("Start the worker")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        main = [r for r in w.requests() if r["reply"].get("agent") != "worker"]
        tool = [m for m in main[-1]["body"]["messages"] if m["role"] == "tool"]
        self.assertTrue(tool and "worker-rc=0" in texts(tool[0]), [texts(m) for m in tool])
        conductor, child = w.conductor_and_child()
        self.assertEqual(server.parent_of(child["runtime_session_id"]), conductor["runtime_session_id"])

    def test_a_sub_agents_session_is_the_conductors_child_on_the_server(self):
        # The task tool's sub-agent runs in a child session of the conductor's, in the same
        # OpenCode process: registered on the server with the conductor's runtime session as
        # its parent, so `notes send --children all --parent <conductor>` reaches it
        # at the sub-agent's next tool boundary (issue 32).
        server = self.server()
        agent = server.new_agent(kind="opencode")
        tmp = tempfile.mkdtemp(prefix="preloop-oc-srv-helper-")
        self.addCleanup(shutil.rmtree, tmp, True)
        helper = os.path.join(tmp, "send_children.py")
        with open(helper, "w") as f:
            f.write(SEND_TO_CHILDREN)

        script = subagent_script(helper)
        w = self.world("srv-subagent", script, server, agent)
        p, _ = w.run_opencode("Delegate the work")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        sub = [r for r in w.requests() if r["reply"].get("agent") == "sub"]
        self.assertGreaterEqual(len(sub), 2, [r["reply"] for r in w.requests()])
        sent = sub[0].get("before_reply") or {}
        self.assertEqual(sent.get("rc"), 0, sent)
        hits = where(sub[1], "MARK-oc-children")
        self.assertEqual([role for _, role in hits], ["tool"], [texts(m) for m in sub[1]["body"]["messages"]])
        conductor, child = w.conductor_and_child()
        self.assertEqual(server.parent_of(child["runtime_session_id"]), conductor["runtime_session_id"])

    def test_notes_before_and_mid_run_are_delivered_and_the_receipts_say_so(self):
        server = self.server()
        agent = server.new_agent(kind="opencode")
        before = server.send_note("MARK-oc-srv-before deploy to eu-west-1", agent_id=agent["agent_id"])
        self.assertEqual(before.get("state"), "pending", before)

        def script(w):
            return {"turns": [{"calls": [{"name": "bash", "arguments": {"command": "echo one",
                                                                          "description": "say one"}}],
                               "before_reply_cmd": server.send_note_argv("MARK-oc-srv-mid stop after this",
                                                                         external_session_id="@@SESSION@@")},
                              {"text": "All done."}]}
        w = self.world("srv-notes", script, server, agent)
        p, _ = w.run_opencode("Run echo one")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, [r["reply"] for r in reqs])
        self.assertEqual(where(reqs[0], "MARK-oc-srv-before"), [(1, "user")])
        sent = reqs[0].get("before_reply") or {}
        self.assertEqual(sent.get("rc"), 0, sent)
        mid = json.loads(sent["stdout"])
        hits = where(reqs[1], "MARK-oc-srv-mid")
        self.assertEqual([role for _, role in hits], ["tool"], hits)
        r = server.wait_receipt(before["note_id"], ("delivered",))
        self.assertEqual((r["state"], r.get("delivery_event")), ("delivered", "session_start"), r)
        r = server.wait_receipt(mid["note_id"], ("delivered",))
        self.assertEqual((r["state"], r.get("delivery_event")), ("delivered", "pre_tool_use"), r)

    def test_a_late_note_continues_once_and_the_next_is_undeliverable_at_the_end(self):
        server = self.server()
        agent = server.new_agent(kind="opencode")

        def note(text):
            return server.send_note_argv(text, external_session_id="@@SESSION@@")

        script = {"turns": [{"text": "All done.", "before_reply_cmd": note("MARK-oc-srv-late-A tag v2")},
                            {"text": "Tagged.", "before_reply_cmd": note("MARK-oc-srv-late-B too late")}],
                  "overflow": {"text": "Again."}}
        w = self.world("srv-late", script, server, agent)
        p, _ = w.run_opencode("Say hi")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        reqs = w.requests()
        self.assertEqual(len(reqs), 2, "one continuation, not more: %s" % [r["reply"] for r in reqs])
        last = reqs[1]["body"]["messages"][-1]
        self.assertEqual(last["role"], "user")
        self.assertIn("MARK-oc-srv-late-A", texts(last))
        a = json.loads(reqs[0]["before_reply"]["stdout"])["note_id"]
        b = json.loads(reqs[1]["before_reply"]["stdout"])["note_id"]
        r = server.wait_receipt(a, ("delivered",))
        self.assertEqual((r["state"], r.get("delivery_event")), ("delivered", "stop"), r)
        # The end is reported by a detached worker: wait for it.
        r = server.wait_receipt(b, ("undeliverable",), timeout=20.0)
        self.assertEqual((r["state"], r.get("undeliverable_reason")), ("undeliverable", "session_ended"), r)

    def test_idle_a_note_sent_while_the_session_sits_idle_starts_a_turn(self):
        server = self.server()
        agent = server.new_agent(kind="opencode")
        w = self.world("srv-idle", IDLE_SCRIPT, server, agent,
                       {"PRELOOP_WATCH_SERVER_POLL_MS": "300", "PRELOOP_WATCH_SERVER_POLL_MAX_MS": "1000"})
        srv = OpenCodeServer(w)
        self.addCleanup(srv.stop)
        sid = srv.prompted_session()
        self.assertEqual(len(w.requests()), 1)
        time.sleep(2.5)
        self.assertEqual(len(w.requests()), 1, "nothing is woken while nothing is pending")
        sent = server.send_note("MARK-oc-srv-idle deploy is frozen", external_session_id=sid)
        self.assertTrue(sent.get("runtime_session_id"), sent)
        reqs = srv.wait_requests(2, 30)
        self.assertEqual(len(reqs), 2, "no new turn: %s" % w.shim_log())
        last = reqs[1]["body"]["messages"][-1]
        self.assertEqual(last["role"], "user")
        self.assertIn("MARK-oc-srv-idle", texts(last))
        r = server.wait_receipt(sent["note_id"], ("delivered",))
        self.assertEqual((r["state"], r.get("delivery_event")), ("delivered", "stop"), r)
        time.sleep(2)
        self.assertEqual(len(w.requests()), 2, [r["reply"] for r in w.requests()])


if __name__ == "__main__":
    unittest.main()
