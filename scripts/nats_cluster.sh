#!/usr/bin/env bash
# A throw-away three-node NATS JetStream cluster on 127.0.0.1, for the bus's
# cluster and fault tests (replicated streams, the leader lease).
#
# Usage: scripts/nats_cluster.sh start DIR      start nodes 1-3, wait until JetStream has a
#                                               meta leader, print the client URLs as one line
#                                               (nats://127.0.0.1:A,nats://127.0.0.1:B,...),
#                                               also written to DIR/urls
#        scripts/nats_cluster.sh stop DIR       stop every node (SIGTERM, then SIGKILL after
#                                               10 s); nothing running is not an error
#        scripts/nats_cluster.sh kill DIR N     SIGKILL node N (1-3): a crash
#        scripts/nats_cluster.sh pause DIR N    SIGSTOP node N: a frozen server (its sockets
#                                               stay open, nothing answers)
#        scripts/nats_cluster.sh resume DIR N   SIGCONT node N
#        scripts/nats_cluster.sh restart DIR N  stop node N (as `stop` does) and start it again
#                                               with the same ports and store; waits until it
#                                               is routed to the others and sees a meta leader
#        scripts/nats_cluster.sh status DIR     one line per node: running, paused or down,
#                                               and the meta leader it reports
#
# DIR holds everything: nN.conf (each node's configuration: client, cluster
# and monitoring ports, routes to the other two), nN.pid, nN.log, nN/store
# (its JetStream store) and urls. `stop` leaves DIR in place (the logs are
# what a failed test needs); remove it afterwards, or `start` it again (new
# ports, the same stores). Ports are picked at random
# in 20000-31999 (below Linux's ephemeral range, so outgoing connections do not
# take them), checked free, and tried again when a node could not bind.
# Works as root (nats-server needs no privileges and drops none). Needs
# nats-server (scripts/bootstrap.sh installs it) and curl.
set -euo pipefail

readonly NODES=(1 2 3)
readonly CLUSTER_NAME=matchbook
readonly READY_TIMEOUT_S=30
readonly STOP_TIMEOUT_S=10

die() {
  echo "nats_cluster: $*" >&2
  exit 1
}

usage() {
  die "usage: $0 start|stop|status DIR, or $0 kill|pause|resume|restart DIR N (N: 1-3)"
}

