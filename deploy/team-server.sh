#!/usr/bin/env bash
# A team's perflab store: PostgreSQL and an MLflow tracking server on it, artifacts proxied by the server; closed
# to anyone without a user of its own (MLflow's basic-auth app, PostgreSQL's SCRAM passwords, no trust rule).
#
#   deploy/team-server.sh start [db|mlflow]    start both (or one); a running one is left alone
#   deploy/team-server.sh stop [db|mlflow]     stop both (or one)
#   deploy/team-server.sh status               what runs, whether each printed name is served, what GPU hosts set
#   deploy/team-server.sh user add|remove NAME an MLflow user; its credentials in $PERFLAB_TEAM_DIR/users/NAME.credentials
#
# Settings (environment):
#   PERFLAB_TEAM_DIR        database, artifacts, secrets, logs and pid files (default ./perflab-team), its owner's alone
#   PERFLAB_DB_URL          an existing PostgreSQL database for MLflow (postgresql://user@host:5432/mlflow, without a
#                           password: that goes in $PERFLAB_TEAM_DIR/pgpass, host:port:db:user:password): no
#                           PostgreSQL of our own then
#   PERFLAB_PG_PORT         our PostgreSQL's port (default 5432)
#   PERFLAB_PG_LISTEN       the interfaces it listens on (default localhost; '*' lets sweep workers on other hosts
#                           reach their Optuna database, as role perflab_optuna with the password in optuna.pgpass)
#   PERFLAB_PG_OS_USER      the user PostgreSQL runs as when this script runs as root (default postgres, else nobody)
#   PERFLAB_MLFLOW_HOST     the interface MLflow listens on (default 0.0.0.0: every GPU host of the team)
#   PERFLAB_MLFLOW_PORT     default 5000
#   PERFLAB_MLFLOW_WORKERS  server processes (default 4)
#   PERFLAB_SERVER_NAME     the name GPU hosts reach this host by (default: hostname -f)
#   PERFLAB_SERVER_ADDRESS  the address they reach it at (default: the first of hostname -I)
#   PERFLAB_ALLOWED_HOSTS   more names or addresses the hosts use (comma-separated; '*' patterns as MLflow's
#                           --allowed-hosts): MLflow refuses any Host header not listed, localhost and the two above
#
# Needs: PostgreSQL's server binaries (Debian/Ubuntu: apt-get install postgresql), and perflab installed
# (mlflow and psycopg: pip install -e '.[test]', or pip install mlflow 'psycopg[binary]').
set -euo pipefail
umask 077  # the store's files (database, artifacts, logs, secrets) are this user's alone

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # deploy/: uvicorn_nodelay.py, team_admin.py
DIR=$(mkdir -p "${PERFLAB_TEAM_DIR:-perflab-team}" && cd "${PERFLAB_TEAM_DIR:-perflab-team}" && pwd)
PY=${PYTHON:-python3}
PG_PORT=${PERFLAB_PG_PORT:-5432}
PG_LISTEN=${PERFLAB_PG_LISTEN:-localhost}
HOST=${PERFLAB_MLFLOW_HOST:-0.0.0.0}
PORT=${PERFLAB_MLFLOW_PORT:-5000}
WORKERS=${PERFLAB_MLFLOW_WORKERS:-4}
NAME=${PERFLAB_SERVER_NAME:-$(hostname -f 2> /dev/null || hostname)}
ADDRESS=${PERFLAB_SERVER_ADDRESS:-$(hostname -I 2> /dev/null | awk '{print $1}')}
PGDATA="$DIR/pgdata"
SOCKETS="$DIR/run"  # PostgreSQL's socket and log, its OS user's alone
USERS="$DIR/users"  # an MLflow credentials file per user, admin's included
export PGPASSFILE="$DIR/pgpass" PERFLAB_ADMIN_CREDENTIALS="$DIR/users/admin.credentials"

say() { echo "team-server: $*"; }
die() { echo "team-server: $*" >&2; exit 1; }
admin() { "$PY" "$HERE/team_admin.py" "$@"; }
secret() { [ -s "$1" ] || "$PY" -c "import secrets; print(secrets.token_urlsafe(24))" > "$1"; }
chmod 711 "$DIR"  # PostgreSQL's user (under root) reaches its directories; nobody lists the rest
mkdir -p "$USERS"

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

db_url() {  # what MLflow connects to (passwords in $PGPASSFILE): our PostgreSQL's socket, or PERFLAB_DB_URL
  if [ -n "${PERFLAB_DB_URL:-}" ]; then
    # SQLAlchemy reads postgresql:// as psycopg2; perflab installs psycopg (3)
    echo "${PERFLAB_DB_URL/#postgresql:\/\//postgresql+psycopg://}"
  else
    echo "postgresql+psycopg://perflab@/${1:-mlflow}?host=$SOCKETS&port=$PG_PORT"
  fi
}
auth_db_url() {
  if [ -n "${PERFLAB_DB_URL:-}" ]; then echo "sqlite:///$DIR/basic_auth.db"; else db_url mlflow_auth; fi
}

