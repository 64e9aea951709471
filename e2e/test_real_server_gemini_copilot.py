"""End-to-end against the REAL Preloop server (PyPI preloop==0.17.1, e2e/preloop_server/up.sh):
the real Gemini CLI 0.61.0 and Copilot CLI 1.0.102 headless against their mock models, with
our hooks wired by `preloop-hooks install --harness gemini|copilot` in SERVER mode (a fresh managed agent per scenario, its agt_ token as
PRELOOP_URL/PRELOOP_TOKEN in the harness's environment), notes sent as the human operator
(POST /api/v1/operator-notes), receipts read from GET /api/v1/operator-notes/{id}.

The scenarios of kit.GeminiScenarios (a, c, d) / kit.CopilotScenarios (a-d, s) run here
as they run locally, plus what only the server has: its claim rules for these sources
(docs/contracts/preloop-server.md §4.2, traps 25-26) and central deny rules.

Gemini (gemini_cli: permission-check claims immediately, receipt `delivered` at once):
  b  a note sent while the mock answers with a shell call is claimed by BeforeTool's
     permission check; the hook HOLDS the call (deny): request #1's functionResponse.error
     is "Tool execution blocked: " + the held sentence + the server's block; the model
     re-issues the call, which then runs (nothing pending any more); receipt delivered /
     pre_tool_use
  e  central deny (run_shell_command disabled in an account of its own): the tool does not
     run; "Tool execution blocked: Tool blocked in Preloop"
  g  a CI runner (GITHUB_SHA set): PRELOOP_URL / PRELOOP_TOKEN / PRELOOP_HOME in Gemini's
     environment never reach the hook (wrong values there prove it); credentials only in
     ~/.preloop/config.json; the note before start still arrives
Copilot (copilot_cli: permission-check never hands a note out; hooks must pull):
  b  a mid-run note stays pending through preToolUse and is pulled by postToolUse:
     request #1's tool message; receipt delivered / pre_tool_use
  e  central deny (bash disabled): "Denied by preToolUse hook: Tool blocked in Preloop"
  s  a note during a sub-agent reaches the main agent (task tool message), never the
     sub-agent; a central deny holds inside the sub-agent (its bash never runs)

Run from the repository root:
  python3 -m unittest -v e2e/test_real_server_gemini_copilot.py
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()
DENY_REASON = "Tool blocked in Preloop"


def setUpModule():
    kit.prompt_prereqs(PREREQ, "gemini", "copilot")
    kit.require_server(PREREQ)


def tearDownModule():
    kit.release_server(PREREQ)


class TestRealServerGemini(kit.ServerMode, kit.GeminiScenarios, unittest.TestCase):
    PREREQ = PREREQ
    PREREQS = ("bin_dir", "install_gemini", "gemini", "creds")

    def test_b_note_mid_run_held_by_before_tool(self):
        self.start("b: note mid-run (server: BeforeTool's check claims it and holds the call)")
        tok = self.token("B")
        body = "%s Mid-run: after this command, stop and summarise." % tok
        ran = os.path.join(self.sb.proj, "ran.txt")
        run = self.run_turns([
            self.shell_turn("echo hi > ran.txt", before_reply_cmd=self.note_to_run_argv(body)),
            self.shell_turn("echo hi > ran.txt"),   # the model re-issues the held call
            self.text_turn("Done, after reading the operator note.")])
        note_id = self.sent_in_turn(run, 0)["note_id"]
        # Held once: the re-issued call (nothing pending any more) ran.
        self.check(os.path.exists(ran), "the re-issued call did not run")
        outputs = [h for h in kit.gemini_find_marker(run.requests[2:], "Output:") if h.kind == "function_response_output"]
        self.check(outputs, "request #2 holds no output of the re-issued call")
        hits = self.landings(run.requests, tok)
        first = self.check_delivered_first(hits, lambda h: (h.request_index, h.kind), (1, "function_response_error"),
                                           "request #1, the call's functionResponse.error")
        prefix = "Tool execution blocked: Preloop held this tool call (it did not run)"
        self.check(first.text.startswith(prefix), "the error does not start with %r: %r"
                   % (prefix, kit.shorten(first.text, 400)))
        block = first.text.split("\n\n", 1)[1]
        self.check_block(block, note_id, body)
        self.check(block.startswith("<operator-notes ") and block.endswith("</operator-notes>"),
                   "the reason does not end with the server's block verbatim: %r" % kit.shorten(block, 300))
        self.check_once(hits)
        self.check(len(run.requests) == 3, "%d model requests, want 3 (held, re-issued, answer)" % len(run.requests))
        self.check_receipt(note_id, "delivered", event="pre_tool_use")

    def test_e_central_deny_rule_denies_tool(self):
        run = self.run_denied_shell("run_shell_command")
        hits = kit.gemini_find_marker(run.requests, DENY_REASON)
        first = kit.first_landing(hits)
        self.check(first is not None and (first.request_index, first.kind) == (1, "function_response_error"),
                   "the deny reason is not request #1's functionResponse.error: %s"
                   % (first.short() if first else "nowhere"))
        self.check(first.text == "Tool execution blocked: " + DENY_REASON, "error is %r" % first.text)

    def test_g_ci_runner_credentials_from_home_files(self):
        self.start("g: GITHUB_SHA set: credentials only in ~/.preloop/config.json")
        sb = self.sb
        sb.preloop_home = os.path.join(sb.home, ".preloop")
        os.makedirs(sb.preloop_home, mode=0o700, exist_ok=True)
        cfg = os.path.join(sb.preloop_home, "config.json")
        fd = os.open(cfg, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"url": sb.hook_env["PRELOOP_URL"], "token": sb.hook_env["PRELOOP_TOKEN"]}, f)
        # What Gemini would hand a hook if it did not strip them: all wrong.
        sb.hook_env = {"PRELOOP_URL": "http://127.0.0.1:9", "PRELOOP_TOKEN": "agt_wrong",
                       "PRELOOP_HOME": "/nonexistent/never-reaches-the-hook"}
        tok = self.token("G")
        body = "%s Credentials from ~/.preloop under a CI runner." % tok
        note_id = self.send_before_start(body)["note_id"]
        run = self.run_script({"turns": [{"text": "All done."}]},
                              env={"GITHUB_SHA": "0123456789abcdef0123456789abcdef01234567"})
        first = kit.first_landing(self.landings(run.requests, tok))
        self.check(first is not None and first.request_index == 0, "the note never reached request #0")
        self.check_bracket_block(first.text, note_id, body)
        self.check_receipt(note_id, "delivered", event="session_start")


class TestRealServerCopilot(kit.ServerMode, kit.CopilotScenarios, unittest.TestCase):
    PREREQ = PREREQ
    PREREQS = ("bin_dir", "install_copilot", "copilot", "creds")

    def test_e_central_deny_rule_denies_tool(self):
        run = self.run_denied_shell("bash")
        first = kit.first_landing(kit.copilot_find_marker(run.requests, DENY_REASON))
        self.check(first is not None and (first.request_index, first.role) == (1, "tool"),
                   "the deny reason is not in request #1's tool message: %s" % (first.short() if first else "nowhere"))
        self.check(first.text == "Denied by preToolUse hook: " + DENY_REASON, "tool message is %r" % first.text)

    def test_e_central_deny_holds_inside_a_subagent(self):
        other = self.deny_account("bash")
        self.start("e2: central deny inside a sub-agent", server=other)
        ran = os.path.join(self.sb.proj, "sub-ran.txt")
        body = "%s unused" % self.token("E2")
        run = self.run_script(self.subagent_script(body, sub_cmd="echo ran > sub-ran.txt"))
        self.check(not os.path.exists(ran), "the sub-agent's denied bash ran")
        sub = run.agent_requests("sub")
        first = kit.first_landing(kit.copilot_find_marker(sub, DENY_REASON))
        self.check(first is not None and first.role == "tool"
                   and first.text == "Denied by preToolUse hook: " + DENY_REASON,
                   "the sub-agent's tool message is not the deny: %s" % (first.short() if first else "nowhere"))


if __name__ == "__main__":
    unittest.main()
