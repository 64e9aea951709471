"""End-to-end, GitHub Copilot CLI 1.0.102: the real `copilot -p` headless in BYOK + offline
mode against mock_copilot.py (Chat Completions), with the project's Copilot hooks
(preloop-copilot-*) in $COPILOT_HOME/hooks/preloop.json (camelCase style), in LOCAL mode
(no PRELOOP_URL / PRELOOP_TOKEN; the local inbox under the sandbox's PRELOOP_HOME). The same
scenarios against the real Preloop server are in test_real_server_gemini_copilot.py
(kit.CopilotScenarios holds the shared ones: a-d and s).

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

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()


def setUpModule():
    kit.prompt_prereqs(PREREQ, "copilot")


class TestCopilotLocal(kit.CopilotScenarios, kit.PromptLocalMode, unittest.TestCase):
    """Local mode: a-d and s (kit.CopilotScenarios), s2 and i (kit.PromptLocalMode)."""

    PREREQ = PREREQ

    def test_s_subagent_registers_no_session(self):
        self.start("s2: the sub-agent's hooks register nothing")
        body = "%s unused" % self.token("S2")
        self.run_script(self.subagent_script(body))
        self.check(self.sb.session_ids() == [self.sid],
                   "sessions registered: %s, want only the run's %s" % (self.sb.session_ids(), self.sid))


if __name__ == "__main__":
    unittest.main()
