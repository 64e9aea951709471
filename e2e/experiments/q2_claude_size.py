#!/usr/bin/env python3
"""M2a: Claude Code 2.1.328: what the model sees for a large hook additionalContext.

One `claude -p` run per size case; in each run SessionStart, UserPromptSubmit, PreToolUse
(on a Bash `echo hi`) and Stop (first Stop only) all answer additionalContext of that size
(position-coded text from xfill.make_text, tag Z-<Event>). With --stop-block, Stop answers
{"decision":"block","reason":TEXT} instead. For each carrier prints: intact or not; if
replaced by <persisted-output>, the header line, how many leading chars of the text the
preview keeps, and whether the saved file holds the whole text.

  python3 e2e/experiments/q2_claude_size.py [--model M] [--stop-block] [CASE ...]
CASE = <n><unit>-<alpha>[+<frame>]: unit chars|utf16|bytes|fill, alpha ascii|lines|cjk3|emoji4
(see xfill.py), +<frame> = that many ASCII chars in front; e.g. 10001chars-ascii,
10001utf16-emoji4, 4096fill-emoji4+900 (exactly 4,096 four-byte chars + 900 chars of framing)
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xfill  # noqa: E402
import xrun  # noqa: E402

CASES = ["10000chars-ascii", "10001chars-ascii", "15000chars-ascii", "40000chars-ascii",
         "400000chars-ascii", "4000000chars-ascii", "10001chars-lines", "4096chars-cjk3",
         "10000chars-cjk3", "10001chars-cjk3", "10000utf16-emoji4", "10001utf16-emoji4",
         "10200utf16-emoji4", "4096fill-emoji4+900"]
EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "Stop"]
LABELS = {"SessionStart": "SessionStart hook additional context: ",
          "UserPromptSubmit": "UserPromptSubmit hook additional context: ",
          "PreToolUse": "PreToolUse:Bash hook additional context: ",
          "Stop": "Stop hook additional context: ",
          "Stop-block": "Stop hook feedback:\n"}
SCRIPT = {"agents": [{"name": "main", "turns": [
    {"content": [{"type": "tool_use", "name": "Bash",
                  "input": {"command": "echo hi", "description": "say hi"}}]},
    {"content": [{"type": "text", "text": "Done."}]}],
    "overflow": {"content": [{"type": "text", "text": "Done again."}]}}]}


def parse_case(c):
    m = re.match(r"^(\d+)(chars|bytes|utf16|fill)-(ascii|lines|cjk3|emoji4)(?:\+(\d+))?$", c)
    return {"n": int(m.group(1)), "unit": m.group(2), "alpha": m.group(3),
            "frame": int(m.group(4) or 0)}


def analyse(r, ev, label):
    cap = next((c for c in r["captures"] if c["event"] == ev and c.get("text")), None)
    if not cap:
        return "no hook output captured"
    orig = cap["text"]
    tag = "BEGIN-Z-%s|" % ev
    blocks = [t for q in r["requests"] for _, t in xrun.claude_texts(q["body"]) if tag in t]
    if not blocks:
        return "NOT SEEN by the model (%s)" % xfill.describe(orig)
    b = blocks[0]
    if orig in b:
        return "INTACT (%s)" % xfill.describe(orig)
    ms = [m for m in re.finditer(
        r"<persisted-output>\n(Output too large \(([^)]*)\)\. Full output saved to: (\S+))"
        r"\n\nPreview \(first ([^)]*)\):\n(.*?)\n?</persisted-output>", b, re.S) if tag in m.group(5)]
    if ms:
        m = ms[0]
        path = m.group(3)
        preview = m.group(5)
        head, _ = xfill.kept(orig, preview)
        full = None
        if os.path.exists(path):
            full = open(path, encoding="utf-8").read() == orig
        tail_txt = preview[head:]
        return ("PERSISTED (%s): %r; preview keeps the first %d chars (%d UTF-8 bytes) then %r; "
                "file holds the whole text: %s; label %r present: %s" % (
                    xfill.describe(orig), m.group(1)[:60] + "...", head,
                    len(orig[:head].encode()), tail_txt[:20], full, label, label in b))
    h, t = xfill.kept(orig, b)
    return "CHANGED (%s): keeps head %d, tail %d chars; block starts %r" % (
        xfill.describe(orig), h, t, b[:200])


def main():
    args = sys.argv[1:]
    model = xrun.pop_option(args, "--model")
    stop_block = "--stop-block" in args
    args = [a for a in args if a != "--stop-block"]
    for case in args or CASES:
        z = parse_case(case)
        rules = [{"event": "SessionEnd", "out": "none"},
                 {"event": "Stop", "match": {"stop_hook_active": True}, "out": "none"}]
        for ev in EVENTS:
            out = "block" if (ev == "Stop" and stop_block) else "ctx"
            rules.append({"event": ev, "out": out, "text": "Z-{event}", "size": z})
        out = "/tmp/r1/q2c-%s%s%s" % (case, "-stopblock" if stop_block else "",
                                      "-" + model if model else "")
        r = xrun.claude_run(out, SCRIPT, rules, EVENTS + ["SessionEnd"], prompt="say hi",
                            model=model)
        print("== %s  rc=%s requests=%d  (%s)" % (case, r["rc"], len(r["requests"]), out))
        for ev in EVENTS:
            key = "Stop-block" if (ev == "Stop" and stop_block) else ev
            print("  %-17s %s" % (key, analyse(r, ev, LABELS[key])))


if __name__ == "__main__":
    main()
