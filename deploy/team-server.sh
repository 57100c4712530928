#!/usr/bin/env bash
# A team's perflab store: PostgreSQL and an MLflow tracking server on it, artifacts proxied by the server.
#
#   deploy/team-server.sh start [db|mlflow]    start both (or one); a running one is left alone
#   deploy/team-server.sh stop [db|mlflow]     stop both (or one)
#   deploy/team-server.sh status               what runs, and what each GPU host sets
#
# Settings (environment):
#   PERFLAB_TEAM_DIR        database, artifacts, logs and pid files (default ./perflab-team)
#   PERFLAB_DB_URL          an existing PostgreSQL database for MLflow (postgresql://user:pass@host:5432/mlflow):
#                           no PostgreSQL of our own then
#   PERFLAB_PG_PORT         our PostgreSQL's port (default 5432)
#   PERFLAB_PG_LISTEN       the interfaces it listens on (default localhost; '*' lets sweep workers on other hosts
#                           reach their Optuna database, with the password in $PERFLAB_TEAM_DIR/pg-password)
#   PERFLAB_PG_OS_USER      the user PostgreSQL runs as when this script runs as root (default postgres, else nobody)
#   PERFLAB_MLFLOW_HOST     the interface MLflow listens on (default 0.0.0.0: every GPU host of the team)
#   PERFLAB_MLFLOW_PORT     default 5000
#   PERFLAB_MLFLOW_WORKERS  server processes (default 4)
#   PERFLAB_ALLOWED_HOSTS   MLflow's --allowed-hosts, for a server reached by a name or public address (MLflow's
#                           default allows localhost and private addresses)
#
# Needs: PostgreSQL's server binaries (Debian/Ubuntu: apt-get install postgresql), and perflab installed
# (mlflow and psycopg: pip install -e '.[test]', or pip install mlflow 'psycopg[binary]').
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # deploy/: uvicorn_nodelay.py
DIR=$(mkdir -p "${PERFLAB_TEAM_DIR:-perflab-team}" && cd "${PERFLAB_TEAM_DIR:-perflab-team}" && pwd)
PY=${PYTHON:-python3}
PG_PORT=${PERFLAB_PG_PORT:-5432}
PG_LISTEN=${PERFLAB_PG_LISTEN:-localhost}
HOST=${PERFLAB_MLFLOW_HOST:-0.0.0.0}
PORT=${PERFLAB_MLFLOW_PORT:-5000}
WORKERS=${PERFLAB_MLFLOW_WORKERS:-4}
PGDATA="$DIR/pgdata"
SOCKETS="$DIR/run"

say() { echo "team-server: $*"; }
die() { echo "team-server: $*" >&2; exit 1; }

pg_bin() {
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | sort -V | tail -1)
  if [ -n "$found" ]; then echo "$found"; return; fi
  command -v initdb > /dev/null && dirname "$(command -v initdb)" && return
  die "no PostgreSQL server binaries (initdb, pg_ctl): apt-get install postgresql, or set PERFLAB_DB_URL"
}

# PostgreSQL refuses to run as root: as root, it runs as PERFLAB_PG_OS_USER and owns what it writes.
pg_user() {
  if [ -n "${PERFLAB_PG_OS_USER:-}" ]; then echo "$PERFLAB_PG_OS_USER"
  elif id postgres > /dev/null 2>&1; then echo postgres
  else echo nobody
  fi
}
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u "$(pg_user)" -- "$@"; else "$@"; fi
}

db_url() {  # what MLflow connects to: the socket of our PostgreSQL (no password), or PERFLAB_DB_URL
  if [ -n "${PERFLAB_DB_URL:-}" ]; then
    # SQLAlchemy reads postgresql:// as psycopg2; perflab installs psycopg (3)
    echo "${PERFLAB_DB_URL/#postgresql:\/\//postgresql+psycopg://}"
  else
    echo "postgresql+psycopg://perflab@/mlflow?host=$SOCKETS&port=$PG_PORT"
  fi
}

db_running() { [ -z "${PERFLAB_DB_URL:-}" ] && [ -f "$PGDATA/postmaster.pid" ] && as_pg "$(pg_bin)/pg_ctl" -D "$PGDATA" status > /dev/null 2>&1; }

start_db() {
  if [ -n "${PERFLAB_DB_URL:-}" ]; then say "database: PERFLAB_DB_URL (not started here)"; return; fi
  if db_running; then say "PostgreSQL already runs on port $PG_PORT"; return; fi
  local bin; bin=$(pg_bin)
  mkdir -p "$SOCKETS"
  [ "$(id -u)" = 0 ] && chown "$(pg_user)" "$DIR" "$SOCKETS"
  if [ ! -f "$PGDATA/PG_VERSION" ]; then
    [ -f "$DIR/pg-password" ] || (umask 077 && "$PY" -c "import secrets; print(secrets.token_urlsafe(18))" > "$DIR/pg-password")
    [ "$(id -u)" = 0 ] && chown "$(pg_user)" "$DIR/pg-password"
    # local socket: trust (this host's MLflow server); TCP: the password (sweep workers on other hosts)
    as_pg "$bin/initdb" -D "$PGDATA" -U perflab --pwfile="$DIR/pg-password" --auth-local=trust \
      --auth-host=scram-sha-256 -E UTF8 > "$DIR/initdb.log"
    if [ "$PG_LISTEN" != localhost ] && [ "$PG_LISTEN" != 127.0.0.1 ]; then
      echo "host all perflab all scram-sha-256" | as_pg tee -a "$PGDATA/pg_hba.conf" > /dev/null
    fi
  fi
  as_pg "$bin/pg_ctl" -D "$PGDATA" -l "$DIR/postgresql.log" -w -t 60 \
    -o "-p $PG_PORT -k $SOCKETS -c listen_addresses='$PG_LISTEN'" start > /dev/null
  for db in mlflow optuna; do  # MLflow's runs; Optuna's studies (perflab sweep run --storage ...)
    as_pg "$bin/createdb" -h "$SOCKETS" -p "$PG_PORT" -U perflab "$db" 2> /dev/null || true
  done
  say "PostgreSQL runs on port $PG_PORT (data in $PGDATA)"
}

