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
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit  # noqa: E402

CLAUDE = None
BIN_DIR = None

PROMPT = "Run echo hi"
BASH_TURN = {"content": [{"type": "text", "text": "Running it."},
                         {"type": "tool_use", "name": "Bash",
                          "input": {"command": "echo hi", "description": "say hi"}}]}
TERMINAL_STATES = {"delivered", "expired", "cancelled", "undeliverable"}
STOP_LABELS = {kit.LABEL_STOP_CONTEXT, kit.LABEL_STOP_FEEDBACK}
FRAMING_HUMAN_START = "The block below is an instruction from the human operating this agent"


def setUpModule():
    global CLAUDE, BIN_DIR
    CLAUDE = kit.ensure_claude()
    BIN_DIR = kit.build_binaries()


def text_turn(text, **extra):
    return dict({"content": [{"type": "text", "text": text}]}, **extra)


def new_token(tag):
    return "E2E-%s-%s" % (tag, uuid.uuid4().hex[:10])


def is_stop_label(label):
    return label in STOP_LABELS or (label or "").startswith(kit.LABEL_STOP_BLOCKING_PREFIX)


class ScenarioFailure(AssertionError):
    pass


class _ClaudeCodeScenarios:
    """Mixed into one TestCase per model (wire shape)."""

    MODEL = None            # None = Claude Code's default model
    MODEL_NAME = "default"
    CONTEXT_SHAPE = None    # where SessionStart / PreToolUse context lands for this model

    # ------------------------------------------------------------------ plumbing
    def setUp(self):
        self.sb = None
        self.scenario = None
        self.run_result = None
        self.receipts = {}
        self.markers = []
        self.note_ids = []

    def start(self, scenario):
        self.scenario = "%s [model=%s]" % (scenario, self.MODEL_NAME)
        self.sb = kit.Sandbox("%s-%s" % (scenario.split(":")[0], self.MODEL_NAME), BIN_DIR, CLAUDE)
        self.addCleanup(self.sb.close)
        self.sb.write_settings()
        return self.sb

    def report(self, msg):
        sb, run = self.sb, self.run_result
        out = ["", "SCENARIO %s: %s" % (self.scenario, msg)]
        if sb:
            sb.keep = True
            out.append("artifacts kept in %s (requests.jsonl, claude.debug.log, cmdline.txt, "
                       "home/, preloop-home/)" % sb.root)
        if run:
            out.append("claude rc=%s timed_out=%s duration=%ss model requests=%d"
                       % (run.rc, run.timed_out, run.duration_s, len(run.requests)))
            out.append("claude stdout: " + kit.shorten(run.stdout, 600))
            if run.stderr.strip():
                out.append("claude stderr: " + kit.shorten(run.stderr, 600))
            for br in run.before_reply():
                out.append("mock before_reply_cmd: argv=%s rc=%s stdout=%s stderr=%s%s" % (
                    kit.shorten(" ".join(br.get("argv", [])), 300), br.get("rc"),
                    kit.shorten(br.get("stdout", ""), 300), kit.shorten(br.get("stderr", ""), 300),
                    (" error=" + br["error"]) if br.get("error") else
                    (" skipped=" + br["skipped"]) if br.get("skipped") else ""))
        for nid in self.note_ids:
            try:
                r = sb.note_status(nid)   # fresh: the state now, not when last checked
            except Exception as e:   # noqa: BLE001 -- a dump must not hide the failure
                r = self.receipts.get(nid) or "unreadable: %s" % e
            out.append("receipt %s: %s" % (nid, json.dumps(r, ensure_ascii=False)))
        if run:
            out.append("model requests (shortened; markers: %s):" % ", ".join(self.markers))
            out.append(kit.summarize_requests(run.requests, self.markers))
        if sb:
            lines = sb.debug_log_hook_lines()
            if lines:
                out.append("hook lines from claude.debug.log:")
                out.extend("  " + l for l in lines)
            lines = sb.preloop_log_lines()
            if lines:
                out.append("PRELOOP_HOME/log:")
                out.extend("  " + l for l in lines)
        return "\n".join(out)

    def check(self, cond, msg):
        if not cond:
            raise ScenarioFailure(self.report(msg))

    def run_claude(self, sid, script):
        self.sb.start_mock(script)
        try:
            self.run_result = self.sb.run_claude(PROMPT, sid, model=self.MODEL)
        finally:
            self.sb.mock.stop()
        run = self.run_result
        self.check(not run.timed_out and run.rc == 0,
                   "claude -p did not finish cleanly (rc=%s, timed out=%s)" % (run.rc, run.timed_out))
        self.check(isinstance(run.output, dict) and not run.output.get("is_error"),
                   "claude -p --output-format json did not report success")
        return run

    def send_before_start(self, sid, body):
        try:
            sent = self.sb.send_note(sid, body)
        except kit.KitError as e:
            raise ScenarioFailure(self.report("sending the note failed: %s" % e))
        self.check(isinstance(sent, dict) and sent.get("note_id"),
                   "`notes send --json` printed no note_id: %r" % (sent,))
        self.note_ids.append(sent["note_id"])
        return sent["note_id"]

    def sent_in_turn(self, run, turn):
        """The note id printed by the before_reply_cmd the mock ran for `turn`."""
        recs = [r for r in run.records if r.get("before_reply")
                and r.get("reply", {}).get("turn") == turn and not r["before_reply"].get("skipped")]
        self.check(recs, "the mock never ran the before_reply_cmd of turn %d "
                         "(the conversation did not reach that turn)" % turn)
        br = recs[0]["before_reply"]
        self.check(br.get("rc") == 0, "`%s` (run by the mock before answering turn %d) "
                   "exited %s" % (" ".join(br["argv"]), turn, br.get("rc")))
        try:
            sent = json.loads(br.get("stdout", ""))
        except ValueError:
            sent = None
        self.check(isinstance(sent, dict) and sent.get("note_id"),
                   "`%s` printed no JSON with note_id: %r" % (" ".join(br["argv"]), br.get("stdout")))
        self.note_ids.append(sent["note_id"])
        return sent["note_id"]

    def receipt(self, note_id, wait_for=TERMINAL_STATES, timeout=8.0):
        try:
            r = self.sb.wait_note_state(note_id, wait_for, timeout=timeout)
        except kit.KitError as e:
            raise ScenarioFailure(self.report("reading the receipt failed: %s" % e))
        self.receipts[note_id] = r
        return r

    def check_receipt(self, note_id, state, event=None, reason=None):
        r = self.receipt(note_id)
        self.check(r.get("note_id") == note_id, "receipt note_id is %r, want %r"
                   % (r.get("note_id"), note_id))
        self.check(r.get("state") == state, "receipt state is %r, want %r" % (r.get("state"), state))
        if event is not None:
            self.check(r.get("delivery_event") == event, "receipt delivery_event is %r, want %r"
                       % (r.get("delivery_event"), event))
        if reason is not None:
            self.check(r.get("undeliverable_reason") == reason,
                       "receipt undeliverable_reason is %r, want %r"
                       % (r.get("undeliverable_reason"), reason))
        return r

    def check_framed(self, hit, note_id, body):
        """Scenario e (applied to every delivered note): the text is a full
        <operator-notes count="1" source="preloop-control-plane"> block holding exactly
        this note (id attribute = the note id, body verbatim)."""
        blocks = [b for b in kit.note_blocks(hit.text) if any(e["id"] == note_id for e in b[2])]
        self.check(blocks, "no complete <operator-notes count=.. source=\"preloop-control-plane\">"
                           "...</operator-notes> block holding note %s found in: %r"
                   % (note_id, kit.shorten(hit.text, 1500)))
        block, count, elements = blocks[0]
        self.check(count == 1 and len(elements) == 1,
                   "block has count=%d and %d <operator-note> elements, want 1 and 1: %r"
                   % (count, len(elements), kit.shorten(block, 1500)))
        self.check(elements[0]["body"] == body, "note body in the block is %r, want %r"
                   % (elements[0]["body"], body))
        return block, elements[0]

    def token(self, tag):
        """A unique marker to put in a note body (listed in failure dumps)."""
        t = new_token(tag)
        self.markers.append(t)
        return t

    def hits_for(self, run, marker):
        return kit.find_marker(run.requests, marker)

    def describe_hits(self, hits):
        return "; ".join(h.short(160) for h in hits) or "nowhere"

    # ------------------------------------------------------------------ scenarios
    def test_a_note_before_start_reaches_first_request(self):
        sb = self.start("a: note sent before start")
        sid = kit.new_session_id()
        tok = self.token("A")
        body = "%s Before you start, print the working directory too." % tok
        note_id = self.send_before_start(sid, body)
        run = self.run_claude(sid, {"turns": [BASH_TURN, text_turn("All done.")]})

        hits = self.hits_for(run, tok)
        first = kit.first_hit(hits)
        self.check(first is not None, "the note never reached the model")
        self.check(first.request_index == 0,
                   "first seen in request #%d, want #0: %s" % (first.request_index, first.short()))
        self.check(first.label == kit.LABEL_SESSION_START,
                   "label is %r, want %r" % (first.label, kit.LABEL_SESSION_START))
        self.check(first.shape == self.CONTEXT_SHAPE,
                   "wire shape is %r, want %r for this model" % (first.shape, self.CONTEXT_SHAPE))
        others = [h for h in hits if h.label != kit.LABEL_SESSION_START]
        self.check(not others, "delivered more than once / under another label: %s"
                   % self.describe_hits(others))
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no Stop rescue when "
                                           "nothing is pending)" % len(run.requests))
        self.check_framed(first, note_id, body)
        self.check_receipt(note_id, "delivered", event="session_start")

    def test_b_note_mid_run_reaches_request_after_tool_call(self):
        sb = self.start("b: note sent mid-run")
        sid = kit.new_session_id()
        tok = self.token("B")
        body = "%s Mid-run: after this command, stop and summarise." % tok
        run = self.run_claude(sid, {"turns": [
            dict(BASH_TURN, before_reply_cmd=sb.send_note_argv(sid, body)),
            text_turn("All done.")]})
        note_id = self.sent_in_turn(run, 0)

        hits = self.hits_for(run, tok)
        first = kit.first_hit(hits)
        self.check(first is not None, "the note never reached the model")
        self.check(first.request_index == 1, "first seen in request #%d, want #1 (the one after "
                                             "the Bash tool call): %s"
                   % (first.request_index, first.short()))
        self.check(first.label == kit.LABEL_PRE_TOOL_USE_BASH,
                   "label is %r, want %r" % (first.label, kit.LABEL_PRE_TOOL_USE_BASH))
        self.check(first.shape == self.CONTEXT_SHAPE,
                   "wire shape is %r, want %r for this model" % (first.shape, self.CONTEXT_SHAPE))
        others = [h for h in hits if h.label != kit.LABEL_PRE_TOOL_USE_BASH]
        self.check(not others, "delivered more than once / under another label: %s"
                   % self.describe_hits(others))
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no Stop rescue when "
                                           "nothing is pending)" % len(run.requests))
        self.check_framed(first, note_id, body)
        self.check_receipt(note_id, "delivered", event="pre_tool_use")

    def test_c_note_after_last_tool_call_rescued_by_stop(self):
        sb = self.start("c: note sent after the last tool call")
        sid = kit.new_session_id()
        tok = self.token("C")
        body = "%s Late note: also mention the exit code." % tok
        run = self.run_claude(sid, {"turns": [
            BASH_TURN,
            text_turn("All done.", before_reply_cmd=sb.send_note_argv(sid, body)),
            text_turn("Noted the operator note.")]})
        note_id = self.sent_in_turn(run, 1)

        hits = self.hits_for(run, tok)
        first = kit.first_hit(hits)
        self.check(first is not None, "the note never reached the model (no Stop rescue)")
        self.check(len(run.requests) == 3, "%d model requests, want 3 (exactly one extra "
                                           "request from the Stop rescue)" % len(run.requests))
        self.check(first.request_index == 2,
                   "first seen in request #%d, want #2: %s" % (first.request_index, first.short()))
        stop_hits = [h for h in hits if is_stop_label(h.label)]
        self.check(stop_hits, "not under a Stop label (%s): %s"
                   % (sorted(STOP_LABELS), self.describe_hits(hits)))
        others = [h for h in hits if not is_stop_label(h.label)]
        self.check(not others, "also delivered under another label: %s" % self.describe_hits(others))
        self.check_framed(stop_hits[0], note_id, body)
        self.check_receipt(note_id, "delivered", event="stop")

    def test_d_note_pending_at_end_is_undeliverable_session_ended(self):
        sb = self.start("d: note still pending when the run ends")
        sid = kit.new_session_id()
        tok_a, tok_b = self.token("D1"), self.token("D2")
        body_a = "%s Late note that Stop rescues." % tok_a
        body_b = "%s Note sent during the rescue turn, too late." % tok_b
        run = self.run_claude(sid, {"turns": [
            BASH_TURN,
            text_turn("All done.", before_reply_cmd=sb.send_note_argv(sid, body_a)),
            text_turn("Noted.", before_reply_cmd=sb.send_note_argv(sid, body_b)),
        ], "overflow": text_turn("Nothing more to do.")})
        note_a = self.sent_in_turn(run, 1)
        note_b = self.sent_in_turn(run, 2)   # fails if there was no rescue turn

        self.check(len(run.requests) == 3, "%d model requests, want 3 (one Stop rescue, then "
                                           "stop_hook_active=true ends the run)" % len(run.requests))
        hits_b = self.hits_for(run, tok_b)
        self.check(not hits_b, "the note sent during the rescue turn reached the model: %s"
                   % self.describe_hits(hits_b))
        self.check(self.hits_for(run, tok_a), "the rescued note (prerequisite) is not in any request")
        self.check_receipt(note_a, "delivered", event="stop")
        self.check_receipt(note_b, "undeliverable", reason="session_ended")

    def test_e_operator_note_framing(self):
        self.start("e: operator note framing")
        sid = kit.new_session_id()
        tok = self.token("E")
        body = ('%s Framing check: "quotes", & ampersand, <b>angle</b> brackets, '
                'ünïcödé.\nSecond line.' % tok)
        note_id = self.send_before_start(sid, body)
        run = self.run_claude(sid, {"turns": [BASH_TURN, text_turn("All done.")]})

        first = kit.first_hit(self.hits_for(run, tok))
        self.check(first is not None, "the note never reached the model")
        self.check(first.label == kit.LABEL_SESSION_START,
                   "label is %r, want %r" % (first.label, kit.LABEL_SESSION_START))
        after_label = first.text[len(first.label):]
        self.check(after_label.startswith(
            '<operator-notes count="1" source="preloop-control-plane">\n'),
            "the text after the label does not start with the block's opening tag: %r"
            % kit.shorten(after_label, 600))
        block, element = self.check_framed(first, note_id, body)
        self.check(after_label.startswith(block), "the block is not the whole hook context "
                   "(text right after the label: %r)" % kit.shorten(after_label, 1500))
        framing = block.split("\n")[1]
        self.check(framing.startswith(FRAMING_HUMAN_START),
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
        sid = kit.new_session_id()
        tok = self.token("F")
        body = "%s For whichever Claude Code session starts next." % tok
        try:
            sent = sb.cli_json("notes", "send", "--harness", "claude-code", "--next-session",
                               "--json", body)
        except kit.KitError as e:
            raise ScenarioFailure(self.report("sending the note failed: %s" % e))
        self.check(isinstance(sent, dict) and sent.get("note_id"),
                   "`notes send --harness claude-code --next-session --json` printed no note_id: %r"
                   % (sent,))
        note_id = sent["note_id"]
        self.note_ids.append(note_id)
        run = self.run_claude(sid, {"turns": [BASH_TURN, text_turn("All done.")]})

        first = kit.first_hit(self.hits_for(run, tok))
        self.check(first is not None, "the note never reached the model")
        self.check(first.request_index == 0 and first.label == kit.LABEL_SESSION_START,
                   "first seen as %s, want request #0 under %r"
                   % (first.short(), kit.LABEL_SESSION_START))
        self.check_framed(first, note_id, body)
        self.check_receipt(note_id, "delivered", event="session_start")
        try:
            notes = sb.cli_json("notes", "list", "--session", sid, "--json")
            sessions = sb.cli_json("sessions", "list", "--json")
        except kit.KitError as e:
            raise ScenarioFailure(self.report("listing failed: %s" % e))
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


class TestClaudeCodeDefaultModel(_ClaudeCodeScenarios, unittest.TestCase):
    """Claude Code's default model (claude-opus-5-5): hook text arrives in role:"system"
    messages."""
    MODEL = kit.MODEL_DEFAULT
    MODEL_NAME = "default"
    CONTEXT_SHAPE = "system_message"


class TestClaudeCodeSonnet45(_ClaudeCodeScenarios, unittest.TestCase):
    """--model claude-sonnet-4-5-20250929: hook text arrives as <system-reminder> text
    blocks in user messages."""
    MODEL = kit.MODEL_SONNET_45
    MODEL_NAME = "sonnet-4-5"
    CONTEXT_SHAPE = "system_reminder"


if __name__ == "__main__":
    unittest.main()
