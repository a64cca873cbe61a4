#!/usr/bin/env bash
# Nonsensical arguments are refused with exit 2 and a message naming the
# problem; an unreachable target fails quickly (exit 1) with a clear error.
# Usage: load_bad_args.sh MATCHBOOK MATCHBOOK_LOAD
set -u
LOAD=$2
source "$(dirname "$0")/common.sh"

T=http://127.0.0.1:1
expect() {  # expect RC PATTERN ARGS...
  local want=$1 pattern=$2
  shift 2
  local out rc
  out=$("$LOAD" "$@" 2>&1)
  rc=$?
  [ $rc -eq "$want" ] || fail "'$*' exited $rc, want $want: $out"
  grep -qiE -- "$pattern" <<<"$out" || fail "'$*': message does not match '$pattern': $out"
}

expect 2 "unknown preset 'nope'" --target $T --admin-token x --preset nope
expect 2 "--subscribe-to: 'wss://127.0.0.1:1' is not http://host:port" --target $T --admin-token x --preset coinflow --subscribe-to wss://127.0.0.1:1
expect 2 "--preset" --target $T --admin-token x
expect 2 "--rate: must be > 0" --target $T --admin-token x --preset coinflow --rate 0
expect 2 "--rate: must be > 0" --target $T --admin-token x --preset coinflow --rate -5
expect 2 "--rate: must be > 0 and at most" --target $T --admin-token x --preset coinflow --rate 1e12
expect 2 "--rate" --target $T --admin-token x --preset coinflow --rate abc
expect 2 "--duration: must be > 0" --target $T --admin-token x --preset coinflow --duration 0
expect 2 "--duration: must be > 0" --target $T --admin-token x --preset coinflow --duration -1
expect 2 "--subscribers: must be" --target $T --admin-token x --preset coinflow --subscribers -1
expect 2 "--subscribe-to: 'ws://127.0.0.1:1' is not http://host:port" --target $T --admin-token x --preset coinflow --subscribe-to ws://127.0.0.1:1
expect 2 "--subscribe-to: port" --target $T --admin-token x --preset coinflow --subscribe-to http://127.0.0.1:0
expect 2 "not http://host:port" --target ftp://127.0.0.1:80 --admin-token x --preset coinflow
expect 2 "not http://host:port" --target http://127.0.0.1 --admin-token x --preset coinflow
expect 2 "port 'x' is not" --target http://127.0.0.1:x --admin-token x --preset coinflow
expect 2 "--target" --admin-token x --preset coinflow
expect 2 "--admin-token: missing" --target $T --preset coinflow
expect 2 "--connections: must be" --target $T --admin-token x --preset coinflow --connections 0
expect 2 "--cancel-share: must be 0..1" --target $T --admin-token x --preset coinflow --cancel-share 2
expect 2 "--resp-type" --target $T --admin-token x --preset coinflow --resp-type BOGUS
expect 2 "--transport" --target $T --admin-token x --preset coinflow --transport BOGUS
expect 2 "--ws-auth" --target $T --admin-token x --preset coinflow --transport ws-api --ws-auth BOGUS
expect 2 "--ws-auth" --target $T --admin-token x --preset coinflow --ws-auth session
expect 2 "--bogus" --target $T --admin-token x --preset coinflow --bogus

# Nothing listens on port 1: a clear error within 5 s.
start=$(date +%s%N)
expect 1 "unreachable.*127.0.0.1:1.*(refused|failed)" --target $T --admin-token x --preset coinflow --duration 1
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ $elapsed_ms -lt 5000 ] || fail "unreachable target took ${elapsed_ms} ms"

# A wrong admin token: refused at set-up, exit 1.
start_server "$1"
expect 1 "admin token" --target "http://127.0.0.1:$PORT" --admin-token wrong --preset coinflow --duration 1
expect 1 "--symbol: no market 'NOPE'" --target "http://127.0.0.1:$PORT" --admin-token "$TOKEN" \
  --preset coinflow --duration 1 --symbol NOPE
echo "load_bad_args: ok"
