"""Landing: where a string landed in one Gemini or Copilot request body, found by a
harness's segments() function (gemini.py, copilot.py). The two harnesses share it because
both bodies are lists of messages with JSON paths to every string."""

from dataclasses import dataclass

from .common import shorten

__all__ = ["Landing", "find_landings", "first_landing"]


@dataclass
class Landing:
    """Where a string landed in one Gemini or Copilot request body."""
    request_index: int      # index among the requests searched (e.g. RunResult.requests)
    index: int              # contents[index] (Gemini) / messages[index] (Copilot); -1: systemInstruction
    role: str               # user | model | system (Gemini); system | user | assistant | tool (Copilot)
    kind: str               # Gemini: text | function_response_output | function_response_error |
                            #         function_call | system_instruction; Copilot: content
    path: str               # JSON path in the body, e.g. contents[2].parts[0].functionResponse.response.output
    text: str               # the whole string at that path

    def short(self, n=300):
        return "req#%d %s (%s/%s) text=%r" % (self.request_index, self.path, self.role, self.kind,
                                             shorten(self.text, n))


def find_landings(segments, requests, marker):
    """[Landing] for every string `segments(body)` yields that holds marker."""
    return [Landing(n, i, role, kind, path, txt) for n, body in enumerate(requests)
            for i, role, kind, path, txt in segments(body) if marker in txt]


def first_landing(landings):
    """The earliest landing, or None; later requests repeat the history, so
    {(l.index, l.path) for l in landings} tells how many distinct places there are."""
    return min(landings, key=lambda h: (h.request_index, h.index)) if landings else None
