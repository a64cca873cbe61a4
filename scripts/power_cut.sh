#!/usr/bin/env bash
# Power cuts of `matchbook serve`: its data directory on ext4 on a loop device,
# the device's backing file copied while serve is stopped and no write is in
# flight, each copy recovered and checked against every acknowledged answer
# (scripts/power_cut.py says how; docs/testing.md and docs/pipeline.md what it shows).
#
#   scripts/power_cut.sh N [--out DIR] [--seed S] [--keep-images] [--fsync POLICY]
#                        [--image-mb MB] [--prefill-events N [--prefill-via fill|load]
#                        [--bench-bin PATH] [--load-bin PATH]] [--verify-projection-every K]
#                        [--round-cuts R]
#   scripts/power_cut.sh --check CUT_DIR      # check one cut again
#
# Each run makes a new directory power_cut.XXXXXX under --out (default
# $TMPDIR or /tmp) holding a directory per cut (under round-NNN/ when the run
# has more than --round-cuts cuts): acks.jsonl (every answer
# acknowledged before the cut), matchbook.toml, moment, check.log, serve.log
# and, unless the cut passed, image.ext4 (kept always with --keep-images).
#
# Root only (losetup, mount). The binary is $MATCHBOOK_BIN, default
# build/release/bin/matchbook. The last line is "N passed, M failed"; the exit
# status is 0 only when M is 0, 77 when the machine cannot run it (not root,
# no loop device, a tool missing), with the reason on stderr.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${MATCHBOOK_BIN:-$root/build/release/bin/matchbook}

skip() {
  echo "power_cut: skipped: $*" >&2
  exit 77
}

[ "$(id -u)" -eq 0 ] || skip "needs root (losetup and mount)"
for tool in losetup mount umount mkfs.ext4 fsck.ext4 e2fsck python3; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool is not installed"
done
[ -x "$bin" ] || { echo "power_cut: no binary at $bin (set MATCHBOOK_BIN)" >&2; exit 2; }

out=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
parent=${out:-${TMPDIR:-/tmp}}
mkdir -p "$parent"
out=$(mktemp -d "$(cd "$parent" && pwd)/power_cut.XXXXXX")

# A loop device must be available: try one on a scratch image.
probe="$out/.probe.img"
truncate -s 1M "$probe"
if ! dev=$(losetup --find --show "$probe" 2>/dev/null); then
  rm -f "$probe"
  skip "no loop device available (losetup --find failed; is the loop module loaded?)"
fi
losetup -d "$dev"
rm -f "$probe"

# Whatever happens to the harness (failure, Ctrl-C, a kill), no mount or loop
# device of this run outlives it.
cleanup() {
  local mnt dev
  while read -r mnt; do
    umount -l "$mnt" 2>/dev/null || true
  done < <(awk -v d="$out/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r)
  while read -r dev; do
    [ -n "$dev" ] && losetup -d "$dev" 2>/dev/null || true
  done < <(losetup -n -l -O NAME,BACK-FILE 2>/dev/null | awk -v d="$out/" 'index($2, d) == 1 { print $1 }')
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "power_cut: run directory $out"
python3 "$root/scripts/power_cut.py" --bin "$bin" --out "$out" "${args[@]}"
