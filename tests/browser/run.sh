#!/usr/bin/env bash
# Runs the browser tests (the trading and operator pages in Debian's chromium,
# driven by playwright-core) against a matchbook binary, each test with its
# own server (fresh data directory, ephemeral port; tests/e2e/lib.mjs).
# Screenshots go to the output directory. Prints "browser: ok" at the end;
# exits non-zero if any test failed.
#
# Usage: tests/browser/run.sh <path to matchbook> [output directory]
#        (default output: build/test-output under the source tree)
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 <path to matchbook binary> [output directory]" >&2
  exit 2
fi
bin="$(realpath "$1")"
if [ ! -x "$bin" ]; then
  echo "browser: not an executable: $bin" >&2
  exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
# playwright-core 1.64.1 (the version built for Debian 12's chromium 156)
# runs on Node.js 20 or later; Debian 12's own nodejs is 18.
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "browser: SKIPPED: playwright-core 1.64.1 needs Node.js >= 20, this is $(node --version) (README: Node.js)"
  exit 0
fi
out="${2:-$here/../../build/test-output}"
mkdir -p "$out"
export MB_TEST_OUTPUT="$(realpath "$out")"

# node_modules missing, or older than the lock file: install exactly the lock
# (tests/e2e's too: the harness, lib.mjs, imports its packages).
for dir in "$here" "$here/../e2e"; do
  if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund)
  fi
done

cd "$here"
start=$(date +%s)
failed=()
# Each page once more over https/wss (--tls: a test CA made with openssl,
# tests/e2e/lib.mjs), as a user of a remote server meets it.
for entry in trading admin depth "trading --tls" "admin --tls"; do
  read -r test args <<< "$entry"
  echo "=== browser $entry"
  # shellcheck disable=SC2086 # the arguments are words
  if ! node "$test.mjs" "$bin" $args; then
    failed+=("$entry")
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "browser: FAIL (${failed[*]})" >&2
  exit 1
fi
echo "browser: ok ($(( $(date +%s) - start )) s; screenshots in $MB_TEST_OUTPUT)"
