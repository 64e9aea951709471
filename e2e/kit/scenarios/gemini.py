"""GeminiScenarios: Gemini CLI `gemini -p` against mock_gemini.py, and where a note must
land in scenarios a and c (the bracket block of the SessionStart context, the AfterAgent
rescue)."""

from ..blocks import FRAMING_HUMAN, bracket_blocks
from ..common import shorten
from ..gemini import gemini_escaped, gemini_find_marker
from .notes import RUN_PROMPT
from .prompt import PromptScenarios

__all__ = ["GeminiScenarios"]


class GeminiScenarios(PromptScenarios):
    """Gemini CLI 0.61.0 `gemini -p` against mock_gemini.py with our hooks; scenarios a, c
    and d for every mode (b differs: local AfterTool carries the note, the server's
    BeforeTool holds the call)."""

    HARNESS = "gemini"
    PREREQS = ("bin_dir", "install_gemini", "gemini")
    ARTIFACTS = "requests.jsonl, gemini.stdout, gemini.stderr, cmdline.txt, home/.gemini/, preloop-home/"
    RESCUER = "AfterAgent"
    FIND_MARKER = staticmethod(gemini_find_marker)

    def shell_turn(self, command="echo hi", **extra):
        return dict({"calls": [{"name": "run_shell_command", "args": {"command": command}}]}, **extra)

    def wire(self):
        """After the kit's base settings (API-key auth for the mock)."""
        self.sb.write_gemini_settings()
        PromptScenarios.wire(self)

    def run_script(self, script, env=None, expect_rc=0):
        run = PromptScenarios.run_script(self, script, env, expect_rc)
        self.check((run.output or {}).get("session_id") == self.sid, "gemini did not use --session-id")
        return run

    def check_once(self, hits):
        places = sorted({(h.index, h.path) for h in hits})
        self.check(len(places) == 1, "delivered in more than one place: %s" % [h.short(120) for h in hits])

    def check_bracket_block(self, text, note_id, body):
        """text (as the model got it) holds exactly one bracket block with this note, the
        body as Gemini passes it (< and > escaped), the mode's auth; returns the element."""
        blocks = [b for b in bracket_blocks(text) if any(e["id"] == note_id for e in b[3])]
        self.check(blocks, "no [operator-notes ...] block holding note %s in %r" % (note_id, shorten(text, 1500)))
        block, count, framing, els = blocks[0]
        self.check(count == 1 and len(els) == 1, "count=%d, %d elements, want 1 and 1: %r" % (count, len(els), block))
        self.check(framing.startswith(FRAMING_HUMAN), "framing sentence is %r" % framing)
        self.check(els[0]["body"] == gemini_escaped(body), "body in the block is %r, want %r"
                   % (els[0]["body"], gemini_escaped(body)))
        if self.EXPECT_AUTH:
            self.check(els[0]["auth"] == self.EXPECT_AUTH, "auth=%r, want %r" % (els[0]["auth"], self.EXPECT_AUTH))
        self.check("&lt;operator-note" not in text and "&lt;/operator-note" not in text.replace(
            gemini_escaped(body), ""), "an escaped XML frame reached the model: %r" % shorten(text, 600))
        return els[0]

    # ------------------------------------------------------------------ scenarios a, c (d: NoteScenarios)
    def test_a_note_before_start_reaches_first_request(self):
        run, tok, note_id, body = self.run_scenario_a()
        hits = self.landings(run.requests, tok)
        first = self.check_delivered_first(hits, lambda h: (h.request_index, h.path), (0, "contents[0].parts[1].text"),
                                           "request #0 contents[0].parts[1].text (SessionStart)")
        self.check(first.text.startswith("<hook_context>[operator-notes count=\"1\"")
                   and first.text.endswith("[/operator-notes]</hook_context>\n\n" + RUN_PROMPT),
                   "SessionStart context is not <hook_context>[bracket block]</hook_context> before the "
                   "prompt: %r" % shorten(first.text, 600))
        self.check_once(hits)
        self.check(len(run.requests) == 2, "%d model requests, want 2 (no rescue when nothing is pending)"
                   % len(run.requests))
        self.check_bracket_block(first.text, note_id, body)
        self.check_receipt(note_id, "delivered", event="session_start")

    def test_c_note_after_last_tool_call_rescued_by_after_agent(self):
        run, hits, first, note_id, body = self.run_scenario_c()
        last = len(run.requests[2]["contents"]) - 1
        self.check((first.request_index, first.index, first.role, first.kind) == (2, last, "user", "text")
                   and first.path == "contents[%d].parts[0].text" % last,
                   "first seen at %s, want request #2, the last (user) content's first part" % first.short())
        self.check(first.text.startswith("<operator-notes count=\"1\""),
                   "the AfterAgent reason is not the XML block verbatim: %r" % shorten(first.text, 300))
        self.check_once(hits)
        self.check_block(first.text, note_id, body)
        self.check_receipt(note_id, "delivered", event="stop")
