#!/usr/bin/env bash
# Builds the codec's libFuzzer target (the `fuzz` preset: clang++-14 with
# ASan + UBSan) and runs it for a number of seconds on a scratch copy of the
# committed seed corpus, so src/codec/fuzz_corpus/ never grows by accident.
# A crashing input is saved under <build_dir>/fuzz_artifacts/ and the script
# exits non-zero.
#
#   scripts/fuzz.sh [seconds=60] [build_dir=build/fuzz]
#
# Extra libFuzzer flags can go in MB_FUZZ_FLAGS, e.g. MB_FUZZ_FLAGS="-jobs=4".
set -euo pipefail

secs="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${2:-$root/build/fuzz}"

cd "$root"
cmake --preset fuzz -B "$build" >/dev/null
cmake --build "$build" --target codec_fuzz

bin="$(find "$build" -name codec_fuzz -type f -perm -u+x | head -n 1)"
if [[ -z "$bin" ]]; then
  echo "fuzz.sh: codec_fuzz not found under $build" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$build/fuzz_artifacts"
cp "$root"/src/codec/fuzz_corpus/* "$work/corpus/"

# shellcheck disable=SC2086  # MB_FUZZ_FLAGS is a list of flags
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$build/fuzz_artifacts/" ${MB_FUZZ_FLAGS:-} "$work/corpus"
