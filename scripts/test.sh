#!/usr/bin/env bash
# Builds and runs every test, then prints how long each phase took.
#
#   asan     the suite in a Debug build (assertions on, -Werror) under
#            AddressSanitizer + UBSan: the warnings check, the memory check
#            and the unit tests in one build
#   tsa      clang's thread-safety analysis (the `tsa` preset): the libraries,
#            matchbook and matchbook-load checked by clang 14 with
#            -Wthread-safety -fsyntax-only (scripts/syntax_check.py over the
#            preset's compile_commands.json); nothing is built or run
#   e2e      the end-to-end tests (the real ccxt client, a depth-stream
#            consumer, a stalled subscriber) against the asan build's
#            `matchbook serve`, then the browser tests of the trading and
#            operator pages (chromium; screenshots in build/asan/test-output)
#   release  the optimised build (the README's run command's flags), with
#            -Werror: matchbook, matchbook-load, matchbook-bench and every test that
#            drives them (the command-line, load, soak, full-disk, power-cut
#            and benchmark smoke runs against real `matchbook serve`), the
#            crash test and the property test; the other unit tests ran in
#            the asan phase and their binaries are not built again
#   tsan     the multi-threaded tests under ThreadSanitizer (the test binaries
#            whose labels the tsan phase selects, nothing else is built)
#   fuzz     a short libFuzzer run of the codec's decoders (clang)
#
# The projection tests run against a real PostgreSQL (a throw-away cluster,
# scripts/pg_cluster.sh) as well as SQLite. Compiles go through ccache when
# it is installed (scripts/bootstrap.sh installs it; the cache lives outside
# the clone, so a second run on the same machine is faster).
#
# Usage: scripts/test.sh            everything (what CI runs)
#        scripts/test.sh --quick    the inner loop: the Debug build (`dev`
#                                   preset) and its tests, without the load,
#                                   soak and benchmark runs
# Environment: MB_TEST_PHASES="asan release" runs a subset of the phases;
#              MB_FUZZ_SECONDS (20) the fuzzing time.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
elif [ $# -gt 0 ]; then
  echo "usage: scripts/test.sh [--quick]" >&2
  exit 2
fi

jobs=$(nproc)
suite_start=$(date +%s)
phase_names=()
phase_secs=()
phase_start=0
current=""

begin() {
  current=$1
  phase_start=$(date +%s)
  echo "=== $1: $2"
}
end() {
  phase_names+=("$current")
  phase_secs+=($(( $(date +%s) - phase_start )))
  current=""
}
# The table of phases, printed last whatever happens (a failed phase shows
# how far it got).
report() {
  local status=$?
  if [ -n "$current" ]; then
    phase_names+=("$current (failed)")
    phase_secs+=($(( $(date +%s) - phase_start )))
  fi
  echo
  printf '%-24s %8s\n' phase seconds
  for i in "${!phase_names[@]}"; do
    printf '%-24s %8d\n' "${phase_names[$i]}" "${phase_secs[$i]}"
  done
  printf '%-24s %8d\n' total $(( $(date +%s) - suite_start ))
  if command -v ccache >/dev/null 2>&1; then
    ccache --show-stats 2>/dev/null | grep -iE '^ *(hits|misses|cacheable calls)' | sed 's/^/ccache: /' || true
  fi
  if [ "$status" -eq 0 ]; then echo "=== all tests passed"; else echo "=== FAILED (exit $status)"; fi
}
trap 'report; bash scripts/pg_cluster.sh stop "${pg_dir:-}" >/dev/null 2>&1 || true' EXIT

begin bootstrap "install what is missing"
bash scripts/bootstrap.sh
end

# A throw-away PostgreSQL 15 cluster for the projection tests (the PostgreSQL
# store is tested against a real server): started here, removed on exit.
begin postgresql "start a throw-away cluster"
pg_dir=$(mktemp -d /tmp/matchbook-test-pg.XXXXXX)
MATCHBOOK_PG_URL=$(bash scripts/pg_cluster.sh start "${pg_dir}")
export MATCHBOOK_PG_URL MATCHBOOK_PG_DIR="${pg_dir}"
echo "postgresql: ${MATCHBOOK_PG_URL}"
end

if [ "$quick" = 1 ]; then
  begin "dev build" "configure and build"
  cmake --preset dev >/dev/null
  cmake --build --preset dev -j "$jobs"
  end
  begin "dev tests" "ctest, without the load, soak and benchmark runs"
  ctest --preset dev -j "$jobs" -LE '^(load|soak|bench)$'
  end
  exit 0
fi

phases=${MB_TEST_PHASES:-asan tsa e2e release tsan fuzz}
want() { [[ " $phases " == *" $1 "* ]]; }

build_and_test() {
  local preset=$1
  begin "$preset build" "configure and build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  end
  begin "$preset tests" "ctest"
  ctest --preset "$preset" -j "$jobs"
  end
}

if want asan; then build_and_test asan; fi

if want tsa; then
  # The locking contracts (MB_GUARDED_BY, MB_REQUIRES: common/thread_annotations.h)
  # checked by clang: a guarded member touched without its lock fails the
  # build. The libraries, matchbook and matchbook-load are checked, no tests,
  # with -fsyntax-only: the analysis is the front end's, code generation would
  # be wasted (about 40 % of the compile).
  begin tsa "clang -Wthread-safety check of the libraries, matchbook and matchbook-load"
  cmake --preset tsa >/dev/null
  python3 scripts/syntax_check.py build/tsa -j "$jobs"
  end
fi

if want e2e; then
  # The real ccxt client, a depth-stream consumer and a stalled subscriber
  # against `matchbook serve` (tests/e2e; npm packages pinned by the lock file),
  # in the ASan + UBSan build: memory errors under real clients.
  if [ ! -x build/asan/bin/matchbook ]; then
    begin "asan build" "configure and build matchbook for the end-to-end tests"
    cmake --preset asan >/dev/null
    cmake --build --preset asan -j "$jobs" --target matchbook
    end
  fi
  begin e2e "end-to-end tests against the asan build of matchbook serve"
  bash tests/e2e/run.sh build/asan/bin/matchbook
  end
  # The trading and operator pages in Debian's chromium (playwright-core,
  # pinned by tests/browser/package-lock.json), against the same binary;
  # screenshots and the render-budget figures in build/asan/test-output.
  begin browser "the web pages in a real browser (tests/browser)"
  bash tests/browser/run.sh build/asan/bin/matchbook build/asan/test-output
  end
fi

if want release; then
  # Tests are chosen from ctest's own list (before the build, so by label:
  # a test's command is not known until its binary exists): every test
  # without the label "unit" (mb_test gives it to each unit-test binary),
  # plus the crash and property tests. Built: the product's binaries and
  # those two tests' binaries (a new kind of test that drives another binary
  # fails here as "Could not find executable" until it is added).
  begin "release build" "configure and build the binaries and the tests that drive them"
  cmake --preset release >/dev/null
  read -r release_tests < <(ctest --preset release -N --show-only=json-v1 | python3 -c '
import json, sys
again = {"crash", "property", "property_small_window"}
tests = []
for t in json.load(sys.stdin)["tests"]:
    labels = [v for p in t.get("properties", []) if p["name"] == "LABELS" for v in p["value"]]
    if "unit" in labels and t["name"] not in again:
        continue
    tests.append(t["name"])
if not tests:
    sys.exit("release: ctest listed no test to run")
print("^(" + "|".join(tests) + ")$")')
  [ -n "${release_tests:-}" ] || { echo "release: no test list from ctest" >&2; exit 1; }
  release_targets="matchbook matchbook-load matchbook-bench crash_test property_test"
  # The crash test runs a child binary of its own.
  cmake --build --preset release -j "$jobs" --target $release_targets crash_child
  end
  begin "release tests" "ctest: the binaries under load, the crash and property tests"
  ctest --preset release -j "$jobs" --no-tests=error -R "$release_tests"
  end
fi

if want tsan; then
  # The multi-threaded parts (rings, wait strategies, the pipeline, the crash
  # test, the gateway's threads, the projector and its checkpointer, the bus
  # publisher, metrics, logs) under ThreadSanitizer; the single-threaded
  # suites gain nothing there.
  # Only the test binaries of the selected labels are built.
  labels='concurrency|exchange|crash|gateway|^projection$|^bus$|metrics|^log$'
  exclude='gateway_(api|json)|metrics_prometheus'
  begin "tsan build" "configure and build the multi-threaded tests"
  cmake --preset tsan >/dev/null
  # mb_test(NAME x ...) registers test x run by the binary x_test.
  targets=$(ctest --preset tsan -N -L "$labels" -E "$exclude" --show-only=json-v1 | python3 -c '
import json, sys
print(" ".join(sorted(t["name"] + "_test" for t in json.load(sys.stdin)["tests"])))')
  # The crash test runs a child binary of its own.
  cmake --build --preset tsan -j "$jobs" --target $targets crash_child
  end
  begin "tsan tests" "ctest"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ctest --preset tsan -j "$jobs" -L "$labels" -E "$exclude"
  end
fi

if want fuzz; then
  begin fuzz "codec decoder smoke run (${MB_FUZZ_SECONDS:-20} s)"
  bash scripts/fuzz.sh "${MB_FUZZ_SECONDS:-20}"
  end
fi
