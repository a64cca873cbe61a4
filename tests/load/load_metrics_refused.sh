#!/usr/bin/env bash
# A server that refuses the load generator's /metrics scrape (a non-loopback
# client and `[metrics] remote = false`, the default) still gets a complete
# run: exit 0, the server CPU figures null, and a warning saying why.
# Usage: load_metrics_refused.sh MATCHBOOK MATCHBOOK_LOAD
set -u
MATCHBOOK=$1 LOAD=$2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$(dirname "$0")/common.sh"

# The first non-loopback IPv4 address of this machine.
ADDR=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+(\.[0-9]+){3}$' |
  grep -v '^127\.' | head -n1)
if [ -z "$ADDR" ]; then
  echo "load_metrics_refused: ok (not run: this machine has no non-loopback IPv4 address)"
  exit 0
fi
CONF=$(mktemp)
# The operator API must answer remote peers for the set-up (in plain text:
# this server has no certificate); /metrics does not.
sed -e 's/^admin_remote = false/admin_remote = true\nadmin_remote_plaintext = true/' \
  "$SRC/config/matchbook.toml" >"$CONF"
grep -q '^admin_remote = true' "$CONF" || fail "config: no admin_remote line to turn on"
grep -q '^remote = false' "$CONF" || fail "config: [metrics] remote is not false"
start_server "$MATCHBOOK" --config "$CONF" --host 0.0.0.0
OUT=$(mktemp -d)
trap 'stop_server; rm -rf "$OUT" "$CONF"' EXIT

"$LOAD" --target "http://$ADDR:$PORT" --admin-token "$TOKEN" --json --accounts 4 \
  --connections 8 --preset snaptrade --duration 1 --rate 100 >"$OUT/out" 2>"$OUT/err"
rc=$?
[ $rc -eq 0 ] || { cat "$OUT/err" "$OUT/out" >&2; fail "exited $rc"; }
grep -q 'warning: server CPU not measured: GET /metrics answered 403' "$OUT/err" ||
  { cat "$OUT/err" >&2; fail "no warning on stderr"; }
python3 - "$OUT/out" <<'PY' || fail "bad report"
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert r["requests"] > 0 and r["errors"] == 0, r
for k in ("server_cpu_seconds", "server_cpu_window_s", "server_cpu_us_per_order",
          "server_cpu_ns_per_message", "server_threads"):
    assert r[k] is None, (k, r[k])
assert "403" in r["server_cpu_warning"] and "loopback" in r["server_cpu_warning"], r
assert r["messages_delivered"] > 0, r["messages_delivered"]
PY
echo "load_metrics_refused: ok"
