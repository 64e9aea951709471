"""The spawn cost of our OpenCode plugin measured inside a real `opencode run` (docs/performance.md,
"OpenCode: the spawn from Bun per event"): an e2e world (e2e/test_opencode.py: the mock model,
our plugin installed, local mode) plus bench/opencode-spawn-plugin.js beside our plugin, which
times `ask` through `Bun.spawn` and `child_process.spawn` on the first chat.message.

  PRELOOP_BIN_DIR=<release dir> PRELOOP_E2E_HARNESS_DIR=<harnesses> python3 bench/opencode-spawn-in-opencode.py [runs]
"""

import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import test_opencode as t  # noqa: E402


def main():
    runs = sys.argv[1] if len(sys.argv) > 1 else "100"
    out = os.path.join(tempfile.mkdtemp(prefix="preloop-oc-spawn-"), "out.txt")
    w = t.OpenCodeWorld("bench", {"turns": [{"text": "Hello."}]},
                        {"BENCH_EXE": os.path.join(t.bin_dir(), "preloop-hooks"), "BENCH_OUT": out, "BENCH_RUNS": runs})
    try:
        shutil.copy(os.path.join(HERE, "opencode-spawn-plugin.js"), os.path.join(w.config, "plugins", "zbench.js"))
        p, _ = w.run_opencode("Say hi")
        if p.returncode != 0 or not os.path.exists(out):
            sys.exit("opencode run failed: rc %d\n%s" % (p.returncode, p.stderr[-2000:]))
        print("what | median ms | p90 ms | min ms")
        print(open(out).read(), end="")
    finally:
        w.close()


if __name__ == "__main__":
    main()
