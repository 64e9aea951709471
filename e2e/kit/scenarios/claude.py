"""ClaudeScenarios: Claude Code `claude -p` against mock_anthropic.py, one TestCase per
model (wire shape), and where a note must land in scenarios a-c."""

from ..claude import (LABEL_PRE_TOOL_USE_BASH, LABEL_SESSION_START, STOP_LABELS, bash_turn,
                      find_marker, first_hit, is_stop_label, text_turn)
from ..common import KitError
from .base import ScenarioFailure
from .notes import RUN_PROMPT, NoteScenarios

__all__ = ["ClaudeScenarios"]


class ClaudeScenarios(NoteScenarios):
    """Claude Code 2.1.328 `claude -p` against mock_anthropic.py, one TestCase per model
    (wire shape: MODEL, MODEL_NAME, CONTEXT_SHAPE), with the scenarios a-d:
      a  note before start -> request #0 under the SessionStart label, once
      b  note sent while the mock answers request #0 (a Bash call) -> request #1 under
         the PreToolUse:Bash label
      c  note sent while the mock answers the final text turn -> one Stop rescue request
      d  as c, plus a note during the rescue turn -> never delivered, session_ended
    WIRING: "settings" (kit.Sandbox.write_settings) or "install" (`preloop-hooks install`)."""

    HARNESS = "claude"
    MODEL = None
    MODEL_NAME = "default"
    CONTEXT_SHAPE = None
    WIRING = "settings"
    PREREQS = ("claude", "bin_dir")
    ARTIFACTS = "requests.jsonl, claude.debug.log, cmdline.txt, home/, preloop-home/"
    FIND_MARKER = staticmethod(find_marker)

    def label(self):
        return "%s, model=%s" % (self.MODE, self.MODEL_NAME)

    def start(self, scenario, server=None):
        sb = NoteScenarios.start(self, scenario, server)
        try:
            if self.WIRING == "install":
                how = sb.install_hooks("claude-code")
                self.wiring = {"install": "preloop-hooks install --harness claude-code --scope user",
                               "kit": "kit.Sandbox.write_settings (no `install` in this build)"}[how]
            else:
                sb.write_settings()
                self.wiring = "kit.Sandbox.write_settings"
        except KitError as e:
            raise ScenarioFailure(self.report("setup failed: %s" % e))
        return sb

    def shell_turn(self, command="echo hi", **extra):
        return bash_turn(command, **extra)

    def text_turn(self, text, **extra):
        return text_turn(text, **extra)

    def run_turns(self, turns):
        return self.run_claude({"turns": turns, "overflow": text_turn(self.OVERFLOW)})

    def run_claude(self, script):
        self.sb.start_mock(script)
        try:
            self.run_result = self.sb.run_claude(RUN_PROMPT, self.sid, model=self.MODEL)
        finally:
            self.sb.mock.stop()
        run = self.run_result
        self.check(not run.timed_out and run.rc == 0,
                   "claude -p did not finish cleanly (rc=%s, timed out=%s)" % (run.rc, run.timed_out))
        self.check(isinstance(run.output, dict) and not run.output.get("is_error"),
                   "claude -p --output-format json did not report success")
        return run

    def harness_log_lines(self):
        lines = self.sb.debug_log_hook_lines()
        return ["hook lines from claude.debug.log:"] + ["  " + l for l in lines] if lines else []

    def expect_delivered_once(self, run, tok, note_id, body, request_index, label):
        """The note is first seen in request #request_index under `label`, in this
        model's wire shape, nowhere under another label, as a full block; 2 requests."""
        hits = self.landings(run.requests, tok)
        first = first_hit(hits)
        self.check(first is not None, "the note never reached the model")
        self.check(first.request_index == request_index, "first seen in request #%d, want #%d: %s"
                   % (first.request_index, request_index, first.short()))
        self.check(first.label == label, "label is %r, want %r" % (first.label, label))
        self.check(first.shape == self.CONTEXT_SHAPE,
                   "wire shape is %r, want %r for this model" % (first.shape, self.CONTEXT_SHAPE))
        others = [h for h in hits if h.label != label]
        self.check(not others, "delivered more than once / under another label: %s"
                   % self.describe_hits(others))
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no Stop rescue when "
                                           "nothing is pending)" % len(run.requests))
        self.check_block(first.text, note_id, body)
        return first

    # ------------------------------------------------------------------ scenarios a-c (d: NoteScenarios)
    def test_a_note_before_start_reaches_first_request(self):
        run, tok, note_id, body = self.run_scenario_a()
        self.expect_delivered_once(run, tok, note_id, body, 0, LABEL_SESSION_START)
        self.check_receipt(note_id, "delivered", event="session_start")

    def test_b_note_mid_run_reaches_request_after_tool_call(self):
        run, tok, note_id, body = self.run_scenario_b()
        self.expect_delivered_once(run, tok, note_id, body, 1, LABEL_PRE_TOOL_USE_BASH)
        self.check_receipt(note_id, "delivered", event="pre_tool_use")

    def test_c_note_after_last_tool_call_rescued_by_stop(self):
        run, hits, first, note_id, body = self.run_scenario_c()
        self.check(first.request_index == 2,
                   "first seen in request #%d, want #2: %s" % (first.request_index, first.short()))
        stop_hits = [h for h in hits if is_stop_label(h.label)]
        self.check(stop_hits, "not under a Stop label (%s): %s"
                   % (sorted(STOP_LABELS), self.describe_hits(hits)))
        others = [h for h in hits if not is_stop_label(h.label)]
        self.check(not others, "also delivered under another label: %s" % self.describe_hits(others))
        self.check_block(stop_hits[0].text, note_id, body)
        self.check_receipt(note_id, "delivered", event="stop")
