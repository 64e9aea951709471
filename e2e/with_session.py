#!/usr/bin/env python3
"""Run a command with "@@SESSION@@" in its arguments replaced by the harness session id
the hooks registered (the newest $PRELOOP_HOME/sessions/*.json, "external_session_id").

  with_session.py PROGRAM ARG...      e.g. with_session.py preloop-hooks notes send
                                      --session @@SESSION@@ --json "text"

Codex picks its own session id, so a local-mode scenario cannot know it when it writes
the mock's script; the mock runs this as a turn's before_reply_cmd (with the mock's
environment, which has PRELOOP_HOME). Exits with the command's exit code; its stdout and
stderr pass through. Stdlib only.
"""

import json
import os
import subprocess
import sys


def session_id():
    d = os.path.join(os.environ["PRELOOP_HOME"], "sessions")
    files = sorted((os.path.join(d, n) for n in os.listdir(d) if n.endswith(".json")),
                   key=os.path.getmtime) if os.path.isdir(d) else []
    if not files:
        sys.stderr.write("with_session.py: no session file in %s: no SessionStart hook "
                         "registered a session\n" % d)
        sys.exit(2)
    with open(files[-1]) as f:
        return json.load(f)["external_session_id"]


def main():
    argv = sys.argv[1:]
    if any("@@SESSION@@" in a for a in argv):
        sid = session_id()
        argv = [a.replace("@@SESSION@@", sid) for a in argv]
    return subprocess.run(argv, stdin=subprocess.DEVNULL).returncode


if __name__ == "__main__":
    sys.exit(main())
