#!/usr/bin/env bash
# A throwaway PostgreSQL 15 server for tests (docs/postgres.md). Not a system
# service: initdb into DIR, a server that listens only on a unix socket in
# DIR (no TCP port to collide with), trust authentication, removed with DIR.
#
#   scripts/pg-test-server.sh start DIR [WATCH_PID]
#       Creates DIR/data, starts the server, prints its URL on stdout:
#         postgresql://korch@/postgres?host=DIR&port=5432
#       With WATCH_PID, a watchdog stops the server (immediate mode) and
#       removes DIR once that process is gone, so a test that crashes or is
#       killed leaves no server behind.
#   scripts/pg-test-server.sh restart DIR
#       Restarts the server (fast mode: clients are disconnected), for tests of
#       what a store does when its server goes away and comes back.
#   scripts/pg-test-server.sh stop DIR
#       Stops the server (immediate mode). Idempotent.
#
# PostgreSQL refuses to run as root: as root the server runs as the
# "postgres" user (Debian's postgresql-common makes it) or else "nobody", and
# DIR is handed to that user. The binaries come from postgresql-15
# (scripts/install-deps.sh); KORCH_PG_BIN names another folder of them.
set -euo pipefail

PG_BIN=${KORCH_PG_BIN:-/usr/lib/postgresql/15/bin}
PORT=5432  # names the socket file DIR/.s.PGSQL.5432; no TCP listener

die() {
  echo "pg-test-server: $*" >&2
  exit 1
}

# Runs "$@" as the server's user.
as_server() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u "$SERVER_USER" -- "$@"
  else
    "$@"
  fi
}

pick_user() {
  SERVER_USER=$(id -un)
  if [[ $(id -u) -eq 0 ]]; then
    if getent passwd postgres >/dev/null; then SERVER_USER=postgres; else SERVER_USER=nobody; fi
  fi
}

cmd=${1:-}
dir=${2:-}
[[ -n $cmd && -n $dir ]] || die "usage: $0 start DIR [WATCH_PID] | restart DIR | stop DIR"
[[ -x $PG_BIN/postgres && -x $PG_BIN/initdb && -x $PG_BIN/pg_ctl ]] ||
  die "PostgreSQL 15 server binaries not found in $PG_BIN (install postgresql-15: scripts/install-deps.sh)"
pick_user

case $cmd in
  start)
    watch_pid=${3:-}
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    # The socket path must fit in sun_path (107 bytes).
    ((${#dir} + 20 < 107)) || die "$dir: path too long for a unix socket"
    if [[ $(id -u) -eq 0 ]]; then
      chown "$SERVER_USER" "$dir"
      # As root the server runs as another user, who must be able to reach DIR.
      as_server test -x "$(dirname "$dir")" ||
        die "$SERVER_USER cannot enter $(dirname "$dir") (mode $(stat -c %a "$(dirname "$dir")")): make it searchable (chmod o+x) or use another folder"
    fi
    chmod 0700 "$dir"
    as_server "$PG_BIN/initdb" -D "$dir/data" -A trust -U korch -E UTF8 --locale=C --no-sync \
      >"$dir/initdb.log" 2>&1 || die "initdb failed: $(tail -n 5 "$dir/initdb.log")"
    # Connections come from the tests' own processes (and their children).
    as_server "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-k $dir -c listen_addresses= -p $PORT -c max_connections=200" start \
      >"$dir/pg_ctl.log" 2>&1 || die "server did not start: $(tail -n 5 "$dir/server.log" 2>/dev/null)"
    if [[ -n $watch_pid ]]; then
      # Detached from the caller's stdout so that $(...) returns at once.
      (
        while kill -0 "$watch_pid" 2>/dev/null && [[ -d $dir/data ]]; do sleep 1; done
        if [[ -d $dir/data ]]; then
          as_server "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
          rm -rf "$dir"
        fi
      ) </dev/null >/dev/null 2>&1 &
      disown
    fi
    echo "postgresql://korch@/postgres?host=$dir&port=$PORT"
    ;;
  restart)
    [[ -d $dir/data ]] || die "$dir: no server"
    as_server "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -m fast restart \
      >"$dir/pg_ctl.log" 2>&1 || die "server did not restart: $(tail -n 5 "$dir/server.log" 2>/dev/null)"
    ;;
  stop)
    [[ -d $dir/data ]] || exit 0
    if [[ -f $dir/data/postmaster.pid ]]; then
      as_server "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    ;;
  *)
    die "unknown command '$cmd' (start | restart | stop)"
    ;;
esac
