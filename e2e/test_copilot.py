"""End-to-end, GitHub Copilot CLI 1.0.102: the real `copilot -p` headless in BYOK + offline
mode against mock_copilot.py (Chat Completions), with the project's Copilot hooks
(preloop-copilot-*) in $COPILOT_HOME/hooks/preloop.json (camelCase style), in LOCAL mode
(no PRELOOP_URL / PRELOOP_TOKEN; the local inbox under the sandbox's PRELOOP_HOME). The same
scenarios against the real Preloop server are in test_real_server_gemini_copilot.py
(CopilotScenarios is shared).

Wiring: `preloop-hooks install --harness copilot --scope user` (camelCase
$COPILOT_HOME/hooks/preloop.json; a preloop-hooks without it fails every test, with the
reason). The run's session id is chosen with --session-id.

Where a note reaches the model (exact, checked request by request; nothing is escaped):
  a  note before start -> request #0, messages[1]: a user message that is the block
     (sessionStart additionalContext); receipt delivered / session_start
  b  note while the mock answers request #0 with a bash call -> preToolUse claims nothing
     (the server never hands copilot_cli a note; the local inbox mirrors it), the tool
     runs, postToolUse pulls: request #1, the tool message ends with
     'Tool "bash" succeeded. Additional guidance from postToolUse hooks:\\n' + block;
     receipt delivered / pre_tool_use
  c  note while the mock answers the final text turn -> agentStop decision:block: one extra
     request whose last user message is "<current_datetime>...\\n\\n" + block; receipt
     delivered / stop
  d  as c, then a second note during the rescue turn -> in no request; undeliverable /
     session_ended
  s  a sub-agent (task tool) runs while a note arrives: the note reaches no sub-agent
     request, and the main agent gets it in the task's tool message (postToolUse of the
     main session); the sub-agent registered no session of its own
  i  our own agentStop block comes back as userPromptSubmitted's prompt: no title from it

Run from the repository root:
  python3 -m unittest -v e2e/test_copilot.py
"""

import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402
from test_gemini import require_install  # noqa: E402

PREREQ = kit.Prereq()

COPILOT_EVENTS = ("sessionStart", "userPromptSubmitted", "preToolUse", "postToolUse", "agentStop", "sessionEnd")
COPILOT_HOOK_BINARIES = {
    "sessionStart": "preloop-copilot-session-start",
    "userPromptSubmitted": "preloop-copilot-user-prompt-submitted",
    "preToolUse": "preloop-copilot-pre-tool-use",
    "postToolUse": "preloop-copilot-post-tool-use",
    "agentStop": "preloop-copilot-agent-stop",
    "sessionEnd": "preloop-copilot-session-end",
}
PROMPT = "Run echo hi"
BASH = {"name": "bash", "arguments": {"command": "echo hi", "description": "say hi"}}
SHELL_TURN = {"calls": [BASH]}
DATETIME_RE = r"<current_datetime>[^<]*</current_datetime>\n\n"
POST_LABEL = '\n\nTool "bash" succeeded. Additional guidance from postToolUse hooks:\n'


def setUpModule():
    PREREQ.get("bin_dir", lambda: kit.build_binaries(tuple(COPILOT_HOOK_BINARIES.values())))
    PREREQ.get("install", lambda: require_install(PREREQ["bin_dir"], "copilot"))
    PREREQ.get("copilot", kit.ensure_copilot)


