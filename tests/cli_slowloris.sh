#!/usr/bin/env bash
# Slow clients do not stop others from trading: 1,000 connections from one
# address each sending a byte of a request header every 2 s are cut off by
# the header deadline (gateway.read_timeout_ms, 10 s), and meanwhile
# other clients' orders are answered as before; an address over
# gateway.max_connections_per_ip gets 429. Prints the order latency
# percentiles without and with the slow clients (one run, one machine).
# Usage: tests/cli_slowloris.sh <path to matchbook>
set -euo pipefail
mb=$1
# 2,100 client sockets and as many server sockets: more descriptors than the
# usual default of 1,024 (root may raise the hard limit too).
ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge 4096 ] || { echo "FAIL: the descriptor limit $(ulimit -n) is below 4096" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
serve_pid=
cleanup() {
  if [ -n "$serve_pid" ]; then kill -9 "$serve_pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  tail -20 "$dir/s.err" >&2 || true
  exit 1
}
# shellcheck source=tests/serve_lib.sh
source "$here/serve_lib.sh"
sed -e 's/^max_connections_per_ip = 2000$/max_connections_per_ip = 1100/' \
  "$here/../config/matchbook.toml" >"$dir/c.toml"
grep -q '^read_timeout_ms = 10000$' "$dir/c.toml" || fail "config: no read_timeout_ms line"
grep -q '^max_connections_per_ip = 1100$' "$dir/c.toml" || fail "config: no max_connections_per_ip line"
start_serve "$mb" "$dir/d" "$dir/s" --config "$dir/c.toml" --weight-per-minute 0 --ip-weight-per-minute 0
port=${base##*:}
read -r _ k1 s1 <<<"$(new_trader alice USDT 1000000)"
read -r _ k2 s2 <<<"$(new_trader bob BTC 100)"

# 40 crossing orders, each timed (ms); prints "p50 p99 max" and fails on any error.
orders() {
  local times=() t0 t1 r
  for i in $(seq 1 20); do
    for who in buy sell; do
      t0=$(date +%s%N)
      if [ "$who" = buy ]; then r=$(order "$k1" "$s1" BUY 30000 0.001); else r=$(order "$k2" "$s2" SELL 30000 0.001); fi
      t1=$(date +%s%N)
      json_get orderId <<<"$r" >/dev/null || fail "an order was not answered: $r"
      times+=($(((t1 - t0) / 1000)))
    done
  done
  printf '%s\n' "${times[@]}" | sort -n | python3 -c '
import sys
v = [int(x) for x in sys.stdin]
q = lambda p: v[min(len(v) - 1, int(p * len(v)))] / 1000
print(f"{q(0.5):.1f} {q(0.99):.1f} {v[-1] / 1000:.1f}")'
}
quiet=$(orders)

python3 "$here/slow_clients.py" "$port" 1000 90 2 >"$dir/slow.out" &
slow=$!
for _ in $(seq 600); do grep -q '^opened' "$dir/slow.out" 2>/dev/null && break; sleep 0.1; done
grep -qx 'opened 1000' "$dir/slow.out" || fail "the slow clients did not connect: $(cat "$dir/slow.out")"
open=$(curl -sS "$base/metrics" | sed -n 's/^matchbook_http_connections \([0-9]*\).*/\1/p')
[ "${open:-0}" -ge 1000 ] || fail "the server does not count the slow connections ($open)"
busy=$(orders)
wait "$slow"
closed=$(sed -n 's/^closed_by_server //p' "$dir/slow.out")
[ "$closed" = 1000 ] || fail "the server cut off $closed of 1000 slow clients (all expected)"
timeouts=$(curl -sS "$base/metrics" | sed -n 's/^matchbook_http_timeouts_total \([0-9]*\).*/\1/p')
[ "${timeouts:-0}" -ge 1000 ] || fail "timeouts counted: $timeouts"
echo "orders p50/p99/max ms: quiet $quiet; with 1000 slow clients $busy"

# Over the per-address limit: 429, and the connection is closed.
python3 - "$port" <<'PY' || fail "the per-address limit did not answer 429"
import socket, sys
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(1100)]
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"GET /api/v3/ping HTTP/1.1\r\nHost: x\r\n\r\n")
s.settimeout(5)
data = s.recv(4096)
sys.exit(0 if data.startswith(b"HTTP/1.1 429") and b"-1003" in data else 1)
PY
refused=$(curl -sS "$base/metrics" | sed -n 's/^matchbook_http_connections_refused_total{reason="address"} \([0-9]*\).*/\1/p')
[ "${refused:-0}" -ge 1 ] || fail "the refusal is not counted ($refused)"
echo "cli slowloris checks: ok"
