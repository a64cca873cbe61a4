#!/usr/bin/env bash
# The journal on the bus end to end: `matchbook serve --nats` against a
# nats-server started here publishes every durable record (health and
# metrics say how far) and its newest snapshot; NATS killed, deposits and orders are still answered
# and the lag shows in /admin/v1/health; NATS back, the lag returns to 0;
# the server stopping leaves nothing unpublished; a bad --nats is refused
# before anything starts.
# Usage: tests/cli_bus.sh <path to matchbook>
set -euo pipefail
mb=$1
dir=$(mktemp -d)
pid=
npid=
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
  if [ -n "$npid" ]; then kill -9 "$npid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  echo "--- serve stderr ---" >&2
  cat "$dir/serve.err" >&2 || true
  exit 1
}
nats_bin=$(command -v nats-server || echo /usr/sbin/nats-server)
[ -x "$nats_bin" ] || fail "nats-server is not installed (scripts/bootstrap.sh installs it)"
nport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
nats_url="nats://127.0.0.1:$nport"
start_nats() {
  "$nats_bin" -js -a 127.0.0.1 -p "$nport" -sd "$dir/nats" -l "$dir/nats.log" &
  npid=$!
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$nport") 2>/dev/null && return 0
    sleep 0.1
  done
  fail "nats-server did not start"
}

# A bad URL is refused before anything starts.
if "$mb" serve --data-dir "$dir/bad" --port 0 --nats http://127.0.0.1:1 >/dev/null 2>"$dir/bad.err"; then
  fail "serve accepted --nats http://..."
fi
grep -q -- "--nats: NATS server \"http://127.0.0.1:1\" is not nats://host:port" "$dir/bad.err" ||
  fail "unclear refusal: $(cat "$dir/bad.err")"
[ ! -e "$dir/bad/journal" ] || fail "a refused start created a journal"

start_nats
"$mb" serve --data-dir "$dir/d" --port 0 --nats "$nats_url" >"$dir/serve.out" 2>"$dir/serve.err" &
pid=$!
for _ in $(seq 300); do
  grep -qx ready "$dir/serve.out" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || fail "serve exited before ready"
  sleep 0.1
done
grep -qx ready "$dir/serve.out" || fail "serve not ready"
base=$(sed -n 's#^api: \(http://[^/]*\)/api/v3$#\1#p' "$dir/serve.out")
token=$(cat "$dir/d/admin.token")
admin=(-s -H "X-MB-ADMIN-TOKEN: $token" -H "Content-Type: application/json")
account=$(curl "${admin[@]}" -X POST "$base/admin/v1/accounts" -d '{"name":"bus-test"}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["accountId"])')
deposit() {
  local code
  code=$(curl "${admin[@]}" -o "$dir/deposit.json" -w '%{http_code}' -X POST \
    "$base/admin/v1/deposits" \
    -d "{\"accountId\":$account,\"asset\":\"USDT\",\"amount\":\"10\",\"ref\":\"bus-$1\"}")
  [ "$code" = 200 ] || fail "deposit $1 answered $code: $(cat "$dir/deposit.json")"
}
# health FIELD: the bus object's field (and durableSequence as "durable").
health() {
  curl "${admin[@]}" "$base/admin/v1/health" | python3 -c '
import json, sys
h = json.load(sys.stdin)
f = sys.argv[1]
print(h["durableSequence"] if f == "durable" else h["bus"][f])' "$1"
}
# Waits until the stream holds every durable record.
caught_up() {
  for _ in $(seq 200); do
    [ "$(health lagEvents)" = 0 ] && [ "$(health publishedSequence)" = "$(health durable)" ] && return 0
    sleep 0.1
  done
  fail "the publisher did not catch up: $(curl "${admin[@]}" "$base/admin/v1/health")"
}

for i in 1 2 3 4 5; do deposit "a$i"; done
caught_up
[ "$(health publishedSequence)" -ge 5 ] || fail "published $(health publishedSequence) records"
[ "$(health stream)" = MATCHBOOK_matchbook ] || fail "stream $(health stream)"
[ "$(health connected)" = True ] || fail "not connected"
# Read whole, then searched: grep -q would close the pipe early, and curl's
# SIGPIPE would fail the pipeline.
metrics=$(curl -s "$base/metrics")
grep -q '^matchbook_bus_lag_events 0$' <<<"$metrics" || fail "no lag metric"

# A snapshot (SIGUSR1 writes one) reaches the bus too.
kill -USR1 "$pid"
durable=$(health durable)
for _ in $(seq 100); do [ "$(health snapshotSequence)" = "$durable" ] && break; sleep 0.1; done
[ "$(health snapshotSequence)" = "$durable" ] ||
  fail "snapshot $durable not on the bus: $(health snapshotSequence)"
grep -q "snapshot $durable on the bus" "$dir/serve.err" || fail "the snapshot was not logged"

# NATS gone: deposits are answered as before; the lag shows.
kill -9 "$npid"
wait "$npid" 2>/dev/null || true
npid=
for i in 1 2 3 4 5 6 7 8; do deposit "b$i"; done
for _ in $(seq 100); do [ "$(health connected)" = False ] && break; sleep 0.1; done
[ "$(health connected)" = False ] || fail "still connected with NATS killed"
[ "$(health lagEvents)" -ge 8 ] || fail "lag $(health lagEvents) with NATS down"
# The publish in flight fails once its acknowledgement is overdue (timeout_ms).
for _ in $(seq 100); do [ -n "$(health lastError)" ] && break; sleep 0.1; done
[ -n "$(health lastError)" ] || fail "no error reported"
grep -q "trading is not affected" "$dir/serve.err" || fail "the outage was not logged"

# NATS back (its store kept): the stream is filled up to the journal.
start_nats
caught_up
[ -z "$(health lastError)" ] || fail "error left after recovery: $(health lastError)"

# Stopping leaves nothing unpublished.
deposit c1
durable=$(health durable)
kill -TERM "$pid"
wait "$pid" || fail "serve exited with $?"
pid=
grep -q "stopped at record $durable of $durable" "$dir/serve.err" ||
  fail "did not stop at $durable: $(grep 'stopped at' "$dir/serve.err")"
echo "cli bus checks: ok"
