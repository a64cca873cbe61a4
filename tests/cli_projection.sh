#!/usr/bin/env bash
# The projection tools end to end: a demo journal projected into SQLite,
# verified, rebuilt (same rows), refused while the directory is in use and
# when the projection comes from another data directory.
# Usage: tests/cli_projection.sh <path to matchbook>
set -euo pipefail
mb=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$mb" demo --data-dir "$dir/a" >/dev/null
out=$("$mb" project --data-dir "$dir/a")
echo "$out"
grep -q "caught up at sequence" <<<"$out"
"$mb" verify --projection --data-dir "$dir/a" | tee "$dir/verify.txt"
grep -q "projection: ok (equals the journal)" "$dir/verify.txt"

# A rebuild gives the same result.
"$mb" project --rebuild --data-dir "$dir/a" | grep -q "rebuilt at sequence"
"$mb" verify --projection --data-dir "$dir/a" >/dev/null

# The projection of another (shorter) journal is refused, and verify says why.
mkdir -p "$dir/b/journal"
cp "$dir/a/projection.sqlite" "$dir/b/"
if "$mb" project --data-dir "$dir/b" 2>"$dir/err.txt"; then
  echo "a projection ahead of its journal was accepted" >&2
  exit 1
fi
grep -q "another data directory" "$dir/err.txt"
if "$mb" verify --projection --data-dir "$dir/b" >"$dir/out.txt"; then
  echo "verify accepted a projection of another journal" >&2
  exit 1
fi
grep -q "DIFFERENCE" "$dir/out.txt"

# An unknown backend in the configuration is refused with file, line and field.
sed 's/^\[engine\]/[projection]\nbackend = "mysql"\n\n[engine]/' \
  "$(dirname "$0")/../config/matchbook.toml" >"$dir/bad.toml"
if "$mb" config check "$dir/bad.toml" 2>"$dir/err2.txt"; then
  echo "an unknown projection backend was accepted" >&2
  exit 1
fi
grep -q "projection.backend" "$dir/err2.txt"
echo "cli projection checks: ok"
