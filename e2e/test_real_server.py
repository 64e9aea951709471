"""End-to-end against the REAL Preloop server: PyPI preloop==0.17.1 on 127.0.0.1 with its
PostgreSQL 16 + pgvector (brought up by e2e/preloop_server/up.sh in setUpModule), and the
real Claude Code 2.1.328 CLI headless against mock_anthropic.py, with the project's hooks
wired into a temporary HOME by `preloop-hooks install --harness claude-code --scope user`
(or, while this build has no `install`, by kit.Sandbox.write_settings) and running in
SERVER mode: PRELOOP_URL + PRELOOP_TOKEN (a fresh managed agent's agt_ runtime token per
scenario) in claude's, and so the hooks', environment.

Every scenario checks what the mock model received and the note's receipt on the server
(GET /api/v1/operator-notes/{id} with the user's personal API key):

  a   note to the agent (agent_id) before the run starts -> first model request,
      SessionStart label; receipt delivered / session_start, bound to the run's session
  a2  the same with next_session: true
  b   note to the run (external_session_id) while the mock answers request 0 with a Bash
      call -> request 1 (after the tool call), PreToolUse:Bash label; receipt delivered /
      pre_tool_use
  c   note to the run while the mock answers the final text-only turn -> rescued by Stop:
      exactly one extra request; receipt delivered / stop
  d   a second note sent during that rescue turn (no second rescue) -> reaches no request;
      receipt undeliverable / session_ended (the SessionEnd hook's session-end call)
  e   a central deny rule (Bash disabled account-wide through POST /tool-configurations,
      in an account of its own so no other scenario is affected) -> Bash is not run and the
      model gets tool_result is_error "PreToolUse:Bash hook error: Tool blocked in Preloop"

Codex 0.169.0 (`codex exec` against mock_openai.py, hooks wired by `preloop-hooks install
--harness codex --scope user`, class TestRealServerCodex): a-d as above, plus
  e   PermissionRequest (--approve-for-me, an escalated call) blocked on the server until a
      human approves through /approval-requests; a note sent meanwhile is claimed deferred
      (receipt `claimed`), carried by the next PreToolUse and acked (`delivered`)

If the server cannot come up, every test here FAILS (nothing is skipped: kit.Prereq), the
first one with up.sh's output and the server log's tail. tearDownModule stops the server again (down.sh, by PID) when
this run started it, unless PRELOOP_E2E_SERVER_KEEP=1. Run alone, from the repository root:
  python3 -m unittest -v e2e/test_real_server.py
"""

import json
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()
DENY_REASON = "Tool blocked in Preloop"


def setUpModule():
    PREREQ.get("claude", kit.ensure_claude)
    PREREQ.get("bin_dir", kit.build_binaries)
    PREREQ.get("codex_bin_dir", lambda: kit.build_binaries(kit.CODEX_HOOK_BINARIES))
    PREREQ.get("codex_install", lambda: kit.require_install(PREREQ["codex_bin_dir"], "codex"))
    PREREQ.get("codex", kit.ensure_codex)
    kit.require_server(PREREQ, wiring="`preloop-hooks install --harness claude-code --scope user`"
                       if PREREQ["bin_dir"] and kit.has_install_command(os.path.join(PREREQ["bin_dir"], kit.CLI_BINARY))
                       else "kit.Sandbox.write_settings (this preloop-hooks has no `install` yet)")


def tearDownModule():
    kit.release_server(PREREQ)


