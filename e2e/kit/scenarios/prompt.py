"""PromptScenarios: what the `<harness> -p PROMPT` suites (Gemini CLI, Copilot CLI) share:
a test-picked session id, wiring by `preloop-hooks install`, the mock's script shape; and
PromptLocalMode, their local-mode-only scenario i."""

import json
import os

from ..common import KitError, shorten
from ..landing import first_landing
from .base import ScenarioFailure
from .modes import LocalMode
from .notes import RUN_PROMPT, NoteScenarios

__all__ = ["PromptLocalMode", "PromptScenarios"]


class PromptScenarios(NoteScenarios):
    """`<harness> -p PROMPT` headless (Gemini CLI, Copilot CLI) with the session id the test
    picks (--session-id), hooks wired by `preloop-hooks install --harness HARNESS --scope
    user`, the mock's script {"turns": [...]} (+ the overflow turn). PREREQ[HARNESS] is the
    harness binary."""

    def wire(self):
        """Our hooks into the sandbox's HOME the way a user wires them."""
        self.sb.install_hooks(self.HARNESS)
        self.wiring = "preloop-hooks install --harness %s --scope user" % self.HARNESS

    def run_turns(self, turns):
        return self.run_script({"turns": turns})

    def run_script(self, script, env=None, expect_rc=0):
        """Start the mock with `script`, wire, run (env: added to the harness's environment)."""
        try:
            self.sb.start_mock(dict({"overflow": {"text": self.OVERFLOW}}, **script), self.HARNESS)
            self.wire()
        except KitError as e:
            raise ScenarioFailure(self.report("setup failed: %s" % e))
        try:
            self.run_result = getattr(self.sb, "run_" + self.HARNESS)(
                self.PREREQ[self.HARNESS], RUN_PROMPT, session_id=self.sid, env=env)
        finally:
            self.sb.mock.stop()
        run = self.run_result
        self.check(not run.timed_out and run.rc == expect_rc,
                   "%s -p did not finish as expected (rc=%s, want %s, timed out=%s)"
                   % (self.HARNESS, run.rc, expect_rc, run.timed_out))
        return run

    def run_lines(self, run):
        return ["%s %s: %s" % (self.HARNESS, name, shorten(text, n))
                for name, text, n in (("stdout", run.stdout, 600), ("stderr", run.stderr, 900))]

    def check_delivered_first(self, hits, where, want, why):
        """The earliest landing is at `where(first)` == want (else: `why`, and where it was)."""
        first = first_landing(hits)
        self.check(first is not None, "the note never reached the model")
        self.check(where(first) == want, "first seen at %s, want %s" % (first.short(), why))
        return first


class PromptLocalMode(LocalMode):
    """Local mode for PromptScenarios: i, our own stop-hook block coming back as the
    prompt hook's prompt (a continuation), does not title the session."""

    def test_i_continuation_prompt_does_not_title_the_session(self):
        self.start("i: our %s block comes back as the prompt hook's prompt" % self.RESCUER)
        body = "%s Late note." % self.token("I")
        run = self.run_turns([self.text_turn("All done.", before_reply_cmd=self.note_to_run_argv(body)),
                              self.text_turn("Noted.")])
        note_id = self.sent_in_turn(run, 0)["note_id"]
        self.check(len(run.requests) == 2, "%d requests, want 2 (one rescue)" % len(run.requests))
        self.check_receipt(note_id, "delivered", event="stop")
        with open(os.path.join(self.sb.preloop_home, "sessions", "%s.json" % self.sid)) as f:
            sess = json.load(f)
        self.check(sess.get("title") == RUN_PROMPT,
                   "session title is %r, want the prompt %r" % (sess.get("title"), RUN_PROMPT))
