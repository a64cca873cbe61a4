#!/usr/bin/env bash
# Journal retention end to end ([journal] retention, docs/journal_format.md):
#   - three rounds of a long stream (matchbook-bench fill through the same
#     exchange serve runs: 1 MiB segments, a snapshot every 10,000 events, two
#     kept), each followed by `serve`, which archives every segment below the
#     oldest snapshot kept and the projection's next record: the live journal
#     stays bounded while the whole stream grows, and the archive holds the rest;
#   - `matchbook journal list` shows both; `matchbook verify` (reading the
#     archive) replays from sequence 1 and matches every snapshot;
#     `matchbook project --rebuild` from the archive equals the journal
#     (`verify --projection`);
#   - retention "delete" (offline, `matchbook journal archive`) removes what
#     nobody needs, and serve still recovers from its snapshot;
#   - bad inputs: an unknown policy is refused at start, naming the key.
# Usage: tests/cli_retention.sh <path to matchbook> <path to matchbook-bench>
set -euo pipefail
mb=$(realpath "$1")
bench=$(realpath "$2")
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
serve_pid=""
stop() {
  [[ -n "$serve_pid" ]] && kill -TERM "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap stop EXIT
fail() {
  echo "cli_retention: $*" >&2
  [[ -s "$tmp/serve.err" ]] && tail -n 15 "$tmp/serve.err" >&2
  exit 1
}
# shellcheck source=tests/serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"

config() {  # config POLICY > file
  sed -e "s/^segment_mb = .*/segment_mb = 1\nretention = \"$1\"/" \
    -e 's/^every_events = .*/every_events = 10000/' -e 's/^keep = .*/keep = 2/' \
    "$src/config/matchbook.toml"
}
config archive >"$tmp/archive.toml"
grep -q '^retention = "archive"' "$tmp/archive.toml" || fail "could not write the configuration"
live_bytes() { du -sb "$1/journal" | cut -f1; }

d=$tmp/data
bound=$((8 << 20))
prev_first=1  # 1: nothing retired yet
for round in 1 2 3; do
  "$bench" fill --config "$tmp/archive.toml" --data-dir "$d" --events 30000 >"$tmp/fill.out" 2>&1 ||
    fail "fill: $(tail -3 "$tmp/fill.out")"
  before=$(live_bytes "$d")
  start_serve "$mb" "$d" "$tmp/serve" --config "$tmp/archive.toml"
  # Retention runs every 2 s; once the projection has caught up, the oldest
  # snapshot kept is the floor: wait for that, then for a pass after it.
  lag=""
  for _ in $(seq 1 150); do
    lag=$(curl -sS "$base/metrics" | sed -n 's/^matchbook_history_lag_events \([0-9]*\)$/\1/p')
    [[ "$lag" == 0 ]] && break
    sleep 0.2
  done
  [[ "$lag" == 0 ]] || fail "round $round: the projection did not catch up"
  sleep 2.5
  first=$(curl -sS "$base/metrics" | sed -n 's/^matchbook_journal_first_sequence \([0-9]*\)$/\1/p')
  ((${first:-0} >= prev_first)) || fail "round $round: the journal's first sequence went back"
  prev_first=$first
  kill -TERM "$serve_pid" && wait "$serve_pid" || fail "serve did not stop cleanly"
  serve_pid=""
  after=$(live_bytes "$d")
  echo "round $round: live journal $before -> $after bytes, archive $(du -sb "$d/archive" | cut -f1) bytes, first live sequence $first"
  ((after <= bound)) || fail "round $round: the live journal is $after bytes (bound $bound)"
  [[ -n "$first" && "$first" != 0 ]] || fail "round $round: no matchbook_journal_first_sequence"
done
"$mb" journal list --config "$tmp/archive.toml" "$d" >"$tmp/list.out" || fail "journal list"
grep -q "^ *1\.\..* archived " "$tmp/list.out" || fail "journal list: $(cat "$tmp/list.out")"
tail -1 "$tmp/list.out"

"$mb" verify --config "$tmp/archive.toml" "$d" >"$tmp/verify.out" 2>&1 || fail "verify: $(cat "$tmp/verify.out")"
grep -q "no snapshot + .* journal records" "$tmp/verify.out" && grep -q "invariants: ok" "$tmp/verify.out" ||
  fail "verify did not replay from sequence 1: $(cat "$tmp/verify.out")"
"$mb" journal verify --config "$tmp/archive.toml" "$d" >"$tmp/jverify.out" 2>&1 ||
  fail "journal verify: $(cat "$tmp/jverify.out")"
grep -q "records 1\.\." "$tmp/jverify.out" || fail "journal verify: $(cat "$tmp/jverify.out")"
"$mb" project --rebuild --config "$tmp/archive.toml" "$d" >"$tmp/project.out" 2>&1 ||
  fail "project --rebuild: $(cat "$tmp/project.out")"
"$mb" verify --projection --config "$tmp/archive.toml" "$d" >"$tmp/vp.out" 2>&1 ||
  fail "verify --projection: $(cat "$tmp/vp.out")"
grep -q "projection: ok" "$tmp/vp.out" || fail "verify --projection: $(cat "$tmp/vp.out")"
echo "verify, project --rebuild and verify --projection read the archive: ok"

# Retention "delete", offline.
config delete >"$tmp/delete.toml"
d2=$tmp/data2
"$bench" fill --config "$tmp/delete.toml" --data-dir "$d2" --events 30000 >/dev/null 2>&1 || fail "fill 2"
"$mb" project --config "$tmp/delete.toml" "$d2" >/dev/null 2>&1 || fail "project 2"
"$mb" journal archive --config "$tmp/delete.toml" "$d2" >"$tmp/delete.out" 2>&1 ||
  fail "journal archive (delete): $(cat "$tmp/delete.out")"
grep -q "segments (.* bytes) deleted" "$tmp/delete.out" || fail "delete: $(cat "$tmp/delete.out")"
[[ ! -e "$d2/archive" || -z "$(ls "$d2/archive")" ]] || fail "delete wrote an archive"
cat "$tmp/delete.out"
start_serve "$mb" "$d2" "$tmp/serve2" --config "$tmp/delete.toml"
kill -TERM "$serve_pid" && wait "$serve_pid" || fail "serve on the trimmed journal did not stop cleanly"
serve_pid=""

# Bad input: an unknown policy.
sed 's/^retention = "delete"/retention = "sometimes"/' "$tmp/delete.toml" >"$tmp/bad.toml"
if "$mb" serve --config "$tmp/bad.toml" --data-dir "$tmp/bad" --port 0 >/dev/null 2>"$tmp/bad.err"; then
  fail "an unknown retention policy was accepted"
fi
grep -q "journal.retention" "$tmp/bad.err" || fail "bad policy: $(cat "$tmp/bad.err")"
echo "cli retention checks: ok"
