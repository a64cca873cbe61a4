#!/usr/bin/env bash
# Builds and runs every test, then prints how long each phase took.
#
#   format   clang-format --dry-run -Werror over every tracked C++ file
#   tidy     clang-tidy (.clang-tidy's checks) over the core modules' sources
#            (engine, concurrency, codec, common, journal, fanout, exchange)
#   asan     the suite in a Debug build (assertions on, -Werror) under
#            AddressSanitizer + UBSan: the warnings check, the memory check
#            and the unit tests in one build (the tests' own sources
#            unoptimised and without UBSan, MB_TEST_COMPILE_OPTIONS: the code
#            they test has both sanitizers)
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
#   tsan     the multi-threaded tests under ThreadSanitizer, -O1 (the test
#            binaries whose labels the tsan phase selects, nothing else is
#            built)
#   fuzz     a short libFuzzer run of the codec's decoders (clang)
#
# The release, tsan, fuzz and tsa builds do not wait for their turn: once the
# asan build is done they are built one after another in the background at
# the lowest CPU and I/O priority (nice 19, ionice best-effort 7), on the
# cycles the test phases leave idle (tests wait on fsync, sockets and child
# processes), so a test never waits for a compiler. A phase that needs one of them waits for it
# ("... build (wait)" in the table; "... build (background)" is its own time).
# Their output is in build/<preset>/background-build.log, printed if a build
# fails.
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
  local status=$1
  if [ -n "$current" ]; then
    # A phase cut short (a signal) never reads as a pass.
    [ "$status" -eq 0 ] && status=1
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
bg_pid=""
stop_background() {
  if [ -n "$bg_pid" ]; then kill -- -"$bg_pid" 2>/dev/null || true; fi
}
trap 'rc=$?; stop_background; report "$rc"; bash scripts/pg_cluster.sh stop "${pg_dir:-}" >/dev/null 2>&1 || true' EXIT

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

phases=${MB_TEST_PHASES:-format asan tidy tsa e2e release tsan fuzz}
want() { [[ " $phases " == *" $1 "* ]]; }

# The release phase's tests are chosen from ctest's own list (before the
# build, so by label: a test's command is not known until its binary exists):
# every test without the label "unit" (mb_test gives it to each unit-test
# binary), plus the crash and property tests. Built: the product's binaries
# and those two tests' binaries (a new kind of test that drives another binary
# fails here as "Could not find executable" until it is added).
release_build() {
  cmake --preset release >/dev/null
  ctest --preset release -N --show-only=json-v1 | python3 -c '
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
print("^(" + "|".join(tests) + ")$")' > build/release/suite-tests.txt
  # The crash test runs a child binary of its own.
  cmake --build --preset release -j "$jobs" \
    --target matchbook matchbook-load matchbook-bench crash_test property_test crash_child
}

