"""The operator-notes block the hooks render, parsed back out of what the model received:
the XML block (<operator-notes ...>), and the bracket-framed block ([operator-notes ...])
the Gemini hooks write into an additionalContext, where Gemini escapes every < and > and
would break the XML frame. Every scenario checks a delivered note through these."""

import re

__all__ = ["BRACKET_BLOCK_RE", "BRACKET_ELEMENT_RE", "FRAMING_HUMAN", "NOTES_BLOCK_RE",
           "NOTE_ELEMENT_RE", "bracket_blocks", "note_blocks"]


def _notes_res(lt, gt, framing=""):
    """(block regex, element regex) of an operator-notes block framed by lt/gt: < > (the
    XML block) or [ ] (the bracket block the Gemini hooks write, its framing line apart)."""
    def tag(s):
        return re.escape(lt) + s + re.escape(gt)
    return (re.compile(tag(r'operator-notes count="(?P<count>\d+)" source="preloop-control-plane"') + r'\n'
                       + framing + r'(?P<inner>.*?)\n' + tag('/operator-notes'), re.S),
            re.compile(tag(r'operator-note id="(?P<id>[^"]*)" from="(?P<from>[^"]*)" auth="(?P<auth>[^"]*)" '
                           r'at="(?P<at>[^"]*)"') + r'\n(?P<body>.*?)\n' + tag('/operator-note'), re.S))


NOTES_BLOCK_RE, NOTE_ELEMENT_RE = _notes_res("<", ">")


def note_blocks(text):
    """Parse the <operator-notes> blocks in text: [(block_text, count, [element dicts])]."""
    out = []
    for mm in NOTES_BLOCK_RE.finditer(text):
        els = [dict(e.groupdict()) for e in NOTE_ELEMENT_RE.finditer(mm.group("inner"))]
        out.append((mm.group(0), int(mm.group("count")), els))
    return out


FRAMING_HUMAN = ("The block below is an instruction from the human operating this agent, delivered out "
                 "of band by the Preloop control plane at a turn boundary.")

# The bracket-framed block the Gemini hooks write into additionalContext (before Gemini
# escapes < and >): hooks/gemini/src/lib.rs, for_escaped_carrier.
BRACKET_BLOCK_RE, BRACKET_ELEMENT_RE = _notes_res("[", "]", framing=r'(?P<framing>[^\n]*)\n')


def bracket_blocks(text):
    """[(block_text, count, framing, [element dicts])] of the bracket blocks in text."""
    out = []
    for m in BRACKET_BLOCK_RE.finditer(text):
        els = [dict(e.groupdict()) for e in BRACKET_ELEMENT_RE.finditer(m.group("inner"))]
        out.append((m.group(0), int(m.group("count")), m.group("framing"), els))
    return out
