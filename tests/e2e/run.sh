#!/usr/bin/env bash
# Runs the end-to-end tests against a matchbook binary, each with its own
# server (fresh data directory, ephemeral port). Prints "e2e: ok" at the end;
# exits non-zero if any test failed.
#
# Usage: tests/e2e/run.sh <path to matchbook>
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 <path to matchbook binary>" >&2
  exit 2
fi
bin="$(realpath "$1")"
if [ ! -x "$bin" ]; then
  echo "e2e: not an executable: $bin" >&2
  exit 2
fi

cd "$(dirname "$0")"

# node_modules is missing, or older than the lock file: install exactly the lock.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

# Every test runs (each reports all it can); the run fails if any failed.
start=$(date +%s)
failed=()
# Each entry: the test's file and its arguments after the binary.
tests=(
  "ccxt_e2e" "ccxt_ws_api" "ccxt_e2e --tls" "ccxt_ws_api --tls" "tls --tls"
  "stop_orders" "order_lists" "order_lists_ws" "depth_sync"
  "slow_subscriber" "replica" "listing" "transfers" "transfers --tls"
  "transfer_load soak --transfers 300 --kills 3"
)
for entry in "${tests[@]}"; do
  read -r test args <<< "$entry"
  echo "=== $entry"
  # shellcheck disable=SC2086 # the arguments are words
  if ! node "$test.mjs" "$bin" $args; then
    failed+=("$test")
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "e2e: FAIL (${failed[*]})" >&2
  exit 1
fi
echo "e2e: ok ($(( $(date +%s) - start )) s)"
