#!/usr/bin/env bash
# What crosses the wire: a packet capture of the loopback while a client
# creates an account, an API key and a listen key, trades and opens its user
# stream. With TLS on the API the capture holds none of the admin token, the
# API key's secret or the listen key; the same flow over plain HTTP is
# captured too, and there they are found (so the search can find them).
# Needs tcpdump (scripts/bootstrap.sh) and the right to capture (root).
# Usage: tests/cli_capture.sh <path to matchbook>
set -euo pipefail
mb=$1
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
serve_pid=
cap_pid=
cleanup() {
  if [ -n "$serve_pid" ]; then kill -9 "$serve_pid" 2>/dev/null || true; fi
  if [ -n "$cap_pid" ]; then kill -9 "$cap_pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# shellcheck source=tests/serve_lib.sh
source "$here/serve_lib.sh"
command -v tcpdump >/dev/null || fail "tcpdump is not installed (scripts/bootstrap.sh installs it)"

# shellcheck source=tests/test_ca.sh
source "$here/test_ca.sh"
make_test_server "$dir"
export CURL_CA_BUNDLE="$dir/ca.pem"

# run NAME [serve flags...]: the flow against a new server, captured; leaves
# $dir/NAME.pcap and the three secrets in $dir/NAME.secrets.
run() {
  local name=$1
  shift
  start_serve "$mb" "$dir/$name" "$dir/$name" "$@"
  local port=${base##*:}
  tcpdump -i lo -U -s 0 -w "$dir/$name.pcap" "tcp port $port" 2>"$dir/$name.tcpdump" &
  cap_pid=$!
  for _ in $(seq 50); do grep -q "listening on" "$dir/$name.tcpdump" && break; sleep 0.1; done
  grep -q "listening on" "$dir/$name.tcpdump" || fail "tcpdump did not start: $(cat "$dir/$name.tcpdump")"
  read -r _ key secret <<<"$(new_trader alice USDT 100000)"
  order "$key" "$secret" BUY 30000 0.001 >/dev/null
  local listen
  listen=$(curl -sS --fail-with-body -X POST -H "X-MBX-APIKEY: $key" "$base/api/v3/userDataStream" |
    json_get listenKey)
  local ws=${base/http/ws}
  python3 "$here/ws_client.py" "$ws/ws/$listen" "$dir/ca.pem" 1 >"$dir/$name.ws" ||
    fail "$name: the user stream did not open"
  grep -qx open "$dir/$name.ws" || fail "$name: the user stream did not open"
  printf '%s\n%s\n%s\n' "$token" "$secret" "$listen" >"$dir/$name.secrets"
  sleep 0.5
  kill -INT "$cap_pid"
  wait "$cap_pid" || true
  cap_pid=
  kill -TERM "$serve_pid"
  wait "$serve_pid" || true
  serve_pid=
}

# found NAME: how many of the secrets the capture holds.
found() {
  python3 - "$dir/$1.pcap" "$dir/$1.secrets" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
secrets = [s for s in open(sys.argv[2]).read().split("\n") if s]
print(sum(1 for s in secrets if s.encode() in data))
PY
}

run tls --tls-cert "$dir/server.pem" --tls-key "$dir/server.key"
[[ "$base" == https://* ]] || fail "the TLS server prints $base"
bytes=$(stat -c %s "$dir/tls.pcap")
[ "$bytes" -gt 4000 ] || fail "the capture holds $bytes bytes: the flow was not captured"
[ "$(found tls)" = 0 ] || fail "the TLS capture holds $(found tls) of the admin token, API secret and listen key"
run plain
[ "$(found plain)" = 3 ] || fail "the plain capture holds $(found plain) of 3 secrets: the search cannot find them"
echo "capture: TLS ${bytes} bytes, no admin token, API secret or listen key; plain HTTP: all three"
echo "cli capture checks: ok"