[ $# -ge 2 ] || usage
cmd=$1
dir=$2
[ -n "${dir}" ] || usage
case "${dir}" in
  /*) ;;
  *) dir="$(pwd)/${dir}" ;;
esac
dir=${dir%/}

nats_server() {
  local p
  for p in /usr/sbin/nats-server /usr/bin/nats-server; do
    if [ -x "${p}" ]; then
      echo "${p}"
      return 0
    fi
  done
  command -v nats-server || die "nats-server not found: install the package nats-server (scripts/bootstrap.sh)"
}

# The node's pid when its process is alive and is the nats-server of this
# DIR (a pid file left by a killed node may name a recycled pid).
node_pid() {
  local n=$1 pid
  [ -f "${dir}/n${n}.pid" ] || return 1
  pid=$(cat "${dir}/n${n}.pid")
  [ -n "${pid}" ] && kill -0 "${pid}" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -qF -- "${dir}/n${n}.conf" || return 1
  echo "${pid}"
}

# "T" (stopped) for a paused process, as /proc/PID/stat says.
node_paused() {
  local pid=$1
  [ "$(awk '{print $3}' "/proc/${pid}/stat" 2>/dev/null)" = "T" ]
}

port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Nine distinct free ports: client, cluster and monitoring for each node.
pick_ports() {
  local -A taken=()
  local port
  ports=()
  while [ "${#ports[@]}" -lt 9 ]; do
    port=$((20000 + RANDOM % 12000))
    [ -z "${taken[${port}]:-}" ] || continue
    port_in_use "${port}" && continue
    taken[${port}]=1
    ports+=("${port}")
  done
}

client_port() { sed -n 's/^listen: 127\.0\.0\.1:\([0-9]*\)$/\1/p' "${dir}/n$1.conf"; }
http_port() { sed -n 's/^http: 127\.0\.0\.1:\([0-9]*\)$/\1/p' "${dir}/n$1.conf"; }

# Writes nN.conf for the three nodes from ${ports[@]}.
write_configs() {
  local n i routes
  for n in "${NODES[@]}"; do
    routes=""
    for i in "${NODES[@]}"; do
      [ "${i}" = "${n}" ] && continue
      routes+="    nats-route://127.0.0.1:${ports[$(((i - 1) * 3 + 1))]}"$'\n'
    done
    mkdir -p "${dir}/n${n}/store"
    cat >"${dir}/n${n}.conf" <<EOF
# nats_cluster.sh: node ${n} of 3
server_name: n${n}
listen: 127.0.0.1:${ports[$(((n - 1) * 3))]}
http: 127.0.0.1:${ports[$(((n - 1) * 3 + 2))]}
pid_file: "${dir}/n${n}.pid"
log_file: "${dir}/n${n}.log"
jetstream {
  store_dir: "${dir}/n${n}/store"
}
cluster {
  name: ${CLUSTER_NAME}
  listen: 127.0.0.1:${ports[$(((n - 1) * 3 + 1))]}
  routes: [
${routes}  ]
}
EOF
  done
}

# Starts node N in the background, detached from this script: its own
# session, stdin from /dev/null and output to its log, so a caller reading
# this script's stdout (urls=$(... start DIR)) is not held open by it. The
# server writes nN.pid itself once it runs; launched[N] is the process
# started here, to notice a server that exits before that.
declare -A launched=()
start_node() {
  local n=$1 bin
  bin=$(nats_server)
  rm -f "${dir}/n${n}.pid"
  setsid "${bin}" -c "${dir}/n${n}.conf" </dev/null >>"${dir}/n${n}.log" 2>&1 &
  launched[${n}]=$!
}

# The meta leader node N's monitoring port reports ("" when none or no answer).
meta_leader() {
  curl -sf --max-time 1 "http://127.0.0.1:$(http_port "$1")/jsz" 2>/dev/null |
    tr -d ' \n' | sed -n 's/.*"meta_cluster":{[^}]*"leader":"\([^"]*\)".*/\1/p'
}

# Routes node N has to the other nodes.
routes_of() {
  curl -sf --max-time 1 "http://127.0.0.1:$(http_port "$1")/routez" 2>/dev/null |
    tr -d ' \n' | sed -n 's/.*"num_routes":\([0-9]*\).*/\1/p'
}

# Node N is running, routed to both others, and knows the meta leader.
node_ready() {
  local n=$1
  node_pid "${n}" >/dev/null || return 1
  [ "$(routes_of "${n}")" = "2" ] || return 1
  [ -n "$(meta_leader "${n}")" ]
}

# Waits until every node in "$@" (started by start_node) is ready; fails
# when one exited (its number in ${failed_node}) or the time ran out.
wait_ready() {
  local deadline=$((SECONDS + READY_TIMEOUT_S)) n all
  failed_node=""
  while [ "${SECONDS}" -lt "${deadline}" ]; do
    all=1
    for n in "$@"; do
      if ! node_pid "${n}" >/dev/null && ! kill -0 "${launched[${n}]:-0}" 2>/dev/null; then
        failed_node=${n}
        return 1
      fi
      node_ready "${n}" || all=0
    done
    [ "${all}" = 1 ] && return 0
    sleep 0.2
  done
  return 1
}

