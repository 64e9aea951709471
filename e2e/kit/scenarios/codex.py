"""CodexScenarios: Codex `codex exec` against mock_openai.py, wired by `preloop-hooks
install`, and where a note must land in scenarios a-c."""

import html

from ..codex import codex_find_marker, codex_segments
from ..common import KitError, shorten
from .base import Scenario, ScenarioFailure
from .notes import NoteScenarios

__all__ = ["CODEX_PROMPT", "CodexScenarios"]

CODEX_PROMPT = "say hi"


class CodexScenarios(NoteScenarios):
    """Codex 0.169.0 `codex exec` against mock_openai.py, hooks wired by `preloop-hooks
    install --harness codex --scope user` (hooks.json + trust entries in config.toml).
    Codex picks its own session id: notes to the run go through "@@SESSION@@" (the id the
    SessionStart hook registered). Scenarios a-d as for Claude Code:
      a  note before start -> request #0, a developer message before the user prompt
      b  note mid-run -> request #1, a developer message between the function_call and
         its output
      c  note after the last tool call -> request #2 ends with a user <hook_prompt
         hook_run_id="stop:..."> message (Codex HTML-escapes it)
      d  a note during the rescue turn -> in no request; undeliverable / session_ended"""

    HARNESS = "codex"
    PREREQS = ("codex", "bin_dir")
    ARTIFACTS = "requests.jsonl, codex.stdout, codex.stderr, cmdline.txt, codex-home/, preloop-home/"
    PICKS_SESSION = False
    FIND_MARKER = staticmethod(codex_find_marker)

    def shell_turn(self, command="echo hi", **extra):
        return dict({"calls": [{"cmd": command}]}, **extra)

    def run_turns(self, turns):
        return self.run_codex({"agents": [{"name": "main", "turns": turns,
                                           "overflow": {"text": self.OVERFLOW}}]})

    def run_codex(self, script, prompt=CODEX_PROMPT, approve_for_me=False, **kw):
        try:
            self.sb.start_mock(script, "openai")
            self.sb.write_codex_config(approve_for_me=approve_for_me)
            self.sb.install_hooks("codex")
            self.wiring = "preloop-hooks install --harness codex --scope user"
        except KitError as e:
            raise ScenarioFailure(self.report("setup failed: %s" % e))
        try:
            self.run_result = self.sb.run_codex(self.PREREQ["codex"], prompt,
                                                approve_for_me=approve_for_me, **kw)
        finally:
            self.sb.mock.stop()
        run = self.run_result
        self.check(not run.timed_out and run.rc == 0,
                   "codex exec did not finish cleanly (rc=%s, timed out=%s)" % (run.rc, run.timed_out))
        self.check(run.session_id, "no session file in PRELOOP_HOME/sessions: SessionStart registered nothing")
        return run

    def run_lines(self, run):
        hook_lines = [l for l in run.stderr.splitlines()
                      if l.startswith("hook: ") or "warning" in l.lower() or "error" in l.lower()]
        return ["codex stderr (hook status lines): " + " | ".join(hook_lines[-30:]),
                "codex stdout: " + shorten(run.stdout, 400)]

    def check_block(self, text, note_id, body):
        return Scenario.check_block(self, html.unescape(text), note_id, body)   # Codex escapes a Stop reason

    def first_hit(self, run, tok):
        hits = codex_find_marker(run.requests, tok)
        self.check(hits, "the note (%s) never reached the model" % tok)
        return hits[0], hits

    def check_once(self, hits):
        """Present in one input item only (later requests repeat the history)."""
        self.check(len({i for _, i, _, _ in hits}) == 1,
                   "delivered more than once: at (request, item, role) %s"
                   % [(n, i, role) for n, i, role, _ in hits])

    # ------------------------------------------------------------------ scenarios a-c (d: NoteScenarios)
    def test_a_note_before_start_reaches_first_request(self):
        run, tok, note_id, body = self.run_scenario_a()
        (n, i, role, txt), hits = self.first_hit(run, tok)
        self.check(n == 0 and role == "developer",
                   "first seen in request #%d item %d role %s, want request #0 in a developer message"
                   % (n, i, role))
        prompt_at = [j for j, r, t in codex_segments(run.requests[0])
                     if r == "user" and t.strip() == CODEX_PROMPT]
        self.check(prompt_at and i < prompt_at[0], "the SessionStart context (item %d) is not before "
                   "the user prompt (items %s)" % (i, prompt_at))
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no Stop rescue when nothing "
                                           "is pending)" % len(run.requests))
        self.check_block(txt, note_id, body)
        self.check_receipt(note_id, "delivered", event="session_start")

    def test_b_note_mid_run_reaches_request_after_tool_call(self):
        run, tok, note_id, body = self.run_scenario_b()
        (n, i, role, txt), hits = self.first_hit(run, tok)
        items = run.requests[n].get("input") or []
        self.check(n == 1 and role == "developer",
                   "first seen in request #%d role %s, want request #1 (after the tool ran), developer"
                   % (n, role))
        self.check(items[i - 1].get("type") == "function_call"
                   and any(it.get("type") == "function_call_output" for it in items[i + 1:]),
                   "the PreToolUse context (item %d) is not between the function_call and its output" % i)
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no Stop rescue)" % len(run.requests))
        self.check_block(txt, note_id, body)
        self.check_receipt(note_id, "delivered", event="pre_tool_use")

    def test_c_note_after_last_tool_call_rescued_by_stop(self):
        run, hits, (n, i, role, txt), note_id, body = self.run_scenario_c()
        self.check(n == 2 and role == "user" and txt.startswith("<hook_prompt hook_run_id=\"stop:"),
                   "first seen in request #%d role %s as %r, want request #2, a user <hook_prompt "
                   "hook_run_id=\"stop:...\"> message" % (n, role, shorten(txt, 200)))
        self.check(i == len(run.requests[2].get("input") or []) - 1,
                   "the Stop reason (item %d) is not the last item of request #2" % i)
        self.check_once(hits)
        self.check_block(txt, note_id, body)
        self.check_receipt(note_id, "delivered", event="stop")