class CopilotScenarios(kit.Scenario):
    """Copilot CLI 1.0.102 `copilot -p` against mock_copilot.py with our hooks; scenarios
    a-d for every mode."""

    HARNESS = "copilot"
    PREREQS = ("bin_dir", "install", "copilot")
    ARTIFACTS = "requests.jsonl, copilot.stdout, copilot.stderr, copilot-logs/, cmdline.txt, home/.copilot/, preloop-home/"

    def start(self, scenario, server=None):
        self.server_override = server       # ServerMode: another account's client
        self.new_sandbox(scenario)
        self.sid = kit.new_session_id()
        return self.sb

    def wire(self):
        """Our hooks into $COPILOT_HOME/hooks/ the way a user wires them:
        `preloop-hooks install --harness copilot --scope user`."""
        self.sb.install_hooks("copilot")
        self.wiring = "preloop-hooks install --harness copilot --scope user"

    def run_copilot(self, script, prompt=PROMPT, env=None):
        try:
            self.sb.start_mock(dict({"overflow": {"text": "Nothing more to do."}}, **script), "copilot")
            self.wire()
        except kit.KitError as e:
            raise kit.ScenarioFailure(self.report("setup failed: %s" % e))
        try:
            self.run_result = self.sb.run_copilot(self.PREREQ["copilot"], prompt, session_id=self.sid, env=env)
        finally:
            self.sb.mock.stop()
        run = self.run_result
        self.check(not run.timed_out and run.rc == 0,
                   "copilot -p did not finish cleanly (rc=%s, timed out=%s)" % (run.rc, run.timed_out))
        return run

    def landings(self, requests, tok):
        return kit.copilot_find_marker(requests, tok)

    def check_once(self, hits):
        self.check(len({h.index for h in hits}) == 1, "delivered in more than one message: %s"
                   % [h.short(120) for h in hits])

    def run_lines(self, run):
        return ["copilot stdout: " + kit.shorten(run.stdout, 600), "copilot stderr: " + kit.shorten(run.stderr, 900)]

    def expect_block_only(self, text, note_id, body):
        """The text is exactly one block holding the note (Copilot passes it verbatim)."""
        block, _ = self.check_block(text, note_id, body)
        return block

    # ------------------------------------------------------------------ scenarios a-d
    def test_a_note_before_start_reaches_first_request(self):
        self.start("a: note sent before the run starts")
        tok = self.token("A")
        body = "%s Before you start, print the working directory too." % tok
        note_id = self.send_before_start(body)["note_id"]
        run = self.run_copilot({"turns": [SHELL_TURN, {"text": "All done."}]})
        hits = self.landings(run.requests, tok)
        first = kit.first_landing(hits)
        self.check(first is not None, "the note never reached the model")
        self.check((first.request_index, first.index, first.role) == (0, 1, "user"),
                   "first seen at %s, want request #0 messages[1] (sessionStart)" % first.short())
        block = self.expect_block_only(first.text, note_id, body)
        self.check(first.text == block, "messages[1] is not exactly the block: %r" % kit.shorten(first.text, 400))
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2" % len(run.requests))
        self.check_receipt(note_id, "delivered", event="session_start")

    def test_b_note_mid_run_reaches_request_after_tool_call(self):
        self.start("b: note to the run sent mid-run")
        tok = self.token("B")
        body = "%s Mid-run: after this command, stop and summarise." % tok
        run = self.run_copilot({"turns": [dict(SHELL_TURN, before_reply_cmd=self.note_to_run_argv(body)),
                                          {"text": "All done."}]})
        note_id = self.sent_in_turn(run, 0)["note_id"]
        hits = self.landings(run.requests, tok)
        first = kit.first_landing(hits)
        self.check(first is not None, "the note never reached the model")
        self.check((first.request_index, first.role) == (1, "tool"),
                   "first seen at %s, want request #1 in the bash tool message (postToolUse)" % first.short())
        self.check(first.text.startswith("hi\n") and POST_LABEL in first.text,
                   "the tool message is not <output> + the postToolUse label + block: %r"
                   % kit.shorten(first.text, 500))
        block = self.expect_block_only(first.text.split(POST_LABEL, 1)[1], note_id, body)
        self.check(first.text.endswith(POST_LABEL + block), "the block is not the tool message's end")
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2" % len(run.requests))
        self.check_receipt(note_id, "delivered", event="pre_tool_use")

    def test_c_note_after_last_tool_call_rescued_by_agent_stop(self):
        self.start("c: note to the run sent after the last tool call")
        tok = self.token("C")
        body = "%s Late note: also mention the exit code." % tok
        run = self.run_copilot({"turns": [
            SHELL_TURN,
            {"text": "All done.", "before_reply_cmd": self.note_to_run_argv(body)},
            {"text": "Noted the operator note."}]})
        note_id = self.sent_in_turn(run, 1)["note_id"]
        hits = self.landings(run.requests, tok)
        first = kit.first_landing(hits)
        self.check(first is not None, "the note never reached the model (no agentStop rescue)")
        self.check(len(run.requests) == 3, "%d model requests, want 3 (one continuation)" % len(run.requests))
        last = len(run.requests[2]["messages"]) - 1
        self.check((first.request_index, first.index, first.role) == (2, last, "user"),
                   "first seen at %s, want request #2, its last (user) message" % first.short())
        m = re.match(DATETIME_RE, first.text)
        self.check(m, "the continuation message does not start with <current_datetime>: %r" % first.text[:200])
        block = self.expect_block_only(first.text[m.end():], note_id, body)
        self.check(first.text == m.group(0) + block,
                   "the continuation is not <current_datetime> + the block (and nothing else): %r"
                   % kit.shorten(first.text, 500))
        self.check_once(hits)
        self.check_receipt(note_id, "delivered", event="stop")

    def test_d_note_pending_at_end_is_undeliverable_session_ended(self):
        self.start("d: note to the run still pending when the run ends")
        tok_a, tok_b = self.token("D1"), self.token("D2")
        body_a = "%s Late note that agentStop rescues." % tok_a
        body_b = "%s Note sent during the rescue turn, too late." % tok_b
        run = self.run_copilot({"turns": [
            SHELL_TURN,
            {"text": "All done.", "before_reply_cmd": self.note_to_run_argv(body_a)},
            {"text": "Noted.", "before_reply_cmd": self.note_to_run_argv(body_b)}]})
        note_a = self.sent_in_turn(run, 1)["note_id"]
        note_b = self.sent_in_turn(run, 2)["note_id"]
        self.check(len(run.requests) == 3, "%d model requests, want 3" % len(run.requests))
        self.check(not self.landings(run.requests, tok_b), "the note sent during the rescue turn reached the model")
        self.check(self.landings(run.requests, tok_a), "the rescued note (prerequisite) is in no request")
        self.check_receipt(note_a, "delivered", event="stop")
        self.check_receipt(note_b, "undeliverable", reason="session_ended")

    def subagent_script(self, body, sub_cmd="echo sub"):
        return {
            "turns": [{"calls": [{"name": "task", "arguments": {
                "name": "helper", "description": "run a helper", "prompt": "SUBAGENT-TASK: run %s" % sub_cmd,
                "agent_type": "general-purpose", "mode": "sync"}}]}, {"text": "Main done."}],
            "agents": [{"name": "sub", "match": "SUBAGENT-TASK", "turns": [
                {"calls": [{"name": "bash", "arguments": {"command": sub_cmd, "description": "sub"}}],
                 "before_reply_cmd": self.note_to_run_argv(body)},
                {"text": "Sub done."}], "overflow": {"text": "Sub continued."}}]}

    def test_s_note_during_a_subagent_reaches_the_main_agent(self):
        self.start("s: a note arrives while a sub-agent runs")
        tok = self.token("S")
        body = "%s Note for the main agent, sent while its sub-agent works." % tok
        run = self.run_copilot(self.subagent_script(body))
        note_id = self.sent_in_turn(run, 0, agent="sub")["note_id"]
        sub = run.agent_requests("sub")
        self.check(len(sub) == 2, "%d sub-agent requests, want 2 (no continuation of the sub-agent)" % len(sub))
        self.check(not self.landings(sub, tok), "the note reached the sub-agent: %s"
                   % [h.short(120) for h in self.landings(sub, tok)])
        hits = self.landings(run.requests, tok)
        first = kit.first_landing(hits)
        self.check(first is not None, "the note never reached the main agent")
        self.check((first.request_index, first.role) == (1, "tool"),
                   "first seen at %s, want main request #1 in the task's tool message" % first.short())
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d main requests, want 2" % len(run.requests))
        self.check_receipt(note_id, "delivered", event="pre_tool_use")


