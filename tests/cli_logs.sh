#!/usr/bin/env bash
# The server's logs end to end: with --log-format json every line on stderr is
# one JSON object (ts, level, component, msg); the start-up decisions are each
# on a line of their own; no secret (API secret, admin token, signature) is
# ever written; --log-level warn keeps info lines out; bad log options are
# refused before anything starts.
# Usage: tests/cli_logs.sh <path to matchbook>
set -euo pipefail
mb=$1
dir=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  echo "--- stderr ---" >&2
  cat "$dir/serve.err" >&2 || true
  exit 1
}

# Starts the server; sets pid and base.
start() {
  rm -f "$dir/serve.out"  # no "ready" of an earlier server
  "$mb" serve --data-dir "$dir/d" --port 0 "$@" >"$dir/serve.out" 2>"$dir/serve.err" &
  pid=$!
  for _ in $(seq 300); do
    grep -qx ready "$dir/serve.out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || fail "serve exited before ready"
    sleep 0.1
  done
  grep -qx ready "$dir/serve.out" || fail "serve not ready"
  base=$(sed -n 's#^api: \(http://[^/]*\)/api/v3$#\1#p' "$dir/serve.out")
  [ -n "$base" ] || fail "no api: line"
}
stop() {
  kill -TERM "$pid"
  wait "$pid" || fail "serve exited with $?"
  pid=
}

start --log-format json
token=$(cat "$dir/d/admin.token")
admin=(-s -H "X-MB-ADMIN-TOKEN: $token" -H "Content-Type: application/json")
account=$(curl "${admin[@]}" -X POST "$base/admin/v1/accounts" -d '{"name":"log-test"}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["accountId"])')
keyjson=$(curl "${admin[@]}" -X POST "$base/admin/v1/accounts/$account/apiKeys" -d '{}')
apikey=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["apiKey"])' "$keyjson")
secret=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["secretKey"])' "$keyjson")
curl "${admin[@]}" -X POST "$base/admin/v1/deposits" \
  -d "{\"accountId\":$account,\"asset\":\"USDT\",\"amount\":\"1000\",\"ref\":\"log-test-1\"}" >/dev/null
symbol=BTCUSDT  # the embedded configuration's first market
query="symbol=$symbol&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&price=500&timestamp=$(date +%s%3N)"
signature=$(printf '%s' "$query" | openssl dgst -sha256 -hmac "$secret" | sed 's/^.*= //')
code=$(curl -s -o "$dir/order.json" -w '%{http_code}' -X POST -H "X-MBX-APIKEY: $apikey" \
  "$base/api/v3/order?$query&signature=$signature")
[ "$code" = 200 ] || fail "signed order answered $code: $(cat "$dir/order.json")"
# A bad signature and a revoked key are logged by nobody with their secrets.
curl -s -o /dev/null -X POST -H "X-MBX-APIKEY: $apikey" "$base/api/v3/order?$query&signature=00"
stop

python3 - "$dir/serve.err" <<'EOF' || fail "not one JSON object per line"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines, "no log lines"
for line in lines:
    o = json.loads(line)
    for k in ("ts", "level", "component", "msg"):
        assert k in o, f"{k} missing: {line}"
    assert o["level"] in ("debug", "info", "warn", "error"), line
    assert o["ts"].endswith("Z") and "T" in o["ts"], line
EOF
for decision in "configuration" "recovered sequence" "thread mb-engine" "thread mb-journal" \
  "fsync policy" "history projection" "running at sequence" "closed at sequence"; do
  grep -q "$decision" "$dir/serve.err" || fail "no start-up line with \"$decision\""
done
for s in "$secret" "$token" "$signature"; do
  if grep -qF -- "$s" "$dir/serve.err" "$dir/serve.out"; then fail "a secret was logged"; fi
done

# --log-level warn: the info lines are gone; the API still answers.
rm -f "$dir/serve.err"
start --log-level warn
curl -s "$base/api/v3/ping" | grep -q '{}' || fail "ping"
stop
if grep -q " info " "$dir/serve.err"; then fail "info lines written at level warn"; fi

# Bad options are refused with a clear message, before anything starts.
if "$mb" serve --data-dir "$dir/d" --port 0 --log-format xml >/dev/null 2>"$dir/bad.err"; then
  fail "--log-format xml accepted"
fi
grep -q "log format" "$dir/bad.err" || fail "message: $(cat "$dir/bad.err")"
if "$mb" serve --data-dir "$dir/d" --port 0 --log-level loud >/dev/null 2>"$dir/bad.err"; then
  fail "--log-level loud accepted"
fi
grep -q "log level" "$dir/bad.err" || fail "message: $(cat "$dir/bad.err")"
echo "cli logs checks: ok"
