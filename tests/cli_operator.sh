#!/usr/bin/env bash
# The operator API's audit log and admin token rotation, against serve:
#   - every operator call is one JSON line of <data_dir>/audit.log (0600):
#     who (the address, a fingerprint of a right token, "wrong" or
#     "missing"), what (method, path, body), when, the answer's status and
#     error code; never the answer's body (a new API key's secret);
#   - health and ready probes with a right token are not audited;
#   - POST /admin/v1/token/rotate: the new token works at once, the old one
#     is refused, admin.token holds the new one; no restart.
# Usage: tests/cli_operator.sh <path to matchbook>
set -euo pipefail
mb=$(realpath "$1")
tmp=$(mktemp -d)
serve_pid=""
stop() {
  [[ -n "$serve_pid" ]] && kill -TERM "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap stop EXIT
fail() {
  echo "cli_operator: $*" >&2
  [[ -s "$tmp/data/audit.log" ]] && { echo "--- audit.log" >&2; cat "$tmp/data/audit.log" >&2; }
  exit 1
}
# shellcheck source=tests/serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"

start_serve "$mb" "$tmp/data" "$tmp/serve"
audit=$tmp/data/audit.log
[[ "$(stat -c %a "$audit")" == 600 ]] || fail "audit.log is not 0600"
lines() { wc -l <"$audit"; }
nth() { sed -n "${1}p" "$audit"; }  # the Nth audit line

id=$(admin POST accounts '{"name":"audited"}' | json_get accountId) || fail "create account"
keys=$(admin POST "accounts/$id/apiKeys" '{}') || fail "create key"
secret=$(json_get secretKey <<<"$keys")
admin GET health >/dev/null && admin GET ready >/dev/null || fail "probes"
[[ "$(lines)" == 2 ]] || fail "expected 2 audit lines after 2 calls and 2 probes, got $(lines)"
line=$(nth 1)
[[ "$(json_get method <<<"$line")" == POST && "$(json_get path <<<"$line")" == /admin/v1/accounts &&
   "$(json_get status <<<"$line")" == 200 && "$(json_get remote <<<"$line")" == 127.0.0.1* &&
   "$(json_get token <<<"$line")" == fp:* && "$(json_get body <<<"$line")" == *audited* ]] ||
  fail "first audit line: $line"
now=$(date +%s%3N)
(( now - $(json_get time <<<"$line") < 60000 )) || fail "audit time: $line"
grep -q "$secret" "$audit" && fail "the audit log holds an API secret"

# Refused calls are audited too, with their answer.
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "X-MB-ADMIN-TOKEN: wrong-token" \
  "$base/admin/v1/accounts" --data '{"name":"x"}')
[[ "$code" == 401 ]] || fail "a wrong token got $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$base/admin/v1/accounts")
[[ "$code" == 401 ]] || fail "no token got $code"
[[ "$(json_get token <<<"$(nth 3)")" == wrong && "$(json_get status <<<"$(nth 3)")" == 401 &&
   "$(json_get code <<<"$(nth 3)")" == -1002 ]] || fail "wrong-token line: $(nth 3)"
[[ "$(json_get token <<<"$(nth 4)")" == missing ]] || fail "missing-token line: $(nth 4)"
grep -q "wrong-token" "$audit" && fail "the audit log holds a presented token"

# Rotation.
old=$token
rotated=$(admin POST token/rotate) || fail "rotate"
new=$(json_get adminToken <<<"$rotated")
[[ -n "$new" && "$new" != "$old" ]] || fail "rotate answered: $rotated"
[[ "$(cat "$tmp/data/admin.token")" == "$new" ]] || fail "admin.token does not hold the new token"
[[ "$(stat -c %a "$tmp/data/admin.token")" == 600 ]] || fail "admin.token is not 0600"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-MB-ADMIN-TOKEN: $old" "$base/admin/v1/accounts")
[[ "$code" == 401 ]] || fail "the old token still works ($code)"
token=$new
admin GET accounts >/dev/null || fail "the new token does not work"
grep -q "$new" "$audit" && fail "the audit log holds the new admin token"
[[ "$(json_get path <<<"$(nth 5)")" == /admin/v1/token/rotate && "$(json_get status <<<"$(nth 5)")" == 200 ]] ||
  fail "rotate line: $(nth 5)"