# The multi-threaded parts (rings, wait strategies, the pipeline, the crash
# test, the gateway's threads, the projector and its checkpointer, the bus
# publisher, metrics, logs) under ThreadSanitizer; the single-threaded suites
# gain nothing there. Only the test binaries of the selected labels are built.
tsan_labels='concurrency|exchange|crash|gateway|^projection$|^bus$|metrics|^log$'
tsan_exclude='gateway_(api|json)|metrics_prometheus'
tsan_build() {
  cmake --preset tsan >/dev/null
  # mb_test(NAME x ...) registers test x run by the binary x_test.
  local targets
  targets=$(ctest --preset tsan -N -L "$tsan_labels" -E "$tsan_exclude" --show-only=json-v1 | python3 -c '
import json, sys
print(" ".join(sorted(t["name"] + "_test" for t in json.load(sys.stdin)["tests"])))')
  # The crash test runs a child binary of its own.
  cmake --build --preset tsan -j "$jobs" --target $targets crash_child
}

# The locking contracts (MB_GUARDED_BY, MB_REQUIRES: common/thread_annotations.h)
# checked by clang: a guarded member touched without its lock fails the build.
# The libraries, matchbook and matchbook-load are checked, no tests, with
# -fsyntax-only: the analysis is the front end's, code generation would be
# wasted (about 40 % of the compile); and only the files that include the
# annotations (about a third): the analysis has nothing to say about others.
tsa_build() {
  cmake --preset tsa >/dev/null
  python3 scripts/syntax_check.py build/tsa -j "$jobs" --only-including common/thread_annotations.h
}

fuzz_build() {
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$jobs" --target codec_fuzz
}

# Builds the wanted ones of release, tsan, fuzz and tsa in the background, in
# that order; build/<preset>/background-build.done marks each one finished (its
# content: the build's seconds), background-build.failed a failure.
start_background_builds() {
  local p
  for p in release tsan fuzz tsa; do
    mkdir -p "build/$p"
    rm -f "build/$p/background-build.done" "build/$p/background-build.failed"
  done
  set -m  # its own process group, so that an early exit stops all of it
  (
    trap - EXIT
    renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true
    if command -v ionice >/dev/null 2>&1; then ionice -c 2 -n 7 -p "$BASHPID" 2>/dev/null || true; fi
    for p in release tsan fuzz tsa; do
      want "$p" || continue
      t0=$(date +%s)
      if "${p}_build" > "build/$p/background-build.log" 2>&1; then
        echo $(( $(date +%s) - t0 )) > "build/$p/background-build.done"
      else
        echo $(( $(date +%s) - t0 )) > "build/$p/background-build.failed"
        exit 1
      fi
    done
  ) < /dev/null &
  bg_pid=$!
  set +m
}

# Waits for the background build of a preset; its time spent waiting is a
# phase, its own time a row of the table.
wait_background_build() {
  local p=$1
  begin "$p build (wait)" "waiting for the background build"
  while [ ! -f "build/$p/background-build.done" ]; do
    if [ -f "build/$p/background-build.failed" ] || ! kill -0 "$bg_pid" 2>/dev/null; then
      [ -f "build/$p/background-build.done" ] && break
      echo "=== $p build failed; build/$p/background-build.log ends:" >&2
      tail -n 60 "build/$p/background-build.log" >&2 || true
      exit 1
    fi
    sleep 1
  done
  end
  phase_names+=("$p build (background)")
  phase_secs+=("$(cat "build/$p/background-build.done")")
}

# Every tracked C++ file as .clang-format lays it out (seconds; first, so a
# badly formatted change fails before anything is built).
if want format; then
  begin "format" "clang-format --dry-run -Werror on every C++ file"
  git ls-files -z '*.cc' '*.h' | xargs -0 clang-format --dry-run -Werror
  end
fi

if want asan; then
  begin "asan build" "configure and build"
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs"
  end
fi

if want release || want tsan || want fuzz || want tsa; then start_background_builds; fi

# clang-tidy's checks (.clang-tidy) over the core modules' sources, with the
# asan build's compile commands; any warning fails the phase.
tidy_modules='engine concurrency codec common journal fanout exchange'
if want tidy; then
  begin "tidy" "clang-tidy (.clang-tidy) over src/{${tidy_modules// /,}}"
  [ -f build/asan/compile_commands.json ] || cmake --preset asan >/dev/null
  tidy_files=()
  for m in $tidy_modules; do
    while IFS= read -r f; do tidy_files+=("$f"); done < <(git ls-files "src/$m/*.cc" | grep -v -e '_test\.cc$' -e '_fuzz\.cc$')
  done
  run-clang-tidy-14 -p build/asan -j "$jobs" -quiet "${tidy_files[@]}" >build/asan/tidy.log 2>&1 ||
    { sed 's/\x1b\[[0-9;]*m//g' build/asan/tidy.log | grep -E -A3 '(warning|error):' | head -60; exit 1; }
  end
fi

if want asan; then
  begin "asan tests" "ctest"
  ctest --preset asan -j "$jobs"
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
  wait_background_build release
  begin "release tests" "ctest: the binaries under load, the crash and property tests"
  ctest --preset release -j "$jobs" --no-tests=error -R "$(cat build/release/suite-tests.txt)"
  end
fi

if want tsan; then
  wait_background_build tsan
  begin "tsan tests" "ctest"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ctest --preset tsan -j "$jobs" -L "$tsan_labels" -E "$tsan_exclude"
  end
fi

if want fuzz; then
  wait_background_build fuzz
  begin fuzz "codec decoder smoke run (${MB_FUZZ_SECONDS:-20} s)"
  bash scripts/fuzz.sh "${MB_FUZZ_SECONDS:-20}"
  end
fi

if want tsa; then
  # The thread-safety analysis ran in the background: its result.
  wait_background_build tsa
  tail -n 3 build/tsa/background-build.log
fi
