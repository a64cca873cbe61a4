#!/usr/bin/env bash
# The API's cost of TLS: `matchbook serve` plain and with a certificate (a
# test CA made here), alternated, driven by matchbook-load for 15 s per run
# at 1,000 and 10,000 orders/s without subscribers and at 1,000/s with 50
# WebSocket subscribers, two rounds; a fresh data directory per run. One
# line per run: mode, offered rate, subscribers, achieved rate, dropped,
# errors, server CPU per order (µs) and per WebSocket message (ns), order
# p50/p99/p99.9 (ms), delivery p99 (ms). docs/benchmarks.md, "TLS on the API".
# Usage: [DURATION=S] scripts/bench_tls_api.sh [BUILD_DIR]   (default build/release, 15 s)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/release}/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "bench_tls_api: $*" >&2; exit 1; }
# shellcheck source=tests/test_ca.sh
source "$root/tests/test_ca.sh"
source "$root/tests/serve_lib.sh"
make_test_server "$work"
run() {  # run MODE RATE SUBSCRIBERS
  local mode=$1 rate=$2 subs=$3 d
  d=$(mktemp -d "$work/d.XXXXXX")
  local args=()
  [[ $mode == tls ]] && args=(--tls-cert "$work/server.pem" --tls-key "$work/server.key")
  start_serve "$bin/matchbook" "$d" "$work/serve" --weight-per-minute 0 --ip-weight-per-minute 0 \
    "${args[@]}"
  "$bin/matchbook-load" --target "$base" --ca "$work/ca.pem" --admin-token "$token" \
    --preset snaptrade --rate "$rate" --duration "${DURATION:-15}" --subscribers "$subs" --json 2>/dev/null |
    tail -1 | python3 -c "
import json, sys
r = json.load(sys.stdin)
print('$mode', $rate, $subs, r['achieved_rate_per_s'], r['dropped'], r['errors'],
      r['server_cpu_us_per_order'], r.get('server_cpu_ns_per_message'), r['order_p50_ms'],
      r['order_p99_ms'], r.get('order_p999_ms'), r.get('delivery_p99_ms'))"
  kill -TERM "$serve_pid" && wait "$serve_pid" || true
  serve_pid=""
  rm -rf "$d"
}
echo "mode rate subscribers achieved dropped errors cpu_us_per_order cpu_ns_per_message p50_ms p99_ms p999_ms delivery_p99_ms"
for _ in 1 2; do
  for rate in 1000 10000; do
    for mode in plain tls; do run "$mode" "$rate" 0; done
  done
  for mode in plain tls; do run "$mode" 1000 50; done
done