[[ "$(json_get token <<<"$(nth 7)")" != "$(json_get token <<<"$(nth 1)")" ]] ||
  fail "the new token has the old one's fingerprint"

# Accounts and keys are journal records: a restart without snapshots (the
# journal replayed from its start) serves them again. An auth.json of an
# earlier version, where they were kept before, is journaled at the start:
# its account and key work, its revoked key stays revoked, and the file is
# set aside.
key=$(json_get apiKey <<<"$keys")
kill -TERM "$serve_pid" && wait "$serve_pid" || fail "serve did not stop cleanly"
serve_pid=""
rm -rf "$tmp/data/snapshots"
lid=$((id + 1))
lkey=$(printf 'L%.0s' $(seq 64))
lsecret=$(printf 'S%.0s' $(seq 64))
rkey=$(printf 'R%.0s' $(seq 64))
cat >"$tmp/data/auth.json" <<JSON
{"version":1,"accounts":[{"id":$id,"name":"audited","created_ms":1},
 {"id":$lid,"name":"legacy","created_ms":2}],
 "keys":[{"key":"$lkey","secret":"$lsecret","account":$lid,"created_ms":3,"revoked":false},
 {"key":"$rkey","secret":"$lsecret","account":$lid,"created_ms":4,"revoked":true}]}
JSON
start_serve "$mb" "$tmp/data" "$tmp/serve2"
grep -q "auth.json: journaling 2 accounts, keys and revocations" "$tmp/serve2.err" ||
  fail "the import is not logged: $(cat "$tmp/serve2.err")"
[[ ! -e "$tmp/data/auth.json" && -s "$tmp/data/auth.json.imported" ]] ||
  fail "auth.json was not set aside after its import"
[[ "$(admin GET "accounts/$lid" | json_get name)" == legacy ]] || fail "the imported account"
signed GET /api/v3/account "$lkey" "$lsecret" >/dev/null || fail "the imported key is refused"
signed GET /api/v3/account "$key" "$secret" >/dev/null ||
  fail "a key made before the restart is refused after a replay"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-MBX-APIKEY: $rkey" \
  "$base/api/v3/account?timestamp=$(date +%s%3N)&signature=00")
[[ "$code" == 401 || "$code" == 400 ]] || fail "the imported revoked key answered $code"
kill -TERM "$serve_pid" && wait "$serve_pid" || fail "serve did not stop cleanly"
serve_pid=""
start_serve "$mb" "$tmp/data" "$tmp/serve3"
# The journal and the snapshots hold the keys' secrets: owner only.
for f in "$tmp"/data/journal/*.mbj "$tmp"/data/snapshots/*.mbs; do
  [[ "$(stat -c %a "$f")" == 600 ]] || fail "$f is not 0600"
done
grep -q "journaling" "$tmp/serve3.err" && fail "the import ran twice"
signed GET /api/v3/account "$lkey" "$lsecret" >/dev/null || fail "the imported key after a restart"
# Neither the admin token nor an API secret is ever logged: not in the
# server's logs of the three runs, not in the audit log.
for s in "$token" "$secret" "$lsecret"; do
  if grep -qF -- "$s" "$tmp"/serve*.err "$tmp"/serve*.out "$tmp/data/audit.log"; then
    fail "a secret is in $(grep -lF -- "$s" "$tmp"/serve*.err "$tmp"/serve*.out "$tmp/data/audit.log")"
  fi
done
echo "cli operator checks: ok"
