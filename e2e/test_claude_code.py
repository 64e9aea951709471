"""End-to-end: the real Claude Code 2.1.328 CLI, headless, against mock_anthropic.py,
with the project's hook binaries in $HOME/.claude/settings.json, in local mode
(PRELOOP_HOME is a temp dir; no PRELOOP_URL / PRELOOP_TOKEN).

Scenarios (each runs once per wire shape, see the two TestCase classes at the end):
  a  note sent before the run starts  -> first model request, SessionStart label;
     receipt delivered / session_start
  b  note sent mid-run (while the mock answers request 0 with Bash `echo hi`)
     -> request 1 (after the tool call), PreToolUse:Bash label; receipt delivered /
     pre_tool_use
  c  note sent after the last tool call (while the mock answers the final text turn)
     -> rescued by Stop: exactly one extra request holding it; receipt delivered / stop
  d  note sent during that Stop-rescue extra turn (stop_hook_active is then true, no
     second rescue) -> never reaches the model; receipt undeliverable / session_ended
  e  framing: the text the model gets is a full
     <operator-notes count="1" source="preloop-control-plane"> block with the note body
  f  (extra) a note for "the next claude-code session" (--harness claude-code
     --next-session) -> first request; `notes list --session` / `sessions list` show them

Run from the repository root:
  python3 -m unittest discover -s e2e -p 'test_*.py' -v
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

PREREQ = kit.Prereq()


def setUpModule():
    PREREQ.get("claude", kit.ensure_claude)
    PREREQ.get("bin_dir", kit.build_binaries)


class _LocalClaudeScenarios(kit.ClaudeScenarios, kit.LocalMode):
    """Scenarios a-d (kit.ClaudeScenarios) in local mode, plus e and f; mixed into one
    TestCase per model (wire shape)."""

    PREREQ = PREREQ
    TOKEN_PREFIX = "E2E"

    def test_e_operator_note_framing(self):
        self.start("e: operator note framing")
        tok = self.token("E")
        body = ('%s Framing check: "quotes", & ampersand, <b>angle</b> brackets, '
                'ünïcödé.\nSecond line.' % tok)
        note_id = self.send_before_start(body)["note_id"]
        run = self.run_turns([self.shell_turn(), self.text_turn("All done.")])

        first = kit.first_hit(self.landings(run.requests, tok))
        self.check(first is not None, "the note never reached the model")
        self.check(first.label == kit.LABEL_SESSION_START,
                   "label is %r, want %r" % (first.label, kit.LABEL_SESSION_START))
        after_label = first.text[len(first.label):]
        self.check(after_label.startswith(
            '<operator-notes count="1" source="preloop-control-plane">\n'),
            "the text after the label does not start with the block's opening tag: %r"
            % kit.shorten(after_label, 600))
        block, element = self.check_block(first.text, note_id, body)
        self.check(after_label.startswith(block), "the block is not the whole hook context "
                   "(text right after the label: %r)" % kit.shorten(after_label, 1500))
        framing = block.split("\n")[1]
        self.check(framing.startswith(kit.FRAMING_HUMAN),
                   "framing sentence for a note sent by a human operator is %r" % framing)
        self.check(element["from"] and element["auth"] and element["at"],
                   "empty attribute in %r" % block.split("\n")[2])
        self.check(len(element["at"]) >= 20 and element["at"][4] == "-" and "T" in element["at"],
                   "at=%r is not an ISO-8601 timestamp" % element["at"])

    def test_f_next_session_note_and_cli_listings(self):
        # Beyond a-e: `notes send --harness claude-code --next-session` reaches the first
        # request of the next session; `notes list --session` and `sessions list` show the
        # note and the session afterwards.
        sb = self.start("f: note for the next claude-code session")
        sid = self.sid
        tok = self.token("F")
        body = "%s For whichever Claude Code session starts next." % tok
        try:
            sent = sb.cli_json("notes", "send", "--harness", "claude-code", "--next-session",
                               "--json", body)
        except kit.KitError as e:
            raise kit.ScenarioFailure(self.report("sending the note failed: %s" % e))
        self.check(isinstance(sent, dict) and sent.get("note_id"),
                   "`notes send --harness claude-code --next-session --json` printed no note_id: %r"
                   % (sent,))
        note_id = self.add_sent(sent, "`notes send --harness claude-code --next-session --json`")["note_id"]
        run = self.run_turns([self.shell_turn(), self.text_turn("All done.")])

        first = kit.first_hit(self.landings(run.requests, tok))
        self.check(first is not None, "the note never reached the model")
        self.check(first.request_index == 0 and first.label == kit.LABEL_SESSION_START,
                   "first seen as %s, want request #0 under %r"
                   % (first.short(), kit.LABEL_SESSION_START))
        self.check_block(first.text, note_id, body)
        self.check_receipt(note_id, "delivered", event="session_start")
        try:
            notes = sb.cli_json("notes", "list", "--session", sid, "--json")
            sessions = sb.cli_json("sessions", "list", "--json")
        except kit.KitError as e:
            raise kit.ScenarioFailure(self.report("listing failed: %s" % e))
        listed = find_objects(notes, "note_id", note_id)
        self.check(listed and listed[0].get("state") == "delivered",
                   "`notes list --session %s --json` does not show the note as delivered: %s"
                   % (sid, kit.shorten(json.dumps(notes), 1500)))
        self.check(find_objects(sessions, "external_session_id", sid),
                   "`sessions list --json` does not show session %s: %s"
                   % (sid, kit.shorten(json.dumps(sessions), 1500)))


def find_objects(doc, key, value):
    """Every dict anywhere in a JSON document whose `key` equals `value`."""
    out = []
    if isinstance(doc, dict):
        if doc.get(key) == value:
            out.append(doc)
        for v in doc.values():
            out += find_objects(v, key, value)
    elif isinstance(doc, list):
        for v in doc:
            out += find_objects(v, key, value)
    return out


class TestClaudeCodeDefaultModel(_LocalClaudeScenarios, unittest.TestCase):
    """Claude Code's default model (claude-opus-5-5): hook text arrives in role:"system"
    messages."""
    MODEL = kit.MODEL_DEFAULT
    MODEL_NAME = "default"
    CONTEXT_SHAPE = "system_message"


class TestClaudeCodeSonnet45(_LocalClaudeScenarios, unittest.TestCase):
    """--model claude-sonnet-4-5-20250929: hook text arrives as <system-reminder> text
    blocks in user messages."""
    MODEL = kit.MODEL_SONNET_45
    MODEL_NAME = "sonnet-4-5"
    CONTEXT_SHAPE = "system_reminder"


if __name__ == "__main__":
    unittest.main()
