#!/usr/bin/env python3
"""M2b: Codex 0.169.0: what the model sees for a large additionalContext / Stop reason.

One `codex exec` run per size case; in each run SessionStart, UserPromptSubmit and
PreToolUse (on a shell `echo hi`) answer additionalContext of that size, and the first Stop
answers {"decision":"block","reason":TEXT} of that size (position-coded text from
xfill.make_text, tag Z-<Event>). For each carrier prints: intact, or the truncation notice,
how many leading / trailing characters survive, and the size of what the model got.

  python3 e2e/experiments/q2_codex_size.py [--limit TOKENS] [CASE ...]
  (the doc's runs: no option; then --limit 5000 4096fill-emoji4+900 20000bytes-ascii
   20004bytes-ascii; --limit 1000000 400000bytes-ascii)
CASE = <n><unit>-<alpha>[+<frame>] as in q2_claude_size.py (unit bytes|chars|fill).
--limit sets "additionalContextLimit" on the SessionStart / UserPromptSubmit / PreToolUse
handlers (Stop cannot take it).
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xfill  # noqa: E402
import xrun  # noqa: E402
from q2_claude_size import parse_case  # noqa: E402

CASES = ["10000bytes-ascii", "10001bytes-ascii", "10004bytes-ascii", "16000bytes-ascii",
         "40000bytes-ascii", "400000bytes-ascii", "4096fill-cjk3", "4096fill-emoji4",
         "4096fill-emoji4+900", "10000bytes-emoji4", "10004bytes-emoji4", "16000bytes-lines"]
EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "Stop"]
SCRIPT = {"agents": [{"name": "main", "turns": [{"calls": [{"cmd": "echo hi"}]},
                                                {"text": "Done."}],
                      "overflow": {"text": "Done again."}}]}


def analyse(r, ev):
    cap = next((c for c in r["captures"] if c["event"] == ev and c.get("text")), None)
    if not cap:
        return "no hook output captured"
    orig = cap["text"]
    tag = "Z-%s|" % ev
    blocks = [(loc, t) for q in r["requests"] for loc, t in xrun.codex_texts(q["body"])
              if tag in t or "END-Z-%s" % ev in t]
    if not blocks:
        return "NOT SEEN by the model (%s)" % xfill.describe(orig)
    loc, b = blocks[0]
    if ev == "Stop":
        inner = re.search(r"<hook_prompt[^>]*>(.*)</hook_prompt>", b, re.S)
        b = inner.group(1) if inner else b
    if b == orig:
        return "INTACT, exactly the text (%s) [%s]" % (xfill.describe(orig), loc)
    if orig in b:
        return "INTACT inside a longer item (%s) [%s]" % (xfill.describe(orig), loc)
    h, t = xfill.kept(orig, b)
    m = re.search(r"…(\d+) tokens truncated…", b)
    hdr = b.split("\n")[0]
    saved = re.search(r"Full hook output saved to: (\S+)", b)
    full = None
    if saved and os.path.exists(saved.group(1)):
        full = open(saved.group(1), encoding="utf-8").read() == orig
    return ("TRUNCATED (%s) [%s]: first line %r; keeps head %d chars (%d B) + tail %d chars (%d B); "
            "marker %r; model gets %s; saved file %s holds the whole text: %s" % (
                xfill.describe(orig), loc, hdr, h, len(orig[:h].encode()), t,
                len(orig[len(orig) - t:].encode()) if t else 0, m.group(0) if m else None,
                xfill.describe(b), saved.group(1) if saved else None, full))


def main():
    args = sys.argv[1:]
    limit = None
    if "--limit" in args:
        k = args.index("--limit")
        limit = int(args[k + 1])
        del args[k:k + 2]
    for case in args or CASES:
        z = parse_case(case)
        rules = [{"event": "Stop", "match": {"stop_hook_active": True}, "out": "none"}]
        for ev in EVENTS:
            rules.append({"event": ev, "out": "block" if ev == "Stop" else "ctx",
                          "text": "Z-{event}", "size": z})
        per = {}
        if limit:
            per = {ev: {"additionalContextLimit": limit} for ev in EVENTS if ev != "Stop"}
        out = "/tmp/r1/q2x-%s%s" % (case, "-limit%d" % limit if limit else "")
        r = xrun.codex_run(out, SCRIPT, rules, EVENTS, prompt="say hi", per_event_extra=per)
        print("== %s%s  rc=%s requests=%d  (%s)" % (case, " additionalContextLimit=%d" % limit
                                                    if limit else "", r["rc"], len(r["requests"]), out))
        for ev in EVENTS:
            print("  %-17s %s" % (ev, analyse(r, ev)))


if __name__ == "__main__":
    main()
