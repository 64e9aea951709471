"""NoteScenarios: the four conversations (a-d) every harness runs in every mode, written once
against the harness mixin's turns (shell_turn, text_turn, run_turns) and marker search."""

import os
import time

from ..common import new_session_id, shorten
from .base import Scenario

__all__ = ["RUN_PROMPT", "NoteScenarios"]

RUN_PROMPT = "Run echo hi"           # the prompt of the Claude Code, Gemini and Copilot runs


class NoteScenarios(Scenario):
    """The four conversations every harness runs, in every mode:
      a  a note sent before the run starts (then a shell call and a text turn)
      b  a note to the run sent while the mock answers request #0 with a shell call
      c  a note to the run sent while the mock answers the final text turn: the harness's
         stop hook (RESCUER) rescues it with one extra request
      d  as c, plus a note sent during that rescue turn: no second rescue, the second note
         reaches no request and ends undeliverable / session_ended
    run_scenario_a/b/c set a-c up and run them; where the note must land is the harness's
    own test (test_a_..., test_b_..., test_c_...). d is the same for every harness and runs
    here. A harness's class states its turns (shell_turn, text_turn, run_turns) and how a
    marker is found (FIND_MARKER)."""

    RESCUER = "Stop"            # the hook that rescues a note still pending at the end
    FIND_MARKER = None          # staticmethod (requests, marker) -> [hit], e.g. find_marker
    OVERFLOW = "Nothing more to do."
    PICKS_SESSION = True        # the test picks the run's session id (--session-id)

    def start(self, scenario, server=None):
        """A sandbox for `scenario` (server: ServerMode's client of another account); the
        run's session id is picked here when the harness takes one (PICKS_SESSION)."""
        self.server_override = server
        self.new_sandbox(scenario)
        if self.PICKS_SESSION:
            self.sid = new_session_id()
        return self.sb

    def shell_turn(self, command="echo hi", **extra):
        """A mock turn answering with the harness's shell tool running `command`."""
        raise NotImplementedError

    def text_turn(self, text, **extra):
        """A text-only mock turn (the mock's script shape for the harness)."""
        return dict({"text": text}, **extra)

    def run_turns(self, turns):
        """Run the harness against a mock answering `turns` (then OVERFLOW)."""
        raise NotImplementedError

    def landings(self, requests, marker):
        return self.FIND_MARKER(requests, marker)

    def describe_hits(self, hits):
        return "; ".join(h.short(160) if hasattr(h, "short") else shorten(repr(h), 200)
                         for h in hits) or "nowhere"

    def run_scenario_a(self):
        """a: (run, marker, note_id, body)."""
        self.start("a: note sent before the run starts")
        tok = self.token("A")
        body = "%s Before you start, print the working directory too." % tok
        note_id = self.send_before_start(body)["note_id"]
        return self.run_turns([self.shell_turn(), self.text_turn("All done.")]), tok, note_id, body

    def run_scenario_b(self, shell=None):
        """b, the note sent while the mock answers `shell` (default shell_turn()):
        (run, marker, note_id, body)."""
        self.start("b: note to the run sent mid-run")
        tok = self.token("B")
        body = "%s Mid-run: after this command, stop and summarise." % tok
        run = self.run_turns([dict(shell or self.shell_turn(), before_reply_cmd=self.note_to_run_argv(body)),
                              self.text_turn("All done.")])
        return run, tok, self.sent_in_turn(run, 0)["note_id"], body

    def run_scenario_c(self):
        """c: (run, hits, first hit, note_id, body), after checking that the note reached
        the model and that there was exactly one extra request."""
        self.start("c: note to the run sent after the last tool call")
        tok = self.token("C")
        body = "%s Late note: also mention the exit code." % tok
        run = self.run_turns([
            self.shell_turn(),
            self.text_turn("All done.", before_reply_cmd=self.note_to_run_argv(body)),
            self.text_turn("Noted the operator note.")])
        note_id = self.sent_in_turn(run, 1)["note_id"]
        hits = self.landings(run.requests, tok)
        self.check(hits, "the note never reached the model (no %s rescue)" % self.RESCUER)
        self.check(len(run.requests) == 3, "%d model requests, want 3 (exactly one extra request from "
                                           "the %s rescue)" % (len(run.requests), self.RESCUER))
        return run, hits, min(hits, key=_landing_order), note_id, body

    def test_d_note_pending_at_end_is_undeliverable_session_ended(self):
        self.start("d: note to the run still pending when the run ends")
        tok_a, tok_b = self.token("D1"), self.token("D2")
        body_a = "%s Late note that %s rescues." % (tok_a, self.RESCUER)
        body_b = "%s Note sent during the rescue turn, too late." % tok_b
        run = self.run_turns([
            self.shell_turn(),
            self.text_turn("All done.", before_reply_cmd=self.note_to_run_argv(body_a)),
            self.text_turn("Noted.", before_reply_cmd=self.note_to_run_argv(body_b))])
        note_a = self.sent_in_turn(run, 1)["note_id"]
        note_b = self.sent_in_turn(run, 2)["note_id"]   # fails if there was no rescue turn
        self.check(len(run.requests) == 3, "%d model requests, want 3 (one %s rescue, then "
                                           "stop_hook_active ends the run)" % (len(run.requests), self.RESCUER))
        hits_b = self.landings(run.requests, tok_b)
        self.check(not hits_b, "the note sent during the rescue turn reached the model: %s"
                   % self.describe_hits(hits_b))
        self.check(self.landings(run.requests, tok_a), "the rescued note (prerequisite) is in no request")
        self.check_receipt(note_a, "delivered", event="stop")
        self.check_receipt(note_b, "undeliverable", reason="session_ended")
        self.check_run_end_names(note_b, body_b, note_a)

    def check_run_end_names(self, unread, body, shown):
        """#33 part 3: the run's end names the note it never read, where the operator looks:
        `notes list --undelivered --session` (with its text, not the note it showed),
        `sessions list`'s count (`undelivered_notes`) and the hook log's session-end line
        (`never_read=`, never the text); the same in both modes."""
        sid = self.run_result.session_id
        env = self.operator_env()
        listed = self.sb.cli_json("notes", "list", "--undelivered", "--session", sid, "--json", env=env)
        ids = [n.get("note_id") for n in listed.get("notes") or []]
        self.check(unread in ids and shown not in ids,
                   "`notes list --undelivered --session %s` lists %r, want %s and not %s" % (sid, ids, unread, shown))
        hit = next((n for n in listed.get("notes") or [] if n.get("note_id") == unread), {})
        self.check(hit.get("text") == body and hit.get("undeliverable_reason") == "session_ended",
                   "`notes list --undelivered` shows %r, want its text and session_ended" % (hit,))
        rows = self.sb.cli_json("sessions", "list", "--json", env=env).get("sessions") or []
        row = next((r for r in rows if sid in (r.get("id"), r.get("external_session_id"))), None)
        self.check(row is not None and row.get("undelivered_notes") == 1,
                   "`sessions list --json` row of %s: %r, want undelivered_notes 1" % (sid, row))
        # The SessionEnd line (a detached worker may write it a moment after the end).
        log_path = os.path.join(self.sb.preloop_home, "log", "hooks.log")
        end_line = None
        for _ in range(50):
            lines = []
            if os.path.exists(log_path):
                with open(log_path, encoding="utf-8") as f:
                    lines = f.read().splitlines()
            end_line = next((l for l in reversed(lines) if "never_read=" in l), None)
            if end_line:
                break
            time.sleep(0.1)
        self.check(end_line and " never_read=1 " in end_line + " " and body not in end_line,
                   "the hook log's session-end line names no unread note: %r" % (end_line,))


def _landing_order(h):
    """Earliest first: a Hit, a Landing or a Codex (request, item, role, text) tuple."""
    if isinstance(h, tuple):
        return h[:2]
    return (h.request_index, getattr(h, "message_index", getattr(h, "index", 0)))
