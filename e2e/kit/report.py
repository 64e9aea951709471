"""Failure dumps: each harness's request bodies rendered as short text (only what is new
in each request, wide around the markers, notes and hook labels; SUMMARIZERS by harness) and
the commands a mock ran before replying.

A failing scenario prints these, so the first look at a failure already shows where the
note went."""

import json

from .claude import LABEL_RE
from .codex import codex_segments
from .common import shorten
from .copilot import copilot_segments
from .gemini import gemini_segments
from .harnesses import runner_of

__all__ = ["SUMMARIZERS", "before_reply_lines", "summarize_codex_requests",
           "summarize_copilot_requests", "summarize_gemini_requests", "summarize_json",
           "summarize_request", "summarize_requests"]


def _excerpt(s, markers, width, wide):
    """Shorten s; if it holds a marker, an <operator-note or a hook label, show a wide
    window starting a little before the first of them instead."""
    positions = [s.find(m) for m in markers if m and m in s]
    if "<operator-note" in s:
        positions.append(s.find("<operator-note"))
    mm = LABEL_RE.search(s)
    if mm:
        positions.append(mm.start())
    if not positions:
        return shorten(s, width)
    lo = max(0, min(positions) - 150)
    hi = min(len(s), lo + wide)
    return "%s%s%s" % ("[%d chars]..." % lo if lo else "", s[lo:hi],
                       "...[%d chars]" % (len(s) - hi) if hi < len(s) else "")


def summarize_request(i, body, markers=(), skip=0, width=240, wide=2000):
    """A short text rendering of one request body, block by block: messages before `skip`
    are left out (they repeat the previous request); blocks holding a marker, an
    <operator-note> or a hook label are shown widely around it, others shortened."""
    msgs = body.get("messages") or []
    lines = ["--- request #%d model=%s messages=%d%s" % (
        i, body.get("model"), len(msgs),
        (" (messages[0:%d] left out: as in request #%d)" % (skip, i - 1)) if skip else "")]
    for j, m in enumerate(msgs):
        if j < skip:
            continue
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
        for b in blocks:
            t = b.get("type")
            if t == "text":
                s = b.get("text", "")
            elif t == "tool_use":
                s = "%s %s" % (b.get("name"), json.dumps(b.get("input"), ensure_ascii=False))
            elif t == "tool_result":
                s = b.get("content")
                s = json.dumps(s, ensure_ascii=False) if not isinstance(s, str) else s
                if b.get("is_error"):
                    s = "[is_error] " + s
            else:
                s = json.dumps(b, ensure_ascii=False)
            lines.append("  [%d] %-9s %-11s %r" % (j, m.get("role"), t,
                                                    _excerpt(s, markers, width, wide)))
    return "\n".join(lines)


def summarize_requests(requests, markers=()):
    """summarize_request for a whole run, each request showing only its new messages."""
    out, prev = [], 0
    for i, body in enumerate(requests):
        out.append(summarize_request(i, body, markers, skip=prev))
        prev = len(body.get("messages") or [])
    return "\n".join(out)


def summarize_codex_requests(requests, markers=(), width=240, wide=1500):
    """Each request's input items after the previous request's (shortened)."""
    out, prev = [], 0
    for n, body in enumerate(requests):
        items = body.get("input") or []
        out.append("--- request #%d items=%d%s" % (n, len(items),
                   " (items[0:%d] as in request #%d)" % (prev, n - 1) if prev else ""))
        for i, it in enumerate(items):
            if i < prev or not isinstance(it, dict):
                continue
            t = it.get("type") or "message"
            if t == "function_call":
                s = "%s %s" % (it.get("name"), it.get("arguments"))
            else:
                seg = [x for x in codex_segments({"input": [it]})]
                s = seg[0][2] if seg else json.dumps(it)
            out.append("  [%d] %-20s %-10s %r" % (i, t, it.get("role") or "",
                                                 _excerpt(s, markers, width, wide)))
        prev = len(items)
    return "\n".join(out)


def _summarize_landings(requests, segments, key, markers, width, wide):
    out, prev = [], 0
    for n, body in enumerate(requests):
        items = body.get(key) or []
        out.append("--- request #%d %s=%d%s" % (n, key, len(items),
                   " (%s[0:%d] as in request #%d)" % (key, prev, n - 1) if prev else ""))
        for i, role, kind, path, txt in segments(body):
            if i >= prev or (n == 0 and i < 0):
                out.append("  %-48s %-9s %r" % (path, role, _excerpt(txt, markers, width, wide)))
        prev = len(items)
    return "\n".join(out)


def summarize_gemini_requests(requests, markers=(), width=240, wide=1500):
    """Each request's new contents (systemInstruction once), shortened around markers."""
    return _summarize_landings(requests, gemini_segments, "contents", markers, width, wide)


def summarize_copilot_requests(requests, markers=(), width=240, wide=1500):
    """Each request's new messages, shortened around markers."""
    return _summarize_landings(requests, copilot_segments, "messages", markers, width, wide)


def summarize_json(requests, markers=(), width=240, wide=1500):
    """Any harness's request bodies, each as shortened JSON (wide around the markers): the
    failure dump of a harness whose runner names no SUMMARY of its own."""
    return "\n".join("--- request #%d\n  %s" % (n, _excerpt(json.dumps(body, ensure_ascii=False),
                                                                 markers, width, wide))
                     for n, body in enumerate(requests))


class _Summarizers(dict):
    """{harness (slug or the program its runs carry): summarize(requests, markers)}: its
    runner's SUMMARY (a function here), else summarize_json."""

    def __missing__(self, harness):
        name = getattr(runner_of(harness), "SUMMARY", None)
        return globals()[name] if name else summarize_json


SUMMARIZERS = _Summarizers()


def before_reply_lines(run, width=400):
    """One line per before_reply_cmd the mock ran (or skipped) during a run."""
    out = []
    for br in run.before_reply():
        out.append("mock before_reply_cmd: argv=%s rc=%s stdout=%s stderr=%s%s" % (
            shorten(" ".join(str(a) for a in br.get("argv", [])), 300), br.get("rc"),
            shorten(br.get("stdout", ""), width), shorten(br.get("stderr", ""), 300),
            (" error=" + br["error"]) if br.get("error") else
            (" skipped=" + br["skipped"]) if br.get("skipped") else ""))
    return out
