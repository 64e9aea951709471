#!/usr/bin/env python3
"""What our extension adds to a whole Pi run with no note pending: `pi -p "Run echo one"` (two
model turns against e2e/mock_pi.py: a bash call, then the answer; events session_start,
before_agent_start, tool_call, tool_result, agent_end, session_shutdown), with our extension
installed and without, interleaved, local mode.

  PRELOOP_BIN_DIR=<release dir> PRELOOP_E2E_HARNESS_DIR=<harnesses> python3 bench/pi-turn.py [runs]
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from test_pi import SHELL_THEN_DONE, PiWorld  # noqa: E402


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    w = PiWorld("bench", {"turns": SHELL_THEN_DONE["turns"], "overflow": SHELL_THEN_DONE["turns"][-1]})
    times = {"with": [], "without": []}
    try:
        for i in range(runs + 1):
            for kind in ("with", "without"):
                if kind == "with":
                    w.cli("install", "--harness", "pi", "--bin-dir", os.environ["PRELOOP_BIN_DIR"])
                else:
                    w.cli("uninstall", "--harness", "pi")
                before = len(w.requests()) if os.path.exists(w.log) else 0
                t0 = time.monotonic()
                p = w.run_pi("Run echo one")
                dt = (time.monotonic() - t0) * 1000
                made = len(w.requests()) - before
                if p.returncode != 0 or made != 2:
                    raise SystemExit("run failed: rc %s, %d requests\n%s" % (p.returncode, made, p.stderr))
                if i:  # the first round warms the page cache
                    times[kind].append(dt)
    finally:
        w.close()
    print("runs %d each, interleaved (a first round dropped)" % runs)
    for kind, a in times.items():
        a.sort()
        print("%s our extension: median %.0f ms, min %.0f, max %.0f" % (kind, statistics.median(a), a[0], a[-1]))
    print("added by the extension (median difference): %.0f ms"
          % (statistics.median(times["with"]) - statistics.median(times["without"])))


if __name__ == "__main__":
    main()