stop_db() {
  if [ -n "${PERFLAB_DB_URL:-}" ] || [ ! -f "$PGDATA/PG_VERSION" ]; then return; fi
  as_pg "$(pg_bin)/pg_ctl" -D "$PGDATA" -m fast -w stop > /dev/null 2>&1 && say "PostgreSQL stopped" || true
}

health() { "$PY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" \
             "http://127.0.0.1:$PORT/health" > /dev/null 2>&1; }

mlflow_pid() { [ -f "$DIR/mlflow.pid" ] && kill -0 "$(cat "$DIR/mlflow.pid")" 2> /dev/null && cat "$DIR/mlflow.pid"; }

start_mlflow() {
  if mlflow_pid > /dev/null; then say "MLflow already runs (pid $(mlflow_pid))"; return; fi
  mkdir -p "$DIR/artifacts"
  # uvicorn's workers leave Nagle's algorithm on (deploy/uvicorn_nodelay.py): ~40 ms per request without this loop.
  local args=(--backend-store-uri "$(db_url)" --serve-artifacts --artifacts-destination "$DIR/artifacts"
              --host "$HOST" --port "$PORT" --workers "$WORKERS" --uvicorn-opts "--loop uvicorn_nodelay:NoDelayLoop")
  [ -n "${PERFLAB_ALLOWED_HOSTS:-}" ] && args+=(--allowed-hosts "$PERFLAB_ALLOWED_HOSTS")
  # MLflow's job runner (GenAI evaluation jobs: a dozen more processes) is not what perflab uses: off unless
  # MLFLOW_SERVER_ENABLE_JOB_EXECUTION says otherwise. Its own session: `stop` ends the server and its workers.
  MLFLOW_SERVER_ENABLE_JOB_EXECUTION=${MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false} \
    PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" \
    setsid "$PY" -m mlflow server "${args[@]}" >> "$DIR/mlflow.log" 2>&1 < /dev/null &
  echo $! > "$DIR/mlflow.pid"
  for _ in $(seq 1 240); do  # a new database is migrated first: up to a minute on a small host
    if health; then say "MLflow runs on http://$HOST:$PORT (pid $(cat "$DIR/mlflow.pid"), log $DIR/mlflow.log)"; return; fi
    kill -0 "$(cat "$DIR/mlflow.pid")" 2> /dev/null || die "MLflow server exited; last lines of $DIR/mlflow.log:
$(tail -5 "$DIR/mlflow.log")"
    sleep 0.5
  done
  die "MLflow server did not answer on port $PORT within 120 s (log: $DIR/mlflow.log)"
}

stop_mlflow() {
  local pid
  pid=$(mlflow_pid) || { rm -f "$DIR/mlflow.pid"; return; }
  kill -TERM -- "-$pid" 2> /dev/null || true
  for _ in $(seq 1 40); do kill -0 "$pid" 2> /dev/null || break; sleep 0.25; done
  kill -KILL -- "-$pid" 2> /dev/null || true
  rm -f "$DIR/mlflow.pid"
  say "MLflow stopped"
}

status() {
  if db_running; then say "PostgreSQL: running on port $PG_PORT"
  elif [ -n "${PERFLAB_DB_URL:-}" ]; then say "PostgreSQL: PERFLAB_DB_URL"
  else say "PostgreSQL: not running"; fi
  if health; then say "MLflow: running (pid $(mlflow_pid || echo '?'))"; else say "MLflow: not running"; fi
  local name; name=$(hostname -f 2> /dev/null || hostname)
  echo "each GPU host sets:  export MLFLOW_TRACKING_URI=http://$name:$PORT"
  if [ -z "${PERFLAB_DB_URL:-}" ]; then
    echo "sweeps on several hosts:  perflab sweep run ... --storage postgresql://perflab:\$(cat $DIR/pg-password)@$name:$PG_PORT/optuna"
    [ "$PG_LISTEN" = localhost ] && echo "  (PostgreSQL listens on localhost only: PERFLAB_PG_LISTEN='*' for other hosts)"
  fi
  return 0
}

what=${2:-all}
case "${1:-}" in
  start)
    case "$what" in db) start_db ;; mlflow) start_mlflow ;; all) start_db; start_mlflow; status ;; *) die "start db|mlflow, not '$what'" ;; esac ;;
  stop)
    case "$what" in db) stop_db ;; mlflow) stop_mlflow ;; all) stop_mlflow; stop_db ;; *) die "stop db|mlflow, not '$what'" ;; esac ;;
  status) status ;;
  *) die "usage: $0 start|stop [db|mlflow] | status" ;;
esac
