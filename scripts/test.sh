#!/usr/bin/env bash
# Builds and runs every test: the Debug build (with -Werror), the same suite
# under AddressSanitizer + UBSan and in the optimised release build (the one the
# README's run command builds), the end-to-end tests (the real ccxt client
# against `matchbook serve`) on the ASan and release binaries, the
# multi-threaded tests under ThreadSanitizer, and a short libFuzzer run of the
# codec. The projection tests run against a real PostgreSQL (a throw-away
# cluster, scripts/pg_cluster.sh) as well as SQLite.
# Usage: scripts/test.sh            (everything)
#        MB_TEST_PRESETS="dev" scripts/test.sh   (a subset of presets)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh

# A throw-away PostgreSQL 15 cluster for the projection tests (the PostgreSQL
# store is tested against a real server): started here, removed on exit.
pg_dir=$(mktemp -d /tmp/matchbook-test-pg.XXXXXX)
trap 'bash scripts/pg_cluster.sh stop "${pg_dir}" >/dev/null 2>&1 || true' EXIT
MATCHBOOK_PG_URL=$(bash scripts/pg_cluster.sh start "${pg_dir}")
export MATCHBOOK_PG_URL MATCHBOOK_PG_DIR="${pg_dir}"
echo "=== postgresql: ${MATCHBOOK_PG_URL}"

jobs=$(nproc)
for preset in ${MB_TEST_PRESETS:-dev asan release}; do
  echo "=== ${preset}: configure, build, test"
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}" -j "${jobs}"
  ctest --preset "${preset}" -j "${jobs}"
  if [ "${preset}" != dev ] && [ -z "${MB_SKIP_E2E:-}" ]; then
    # The real ccxt client, a depth-stream consumer and a stalled subscriber
    # against `matchbook serve` (tests/e2e; npm packages pinned by the lockfile).
    echo "=== ${preset}: end-to-end tests against matchbook serve"
    bash tests/e2e/run.sh "build/${preset}/bin/matchbook"
  fi
done

if [ -z "${MB_SKIP_TSAN:-}" ]; then
  # The multi-threaded parts (rings, wait strategies, the pipeline, the crash
  # test) under ThreadSanitizer; the single-threaded suites gain nothing there.
  echo "=== tsan: concurrency, exchange, crash, gateway, projection, metrics and log tests"
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan -j "${jobs}" \
    --target concurrency_ring_test exchange_test crash_test crash_child \
    gateway_server_test gateway_streams_test gateway_e2e_test projection_test \
    metrics_test metrics_flight_test log_test
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ctest --preset tsan -j "${jobs}" \
    -L 'concurrency|exchange|crash|gateway|^projection$|metrics|^log$' \
    -E 'gateway_(api|json)|metrics_prometheus'
fi

if [ -z "${MB_SKIP_FUZZ:-}" ]; then
  echo "=== fuzz: codec decoder smoke run"
  bash scripts/fuzz.sh "${MB_FUZZ_SECONDS:-20}"
fi
echo "=== all tests passed"
