#!/usr/bin/env bash
# The journal tools end to end on a real data directory:
#   demo --data-dir (the pipeline writes a journal), journal verify, verify,
#   journal dump, serve --recover-only (snapshot), a torn tail (verify reports
#   it, serve cuts it), a flipped byte in the middle (refused, file untouched),
#   a foreign file and a second process on the same directory (refused).
# Usage: cli_journal.sh path/to/matchbook
set -euo pipefail
mb="$1"
dir="$(mktemp -d /tmp/mb_cli_journal.XXXXXX)"
trap 'kill %1 2>/dev/null || true; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$mb" demo --data-dir "$dir/d" >"$dir/demo.out" 2>"$dir/demo.err" || fail "demo through the pipeline"
grep -q "identical to the engine's" "$dir/demo.out" || fail "demo output: $(cat "$dir/demo.out")"
"$mb" journal verify "$dir/d" | grep -q "records 1..11 (11 records, 20 events): ok" || fail "journal verify"
"$mb" verify "$dir/d" | grep -q "invariants: ok" || fail "verify"
"$mb" journal dump "$dir/d" --from 4 --to 4 | grep -q "OrderAccepted order=4" || fail "dump"

seg="$dir/d/journal/00000000000000000001.mbj"
cp -a "$dir/d" "$dir/copy"
rm "$dir/d"/snapshots/*  # the shutdown snapshot covers the record cut below
# A torn tail: the last record loses its final 5 bytes.
size=$(stat -c %s "$seg")
truncate -s $((size - 5)) "$seg"
"$mb" journal verify "$dir/d" | grep -q "journal tail: found" || fail "torn tail not reported"
"$mb" serve --data-dir "$dir/d" --recover-only 2>"$dir/serve.err" || fail "serve over a torn tail: $(cat "$dir/serve.err")"
grep -q "journal tail: dropped" "$dir/serve.err" || fail "the cut is not logged"
grep -q "recovered sequence 10 " "$dir/serve.err" || fail "recovery after the cut: $(cat "$dir/serve.err")"
"$mb" verify "$dir/d" >/dev/null || fail "verify after the cut"

# A flipped byte inside the third record: damage in the middle.
seg="$dir/copy/journal/00000000000000000001.mbj"
before=$(sha256sum "$seg")
printf '\xff' | dd of="$seg" bs=1 seek=320 conv=notrunc status=none
damaged=$(sha256sum "$seg")
if "$mb" journal verify "$dir/copy" 2>"$dir/verify.err"; then fail "corruption accepted"; fi
grep -q "corrupt record at offset" "$dir/verify.err" || fail "message: $(cat "$dir/verify.err")"
if "$mb" serve --data-dir "$dir/copy" --recover-only 2>"$dir/serve2.err"; then fail "serve started on a corrupt journal"; fi
grep -q "refusing to skip it" "$dir/serve2.err" || fail "serve message: $(cat "$dir/serve2.err")"
[ "$(sha256sum "$seg")" = "$damaged" ] || fail "the damaged segment was changed"
[ "$before" != "$damaged" ] || fail "the byte flip did nothing"

# A foreign file in the journal directory.
echo hello >"$dir/d/journal/notes.txt"
if "$mb" serve --data-dir "$dir/d" --recover-only 2>"$dir/serve3.err"; then fail "foreign file accepted"; fi
grep -q "unexpected file notes.txt" "$dir/serve3.err" || fail "message: $(cat "$dir/serve3.err")"
rm "$dir/d/journal/notes.txt"

# Two processes on one data directory: the second refuses.
"$mb" serve --data-dir "$dir/d" 2>"$dir/first.err" &
for _ in $(seq 100); do grep -q "running at sequence" "$dir/first.err" && break; sleep 0.1; done
grep -q "running at sequence" "$dir/first.err" || fail "first serve did not start: $(cat "$dir/first.err")"
if "$mb" serve --data-dir "$dir/d" --recover-only 2>"$dir/second.err"; then fail "second process allowed"; fi
grep -q "in use by another process" "$dir/second.err" || fail "message: $(cat "$dir/second.err")"
kill -TERM %1
wait %1 || fail "serve did not shut down cleanly on SIGTERM"
grep -q "closed at sequence 10" "$dir/first.err" || fail "shutdown: $(cat "$dir/first.err")"
echo "cli journal checks: ok"
