#!/usr/bin/env python3
"""Send one operator note to the real Preloop server as the human operator:
POST $PRELOOP_E2E_API/operator-notes with the user token in $PRELOOP_E2E_USER_TOKEN.

  server_note.py '{"external_session_id": "...", "text": "..."}'

The suite's mock model runs this as a turn's before_reply_cmd (mid-run notes). Prints
the server's JSON answer (it has "note_id") and exits 0 only on 201. Stdlib only.

"@@SESSION@@" in a value is replaced by the harness session id the hooks registered, read
from their session file $PRELOOP_HOME/sessions/*.json (Codex picks its own session id, so
the suite cannot know it in advance).

  server_note.py --receipt NOTE_ID|@FILE
prints GET /operator-notes/NOTE_ID instead (a receipt read at that moment of the run;
@FILE: the note id is read from FILE).
"""

import json
import os
import sys
import urllib.error
import urllib.request


def session_id():
    d = os.path.join(os.environ["PRELOOP_HOME"], "sessions")
    files = sorted((os.path.join(d, n) for n in os.listdir(d) if n.endswith(".json")),
                   key=os.path.getmtime) if os.path.isdir(d) else []
    if not files:
        raise SystemExit("no session file in %s: no SessionStart hook registered a session" % d)
    with open(files[-1]) as f:
        return json.load(f)["external_session_id"]


def main():
    if sys.argv[1] == "--receipt":
        note_id = sys.argv[2]
        if note_id.startswith("@"):   # @FILE: the id was written there during the run
            with open(note_id[1:]) as f:
                note_id = f.read().strip()
        req = urllib.request.Request(os.environ["PRELOOP_E2E_API"] + "/operator-notes/" + note_id)
        ok = 200
    else:
        raw = sys.argv[1]
        if "@@SESSION@@" in raw:
            raw = raw.replace("@@SESSION@@", session_id())
        req = urllib.request.Request(os.environ["PRELOOP_E2E_API"] + "/operator-notes",
                                     data=raw.encode(), method="POST")
        ok = 201
    req.add_header("Content-Type", "application/json")
    req.add_header("Accept", "application/json")
    req.add_header("Authorization", "Bearer " + os.environ["PRELOOP_E2E_USER_TOKEN"])
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=30) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    sys.stdout.write(raw.decode(errors="replace") + "\n")
    if status != ok:
        sys.stderr.write("%s %s -> %d\n" % (req.get_method(), req.full_url, status))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
