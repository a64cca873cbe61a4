#!/usr/bin/env bash
# The bus secured end to end (docs/security.md): a nats-server with TLS
# (client certificates required) and accounts whose users may do only their
# role's part; a primary that publishes signed records over tls://, a
# replica that may only read and verifies every record with the bus key.
# A wrong password, CA or plain URL is refused at start naming the option;
# a replica's user cannot publish to the journal subject (the server
# refuses), and a record published with the primary's permissions but
# without the bus key's signature is refused by the replica, whose state
# stays where it was.
# Usage: tests/cli_bus_security.sh <path to matchbook>
set -euo pipefail
mb=$1
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  [ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$dir"/*.err "$dir/nats.log"; do
    [ -f "$f" ] && { echo "--- $f ---" >&2; tail -20 "$f" >&2; }
  done
  exit 1
}
# shellcheck source=tests/serve_lib.sh
source "$here/serve_lib.sh"
nats_bin=$(command -v nats-server || echo /usr/sbin/nats-server)
[ -x "$nats_bin" ] || fail "nats-server is not installed (scripts/bootstrap.sh installs it)"

# A test CA, the server's certificate for 127.0.0.1, a client certificate,
# and a second CA that signed none of them.
# shellcheck source=tests/test_ca.sh
source "$here/test_ca.sh"
make_test_server "$dir"
make_test_cert "$dir" client "extendedKeyUsage=clientAuth"
mkdir "$dir/other"
make_test_ca "$dir/other"
cp "$dir/other/ca.pem" "$dir/otherca.pem"
printf 'primary-password-1\n' >"$dir/primary.pw"
printf 'replica-password-2\n' >"$dir/replica.pw"
printf 'not-the-password\n' >"$dir/wrong.pw"
chmod 600 "$dir"/*.pw

nport=$(free_port)
S=MATCHBOOK_matchbook
cat >"$dir/nats.conf" <<CONF
listen: 127.0.0.1:$nport
jetstream { store_dir: "$dir/nats" }
tls {
  cert_file: "$dir/server.pem"
  key_file: "$dir/server.key"
  ca_file: "$dir/ca.pem"
  verify: true
}
accounts {
  VENUE {
    jetstream: enabled
    users: [
      { user: primary, password: primary-password-1,
        permissions: {
          publish: { allow: ["mb.matchbook.journal", "mb.matchbook.journal.snapshot.>",
                             "\$JS.API.>", "\$JS.FC.>"] }
          subscribe: { allow: ["_INBOX.>"] } } }
      { user: replica, password: replica-password-2,
        permissions: {
          publish: {
            allow: ["\$JS.API.INFO",
                    "\$JS.API.STREAM.INFO.$S", "\$JS.API.STREAM.INFO.${S}_SNAPSHOTS",
                    "\$JS.API.STREAM.MSG.GET.$S", "\$JS.API.STREAM.MSG.GET.${S}_SNAPSHOTS",
                    "\$JS.API.CONSUMER.CREATE.$S", "\$JS.API.CONSUMER.CREATE.$S.>",
                    "\$JS.API.CONSUMER.DELETE.$S.>", "\$JS.API.CONSUMER.INFO.$S.>",
                    "\$JS.FC.>"]
            deny: ["mb.>"] }
          subscribe: { allow: ["_INBOX.>"] } } }
    ]
  }
}
CONF
"$nats_bin" -c "$dir/nats.conf" -l "$dir/nats.log" &
pids+=($!)
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$nport") 2>/dev/null && break
  sleep 0.1
done
url="tls://127.0.0.1:$nport"
tls=(--nats-ca "$dir/ca.pem" --nats-cert "$dir/client.pem" --nats-key "$dir/client.key")

# Refused at start, naming what to check.
"$mb" serve --data-dir "$dir/bad1" --port 0 --nats "$url" "${tls[@]}" --nats-user primary \
  --nats-password-file "$dir/wrong.pw" >/dev/null 2>"$dir/bad1.err" && fail "a wrong password was taken"
grep -q "password_file" "$dir/bad1.err" || fail "a wrong password: $(tail -2 "$dir/bad1.err")"
"$mb" serve --data-dir "$dir/bad2" --port 0 --nats "nats://127.0.0.1:$nport" --nats-user primary \
  --nats-password-file "$dir/primary.pw" >/dev/null 2>"$dir/bad2.err" && fail "plain TCP was taken"
grep -q "TLS" "$dir/bad2.err" || fail "plain TCP to a TLS server: $(tail -2 "$dir/bad2.err")"
"$mb" serve --data-dir "$dir/bad3" --port 0 --nats "$url" --nats-ca "$dir/otherca.pem" \
  --nats-cert "$dir/client.pem" --nats-key "$dir/client.key" --nats-user primary \
  --nats-password-file "$dir/primary.pw" >/dev/null 2>"$dir/bad3.err" && fail "a wrong CA was taken"
grep -q "tls_ca_file" "$dir/bad3.err" || fail "a wrong CA: $(tail -2 "$dir/bad3.err")"
"$mb" serve --data-dir "$dir/bad4" --port 0 --nats "$url" "${tls[@]}" --nats-user primary \
  --nats-password-file "$dir/missing.pw" >/dev/null 2>"$dir/bad4.err" && fail "a missing file was taken"
grep -q "password_file: $dir/missing.pw is not a readable file" "$dir/bad4.err" ||
  fail "a missing password file: $(tail -2 "$dir/bad4.err")"
echo "wrong password, plain TCP, wrong CA and a missing file: refused at start"

# The primary over TLS with its own user.
start_serve "$mb" "$dir/p" "$dir/primary" --nats "$url" "${tls[@]}" --nats-user primary \
  --nats-password-file "$dir/primary.pw"
pids+=("$serve_pid")
[ "$(stat -c %a "$dir/p/bus.key")" = 600 ] || fail "the bus key is not 0600"
pub=$(cat "$dir/p/bus.key.pub")
grep -q "public key $pub" "$dir/primary.err" || fail "the start-up log does not name the public bus key"
read -r _ k1 s1 <<<"$(new_trader alice USDT 100000)"
read -r _ k2 s2 <<<"$(new_trader bob BTC 10)"
order "$k1" "$s1" BUY 100 1 >/dev/null
order "$k2" "$s2" SELL 100 1 >/dev/null
primary_base=$base
durable=$(admin GET health | json_get durableSequence)

# A replica with a wrong bus key refuses the stream at start.
other_key=$(openssl rand -hex 32)
"$mb" replica --data-dir "$dir/r0" --port 0 --nats "$url" "${tls[@]}" --nats-user replica \
  --nats-password-file "$dir/replica.pw" --bus-verify-key "$other_key" >/dev/null 2>"$dir/r0.err" &&
  fail "a replica with another bus key started"
grep -q "refused" "$dir/r0.err" || fail "a wrong verify key: $(tail -2 "$dir/r0.err")"

# The replica: read-only user, the primary's public key.
"$mb" replica --data-dir "$dir/r" --port 0 --nats "$url" "${tls[@]}" --nats-user replica \
  --nats-password-file "$dir/replica.pw" --bus-verify-key "$dir/p/bus.key.pub" \
  --primary "$primary_base" >"$dir/replica.out" 2>"$dir/replica.err" &
pids+=($!)
for _ in $(seq 300); do grep -qx ready "$dir/replica.out" 2>/dev/null && break; sleep 0.1; done
grep -qx ready "$dir/replica.out" || fail "the replica did not get ready"
rbase=$(sed -n 's|^api: \(http://127\.0\.0\.1:[0-9]*\)/api/v3$|\1|p' "$dir/replica.out")
rtoken=$(cat "$dir/r/admin.token")
rhealth() { curl -sS -H "X-MB-ADMIN-TOKEN: $rtoken" "$rbase/admin/v1/health"; }
for _ in $(seq 100); do
  [ "$(rhealth | json_get replica appliedSequence)" = "$durable" ] && break
  sleep 0.1
done
[ "$(rhealth | json_get replica appliedSequence)" = "$durable" ] || fail "the replica did not apply $durable records"
echo "primary and replica over tls:// with their own users: $durable records applied, each verified"

# The replica's user may not publish to the journal subject.
r=$(python3 "$here/nats_raw.py" publish "$url" "$dir/ca.pem" "$dir/client.pem" "$dir/client.key" \
  replica replica-password-2 mb.matchbook.journal 00)
[[ "$r" == *"Permissions Violation"* ]] || fail "the replica's user published to the journal: $r"

# With the primary's permissions but not its key: the replica refuses it.
r=$(python3 "$here/nats_raw.py" replay "$url" "$dir/ca.pem" "$dir/client.pem" "$dir/client.key" \
  primary primary-password-1 "$S" mb.matchbook.journal)
[[ "$r" == *'"seq"'* ]] || fail "the unsigned copy did not reach the stream: $r"
for _ in $(seq 100); do
  [ "$(rhealth | json_get replica refused)" -ge 1 ] && break
  sleep 0.1
done
h=$(rhealth)
[ "$(json_get replica refused <<<"$h")" -ge 1 ] || fail "the unsigned record was not refused: $h"
[ "$(json_get replica appliedSequence <<<"$h")" = "$durable" ] || fail "the replica's state moved: $h"
json_get replica lastError <<<"$h" | grep -q "no Mb-Sig header" || fail "lastError: $h"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-MB-ADMIN-TOKEN: $rtoken" "$rbase/admin/v1/ready")
[ "$code" = 503 ] || fail "the replica is ready ($code) while the stream ends with a refused record"
curl -sS "$rbase/metrics" | grep -q '^matchbook_replica_refused_messages_total [1-9]' ||
  fail "no refused-messages metric"
echo "a publish by the replica's user refused by NATS; an unsigned record refused by the replica"

# Something with the primary's NATS rights but neither its key nor its
# records: the primary erases it at its next publish and goes on (it does
# not take it for another primary), and the replica applies the next record.
r=$(python3 "$here/nats_raw.py" publish "$url" "$dir/ca.pem" "$dir/client.pem" "$dir/client.key" \
  primary primary-password-1 mb.matchbook.journal 00)
[[ "$r" == ok* ]] || fail "the forged message was not sent: $r"
order "$k1" "$s1" BUY 99 1 >/dev/null || fail "the primary refused an order after the forgery"
next=$((durable + 1))
for _ in $(seq 100); do
  [ "$(rhealth | json_get replica appliedSequence)" = "$next" ] && break
  sleep 0.1
done
[ "$(rhealth | json_get replica appliedSequence)" = "$next" ] ||
  fail "the replica did not apply record $next after the forgery: $(rhealth)"
[ "$(admin GET health | json_get bus forgedErased)" -ge 1 ] ||
  fail "the primary did not erase the forged message: $(admin GET health)"
[ "$(admin GET health | json_get role)" = primary ] || fail "the primary stepped down"
grep -q "is not signed with this venue's bus key and is not this journal's: erased" \
  "$dir/primary.err" || fail "the erasure is not logged"
echo "a forged message at the stream's end: erased by the primary, which goes on"
# A clean stop after TLS connections (libnats and OpenSSL both clean up at exit).
kill -TERM "$serve_pid"
rc=0
wait "$serve_pid" || rc=$?
[ "$rc" = 0 ] || fail "the primary exited $rc on SIGTERM"
echo "cli bus security checks: ok"
