#!/usr/bin/env bash
# Stop what up.sh started: the API server, then Postgres, each by its PID file
# only (a PID whose command line no longer matches is left alone).
#
#   ./down.sh                 stop; keep the database, creds.json and the venv
#   ./down.sh --purge         also delete the state ($PRELOOP_E2E_SERVER_HOME: database, creds, logs)
#   ./down.sh --purge-venv    also delete the venv ($PRELOOP_E2E_VENV, the ~1 GB install)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PURGE=0; PURGE_VENV=0
parse_flags 2,7 purge=PURGE purge-venv=PURGE_VENV -- "$@"

if [ -d "$PRELOOP_HOME" ]; then take_lock; fi

# stop_by_pidfile LABEL PIDFILE GRACE_SIGNAL GRACE_S HARD_SIGNAL PID-or-empty
stop_by_pidfile() {
  local label="$1" file="$2" sig="$3" grace="$4" hard="$5" pid="$6"
  if [ -z "$pid" ]; then
    if [ -s "$file" ]; then
      log "$label: PID file $file names no running $label (stale); removing it"
      rm -f "$file"
    else
      log "$label: not running (no PID file)"
    fi
    return 0
  fi
  log "$label: stopping pid $pid (SIG$sig)"
  kill "-$sig" "$pid" 2>/dev/null || true
  if ! wait_gone "$pid" "$grace"; then
    log "$label: pid $pid still there after ${grace}s; sending SIG$hard"
    kill "-$hard" "$pid" 2>/dev/null || true
    wait_gone "$pid" 10 || die "$label: pid $pid would not stop"
  fi
  rm -f "$file"
  log "$label: stopped"
}

# The server first (it holds database connections), then Postgres with a
# "fast" shutdown (SIGINT: abort transactions, then a clean checkpoint).
stop_by_pidfile server "$SERVER_PID_FILE" TERM 20 KILL "$(server_pid || true)"
stop_by_pidfile postgres "$PG_PID_FILE" INT 30 QUIT "$(pg_pid || true)"

if [ "$PURGE" = 1 ] && [ -d "$PRELOOP_HOME" ]; then
  case "$PRELOOP_HOME" in ""|/|/tmp|/root|/home|"$HOME") die "refusing to purge $PRELOOP_HOME" ;; esac
  # Only a directory this kit made (marker), or one with its layout.
  if [ -e "$MARKER_FILE" ] || [ -e "$PRELOOP_HOME/server.env" ] || [ -e "$PGDATA/PG_VERSION" ]; then
    # A postmaster still running on this data directory (e.g. its PID file was
    # lost) must not have its files deleted underneath it.
    if [ -s "$PGDATA/postmaster.pid" ]; then
      pm="$(head -1 "$PGDATA/postmaster.pid" | tr -dc '0-9')"
      if [ -n "$pm" ] && [ -d "/proc/$pm" ] && case "$(proc_cmdline "$pm")" in *"$PGDATA"*) true ;; *) false ;; esac; then
        die "a postgres (pid $pm) not recorded in $PG_PID_FILE still runs on $PGDATA; stop it first"
      fi
    fi
    rm -rf "$PRELOOP_HOME"
    log "purged $PRELOOP_HOME"
  else
    die "$PRELOOP_HOME does not look like preloop-server kit state; not deleting it"
  fi
fi
[ "$PURGE" = 1 ] && rm -f "$LOCK_FILE"

if [ "$PURGE_VENV" = 1 ] && [ -d "$PRELOOP_VENV" ]; then
  case "$PRELOOP_VENV" in ""|/|/tmp|/usr|/usr/local|/root|"$HOME") die "refusing to purge $PRELOOP_VENV" ;; esac
  [ -f "$PRELOOP_VENV/pyvenv.cfg" ] || die "$PRELOOP_VENV is not a virtualenv (no pyvenv.cfg); not deleting it"
  [ -w "$PRELOOP_VENV" ] || die "$(id -un) cannot delete $PRELOOP_VENV"
  rm -rf "$PRELOOP_VENV"
  log "purged $PRELOOP_VENV"
fi
