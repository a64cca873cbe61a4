#!/usr/bin/env bash
# A throw-away PostgreSQL 15 cluster for the projection's tests.
#
# Usage: scripts/pg_cluster.sh start DIR         initdb into DIR/data, start on a free
#                                                 port of 127.0.0.1, create the database
#                                                 `matchbook`, print its URL (one line)
#        scripts/pg_cluster.sh stop DIR          stop the server and remove DIR
#        scripts/pg_cluster.sh stop-server DIR   stop the server, keep the data
#        scripts/pg_cluster.sh start-server DIR  start it again (same port)
#
# The superuser `matchbook` has no password (trust authentication, local
# connections only). Durability is off (fsync=off): the data is disposable.
# As root, initdb and the server run as the unprivileged system user
# matchbook-pg (created if missing; `nobody` where useradd is unavailable),
# which owns DIR. Nothing is installed here: scripts/bootstrap.sh installs
# postgresql-15.
set -euo pipefail

readonly PG_BIN=/usr/lib/postgresql/15/bin
readonly SUPERUSER=matchbook
readonly DATABASE=matchbook

die() {
  echo "pg_cluster: $*" >&2
  exit 1
}

usage() {
  die "usage: $0 start|stop|stop-server|start-server DIR"
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$2
[ -n "${dir}" ] || usage
case "${dir}" in
  /*) ;;
  *) dir="$(pwd)/${dir}" ;;
esac
dir=${dir%/}

for b in initdb pg_ctl postgres psql; do
  [ -x "${PG_BIN}/${b}" ] ||
    die "${PG_BIN}/${b} not found: install the package postgresql-15 (scripts/bootstrap.sh)"
done

# The user the server runs as: initdb and postgres refuse to run as root.
run_user() {
  if [ "$(id -u)" -ne 0 ]; then
    id -un
  elif id -u matchbook-pg >/dev/null 2>&1; then
    echo matchbook-pg
  elif command -v useradd >/dev/null 2>&1 &&
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
      matchbook-pg >/dev/null 2>&1; then
    echo matchbook-pg
  else
    echo nobody
  fi
}

# Runs a command as the server's user (directly when not root).
as_pg() {
  local user
  user=$(cat "${dir}/user")
  if [ "$(id -u)" -ne 0 ]; then
    "$@"
  elif command -v runuser >/dev/null 2>&1; then
    runuser -u "${user}" -- "$@"
  else
    su -s /bin/sh "${user}" -c "$(printf '%q ' "$@")"
  fi
}

port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

server_running() {
  [ -f "${dir}/data/postmaster.pid" ] && as_pg "${PG_BIN}/pg_ctl" -D "${dir}/data" status >/dev/null 2>&1
}

start_server() {
  as_pg "${PG_BIN}/pg_ctl" -D "${dir}/data" -l "${dir}/server.log" -w -t 60 start >/dev/null
}

stop_server() {
  if server_running; then
    as_pg "${PG_BIN}/pg_ctl" -D "${dir}/data" -w -t 60 -m fast stop >/dev/null
  fi
}

start() {
  [ ! -e "${dir}/data" ] || die "${dir}/data already exists (stop it first)"
  mkdir -p "${dir}/sock"
  local user
  user=$(run_user)
  echo "${user}" >"${dir}/user"
  if [ "$(id -u)" -eq 0 ]; then
    chown -R "${user}" "${dir}"
    as_pg test -w "${dir}" ||
      die "${dir} is not reachable by user ${user}: use a directory under /tmp"
  fi
  as_pg "${PG_BIN}/initdb" -D "${dir}/data" -U "${SUPERUSER}" --auth=trust -E UTF8 \
    --locale=C >"${dir}/initdb.log" 2>&1 || die "initdb failed, see ${dir}/initdb.log"

  local attempt port
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    port_in_use "${port}" && continue
    cat >>"${dir}/data/postgresql.conf" <<EOF
# pg_cluster.sh (attempt ${attempt})
listen_addresses = '127.0.0.1'
port = ${port}
unix_socket_directories = '${dir}/sock'
fsync = off
full_page_writes = off
max_connections = 100
EOF
    if start_server; then
      echo "${port}" >"${dir}/port"
      "${PG_BIN}/psql" -q -X -h 127.0.0.1 -p "${port}" -U "${SUPERUSER}" -d postgres \
        -c "CREATE DATABASE ${DATABASE}" >/dev/null ||
        die "could not create the database ${DATABASE}, see ${dir}/server.log"
      echo "postgresql://${SUPERUSER}@127.0.0.1:${port}/${DATABASE}"
      return 0
    fi
    # Another process took the port between the check and the bind: next one.
    grep -q "could not bind\|could not create any TCP/IP sockets" "${dir}/server.log" 2>/dev/null ||
      die "the server did not start, see ${dir}/server.log"
  done
  die "no free port found, see ${dir}/server.log"
}

case "${cmd}" in
  start) start ;;
  stop)
    if [ -f "${dir}/user" ] && [ -d "${dir}/data" ]; then stop_server; fi
    rm -rf "${dir}"
    ;;
  stop-server)
    [ -f "${dir}/port" ] || die "no cluster in ${dir}"
    stop_server
    ;;
  start-server)
    [ -f "${dir}/port" ] || die "no cluster in ${dir}"
    server_running || start_server || die "the server did not start, see ${dir}/server.log"
    ;;
  *) usage ;;
esac
