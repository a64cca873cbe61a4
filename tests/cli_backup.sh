#!/usr/bin/env bash
# `matchbook backup` and `matchbook restore` end to end:
#   - a backup taken while serve runs and trades is restored into a new
#     directory; serve started on it recovers exactly the backup's sequence
#     and state hash (the source's snapshot at that sequence has the same
#     hash), every balance equals the source's at the backup, orders placed
#     after the backup are not there, the API keys and the admin token work,
#     and `matchbook verify` passes;
#   - a backup of a stopped server holds its whole journal;
#   - bad inputs change nothing: a damaged file (named), a missing file, a
#     missing manifest, a non-empty target, another configuration.
# Usage: tests/cli_backup.sh <path to matchbook>
set -euo pipefail
mb=$(realpath "$1")
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
pids=()
stop() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap stop EXIT
fail() {
  echo "cli_backup: $*" >&2
  for f in "$tmp"/*.err; do [[ -s "$f" ]] && { echo "--- $f" >&2; tail -n 10 "$f" >&2; }; done
  exit 1
}
# shellcheck source=tests/serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"

# The balances of every account the test made, and the fee account's.
balances() {
  for id in "$buyer_id" "$seller_id" 0; do
    admin GET "accounts/$id" | json_get balances
  done
}

# --- a live server with trades and resting orders ---
start_serve "$mb" "$tmp/a" "$tmp/a"
pids+=("$serve_pid")
a_pid=$serve_pid
buyer=$(new_trader buyer USDT 100000) || fail "could not create the buyer"
seller=$(new_trader seller BTC 10) || fail "could not create the seller"
read -r buyer_id buyer_key buyer_secret <<<"$buyer"
read -r seller_id seller_key seller_secret <<<"$seller"
for i in 1 2 3; do
  order "$seller_key" "$seller_secret" SELL "3000$i.00" 0.01 >/dev/null || fail "sell $i refused"
  order "$buyer_key" "$buyer_secret" BUY "3000$i.00" 0.01 >/dev/null || fail "buy $i refused"
done
order "$buyer_key" "$buyer_secret" BUY "29000.00" 0.05 >/dev/null || fail "resting buy refused"
before=$(balances)

# --- a live backup ---
"$mb" backup --data-dir "$tmp/a" --to "$tmp/bk" >"$tmp/backup.out" 2>"$tmp/backup.err" ||
  fail "backup of a running server failed: $(cat "$tmp/backup.err")"
cat "$tmp/backup.out"
seq=$(sed -n 's/^backup .*: sequence \([0-9]*\) .*/\1/p' "$tmp/backup.out")
hash=$(sed -n 's/^backup .*state hash \([0-9a-f]*\) .*/\1/p' "$tmp/backup.out")
[[ -n "$seq" && "$seq" -gt 0 && -n "$hash" ]] || fail "no sequence and hash in: $(cat "$tmp/backup.out")"
[[ "$(json_get live <"$tmp/bk/manifest.json")" == "True" ]] || fail "the manifest does not say live"
[[ -f "$tmp/a/snapshots/$(printf '%020d' "$seq").mbs" ]] || fail "the server wrote no snapshot at $seq"
[[ "$(stat -c %a "$tmp/bk/admin.token")" == 600 ]] || fail "the backup's admin token is not 0600"

# After the backup: orders the restore must not have.
order "$buyer_key" "$buyer_secret" BUY "28000.00" 0.07 >/dev/null || fail "later buy refused"
after=$(balances)
[[ "$after" != "$before" ]] || fail "the later order changed no balance"

# --- restore into a new directory, serve on it ---
"$mb" restore --from "$tmp/bk" --data-dir "$tmp/b" --master-key "$tmp/a/master.key" >"$tmp/restore.out" 2>"$tmp/restore.err" ||
  fail "restore failed: $(cat "$tmp/restore.err")"
grep -q "^restored .*: sequence $seq state hash $hash " "$tmp/restore.out" ||
  fail "restore says: $(cat "$tmp/restore.out")"
a_base=$base
start_serve "$mb" "$tmp/b" "$tmp/b"
pids+=("$serve_pid")
grep -q "recovered sequence $seq .*state hash $hash" "$tmp/b.err" ||
  fail "the restored server did not recover sequence $seq with hash $hash"
[[ "$(balances)" == "$before" ]] || fail "restored balances differ from the source's at $seq:
$(balances)
source:
$before"
signed GET /api/v3/account "$buyer_key" "$buyer_secret" >/dev/null ||
  fail "the buyer's API key does not work on the restored server"
open=$(signed GET /api/v3/openOrders "$buyer_key" "$buyer_secret" "symbol=BTCUSDT")
[[ "$(json_get 0 price <<<"$open")" == "29000.00000000" && "$open" != *28000* ]] ||
  fail "restored open orders: $open"
kill -TERM "$serve_pid" && wait "$serve_pid" || fail "the restored server did not stop cleanly"
"$mb" verify "$tmp/b" >"$tmp/verify.out" 2>&1 || fail "verify of the restored directory: $(cat "$tmp/verify.out")"

# --- a stopped server: the whole journal ---
base=$a_base
kill -TERM "$a_pid" && wait "$a_pid" || fail "the source did not stop cleanly"
"$mb" backup --data-dir "$tmp/a" --to "$tmp/bk2" >"$tmp/backup2.out" 2>&1 ||
  fail "backup of a stopped server: $(cat "$tmp/backup2.out")"
seq2=$(sed -n 's/^backup .*: sequence \([0-9]*\) .*/\1/p' "$tmp/backup2.out")
[[ "$seq2" -gt "$seq" && "$(json_get live <"$tmp/bk2/manifest.json")" == "False" ]] ||
  fail "offline backup: $(cat "$tmp/backup2.out")"
"$mb" restore --from "$tmp/bk2" --data-dir "$tmp/c" --master-key "$tmp/a/master.key" >/dev/null 2>&1 || fail "restore of the offline backup"

# --- bad inputs: refused, named, nothing changed ---
refused() {  # refused WHAT EXPECTED_MESSAGE_REGEX CMD...
  local what=$1 want=$2
  shift 2
  if "$@" >"$tmp/bad.out" 2>&1; then fail "$what: accepted"; fi
  grep -Eq "$want" "$tmp/bad.out" || fail "$what: $(cat "$tmp/bad.out")"
  echo "refused: $what: $(head -c 160 "$tmp/bad.out")"
}
seg=$(cd "$tmp/bk" && ls journal | head -1)
cp -r "$tmp/bk" "$tmp/damaged"
printf '\xff' | dd of="$tmp/damaged/journal/$seg" bs=1 seek=100 conv=notrunc status=none
refused "a damaged segment" "backup damaged: journal/$seg" \
  "$mb" restore --from "$tmp/damaged" --data-dir "$tmp/d"
[[ ! -e "$tmp/d" ]] || fail "a refused restore created $tmp/d"
cp -r "$tmp/bk" "$tmp/missing" && rm "$tmp/missing/admin.token"
refused "a missing file" "backup damaged: admin.token" \
  "$mb" restore --from "$tmp/missing" --data-dir "$tmp/d"
cp -r "$tmp/bk" "$tmp/nomanifest" && rm "$tmp/nomanifest/manifest.json"
refused "no manifest" "manifest.json" "$mb" restore --from "$tmp/nomanifest" --data-dir "$tmp/d"
refused "a restore into a non-empty directory" "not an empty directory" \
  "$mb" restore --from "$tmp/bk" --data-dir "$tmp/b"
refused "a backup into a non-empty directory" "not an empty directory" \
  "$mb" backup --data-dir "$tmp/a" --to "$tmp/bk"
# The shipped configuration with another fee: another engine configuration.
sed '0,/^maker_fee_bps = .*/s//maker_fee_bps = 77/' "$src/config/matchbook.toml" >"$tmp/other.toml"
cmp -s "$src/config/matchbook.toml" "$tmp/other.toml" && fail "could not make another configuration"
refused "another configuration" "configuration hash" \
  "$mb" restore --config "$tmp/other.toml" --from "$tmp/bk" --data-dir "$tmp/d"
[[ ! -e "$tmp/d" ]] || fail "a refused restore created $tmp/d"
echo "cli backup checks: ok"
