#!/usr/bin/env bash
# Builds and runs every test: the Debug build (with -Werror), the same suite
# under AddressSanitizer + UBSan and in the optimised release build (the one the
# README's run command builds), and a short libFuzzer run of the codec.
# Usage: scripts/test.sh            (everything)
#        MB_TEST_PRESETS="dev" scripts/test.sh   (a subset of presets)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh

jobs=$(nproc)
for preset in ${MB_TEST_PRESETS:-dev asan release}; do
  echo "=== ${preset}: configure, build, test"
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}" -j "${jobs}"
  ctest --preset "${preset}" -j "${jobs}"
done

if [ -z "${MB_SKIP_FUZZ:-}" ]; then
  echo "=== fuzz: codec decoder smoke run"
  bash scripts/fuzz.sh "${MB_FUZZ_SECONDS:-20}"
fi
echo "=== all tests passed"
