"""CopilotScenarios: Copilot CLI `copilot -p` against mock_copilot.py, and where a note must
land in scenarios a-c and s (a note that arrives while a sub-agent runs)."""

import re

from ..common import shorten
from ..copilot import COPILOT_DATETIME_RE, COPILOT_POST_LABEL, copilot_find_marker
from .prompt import PromptScenarios

__all__ = ["CopilotScenarios"]


class CopilotScenarios(PromptScenarios):
    """Copilot CLI 1.0.102 `copilot -p` against mock_copilot.py with our hooks; scenarios
    a-d and s for every mode."""

    HARNESS = "copilot"
    PREREQS = ("bin_dir", "install_copilot", "copilot")
    ARTIFACTS = ("requests.jsonl, copilot.stdout, copilot.stderr, copilot-logs/, cmdline.txt, home/.copilot/, "
                 "preloop-home/")
    RESCUER = "agentStop"
    FIND_MARKER = staticmethod(copilot_find_marker)

    def shell_turn(self, command="echo hi", **extra):
        return dict({"calls": [{"name": "bash", "arguments": {"command": command, "description": "say hi"}}]}, **extra)

    def check_once(self, hits):
        self.check(len({h.index for h in hits}) == 1, "delivered in more than one message: %s"
                   % [h.short(120) for h in hits])

    def expect_block_only(self, text, note_id, body):
        """The text is exactly one block holding the note (Copilot passes it verbatim)."""
        block, _ = self.check_block(text, note_id, body)
        return block

    def subagent_script(self, body, sub_cmd="echo sub"):
        return {
            "turns": [{"calls": [{"name": "task", "arguments": {
                "name": "helper", "description": "run a helper", "prompt": "SUBAGENT-TASK: run %s" % sub_cmd,
                "agent_type": "general-purpose", "mode": "sync"}}]}, {"text": "Main done."}],
            "agents": [{"name": "sub", "match": "SUBAGENT-TASK", "turns": [
                {"calls": [{"name": "bash", "arguments": {"command": sub_cmd, "description": "sub"}}],
                 "before_reply_cmd": self.note_to_run_argv(body)},
                {"text": "Sub done."}], "overflow": {"text": "Sub continued."}}]}

    # ------------------------------------------------------------------ scenarios a-c, s (d: NoteScenarios)
    def test_a_note_before_start_reaches_first_request(self):
        run, tok, note_id, body = self.run_scenario_a()
        hits = self.landings(run.requests, tok)
        first = self.check_delivered_first(hits, lambda h: (h.request_index, h.index, h.role), (0, 1, "user"),
                                           "request #0 messages[1] (sessionStart)")
        block = self.expect_block_only(first.text, note_id, body)
        self.check(first.text == block, "messages[1] is not exactly the block: %r" % shorten(first.text, 400))
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2" % len(run.requests))
        self.check_receipt(note_id, "delivered", event="session_start")

    def test_b_note_mid_run_reaches_request_after_tool_call(self):
        run, tok, note_id, body = self.run_scenario_b()
        hits = self.landings(run.requests, tok)
        first = self.check_delivered_first(hits, lambda h: (h.request_index, h.role), (1, "tool"),
                                           "request #1 in the bash tool message (postToolUse)")
        self.check(first.text.startswith("hi\n") and COPILOT_POST_LABEL in first.text,
                   "the tool message is not <output> + the postToolUse label + block: %r"
                   % shorten(first.text, 500))
        block = self.expect_block_only(first.text.split(COPILOT_POST_LABEL, 1)[1], note_id, body)
        self.check(first.text.endswith(COPILOT_POST_LABEL + block), "the block is not the tool message's end")
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2" % len(run.requests))
        self.check_receipt(note_id, "delivered", event="pre_tool_use")

    def test_c_note_after_last_tool_call_rescued_by_agent_stop(self):
        run, hits, first, note_id, body = self.run_scenario_c()
        last = len(run.requests[2]["messages"]) - 1
        self.check((first.request_index, first.index, first.role) == (2, last, "user"),
                   "first seen at %s, want request #2, its last (user) message" % first.short())
        m = re.match(COPILOT_DATETIME_RE, first.text)
        self.check(m, "the continuation message does not start with <current_datetime>: %r" % first.text[:200])
        block = self.expect_block_only(first.text[m.end():], note_id, body)
        self.check(first.text == m.group(0) + block,
                   "the continuation is not <current_datetime> + the block (and nothing else): %r"
                   % shorten(first.text, 500))
        self.check_once(hits)
        self.check_receipt(note_id, "delivered", event="stop")

    def test_s_note_during_a_subagent_reaches_the_main_agent(self):
        self.start("s: a note arrives while a sub-agent runs")
        tok = self.token("S")
        body = "%s Note for the main agent, sent while its sub-agent works." % tok
        run = self.run_script(self.subagent_script(body))
        note_id = self.sent_in_turn(run, 0, agent="sub")["note_id"]
        sub = run.agent_requests("sub")
        self.check(len(sub) == 2, "%d sub-agent requests, want 2 (no continuation of the sub-agent)" % len(sub))
        self.check(not self.landings(sub, tok), "the note reached the sub-agent: %s"
                   % [h.short(120) for h in self.landings(sub, tok)])
        hits = self.landings(run.requests, tok)
        self.check_delivered_first(hits, lambda h: (h.request_index, h.role), (1, "tool"),
                                   "main request #1 in the task's tool message")
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d main requests, want 2" % len(run.requests))
        self.check_receipt(note_id, "delivered", event="pre_tool_use")
