#!/usr/bin/env bash
# Where the loopback Preloop server stands: processes (by PID file), health,
# credentials and the last up.sh timings. Exit 0 only when all is up and healthy.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ok=0
if pid="$(pg_pid)"; then echo "postgres  running  pid $pid  127.0.0.1:$PRELOOP_PG_PORT  data $PGDATA"
else echo "postgres  stopped  ($PG_PID_FILE)"; ok=1; fi
if pid="$(server_pid)"; then echo "server    running  pid $pid  $BASE_URL  log $SERVER_LOG"
else echo "server    stopped  ($SERVER_PID_FILE)"; ok=1; fi
if health_ok; then echo "health    healthy  $BASE_URL/api/v1/health"
else echo "health    NOT healthy"; ok=1; fi
py="$PRELOOP_VENV/bin/python"; [ -x "$py" ] || py=python3
if [ -s "$CREDS_FILE" ]; then
  "$py" - "$CREDS_FILE" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("creds     {}: user {}, agent {}, fast_timeout_agent {}, auto_approve_agent {}".format(
    sys.argv[1], d["username"], d["agent_id"], d["fast_timeout_agent"]["agent_id"],
    d["auto_approve_agent"]["agent_id"]))
PY
  if [ "$ok" = 0 ]; then
    PRELOOP_E2E_SERVER_HOME="$PRELOOP_HOME" PRELOOP_E2E_SERVER_PORT="$PRELOOP_PORT" "$py" "$KIT_DIR/seed.py" check 2>&1 | sed 's/^/          /'
    [ "${PIPESTATUS[0]}" = 0 ] || ok=1
  fi
else
  echo "creds     none ($CREDS_FILE)"; ok=1
fi
if [ -s "$TIMINGS_FILE" ]; then
  "$py" - "$TIMINGS_FILE" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
phases = d.get("phases")
if phases:
    parts = "\n          ".join("{:<13} {:>6}s  {}".format(k, v["s"], v["did"][:90]) for k, v in phases.items())
else:
    parts = ", ".join("{} {}".format(k, v) for k, v in d.items() if k != "total_s")
print("last up   {} ({}): {}s\n          {}".format(d.get("at", "?"), d.get("kind", "?"), d["total_s"], parts))
PY
fi
if [ -x "$PRELOOP_VENV/bin/python" ]; then
  echo "venv      $PRELOOP_VENV ($(cat "$PRELOOP_VENV/.preloop-kit-stamp" 2>/dev/null || echo 'no kit stamp'))"
else
  echo "venv      missing ($PRELOOP_VENV)"
fi
exit "$ok"