class TestCopilotLocal(CopilotScenarios, kit.LocalMode, unittest.TestCase):
    """Local mode: a-d and s above, plus i."""

    PREREQ = PREREQ

    def test_s_subagent_registers_no_session(self):
        self.start("s2: the sub-agent's hooks register nothing")
        body = "%s unused" % self.token("S2")
        self.run_copilot(self.subagent_script(body))
        self.check(self.sb.session_ids() == [self.sid],
                   "sessions registered: %s, want only the run's %s" % (self.sb.session_ids(), self.sid))

    def test_i_continuation_prompt_does_not_title_the_session(self):
        self.start("i: our agentStop block comes back as userPromptSubmitted's prompt")
        body = "%s Late note." % self.token("I")
        run = self.run_copilot({"turns": [
            {"text": "All done.", "before_reply_cmd": self.note_to_run_argv(body)},
            {"text": "Noted."}]})
        note_id = self.sent_in_turn(run, 0)["note_id"]
        self.check(len(run.requests) == 2, "%d requests, want 2 (one rescue)" % len(run.requests))
        self.check_receipt(note_id, "delivered", event="stop")
        with open(os.path.join(self.sb.preloop_home, "sessions", "%s.json" % self.sid)) as f:
            sess = json.load(f)
        self.check(sess.get("title") == PROMPT, "session title is %r, want %r" % (sess.get("title"), PROMPT))


if __name__ == "__main__":
    unittest.main()