db_running() { [ -z "${PERFLAB_DB_URL:-}" ] && [ -f "$PGDATA/postmaster.pid" ] && as_pg "$(pg_bin)/pg_ctl" -D "$PGDATA" status > /dev/null 2>&1; }

init_db() {  # a new cluster: every connection needs a password (SCRAM), local ones included
  local bin=$1 pwfile="$SOCKETS/initdb-password"
  secret "$DIR/pg-password"
  echo "*:*:*:perflab:$(cat "$DIR/pg-password")" > "$PGPASSFILE"
  cp "$DIR/pg-password" "$pwfile"  # initdb runs as PostgreSQL's user: a copy it can read, gone after
  mkdir -p "$PGDATA"
  [ "$(id -u)" = 0 ] && chown "$(pg_user)" "$pwfile" "$PGDATA"
  as_pg "$bin/initdb" -D "$PGDATA" -U perflab --pwfile="$pwfile" --auth-local=scram-sha-256 \
    --auth-host=scram-sha-256 -E UTF8 > "$DIR/initdb.log" || { rm -f "$pwfile"; die "initdb failed: $DIR/initdb.log"; }
  rm -f "$pwfile"
  if [ "$PG_LISTEN" != localhost ] && [ "$PG_LISTEN" != 127.0.0.1 ]; then  # sweep workers on other hosts
    echo "host optuna perflab_optuna all scram-sha-256" | as_pg tee -a "$PGDATA/pg_hba.conf" > /dev/null
  fi
}