# SIGTERM, then SIGKILL if it has not exited after STOP_TIMEOUT_S; a paused
# node is continued so that it can act on the SIGTERM.
stop_node() {
  local n=$1 pid i
  # A node started by this run may not have written its pid file yet.
  if ! pid=$(node_pid "${n}"); then
    pid=${launched[${n}]:-}
    if [ -z "${pid}" ] || ! kill -0 "${pid}" 2>/dev/null; then
      rm -f "${dir}/n${n}.pid"
      return 0
    fi
  fi
  kill -TERM "${pid}" 2>/dev/null || true
  kill -CONT "${pid}" 2>/dev/null || true
  for ((i = 0; i < STOP_TIMEOUT_S * 10; i++)); do
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "${pid}" 2>/dev/null; then
    kill -KILL "${pid}" 2>/dev/null || true
    while kill -0 "${pid}" 2>/dev/null; do sleep 0.05; done
  fi
  rm -f "${dir}/n${n}.pid"
}

stop_all() {
  local n
  [ -d "${dir}" ] || return 0
  for n in "${NODES[@]}"; do stop_node "${n}"; done
}

urls() {
  local n line=""
  for n in "${NODES[@]}"; do
    line+="${line:+,}nats://127.0.0.1:$(client_port "${n}")"
  done
  echo "${line}"
}

start() {
  local n
  for n in "${NODES[@]}"; do
    if node_pid "${n}" >/dev/null; then die "node ${n} of ${dir} is running (stop it first)"; fi
  done
  command -v curl >/dev/null || die "curl not found"
  mkdir -p "${dir}"
  for _ in 1 2 3; do
    pick_ports
    write_configs
    for n in "${NODES[@]}"; do start_node "${n}"; done
    if wait_ready "${NODES[@]}"; then
      urls >"${dir}/urls"
      cat "${dir}/urls"
      return 0
    fi
    stop_all
    # Another process took a port between the check and the bind: new ports.
    if [ -n "${failed_node}" ] &&
      grep -qs "address already in use" "${dir}/n${failed_node}.log"; then
      continue
    fi
    [ -z "${failed_node}" ] ||
      die "node ${failed_node} exited while starting, see ${dir}/n${failed_node}.log"
    die "the cluster did not become ready in ${READY_TIMEOUT_S} s, see ${dir}/n*.log"
  done
  die "no free ports after 3 attempts, see ${dir}/n*.log"
}

# Checks N and that DIR holds a cluster; sets ${node}.
node_arg() {
  [ $# -eq 1 ] || usage
  case "$1" in
    1 | 2 | 3) node=$1 ;;
    *) usage ;;
  esac
  [ -f "${dir}/n${node}.conf" ] || die "no cluster in ${dir} (start it first)"
}

signal_node() {
  local sig=$1 pid
  pid=$(node_pid "${node}") || die "node ${node} is not running"
  kill "-${sig}" "${pid}"
}

status() {
  local n pid state
  for n in "${NODES[@]}"; do
    [ -f "${dir}/n${n}.conf" ] || die "no cluster in ${dir}"
    state=down
    if pid=$(node_pid "${n}"); then
      state="running (pid ${pid})"
      node_paused "${pid}" && state="paused (pid ${pid})"
    fi
    echo "n${n} nats://127.0.0.1:$(client_port "${n}") ${state} meta leader: $(meta_leader "${n}")"
  done
}

case "${cmd}" in
  start)
    [ $# -eq 2 ] || usage
    start
    ;;
  stop)
    [ $# -eq 2 ] || usage
    stop_all
    ;;
  status)
    [ $# -eq 2 ] || usage
    status
    ;;
  kill)
    node_arg "${@:3}"
    if pid=$(node_pid "${node}"); then
      kill -KILL "${pid}"
      while kill -0 "${pid}" 2>/dev/null; do sleep 0.05; done
    fi
    ;;
  pause)
    node_arg "${@:3}"
    signal_node STOP
    ;;
  resume)
    node_arg "${@:3}"
    signal_node CONT
    ;;
  restart)
    node_arg "${@:3}"
    stop_node "${node}"
    start_node "${node}"
    wait_ready "${node}" ||
      die "node ${node} did not come back${failed_node:+ (it exited)}, see ${dir}/n${node}.log"
    ;;
  *) usage ;;
esac