class _ServerClaudeScenarios(kit.ClaudeScenarios, kit.ServerMode):
    """Scenarios a-d (kit.ClaudeScenarios) against the real server, plus a2 and e; mixed
    into one TestCase per model (wire shape)."""

    PREREQ = PREREQ
    PREREQS = ("creds", "claude", "bin_dir")
    TOKEN_PREFIX = "E2E-SRV"
    WIRING = "install"

    def test_a2_next_session_note_before_start_reaches_first_request(self):
        self.start("a2: note to the agent's next session before the run starts")
        tok = self.token("A2")
        body = "%s For the next session of this agent." % tok
        sent = self.send_before_start(body, agent_id=self.agent["agent_id"], next_session=True)
        self.check(sent.get("next_session") is True, "send answered next_session=%r" % sent.get("next_session"))
        run = self.run_turns([self.shell_turn(), self.text_turn("All done.")])
        self.expect_delivered_once(run, tok, sent["note_id"], body, 0, kit.LABEL_SESSION_START)
        self.check_receipt(sent["note_id"], "delivered", event="session_start")

    def test_e_central_deny_rule_denies_tool_and_reason_reaches_model(self):
        # Bash disabled account-wide: in an account of its own, so no other scenario (and
        # no other test run on this server) sees the rule.
        run = self.run_denied_shell("Bash")
        self.check(len(run.requests) == 2, "%d model requests, want 2" % len(run.requests))
        results = [b for m in run.requests[1].get("messages") or [] if m.get("role") == "user"
                   and isinstance(m.get("content"), list)
                   for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
        self.check(results, "request #1 holds no tool_result")
        res = results[-1]
        content = res.get("content")
        if isinstance(content, list):
            content = "\n".join(x.get("text", "") for x in content if isinstance(x, dict))
        self.check(res.get("is_error") is True and DENY_REASON in (content or ""),
                   "the tool_result is %r, want is_error=true holding the server's reason %r"
                   % (res, DENY_REASON))
        self.check(content.startswith("PreToolUse:Bash hook error: "),
                   "the deny did not come from our PreToolUse hook: %r" % content)


class TestRealServerClaudeCodeDefaultModel(_ServerClaudeScenarios, unittest.TestCase):
    """Claude Code's default model (claude-opus-5-5): hook text in role:"system" messages."""
    MODEL = kit.MODEL_DEFAULT
    MODEL_NAME = "default"
    CONTEXT_SHAPE = "system_message"


class TestRealServerClaudeCodeSonnet45(_ServerClaudeScenarios, unittest.TestCase):
    """--model claude-sonnet-4-5-20250929: hook text in <system-reminder> blocks."""
    MODEL = kit.MODEL_SONNET_45
    MODEL_NAME = "sonnet-4-5"
    CONTEXT_SHAPE = "system_reminder"


# =============================================================================== Codex

class TestRealServerCodex(kit.CodexScenarios, kit.ServerMode, unittest.TestCase):
    """The real Codex CLI 0.169.0 (`codex exec`) against mock_openai.py (Responses API),
    hooks wired by `preloop-hooks install --harness codex --scope user` (hooks.json + the
    trust entries in $CODEX_HOME/config.toml), server mode: scenarios a-d
    (kit.CodexScenarios) and e. Codex picks its own session id: notes to the run use the
    id the SessionStart hook registered (server_note.py "@@SESSION@@", read from the
    hooks' session file)."""

    PREREQ = PREREQ
    PREREQS = ("creds", "codex_bin_dir", "codex_install", "codex")
    TOKEN_PREFIX = "E2E-CX"

    def bin_dir(self):
        return self.PREREQ["codex_bin_dir"]

    def test_e_permission_request_approved_by_human_with_deferred_note(self):
        # PreToolUse -> PermissionRequest (escalated call, `codex exec --approve-for-me`):
        # the hook's permission-check blocks on the server until a human approves through
        # /approval-requests. A note sent while it waits is claimed DEFERRED with the
        # decision (PermissionRequest cannot carry text), spooled, carried by the next
        # PreToolUse and acked: the receipt reads `claimed` in between, `delivered` after.
        tok = self.token("PR")
        body = "%s Sent while the approval was pending." % tok
        id_file = os.path.join(tempfile.gettempdir(), "preloop-e2e-pr-note-%s" % kit.new_session_id())
        self.addCleanup(lambda: os.path.exists(id_file) and os.unlink(id_file))
        self.start("e: PermissionRequest approved by a human, note deferred then acked")
        agent_id = self.agent["agent_id"]
        server = self.server()

        def human(proc):
            """Wait for the approval request, send the note, then approve."""
            deadline = time.time() + 60
            while time.time() < deadline and proc.poll() is None:
                mine = server.pending_approvals(agent_id)
                if mine:
                    sid = self.sb.session_ids()[-1]
                    note = server.send_note(body, external_session_id=sid)
                    with open(id_file, "w") as f:
                        f.write(note["note_id"])
                    time.sleep(0.3)
                    at_wait = server.receipt(note["note_id"])
                    server.approve(mine[0]["id"], "approved by the e2e human")
                    return {"note_id": note["note_id"], "approval_id": mine[0]["id"],
                            "tool_args": mine[0].get("tool_args"), "receipt_while_waiting": at_wait}
                time.sleep(0.25)
            return {"error": "no pending approval request for agent %s appeared" % agent_id}

        run = self.run_codex({
            "approve_for_me": True,
            "agents": [{"name": "main", "turns": [
                {"calls": [{"cmd": "touch escalated_file", "sandbox_permissions": "require_escalated",
                            "justification": "need to write"}]},
                {"calls": [{"cmd": "echo two"}], "before_reply_cmd": server.receipt_argv("@" + id_file)},
                {"text": "All done."}], "overflow": {"text": "Nothing more."}}]},
            prompt="make the file", approve_for_me=True, during=human)
        got = run.during.get("value") or {}
        self.check(got.get("note_id"), "the human never saw an approval request: %r" % run.during)
        note_id = got["note_id"]
        self.note_ids.append(note_id)
        self.check(got["receipt_while_waiting"].get("state") == "pending",
                   "while the hook waited the note was %r, want pending" % got["receipt_while_waiting"])
        self.check(os.path.exists(os.path.join(self.sb.proj, "escalated_file")),
                   "the approved escalated command did not run (no escalated_file)")
        self.check("hook: PermissionRequest Completed" in run.stderr,
                   "no `hook: PermissionRequest Completed` status line")
        recs = [r for r in run.records if r.get("before_reply") and r.get("reply", {}).get("turn") == 1]
        self.check(recs, "the mock never reached turn 1 (the request after the escalated call)")
        try:
            between = json.loads(recs[0]["before_reply"].get("stdout") or "")
        except ValueError:
            between = None
        self.extra.append("receipt read before turn 1 was answered: %s" % json.dumps(between))
        self.check(isinstance(between, dict) and between.get("state") == "claimed"
                   and between.get("delivered_at") is None,
                   "after the approval (deferred claim) and before the next PreToolUse the receipt "
                   "should be claimed with no delivered_at: %r" % between)
        (n, i, role, txt), hits = self.first_hit(run, tok)
        self.check(n == 2 and role == "developer",
                   "first seen in request #%d role %s, want request #2 (after the next tool call, "
                   "carried by its PreToolUse), developer" % (n, role))
        self.check_block(txt, note_id, body)
        r = self.check_receipt(note_id, "delivered", event="pre_tool_use")
        self.check(r.get("delivered_at") and r.get("claimed_at") and r["delivered_at"] > r["claimed_at"],
                   "delivered_at should come after claimed_at (delivered only at the ack): %r" % r)


if __name__ == "__main__":
    unittest.main()