close_trust() {  # a cluster an earlier recipe made: it trusted local connections, its files were readable
  as_pg grep -qE '^[^#]*[[:space:]]trust([[:space:]]|$)' "$PGDATA/pg_hba.conf" || return 0
  as_pg sed -i -E '/^[^#]/s/[[:space:]]trust([[:space:]]|$)/ scram-sha-256\1/' "$PGDATA/pg_hba.conf"
  echo "*:*:*:perflab:$(cat "$DIR/pg-password")" > "$PGPASSFILE"
  chmod -R go-rwx "$DIR"/*
  [ "$(id -u)" = 0 ] && chown root "$DIR"  # PostgreSQL writes in run/ now, not beside the secrets
  say "PostgreSQL: its trust rules now ask for the password (scram-sha-256); the store's files are this user's alone"
}

start_db() {
  if [ -n "${PERFLAB_DB_URL:-}" ]; then
    [[ "$PERFLAB_DB_URL" =~ ://[^/@]*:[^/@]*@ ]] && die "PERFLAB_DB_URL holds a password (it would show in ps): \
put it in $PGPASSFILE as host:port:database:user:password, and the URL without it"
    say "database: PERFLAB_DB_URL (not started here)"; return
  fi
  if db_running; then say "PostgreSQL already runs on port $PG_PORT"; return; fi
  local bin; bin=$(pg_bin)
  mkdir -p "$SOCKETS"
  [ "$(id -u)" = 0 ] && chown "$(pg_user)" "$SOCKETS"
  [ -f "$PGDATA/PG_VERSION" ] || init_db "$bin"
  close_trust
  as_pg "$bin/pg_ctl" -D "$PGDATA" -l "$SOCKETS/postgresql.log" -w -t 60 \
    -o "-p $PG_PORT -k $SOCKETS -c listen_addresses='$PG_LISTEN'" start > /dev/null
  for db in mlflow mlflow_auth; do  # MLflow's runs; its users and permissions: the superuser's alone
    "$bin/createdb" -h "$SOCKETS" -p "$PG_PORT" -U perflab "$db" 2> /dev/null || true
    "$bin/psql" -h "$SOCKETS" -p "$PG_PORT" -U perflab -d postgres -qc "REVOKE ALL ON DATABASE $db FROM PUBLIC"
  done
  secret "$DIR/optuna-password"  # Optuna's studies (perflab sweep run --storage ...): a role that owns only them
  PGHOST=$SOCKETS PGPORT=$PG_PORT admin role perflab_optuna optuna "$DIR/optuna-password"
  local line=":$PG_PORT:optuna:perflab_optuna:$(cat "$DIR/optuna-password")"
  printf '%s\n' "$NAME$line" ${ADDRESS:+"$ADDRESS$line"} "localhost$line" "127.0.0.1$line" > "$DIR/optuna.pgpass"
  say "PostgreSQL runs on port $PG_PORT (data in $PGDATA)"
}

stop_db() {
  if [ -n "${PERFLAB_DB_URL:-}" ] || [ ! -f "$PGDATA/PG_VERSION" ]; then return; fi
  as_pg "$(pg_bin)/pg_ctl" -D "$PGDATA" -m fast -w stop > /dev/null 2>&1 && say "PostgreSQL stopped" || true
}

local_url() { if [ "$HOST" = 0.0.0.0 ]; then echo "http://127.0.0.1:$PORT"; else echo "http://$HOST:$PORT"; fi; }
health() { "$PY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" \
             "$(local_url)/health" > /dev/null 2>&1; }
names() { echo "$NAME" ${ADDRESS:+"$ADDRESS"}; }
# Each as the Host header a GPU host sends: served to a user, refused to anyone else (deploy/team_admin.py check).
reachable() { admin check "$(local_url)" $(names); }

allowed_hosts() {  # localhost and the printed name and address, bare and with a port, and the admin's list
  local h out=""
  for h in localhost 127.0.0.1 "[::1]" $(names) $(hostname 2> /dev/null); do out+="$h,$h:*,"; done
  echo "$out${PERFLAB_ALLOWED_HOSTS:-}" | sed 's/,$//'
}

mlflow_pid() { [ -f "$DIR/mlflow.pid" ] && kill -0 "$(cat "$DIR/mlflow.pid")" 2> /dev/null && cat "$DIR/mlflow.pid"; }

auth_config() {  # no secret in it: the admin's password and Flask's key reach the server through its environment
  secret "$DIR/flask-secret"
  [ -f "$PERFLAB_ADMIN_CREDENTIALS" ] || admin new-admin "$PERFLAB_ADMIN_CREDENTIALS"
  # EDIT: every user of the team logs into every experiment; one without credentials gets 401. A password is
  # checked by a slow hash (PBKDF2: 1.5 s a request on a busy 2-core host): each worker keeps a verified one for
  # a minute, so a removed user's requests may pass on another worker for up to 60 s.
  printf '%s\n' "[mlflow]" "default_permission = EDIT" "database_uri = $(auth_db_url)" "admin_username = admin" \
    "authorization_function = mlflow.server.auth:authenticate_request_basic_auth" "auth_cache_ttl_seconds = 60" \
    > "$DIR/basic_auth.ini"
}

start_mlflow() {
  if mlflow_pid > /dev/null; then say "MLflow already runs (pid $(mlflow_pid))"; return; fi
  mkdir -p "$DIR/artifacts"
  auth_config
  # uvicorn's workers leave Nagle's algorithm on (deploy/uvicorn_nodelay.py): ~40 ms per request without this loop.
  local args=(--backend-store-uri "$(db_url)" --serve-artifacts --artifacts-destination "$DIR/artifacts"
              --host "$HOST" --port "$PORT" --workers "$WORKERS" --uvicorn-opts "--loop uvicorn_nodelay:NoDelayLoop"
              --app-name basic-auth --allowed-hosts "$(allowed_hosts)")
  # MLflow's job runner (GenAI evaluation jobs: a dozen more processes) is not what perflab uses: off unless
  # MLFLOW_SERVER_ENABLE_JOB_EXECUTION says otherwise. Its own session: `stop` ends the server and its workers.
  MLFLOW_SERVER_ENABLE_JOB_EXECUTION=${MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false} \
    MLFLOW_AUTH_CONFIG_PATH="$DIR/basic_auth.ini" MLFLOW_FLASK_SERVER_SECRET_KEY="$(cat "$DIR/flask-secret")" \
    MLFLOW_AUTH_ADMIN_PASSWORD="$(admin password "$PERFLAB_ADMIN_CREDENTIALS")" \
    PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" \
    setsid "$PY" -m mlflow server "${args[@]}" >> "$DIR/mlflow.log" 2>&1 < /dev/null &
  echo $! > "$DIR/mlflow.pid"
  for _ in $(seq 1 240); do  # a new database is migrated first: up to a minute on a small host
    if health; then
      reachable || { stop_mlflow; die "MLflow started but does not serve the names GPU hosts use (above)"; }
      say "MLflow runs on http://$HOST:$PORT (pid $(cat "$DIR/mlflow.pid"), log $DIR/mlflow.log)"; return
    fi
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
  if health; then
    say "MLflow: running (pid $(mlflow_pid || echo '?'))"
    reachable && say "MLflow serves $(names | sed 's/ / and /') to users, and refuses requests without credentials"
  else say "MLflow: not running"; fi
  echo "each GPU host sets:  export MLFLOW_TRACKING_URI=http://$NAME:$PORT   (or http://${ADDRESS:-ADDRESS}:$PORT)"
  echo "  and its user's credentials: ~/.mlflow/credentials (mode 600), a copy of $USERS/USER.credentials"
  echo "  (deploy/team-server.sh user add USER writes it), or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
  if [ -z "${PERFLAB_DB_URL:-}" ]; then
    echo "sweeps on several hosts:  perflab sweep run ... --storage postgresql://perflab_optuna@$NAME:$PG_PORT/optuna"
    echo "  with the lines of $DIR/optuna.pgpass in ~/.pgpass (mode 600)"
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
  user)
    [ $# = 3 ] || die "user add|remove NAME"
    health || die "MLflow is not running: deploy/team-server.sh start first"
    admin user "$2" "$3" "$USERS" "$(local_url)" ;;
  *) die "usage: $0 start|stop [db|mlflow] | status | user add|remove NAME" ;;
esac
