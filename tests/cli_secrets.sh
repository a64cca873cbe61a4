#!/usr/bin/env bash
# API keys' secrets at rest (docs/security.md, "What is encrypted where"),
# against serve, backup, restore and `secrets scrub`, with a real nats-server:
#   - a first start makes <data_dir>/master.key (0600); a new key's secret
#     works for signing and its bytes (hex or raw) are in no file of the
#     data directory, the backup or the NATS store, nor in `journal dump`;
#   - a wrong, missing or world-readable master key is refused at start,
#     naming [security] master_key_file; restore refuses a backup without
#     the key or with a wrong one, and puts the right one in place;
#   - secrets an earlier version journaled in plain text (an auth.json
#     import) keep working and are counted; `secrets scrub` refuses while one
#     is live, and once they are rotated and revoked leaves none of their
#     bytes in the journal, the snapshots, the data directory or the stream,
#     while `matchbook verify` still replays the journal to every snapshot;
#   - `secrets rotate-master-key` seals every secret again with a new key:
#     the keys work, the old master key is refused.
# Usage: tests/cli_secrets.sh <path to matchbook>
set -euo pipefail
mb=$(realpath "$1")
tmp=$(mktemp -d)
serve_pid=""
npid=""
stop() {
  [[ -n "$serve_pid" ]] && kill -TERM "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  [[ -n "$npid" ]] && kill "$npid" 2>/dev/null && wait "$npid" 2>/dev/null
  rm -rf "$tmp"
}
trap stop EXIT
fail() {
  echo "cli_secrets: $*" >&2
  for f in "$tmp"/*.err; do [[ -s "$f" ]] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done
  exit 1
}
# shellcheck source=tests/serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"
stop_serve() {
  kill -TERM "$serve_pid" && wait "$serve_pid" || fail "serve did not stop cleanly"
  serve_pid=""
}
# Whether any file under the paths holds the text or the bytes of a hex secret.
holds() {  # holds HEX_OR_TEXT PATH...
  local needle=$1
  shift
  grep -rqaF -- "$needle" "$@" && return 0
  if [[ "$needle" =~ ^[0-9a-f]{64}$ ]]; then
    python3 - "$needle" "$@" <<'PY' && return 0
import os, sys
raw = bytes.fromhex(sys.argv[1])
for root in sys.argv[2:]:
    for d, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f), 'rb') as fh:
                if raw in fh.read():
                    sys.exit(0)
sys.exit(1)
PY
  fi
  return 1
}
counted() {  # counted FORM N: matchbook_api_key_secrets{form=FORM} is N
  local m
  m=$(curl -sS "$base/metrics") || fail "GET /metrics"
  grep -qx "matchbook_api_key_secrets{form=\"$1\"} $2" <<<"$m" ||
    fail "secrets of form $1: $(grep api_key_secrets <<<"$m")"
}
# The history projection follows the rewritten journal: caught up and healthy.
projection_follows() {
  local h=""
  for _ in $(seq 100); do
    h=$(admin GET health)
    [[ "$(json_get projection healthy <<<"$h")" == True && "$(json_get projection lagEvents <<<"$h")" == 0 ]] &&
      return 0
    sleep 0.1
  done
  fail "the projection does not follow the rewritten journal: $(json_get projection <<<"$h")"
}
refused() {  # refused OUT EXPECTED_TEXT ARGS...: serve must exit non-zero, saying EXPECTED_TEXT
  local out=$1 want=$2
  shift 2
  if "$mb" serve --port 0 "$@" >"$out.out" 2>"$out.err"; then fail "serve $* started"; fi
  grep -qF -- "$want" "$out.err" || fail "serve $*: no '$want' in: $(tail -3 "$out.err")"
}

nats_bin=$(command -v nats-server || echo /usr/sbin/nats-server)
[[ -x "$nats_bin" ]] || fail "nats-server is not installed (scripts/bootstrap.sh installs it)"
nport=$(free_port)
nats_url="nats://127.0.0.1:$nport"
"$nats_bin" -js -a 127.0.0.1 -p "$nport" -sd "$tmp/nats" -l "$tmp/nats.log" &
npid=$!
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$nport") 2>/dev/null && break
  sleep 0.1
done

data=$tmp/data
start_serve "$mb" "$data" "$tmp/serve1" --nats "$nats_url"
[[ "$(stat -c %a "$data/master.key")" == 600 ]] || fail "master.key is not 0600"
read -r id key secret <<<"$(new_trader alice USDT 100)"
[[ "$secret" =~ ^[0-9a-f]{64}$ ]] || fail "a new secret is not 64 hex characters: $secret"
signed GET /api/v3/account "$key" "$secret" >/dev/null || fail "the new key is refused"
counted sealed 1
stop_serve
holds "$secret" "$data" && fail "the data directory holds the secret"
holds "$secret" "$tmp/nats" && fail "the NATS store holds the secret"
"$mb" journal dump --data-dir "$data" >"$tmp/dump.txt" 2>&1 || fail "journal dump"
grep -q "CREATE_KEY" "$tmp/dump.txt" || fail "journal dump shows no key"
holds "$secret" "$tmp/dump.txt" && fail "journal dump prints the secret"
grep -q "e1:" "$tmp/dump.txt" && fail "journal dump prints the sealed secret"

# The master key's bad inputs, each refused at start and naming the option.
cp "$data/master.key" "$tmp/good.key"
openssl rand -hex 32 >"$tmp/wrong.key" && chmod 600 "$tmp/wrong.key"
refused "$tmp/wrong" "[security] master_key_file: $tmp/wrong.key does not open the secret of API key ${key:0:8}" \
  --data-dir "$data" --master-key "$tmp/wrong.key"
chmod 644 "$tmp/wrong.key"
refused "$tmp/open" "may be read by others (mode 644); chmod 600 it" \
  --data-dir "$data" --master-key "$tmp/wrong.key"
echo "not a key" >"$tmp/junk.key" && chmod 600 "$tmp/junk.key"
refused "$tmp/junk" "a master key is 64 hex characters" --data-dir "$data" --master-key "$tmp/junk.key"
mv "$data/master.key" "$tmp/moved.key"
refused "$tmp/missing" "$data/master.key does not exist, and 1 API key secrets" --data-dir "$data"
[[ ! -e "$data/master.key" ]] || fail "a refused start made a new master key"
mv "$tmp/moved.key" "$data/master.key"

# A backup holds no master key; restore needs it and checks it.
"$mb" backup --data-dir "$data" --to "$tmp/backup" >/dev/null 2>"$tmp/backup.err" || fail "backup"
[[ ! -e "$tmp/backup/master.key" ]] || fail "the backup holds the master key"
holds "$secret" "$tmp/backup" && fail "the backup holds the secret"
if "$mb" restore --from "$tmp/backup" --data-dir "$tmp/r1" 2>"$tmp/r1.err"; then
  fail "restore without the master key"
fi
grep -q "sealed with the venue's master key, which a backup never holds: give it with --master-key" \
  "$tmp/r1.err" || fail "restore without a key: $(cat "$tmp/r1.err")"
chmod 600 "$tmp/wrong.key"
if "$mb" restore --from "$tmp/backup" --data-dir "$tmp/r1" --master-key "$tmp/wrong.key" \
  2>"$tmp/r2.err"; then
  fail "restore with a wrong master key"
fi
grep -q "does not open the secret of API key" "$tmp/r2.err" || fail "wrong key: $(cat "$tmp/r2.err")"
[[ ! -e "$tmp/r1/journal" ]] || fail "a refused restore left files"
"$mb" restore --from "$tmp/backup" --data-dir "$tmp/r1" --master-key "$tmp/good.key" >/dev/null ||
  fail "restore with the master key"
cmp -s <(tr -d '\n' <"$tmp/r1/master.key") <(tr -d '\n' <"$tmp/good.key") ||
  fail "restore did not put the master key in place"
start_serve "$mb" "$tmp/r1" "$tmp/restored"
signed GET /api/v3/account "$key" "$secret" >/dev/null || fail "the key on the restored directory"
stop_serve

# Secrets an earlier version journaled in plain text: an auth.json import.
lkey=$(printf 'L%.0s' $(seq 64))
lsecret=$(openssl rand -hex 32)
cat >"$data/auth.json" <<JSON
{"version":1,"accounts":[{"id":$id,"name":"alice","created_ms":1},
 {"id":$((id + 1)),"name":"legacy","created_ms":2}],
 "keys":[{"key":"$lkey","secret":"$lsecret","account":$((id + 1)),"created_ms":3,"revoked":false}]}
JSON
start_serve "$mb" "$data" "$tmp/serve2" --nats "$nats_url"
grep -q "hold secrets an earlier version journaled in plain text" "$tmp/serve2.err" ||
  fail "no warning about plain secrets"
signed GET /api/v3/account "$lkey" "$lsecret" >/dev/null || fail "the legacy key is refused"
counted plain 1
# The publisher carries the plain record to the stream.
for _ in $(seq 100); do holds "$lsecret" "$tmp/nats" && break; sleep 0.1; done
holds "$lsecret" "$tmp/nats" || fail "the plain secret never reached the stream (the test sees nothing)"
# Refused while the server holds the data directory, and while the key is live.
if "$mb" secrets scrub --data-dir "$data" 2>"$tmp/scrub0.err"; then fail "scrub ran beside serve"; fi
stop_serve
if "$mb" secrets scrub --data-dir "$data" 2>"$tmp/scrub1.err"; then fail "scrub with a live key"; fi
grep -q "API key(s) in use hold a secret in plain text: ${lkey:0:8}" "$tmp/scrub1.err" ||
  fail "scrub with a live key: $(cat "$tmp/scrub1.err")"
# Rotation: the owner gets a new key, the old one is revoked.
start_serve "$mb" "$data" "$tmp/serve3" --nats "$nats_url"
new=$(admin POST "accounts/$((id + 1))/apiKeys" '{}')
nkey=$(json_get apiKey <<<"$new")
nsecret=$(json_get secretKey <<<"$new")
admin DELETE "apiKeys/$lkey" >/dev/null || fail "revoke the legacy key"
counted plain_revoked 1
kill -USR1 "$serve_pid"  # a snapshot that holds the revoked plain secret
for _ in $(seq 100); do [[ -n "$(ls "$data/snapshots")" ]] && break; sleep 0.1; done
stop_serve
holds "$lsecret" "$data/journal" || fail "the journal never held the plain secret"
holds "$lsecret" "$data/snapshots" || fail "the snapshots never held the plain secret"
"$mb" secrets scrub --data-dir "$data" --nats "$nats_url" >"$tmp/scrub.out" 2>"$tmp/scrub.err" ||
  fail "scrub: $(cat "$tmp/scrub.err")"
grep -q "scrubbed 1 plain secret(s) of revoked keys" "$tmp/scrub.out" || fail "$(cat "$tmp/scrub.out")"
grep -q "auth.json.imported removed" "$tmp/scrub.out" || fail "auth.json.imported stays"
grep -q "streams purged" "$tmp/scrub.out" || fail "the streams were not purged"
holds "$lsecret" "$data" && fail "the data directory still holds the plain secret"
holds "$lsecret" "$tmp/nats" && fail "the NATS store still holds the plain secret"
"$mb" verify --data-dir "$data" >"$tmp/verify.out" 2>&1 ||
  fail "verify after the scrub: $(tail -5 "$tmp/verify.out")"
"$mb" secrets scrub --data-dir "$data" >"$tmp/scrub2.out" 2>&1 || fail "a second scrub"
grep -q "scrubbed 0 plain secret" "$tmp/scrub2.out" || fail "a second scrub: $(cat "$tmp/scrub2.out")"
start_serve "$mb" "$data" "$tmp/serve4" --nats "$nats_url"
signed GET /api/v3/account "$nkey" "$nsecret" >/dev/null || fail "the rotated key is refused"
signed GET /api/v3/account "$key" "$secret" >/dev/null || fail "a sealed key after the scrub"
if signed GET /api/v3/account "$lkey" "$lsecret" >/dev/null 2>&1; then
  fail "the scrubbed key still works"
fi
counted scrubbed 1
projection_follows
grep -q "earlier version journaled in plain text" "$tmp/serve4.err" && fail "still warned"
# The last record before the rotation makes a key: the projection applied
# exactly the record the rotation rewrites.
last=$(admin POST "accounts/$id/apiKeys" '{}')
lastkey=$(json_get apiKey <<<"$last")
lastsecret=$(json_get secretKey <<<"$last")
stop_serve
holds "$lsecret" "$tmp/nats" && fail "the republished stream holds the plain secret"
holds "$nsecret" "$data" "$tmp/nats" && fail "the rotated key's secret is stored"

# A new master key: every secret sealed again, the old key opens nothing.
openssl rand -hex 32 >"$tmp/next.key" && chmod 600 "$tmp/next.key"
"$mb" secrets rotate-master-key --data-dir "$data" --new-master-key "$tmp/next.key" \
  --nats "$nats_url" >"$tmp/rotate.out" 2>"$tmp/rotate.err" || fail "rotate: $(cat "$tmp/rotate.err")"
grep -q "sealed 3 secret(s) again" "$tmp/rotate.out" || fail "rotate: $(cat "$tmp/rotate.out")"
cmp -s <(tr -d '\n' <"$data/master.key") <(tr -d '\n' <"$tmp/next.key") ||
  fail "the new master key was not installed"
refused "$tmp/oldkey" "does not open the secret of API key" --data-dir "$data" \
  --master-key "$tmp/good.key"
"$mb" verify --data-dir "$data" >"$tmp/verify2.out" 2>&1 ||
  fail "verify after the rotation: $(tail -5 "$tmp/verify2.out")"
start_serve "$mb" "$data" "$tmp/serve5" --nats "$nats_url"
signed GET /api/v3/account "$key" "$secret" >/dev/null || fail "a key after the master key's rotation"
signed GET /api/v3/account "$nkey" "$nsecret" >/dev/null || fail "the rotated key after the rotation"
signed GET /api/v3/account "$lastkey" "$lastsecret" >/dev/null || fail "the last key after the rotation"
projection_follows
stop_serve
echo "cli secrets checks: ok"
