#!/usr/bin/env python3
"""CPU time and page faults of one hook, per run, for executables side by side.

    python3 bench/rusage.py --server target/debug/preloop-fake-server \
        --hook preloop-claude-code-session-start \
        --fixture fixtures/claude-code-2.1.328/SessionStart.json \
        --runs 500 before=/tmp/a/preloop-hooks after=/tmp/b/preloop-hooks [floor=/path/to/c-floor]

Wall clock on a loaded 2-core machine cannot resolve tens of microseconds;
what the kernel charges a process (user + system CPU time, minor faults,
`wait4`'s rusage) moves far less with the load. Each executable
is started as the hook (a hard link under the hook's name, as `install`
lays them out) in server mode against the fake server, with the fixture on
stdin, stdout a pipe; the executables take turns run by run so the load is
shared alike. One session (the fixture's) throughout: after the first run
it is registered, as under a harness. Prints the medians and means per run.
A `floor...=PATH[:ARG]` entry runs a program as it is, with ARG as its
one argument and `FLOOR_ADDR`/`FLOOR_TOKEN` set: bench/c/floor_calls.c built
with the calls of the hook (`preloop-bench` generates its header; the index
is ARG), the same stdin and environment otherwise.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True, help="the preloop-fake-server executable")
    ap.add_argument("--hook", required=True, help="the hook command name")
    ap.add_argument("--fixture", required=True, help="the payload on stdin")
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("exes", nargs="+", help="label=path of a preloop-hooks executable")
    a = ap.parse_args()

    # The fake server runs until its stdin closes.
    srv = subprocess.Popen([a.server], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    info = json.loads(srv.stdout.readline())
    payload = json.load(open(a.fixture))
    payload.pop("_source", None)
    stdin = json.dumps(payload).encode()

    tmp = tempfile.mkdtemp(prefix="preloop-rusage-")
    runs = []
    for item in a.exes:
        label, _, path = item.partition("=")
        home = os.path.join(tmp, label)
        os.makedirs(os.path.join(home, "bin"))
        argv_tail = []
        if label.startswith("floor"):
            cmd, _, arg = path.partition(":")
            argv_tail = [arg] if arg else []
        else:
            cmd = os.path.join(home, "bin", a.hook)
            os.link(path, cmd) if os.stat(path).st_dev == os.stat(home).st_dev else os.symlink(path, cmd)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "PRELOOP_HOME": home,
            "PRELOOP_STOP_RESCUE_CAP": "1000000",
            "PRELOOP_URL": info["url"],
            "PRELOOP_TOKEN": info["runtime_token"],
            "FLOOR_ADDR": info["url"].removeprefix("http://"),
            "FLOOR_TOKEN": info["runtime_token"],
        }
        runs.append((label, [cmd] + argv_tail, env, []))

    def once(argv, env):
        cmd = argv[0]
        r, w = os.pipe()
        out_r, out_w = os.pipe()
        t0 = time.perf_counter()
        pid = os.posix_spawn(cmd, argv, env, file_actions=[
            (os.POSIX_SPAWN_DUP2, r, 0), (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_CLOSE, w), (os.POSIX_SPAWN_CLOSE, out_r)])
        os.close(r)
        os.close(out_w)
        try:
            os.write(w, stdin)
        except BrokenPipeError:
            pass  # /bin/true reads nothing
        os.close(w)
        while os.read(out_r, 65536):
            pass
        os.close(out_r)
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        if status != 0:
            sys.exit(f"{cmd} exited with {status}")
        return (ru.ru_utime + ru.ru_stime) * 1e3, ru.ru_minflt, wall * 1e3

    for _ in range(a.warmup):
        for _, cmd, env, _ in runs:
            once(cmd, env)
    for _ in range(a.runs):
        for _, cmd, env, got in runs:
            got.append(once(cmd, env))
    srv.stdin.close()
    srv.wait(timeout=10)

    print(f"{a.hook}, {a.runs} runs each, taking turns; load average {os.getloadavg()[0]:.2f}")
    print("| executable | CPU ms/run (user+sys), mean | minor faults, median | wall ms, median |")
    print("|---|---:|---:|---:|")
    for label, _, _, got in runs:
        cpu = statistics.mean(g[0] for g in got)
        flt = statistics.median(g[1] for g in got)
        wall = statistics.median(g[2] for g in got)
        print(f"| {label} | {cpu:.3f} | {flt:.0f} | {wall:.3f} |")


if __name__ == "__main__":
    main()
