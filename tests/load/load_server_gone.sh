#!/usr/bin/env bash
# A server killed (SIGKILL) mid-run: the load generator ends the run within
# 10 s with a report of what it measured (last line JSON, "aborted" set,
# requests > 0) and exit 1 — never a hang.
# Usage: load_server_gone.sh MATCHBOOK MATCHBOOK_LOAD
set -u
LOAD=$2
source "$(dirname "$0")/common.sh"
start_server "$1"
OUT=$(mktemp -d)
trap 'stop_server; rm -rf "$OUT"' EXIT

"$LOAD" --target "http://127.0.0.1:$PORT" --admin-token "$TOKEN" --preset coinflow --duration 30 \
  --rate 200 --subscribers 3 --accounts 4 --connections 8 --json >"$OUT/out" 2>"$OUT/err" &
LOAD_PID=$!
# Wait until the load is running (the server has answered orders), then kill it.
for _ in $(seq 200); do
  n=$(curl -s -H "X-MB-ADMIN-TOKEN: $TOKEN" "http://127.0.0.1:$PORT/admin/v1/health" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["durableSequence"])' 2>/dev/null)
  [ "${n:-0}" -gt 300 ] 2>/dev/null && break
  sleep 0.1
done
sleep 2
kill -9 "$SERVER_PID"
killed=$(date +%s)
for _ in $(seq 100); do
  kill -0 "$LOAD_PID" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$LOAD_PID" 2>/dev/null; then
  kill -9 "$LOAD_PID"
  fail "the load generator still runs 10 s after the server was killed"
fi
wait "$LOAD_PID"
rc=$?
[ $(( $(date +%s) - killed )) -le 10 ] || fail "took more than 10 s to stop"
[ $rc -eq 1 ] || { cat "$OUT/err" >&2; fail "exit $rc, want 1"; }
python3 - "$OUT/out" <<'PY' || { cat "$OUT/err" "$OUT/out" >&2; fail "report"; }
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert r["aborted"] and r["aborted"].startswith("server went away"), r["aborted"]
assert r["requests"] > 0, r["requests"]
assert r["duration_s"] < 25, r["duration_s"]
print("aborted after %.1f s: %s (%d requests)" % (r["duration_s"], r["aborted"], r["requests"]))
PY
echo "load_server_gone: ok"
