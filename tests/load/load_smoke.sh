#!/usr/bin/env bash
# Every preset, short and at modest rates, and the WebSocket API
# (--transport ws-api, HMAC-signed and logged on) (this also runs in Debug and
# ASan builds), against a real server: the last stdout line is the JSON report with
# every interface field, requests > 0, no errors, delivery and freshness
# measured when there are subscribers; --out-dir writes the JSON and the SVG.
# Usage: load_smoke.sh MATCHBOOK MATCHBOOK_LOAD
set -u
MATCHBOOK=$1 LOAD=$2
source "$(dirname "$0")/common.sh"
start_server "$MATCHBOOK"
OUT=$(mktemp -d)
trap 'stop_server; rm -rf "$OUT"' EXIT

run() {  # run NAME SUBSCRIBERS ARGS...
  local name=$1 subs=$2
  shift 2
  "$LOAD" --target "${SCHEME:-http}://127.0.0.1:$PORT" --admin-token "$TOKEN" --json --accounts 8 \
    --connections 16 --out-dir "$OUT" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
  local rc=$?
  [ $rc -eq 0 ] || { cat "$OUT/$name.err" "$OUT/$name.out" >&2; fail "$name exited $rc"; }
  check_json "$OUT/$name.out" "$subs" "$name" || fail "$name: bad report"
  check_server_cpu "$OUT/$name.out" "$subs" || fail "$name: bad server CPU figures"
}

# The server's own CPU (its /metrics, loopback): per order, per thread and,
# with subscribers, per message delivered; no warning.
check_server_cpu() {  # check_server_cpu FILE SUBSCRIBERS
  python3 - "$@" <<'PY'
import json, math, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
subs = int(sys.argv[2])
need = ["server_cpu_seconds", "server_cpu_window_s", "server_cpu_us_per_order",
        "server_cpu_ns_per_message", "server_threads", "server_cpu_warning", "messages_delivered"]
missing = [k for k in need if k not in r]
assert not missing, "missing fields: %s" % missing
assert r["server_cpu_warning"] is None, r["server_cpu_warning"]
us = r["server_cpu_us_per_order"]
assert isinstance(us, (int, float)) and math.isfinite(us) and us > 0, us
assert r["server_cpu_seconds"] > 0 and r["server_cpu_window_s"] > 0, r
# Two cores at most, and a little slack for the scrapes' own timing.
assert r["server_cpu_seconds"] <= 2.5 * r["server_cpu_window_s"], r
threads = r["server_threads"]
assert isinstance(threads, dict) and threads, threads
for name, t in threads.items():
    assert t["cpu_seconds"] >= 0, (name, t)
# Threads are read just after the process, each to a clock tick.
slack = 0.05 + 0.01 * len(threads)
assert sum(t["cpu_seconds"] for t in threads.values()) <= r["server_cpu_seconds"] + slack, threads
if subs > 0:
    assert r["messages_delivered"] > 0, r["messages_delivered"]
    assert r["messages_delivered"] <= r["messages"], (r["messages_delivered"], r["messages"])
    ns = r["server_cpu_ns_per_message"]
    assert isinstance(ns, (int, float)) and math.isfinite(ns) and ns > 0, ns
else:
    assert r["server_cpu_ns_per_message"] is None, r["server_cpu_ns_per_message"]
    assert r["messages_delivered"] == 0, r["messages_delivered"]
if r["preset"] == "max":
    for s in r["steps"]:
        v = s["server_cpu_us_per_order"]
        assert v is None or (math.isfinite(v) and v >= 0), s
    assert any(s["server_cpu_us_per_order"] for s in r["steps"]), r["steps"]
print("%s: server %.1f us/order, %s ns/message" % (r["preset"], us, r["server_cpu_ns_per_message"]))
PY
}

run coinflow 5 --preset coinflow --duration 3 --subscribers 5 --rate 100
run snaptrade 1 --preset snaptrade --duration 3 --rate 500
run lighter 50 --preset lighter --duration 3 --subscribers 50 --rate 200
run nosubs 0 --preset snaptrade --duration 1 --rate 200 --subscribers 0
run wsapi 5 --preset coinflow --duration 3 --subscribers 5 --rate 100 --transport ws-api
run wssession 1 --preset snaptrade --duration 2 --rate 200 --transport ws-api --ws-auth session
run max 1 --preset max --duration 6 --rate 100 --max-p99-ms 1000

python3 - "$OUT/max.out" <<'PY' || fail "max: steps"
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
steps = r["steps"]
assert len(steps) >= 2, steps
# Up after a passing step, down after a failing one (a stall of this VM's
# disk can fail any step; the search must still follow its rule).
assert (steps[1]["rate"] > steps[0]["rate"]) == steps[0]["pass"], steps
passing = [s["rate"] for s in steps if s["pass"]]
if passing:
    assert r["rate"] == max(passing), (r["rate"], steps)
else:
    assert r["achieved_rate_per_s"] == 0, r["achieved_rate_per_s"]
PY
for f in coinflow snaptrade lighter max; do
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$OUT/load-$f.json" || fail "load-$f.json"
  grep -q '<polyline' "$OUT/load-$f.svg" || fail "load-$f.svg has no chart"
  grep -q '</svg>' "$OUT/load-$f.svg" || fail "load-$f.svg is incomplete"
done
# Without --json: the human summary.
"$LOAD" --target "http://127.0.0.1:$PORT" --admin-token "$TOKEN" --preset coinflow --duration 1 \
  --subscribers 1 --rate 50 --accounts 2 --connections 4 >"$OUT/human.out" 2>&1 ||
  fail "human summary run"
grep -q 'order response' "$OUT/human.out" || fail "no summary table"
grep -q '^server CPU (its process_cpu_seconds_total) .* us/order' "$OUT/human.out" ||
  fail "no server CPU line in the summary"

# Over TLS: a server with a certificate from a test CA made here; orders,
# subscribers (wss), history readers and the server's CPU figures over
# https://, then the WebSocket API's orders over wss.
stop_server
TLS_DIR=$(mktemp -d)
trap 'stop_server; rm -rf "$OUT" "$TLS_DIR"' EXIT
# shellcheck source=tests/test_ca.sh
source "$(dirname "$0")/../test_ca.sh"
make_test_server "$TLS_DIR"
start_server "$MATCHBOOK" --tls-cert "$TLS_DIR/server.pem" --tls-key "$TLS_DIR/server.key"
TOKEN=$(cat "$DATA_DIR/admin.token")
SCHEME=https run tls 2 --preset snaptrade --duration 2 --rate 200 --subscribers 2 \
  --history-readers 1 --ca "$TLS_DIR/ca.pem"
SCHEME=https run tls_ws_api 0 --preset snaptrade --duration 1 --rate 100 --subscribers 0 \
  --transport ws-api --ca "$TLS_DIR/ca.pem"
# Without the CA the certificate is refused, and the run says so.
"$LOAD" --target "https://127.0.0.1:$PORT" --admin-token "$TOKEN" --preset snaptrade --duration 1 \
  --subscribers 0 >"$OUT/noca.out" 2>&1 && fail "a run trusted an unknown CA"
grep -q "certificate verify failed" "$OUT/noca.out" || fail "no clear error without --ca: $(cat "$OUT/noca.out")"
echo "load_smoke: ok"
