#!/usr/bin/env bash
# Real full disks under `matchbook serve`: three small ext4 file systems on
# loop devices (made with -m 0: root, which this needs, ignores reserved
# blocks, so "full" is the last block):
#   A  the data directory: journal segments;
#   B  the snapshots (data_dir/snapshots is a link to it), the history store
#      (data_dir/history, a link too; small memtables, so that it flushes
#      within the test) and the SQLite projection;
#   C  the log file (--log-file) and the flight recorder's dumps
#      (data_dir/flight is a link to it; a command over 1 ms dumps).
# Orders flow from two signed clients that trade with each other while a
# filler file takes every free block, of B, then of C, then of A. Checks:
#   - B full: trading goes on (every order answered 200); a requested snapshot
#     fails (a log line, matchbook_snapshot_failures_total), the previous
#     snapshot stays byte for byte and no temporary file is left; the
#     projection and the history store report themselves unhealthy; once the
#     filler is deleted both catch up and the next snapshot is written;
#   - C full: trading goes on (every order answered 200) while flight-recorder
#     dumps fail (dumpErrors), and the log goes on once the filler is deleted;
#   - A full: new orders are refused with HTTP 503 (-1008) naming the disk
#     error, a log line and matchbook_commands_refused_total{reason="journal"};
#     once the filler is deleted intake resumes by itself;
#   - after a clean stop `matchbook verify` passes (nothing half-written
#     survives) and after a restart every order that was answered 200 is there.
# Exits 77 (skipped, with the reason) when not root or without loop devices.
# Usage: tests/full_disk.sh path/to/matchbook
set -euo pipefail
mb=$(realpath "$1")
src=$(cd "$(dirname "$0")/.." && pwd)

skip() {
  echo "full disk: skipped: $*"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root (it loop-mounts three small file systems)"
for tool in losetup mkfs.ext4 mount umount python3; do
  command -v "$tool" >/dev/null || skip "$tool is not installed"
done
[ -e /dev/loop-control ] || skip "no loop devices (/dev/loop-control is missing)"

work=$(mktemp -d /tmp/mb_full_disk.XXXXXX)
pid=""
loops=()
mounts=()
cleanup() {
  if [ -n "$pid" ]; then
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[$i]}" 2>/dev/null || umount -l "${mounts[$i]}" 2>/dev/null || true
  done
  for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "FAIL: $*" >&2
  echo "--- log (last 40 lines) ---" >&2
  tail -n 40 "$work/c/serve.log" >&2 2>/dev/null || true
  echo "--- stderr ---" >&2
  tail -n 20 "$work/serve.err" >&2 2>/dev/null || true
  exit 1
}

# mkfs_mount NAME MIB MOUNTPOINT
mkfs_mount() {
  truncate -s "$2M" "$work/$1.img"
  mkfs.ext4 -q -m 0 "$work/$1.img"
  local loop
  loop=$(losetup -f --show "$work/$1.img" 2>"$work/losetup.err") ||
    skip "no loop device: $(cat "$work/losetup.err")"
  loops+=("$loop")
  mkdir -p "$3"
  mount "$loop" "$3" 2>"$work/mount.err" || skip "cannot mount $loop: $(cat "$work/mount.err")"
  mounts+=("$3")
  rmdir "$3/lost+found"
}
mkfs_mount a 48 "$work/a"
mkfs_mount b 24 "$work/b"
mkfs_mount c 8 "$work/c"
mkdir -p "$work/a/d" "$work/b/snapshots" "$work/b/history" "$work/c/flight"
ln -s "$work/b/snapshots" "$work/a/d/snapshots"
ln -s "$work/b/history" "$work/a/d/history"
ln -s "$work/c/flight" "$work/a/d/flight"

sed -e 's/^segment_mb = .*/segment_mb = 1/' -e 's/^every_seconds = .*/every_seconds = 0/' \
  -e 's/^every_events = .*/every_events = 0/' -e 's/^on_shutdown = .*/on_shutdown = true/' \
  -e 's/^flight_window_ms = .*/flight_window_ms = 1000/' \
  "$src/config/matchbook.toml" >"$work/matchbook.toml"
printf '\n[projection]\nbackend = "sqlite"\npath = "%s"\n[history]\nwrite_buffer_kb = 64\n' \
  "$work/b/projection.sqlite" >>"$work/matchbook.toml"

start() {
  rm -f "$work/serve.out"
  "$mb" serve -c "$work/matchbook.toml" --data-dir "$work/a/d" --port 0 --weight-per-minute 0 \
    --ip-weight-per-minute 0 --flight-threshold-ms 1 --log-file "$work/c/serve.log" \
    >"$work/serve.out" 2>>"$work/serve.err" &
  pid=$!
  for _ in $(seq 300); do
    grep -qx ready "$work/serve.out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || fail "serve exited before ready"
    sleep 0.1
  done
  grep -qx ready "$work/serve.out" || fail "serve not ready"
  base=$(sed -n 's#^api: \(http://[^/]*\)/api/v3$#\1#p' "$work/serve.out")
}
stop() {
  kill -TERM "$pid"
  wait "$pid" || fail "serve exited with $? on SIGTERM"
  pid=""
}

start
python3 "$src/tests/full_disk.py" run "$base" "$work" || fail "the full-disk scenario"
stop
log="$work/c/serve.log"
grep -q "journal write failing" "$log" || fail "no log line for the refusal"
grep -q "journal writes succeed again" "$log" || fail "no log line for the recovery"
grep -q "snapshot at sequence [0-9]* failed" "$log" || fail "no log line for the snapshot"
if ls "$work/b/snapshots" | grep -q 'tmp$'; then fail "a snapshot's temporary file was left"; fi
"$mb" verify -c "$work/matchbook.toml" "$work/a/d" >"$work/verify.out" 2>&1 ||
  fail "verify after the full disks: $(cat "$work/verify.out")"
start
python3 "$src/tests/full_disk.py" check "$base" "$work" || fail "acknowledged orders after restart"
stop
echo "full disk checks: ok"
