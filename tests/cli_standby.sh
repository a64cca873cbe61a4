#!/usr/bin/env bash
# A primary and its hot standby on a 3-node NATS JetStream cluster, end to
# end (docs/failover.md), with ack = replicated:
#   - roles: /admin/v1/health says primary / standby, /admin/v1/ready is 200
#     on the primary only; a standby refuses order entry with 503, answers
#     the read-only operator calls (its primary's accounts, balances,
#     markets) and refuses changes with 409
#   - failover by SIGKILL: the standby takes over; every order answered
#     RESULT by the dead primary is on the new one with the same id and
#     fills, the API keys work there at once, and a key revoked before the
#     kill stays revoked; a market added at run time is served with its
#     book; the market's trades, aggregate trades and candles and an
#     account's orders and fills are what the dead primary answered; the
#     time from kill to the first order accepted is printed
#   - the old primary restarted with --standby rejoins and follows; a
#     standby paused while orders flow catches up
#   - split brain: the primary frozen (SIGSTOP) past its lease, the standby
#     takes over and trades; the old one resumed (SIGCONT) answers 503,
#     journals nothing new and goes on as a standby
#   - planned failover (POST /admin/v1/failover) under a stream of orders:
#     no answer but 200 and retriable 503s
#   - both data directories end with the same records and state hash
#   - NATS frozen past the lease with no standby: intake closes, and the
#     primary takes its lease back once NATS answers again
#   - a standby whose state hash differs from the primary's at a snapshot
#     (MATCHBOOK_TEST_FAULT, test builds) stops with the determinism error
#   - ack = local: orders a primary answered but never published (its
#     publishing held back by MATCHBOOK_TEST_FAULT) are lost at a failover;
#     the old primary, restarted with --standby after the new one has traded
#     on the same sequences, cuts them, logs each discarded order id, and
#     ends with the new primary's state
# Usage: tests/cli_standby.sh <path to matchbook>   (MB_FAILOVER_KILLS=N: more kills)
set -euo pipefail
mb=$1
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/serve_lib.sh
source "$here/serve_lib.sh"
dir=$(mktemp -d)
kills=${MB_FAILOVER_KILLS:-2}
declare -A pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
  bash "$here/../scripts/nats_cluster.sh" stop "$dir/nats" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$dir"/*.err; do
    [ -e "$f" ] || continue
    echo "--- $f (last 30 lines) ---" >&2
    tail -30 "$f" >&2
  done
  exit 1
}
now_ms() { date +%s%3N; }

urls=$(bash "$here/../scripts/nats_cluster.sh" start "$dir/nats") || fail "the NATS cluster did not start"

# start NAME [ARGS...]: serve on data dir $dir/NAME (log $dir/NAME.{out,err}),
# as a primary or (--standby) a standby; waits for its first start line.
start() {
  local name=$1 line have
  shift
  # What the server's earlier runs printed is not waited for again (a
  # demoted primary prints "standby" without a wait_line reading it).
  for line in ready standby; do
    have=$(grep -cx "$line" "$dir/$name.out" 2>/dev/null || true)
    echo "${have:-0}" >"$dir/$name.seen.$line"
  done
  # One bus key and one master key for the venue: the first primary makes
  # them, every standby is given them (it signs the journal and serves the
  # API keys once it takes over).
  MATCHBOOK_TEST_FAULT=${fault:-} "$mb" serve --data-dir "$dir/$name" --port 0 --nats "$urls" \
    --ack "${ack:-replicated}" --bus-signing-key "$dir/bus.key" --master-key "$dir/master.key" "$@" \
    >>"$dir/$name.out" 2>>"$dir/$name.err" &
  pids[$name]=$!
}
# wait_line NAME LINE [SECONDS]: until NAME's stdout has LINE once more than
# it had (counts in $dir/NAME.seen).
wait_line() {
  local name=$1 line=$2 secs=${3:-30} seen have
  seen=$(cat "$dir/$name.seen.$line" 2>/dev/null || echo 0)
  for _ in $(seq $((secs * 20))); do
    have=$(grep -cx "$line" "$dir/$name.out" 2>/dev/null || true)
    if [ "${have:-0}" -gt "$seen" ]; then
      echo "$have" >"$dir/$name.seen.$line"
      return 0
    fi
    sleep 0.05
  done
  fail "$name did not print '$line' within $secs s"
}
# base_of NAME: its newest API address.
base_of() { sed -n 's|^api: \(http://127\.0\.0\.1:[0-9]*\)/api/v3$|\1|p' "$dir/$1.out" | tail -1; }
use() { base=$(base_of "$1"); token=$(cat "$dir/$1/admin.token"); }
health_of() { curl -sS -H "X-MB-ADMIN-TOKEN: $(cat "$dir/$1/admin.token")" "$(base_of "$1")/admin/v1/health"; }
role_of() { health_of "$1" | json_get role; }
ready_code() {
  curl -s -o /dev/null -w '%{http_code}' -H "X-MB-ADMIN-TOKEN: $(cat "$dir/$1/admin.token")" \
    "$(base_of "$1")/admin/v1/ready"
}

# A standby without the venue's bus key is refused and says where to get it.
"$mb" serve --data-dir "$dir/nokey" --port 0 --nats "$urls" --standby >/dev/null 2>"$dir/nokey.err" &&
  fail "a standby without the bus key started"
grep -q "needs the primary's bus key" "$dir/nokey.err" || fail "unclear refusal: $(tail -2 "$dir/nokey.err")"

start a
wait_line a ready
use a
[ "$(role_of a)" = primary ] || fail "a is not the primary"
[ "$(stat -c %a "$dir/bus.key")" = 600 ] || fail "the bus key is not 0600"
[ "$(stat -c %a "$dir/master.key")" = 600 ] || fail "the master key is not 0600"
# A standby without the venue's master key is refused the same way.
"$mb" serve --data-dir "$dir/nomaster" --port 0 --nats "$urls" --standby \
  --bus-signing-key "$dir/bus.key" >/dev/null 2>"$dir/nomaster.err" &&
  fail "a standby without the master key started"
grep -q "needs the primary's master key" "$dir/nomaster.err" ||
  fail "unclear refusal: $(tail -2 "$dir/nomaster.err")"
read -r acc1 key1 sec1 <<<"$(new_trader alice USDT 1000000)"
read -r acc2 key2 sec2 <<<"$(new_trader bob BTC 1000)"
# A key revoked before any failover must stay revoked: a request it signs
# correctly is refused as an unknown key (-2015), never served.
r=$(admin POST "accounts/$acc1/apiKeys" '{}')
revoked=$(json_get apiKey <<<"$r")
revoked_sec=$(json_get secretKey <<<"$r")
signed GET /api/v3/account "$revoked" "$revoked_sec" >/dev/null ||
  fail "the key to be revoked does not work before its revocation"
admin DELETE "apiKeys/$revoked" >/dev/null || fail "revoking a key"
# A market added at run time (after the standby has started, so it learns it
# from the stream): every new primary serves it and its book.
sol_market='{"symbol":"SOLUSDT","base":"SOL","quote":"USDT","tick_size":"0.01","step_size":"0.001",
  "min_qty":"0.001","max_qty":"1000","max_price":"10000","min_notional":"1","maker_fee_bps":0,
  "taker_fee_bps":0}'

start b --standby
wait_line b standby
[ "$(role_of b)" = standby ] || fail "b's health does not say standby"
[ "$(ready_code a)" = 200 ] || fail "the primary is not ready"
[ "$(ready_code b)" = 503 ] || fail "a standby says ready"
code=$(curl -s -o "$dir/standby_order.json" -w '%{http_code}' -X POST \
  -H "X-MBX-APIKEY: $key1" "$(base_of b)/api/v3/order?symbol=BTCUSDT")
[ "$code" = 503 ] || fail "a standby answered order entry with $code"
grep -q "standby" "$dir/standby_order.json" || fail "the standby's refusal does not say why"
admin POST assets '{"symbol":"SOL","scale":9}' >/dev/null || fail "adding the asset SOL"
admin POST markets "$sol_market" >/dev/null || fail "adding the market SOLUSDT"
admin POST deposits "{\"accountId\":$acc2,\"asset\":\"SOL\",\"amount\":\"50\",\"ref\":\"bob-SOL\"}" \
  >/dev/null || fail "a deposit of SOL"
signed POST /api/v3/order "$key2" "$sec2" \
  "symbol=SOLUSDT&side=SELL&type=LIMIT&timeInForce=GTC&price=120.5&quantity=2" >/dev/null ||
  fail "an order on SOLUSDT"
# Read-only operator calls on the standby: its primary's accounts and keys,
# balances from its read side; a change is refused.
standby_admin() { curl -sS -w '\n%{http_code}' -X "$1" -H "X-MB-ADMIN-TOKEN: $(cat "$dir/b/admin.token")" \
  -H 'Content-Type: application/json' ${3:+-d "$3"} "$(base_of b)/admin/v1/$2"; }
for _ in $(seq 50); do
  r=$(standby_admin GET accounts)
  [[ "$r" == *'"alice"'* ]] && break
  sleep 0.1
done
[[ "$r" == *'"alice"'*$'\n200' ]] || fail "the standby does not list the primary's accounts: $r"
for _ in $(seq 50); do
  r=$(standby_admin GET "accounts/$acc1")
  [[ "$r" == *'"USDT"'* ]] && break
  sleep 0.1
done
[[ "$r" == *'"USDT"'*$'\n200' ]] || fail "the standby does not show an account's balances: $r"
r=$(standby_admin GET markets)
[[ "$r" == *'"BTCUSDT"'*$'\n200' ]] || fail "the standby does not list the markets: $r"
r=$(standby_admin POST accounts '{"name":"carol"}')
[[ "$r" == *$'\n409' ]] || fail "the standby took an operator change: $r"

# caught_up: waits (10 s at most) until $standby has every record $primary
# has made durable; otherwise says where each one is and fails.
caught_up() {
  local want got
  want=$(health_of "$primary" | json_get durableSequence)
  for _ in $(seq 100); do
    got=$(health_of "$standby" | json_get standby durableSequence)
    [ "$got" = "$want" ] && return 0
    sleep 0.1
  done
  echo "the standby at $got, the primary at $want"
  return 1
}

acked=()  # order ids answered RESULT
trade_on() {  # trade_on NAME N: N crossing pairs, their ids kept
  use "$1"
  local i r
  for i in $(seq "$2"); do
    r=$(order "$key2" "$sec2" SELL "$((30000 + i))" 0.01) || fail "a sell on $1: $r"
    acked+=("$(json_get orderId <<<"$r")")
    r=$(order "$key1" "$sec1" BUY "$((30000 + i))" 0.01) || fail "a buy on $1: $r"
    [ "$(json_get status <<<"$r")" = FILLED ] || fail "a crossing buy did not fill: $r"
    acked+=("$(json_get orderId <<<"$r")")
  done
}
check_acked_on() {  # every acknowledged order on NAME, FILLED
  use "$1"
  local id r
  for id in "${acked[@]}"; do
    r=$(signed GET /api/v3/order "$key1" "$sec1" "symbol=BTCUSDT&orderId=$id" 2>/dev/null) ||
      r=$(signed GET /api/v3/order "$key2" "$sec2" "symbol=BTCUSDT&orderId=$id") ||
      fail "order $id, answered before the failover, is not on $1: $r"
    [ "$(json_get status <<<"$r")" = FILLED ] || fail "order $id is $(json_get status <<<"$r") on $1"
  done
  r=$(signed GET /api/v3/account "$revoked" "$revoked_sec" 2>&1) &&
    fail "the revoked key works on $1: $r"
  [[ "$r" == *'"code":-2015'* ]] || fail "the revoked key is not refused as unknown on $1: $r"
  r=$(curl -sS "$base/api/v3/depth?symbol=SOLUSDT") || fail "no SOLUSDT on $1: $r"
  [[ "$r" == *'["120.50000000","2.000000000"]'* ]] || fail "the SOLUSDT book on $1: $r"
}

# What a failover must keep: the market's public history and an account's.
histories() {  # histories NAME
  use "$1"
  local p
  for p in "trades?symbol=BTCUSDT&limit=1000" "aggTrades?symbol=BTCUSDT&fromId=1&limit=1000" \
    "klines?symbol=BTCUSDT&interval=1m" "klines?symbol=BTCUSDT&interval=1d"; do
    echo "== $p"
    curl -sS --fail-with-body "$base/api/v3/$p" || fail "$p on $1"
    echo
  done
  echo "== allOrders"
  signed GET /api/v3/allOrders "$key1" "$sec1" "symbol=BTCUSDT&limit=1000" || fail "allOrders on $1"
  echo "== myTrades"
  signed GET /api/v3/myTrades "$key1" "$sec1" "symbol=BTCUSDT&limit=1000" || fail "myTrades on $1"
}

primary=a
standby=b
promotions=()
for k in $(seq "$kills"); do
  trade_on "$primary" 5
  histories "$primary" >"$dir/before.$k"
  t0=$(now_ms)
  kill -9 "${pids[$primary]}"
  wait "${pids[$primary]}" 2>/dev/null || true
  wait_line "$standby" ready 15
  use "$standby"
  # The first order the new primary accepts.
  for _ in $(seq 200); do
    r=$(order "$key2" "$sec2" SELL 40000 0.01 2>/dev/null) && break
    sleep 0.02
  done
  t1=$(now_ms)
  [ "$(json_get status <<<"$r")" = NEW ] || fail "the first order on $standby: $r"
  promotions+=($((t1 - t0)))
  echo "kill $k: $primary killed, $standby accepted an order $((t1 - t0)) ms later"
  [ "$(role_of "$standby")" = primary ] || fail "$standby does not say primary after taking over"
  check_acked_on "$standby"
  histories "$standby" >"$dir/after.$k"
  diff "$dir/before.$k" "$dir/after.$k" >"$dir/histories.diff" ||
    fail "market and account history differ after the failover: $(head -c 600 "$dir/histories.diff")"
  # The old primary rejoins as a standby.
  start "$primary" --standby
  wait_line "$primary" standby
  tmp=$primary
  primary=$standby
  standby=$tmp
done

# A standby that falls behind (paused while orders flow) catches up.
kill -STOP "${pids[$standby]}"
trade_on "$primary" 3
kill -CONT "${pids[$standby]}"
r=$(caught_up) || fail "the paused standby did not catch up: $r"

# Split brain: the primary frozen past its lease.
trade_on "$primary" 2
frozen=$primary
kill -STOP "${pids[$frozen]}"
wait_line "$standby" ready 15
primary=$standby
standby=$frozen
trade_on "$primary" 2
before=$(health_of "$primary" | json_get durableSequence)
kill -CONT "${pids[$frozen]}"
code=$(curl -s -o "$dir/frozen.json" -w '%{http_code}' -X POST -H "X-MBX-APIKEY: $key1" \
  "$(base_of "$frozen")/api/v3/order?symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&price=1&quantity=1&timestamp=$(now_ms)&signature=00" || true)
case "$code" in
  503 | 000) ;;
  *) fail "the resumed old primary answered an order with $code: $(cat "$dir/frozen.json")" ;;
esac
wait_line "$frozen" standby 20
grep -q "no longer the primary" "$dir/$frozen.err" || fail "the old primary did not say why it stopped"
check_acked_on "$primary"

# Planned failover under a stream of orders: 200 or a retriable 503, nothing else.
use "$primary"
# A client that sends to the other server when one answers 503 (what a load
# balancer checking /admin/v1/ready does).
(
  at=$primary
  other=$standby
  for i in $(seq 400); do
    b=$(base_of "$at")
    q="symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=IOC&price=2000&quantity=0.01&timestamp=$(now_ms)"
    s=$(printf '%s' "$q" | openssl dgst -sha256 -hmac "$sec1" | sed 's/^.*= //')
    c=$(curl -s -o "$dir/planned_body" -w '%{http_code}' -X POST -H "X-MBX-APIKEY: $key1" "$b/api/v3/order?$q&signature=$s" || true)
    echo "$c"
    case "$c" in
      200) ;;
      503 | 000) t=$at at=$other other=$t ;;
      *) cat "$dir/planned_body" >>"$dir/planned_bad" ;;
    esac
    sleep 0.005
  done
) >"$dir/planned_codes" &
load=$!
sleep 0.5
r=$(admin POST failover) || fail "POST /admin/v1/failover: $r"
[ "$(json_get handedOver <<<"$r")" = True ] || fail "failover answer: $r"
wait_line "$standby" ready 15
wait_line "$primary" standby 20
wait "$load"
bad=$(grep -v -x -e 200 -e 503 -e 000 "$dir/planned_codes" | sort | uniq -c || true)
[ -z "$bad" ] || fail "answers other than 200/503 during the planned failover: $bad: $(head -c 600 "$dir/planned_bad")"
echo "planned failover: $(grep -cx 200 "$dir/planned_codes") orders 200, $(grep -cx 503 "$dir/planned_codes") answered 503"
tmp=$primary
primary=$standby
standby=$tmp
# Settled within a few seconds (a lease renewal lost to a slow NATS may
# have handed over first).
for _ in $(seq 100); do
  [ "$(role_of "$primary" 2>/dev/null || true)" = primary ] && break
  sleep 0.1
done
[ "$(role_of "$primary")" = primary ] ||
  fail "the planned failover's new primary does not say primary: $(health_of "$primary" || true)"
trade_on "$primary" 2

# The determinism check: a standby whose state hash is made to differ stops.
fault=standby-hash start c --standby
wait_line c standby
use "$primary"
admin POST snapshot >/dev/null
for _ in $(seq 200); do
  kill -0 "${pids[c]}" 2>/dev/null || break
  sleep 0.1
done
kill -0 "${pids[c]}" 2>/dev/null && fail "the standby with a wrong state hash did not stop"
grep -q "determinism error" "$dir/c.err" || fail "the standby stopped without the determinism error"
unset 'pids[c]'
# The healthy standby checked the same snapshot's hash.
for _ in $(seq 100); do
  grep -q "equals the primary's" "$dir/$standby.err" && break
  sleep 0.1
done
grep -q "equals the primary's" "$dir/$standby.err" || fail "the standby did not check the primary's snapshot hash"

# same_state: stops both servers once the standby has every record, then
# compares the two data directories' state hashes (matchbook verify).
same_state() {
  local ha hb
  caught_up >/dev/null || true  # verify says how they differ
  kill -TERM "${pids[$primary]}" "${pids[$standby]}"
  wait "${pids[$primary]}" 2>/dev/null || true
  wait "${pids[$standby]}" 2>/dev/null || true
  pids=()
  ha=$("$mb" verify "$dir/a" 2>&1 | grep -o 'state hash [0-9a-fx]*' | tail -1)
  hb=$("$mb" verify "$dir/b" 2>&1 | grep -o 'state hash [0-9a-fx]*' | tail -1)
  [ -n "$ha" ] && [ "$ha" = "$hb" ] || fail "the two data directories differ: a $ha, b $hb"
}
same_state
IFS=$'\n' sorted=($(printf '%s\n' "${promotions[@]}" | sort -n))
unset IFS
echo "promotion (kill -> first order accepted): ${promotions[*]} ms; max ${sorted[-1]} ms"

# NATS frozen with no standby around: the primary closes intake when its
# lease runs out, and takes the lease back once NATS answers again.
start a
wait_line a ready
nats_all() { for n in 1 2 3; do bash "$here/../scripts/nats_cluster.sh" "$1" "$dir/nats" "$n" >/dev/null; done; }
nats_all pause
sleep 3
use a
if r=$(order "$key2" "$sec2" SELL 41000 0.01 2>&1); then
  nats_all resume
  fail "with NATS frozen past the lease an order was accepted: $r"
fi
case "$r" in
  *"no longer the primary"* | *"Failed to connect"* | *"Empty reply"* | *"Connection refused"*) ;;
  *) nats_all resume; fail "with NATS frozen past the lease an order got: $r" ;;
esac
nats_all resume
wait_line a ready 40
use a
r=$(order "$key2" "$sec2" SELL 41000 0.01) || fail "no order taken after NATS came back: $r"
echo "NATS frozen: intake closed, then the primary took its lease back"

# ack = local: a primary whose records stop reaching the stream goes on
# answering orders; a failover loses them, and the old primary's rejoin cuts
# and logs them (docs/failover.md, "What each level survives").
kill -TERM "${pids[a]}"
wait "${pids[a]}" 2>/dev/null || true
ack=local fault=publish-hold start a
wait_line a ready
# The R3 stream an ack = replicated primary made stays R3 under ack = local
# ([bus] replicas not set).
grep -q "keeps its 3 replicas" "$dir/a.err" || fail "ack = local: the stream's replicas: $(grep -i replica "$dir/a.err" | tail -3)"
ack=local start b --standby
wait_line b standby
primary=a
standby=b
trade_on a 1
r=$(caught_up) || fail "b did not catch up before a's publishing was held: $r"
touch "$dir/a/publish.hold"
use a
lost=()
declare -A lost_price=()
for i in 1 2 3; do
  r=$(order "$key2" "$sec2" SELL "$((42000 + i))" 0.01) || fail "an order on a with publishing held: $r"
  lost+=("$(json_get orderId <<<"$r")")
  lost_price[$(json_get orderId <<<"$r")]="$((42000 + i)).00000000"
done
kill -9 "${pids[a]}"
wait "${pids[a]}" 2>/dev/null || true
rm -f "$dir/a/publish.hold"
wait_line b ready 15
trade_on b 2  # the new primary writes the sequences a had used
# The new primary never had them (their ids went to its own new orders).
for id in "${lost[@]}"; do
  if r=$(signed GET /api/v3/order "$key2" "$sec2" "symbol=BTCUSDT&orderId=$id" 2>&1); then
    [ "$(json_get price <<<"$r")" != "${lost_price[$id]}" ] ||
      fail "order $id, never replicated, is on the new primary: $r"
  fi
done
ack=local start a --standby
wait_line a standby
for id in "${lost[@]}"; do
  grep -Eq "discarded record [0-9]+: accepted order ids ([0-9]+,)*$id(,|\$| )" "$dir/a.err" ||
    fail "the rejoining primary did not log discarded order $id"
done
primary=b
standby=a
trade_on b 1
same_state
echo "ack = local: ${#lost[@]} orders answered but never replicated were lost and logged (ids ${lost[*]})"

# A new standby on an empty data directory, the stream no longer holding
# record 1: it starts from the newest snapshot on the bus, follows, and its
# state hash equals the primary's at the next snapshot.
purge_stream() {  # purge_stream STREAM: the stream keeps only its last message
  python3 - "$urls" "$1" <<'PY'
import json, socket, sys
host, port = sys.argv[1].split(',')[0].replace('nats://', '').rsplit(':', 1)
s = socket.create_connection((host, int(port)), timeout=10)
f = s.makefile('rb')
f.readline()  # INFO
body = b'{"keep":1}'
s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB _INBOX.purge 1\r\n'
          + b'PUB $JS.API.STREAM.PURGE.' + sys.argv[2].encode() + b' _INBOX.purge '
          + str(len(body)).encode() + b'\r\n' + body + b'\r\n')
while True:
    line = f.readline()
    if not line or line.startswith(b'-ERR'):
        sys.exit('purge: %r' % line)
    if line.startswith(b'PING'):
        s.sendall(b'PONG\r\n')
    if line.startswith(b'MSG'):
        reply = json.loads(f.read(int(line.split()[-1])))
        break
if not reply.get('success'):
    sys.exit('purge: %s' % reply)
print(reply.get('purged'))
PY
}
# snapshot_on NAME: a snapshot on NAME, waited for on the bus; prints its sequence.
snapshot_on() {
  local want got
  want=$(health_of "$1" | json_get durableSequence)
  curl -sS -X POST -H "X-MB-ADMIN-TOKEN: $(cat "$dir/$1/admin.token")" \
    "$(base_of "$1")/admin/v1/snapshot" >/dev/null
  for _ in $(seq 300); do
    got=$(health_of "$1" | json_get bus snapshotSequence)
    [ "$got" = "$want" ] && echo "$want" && return 0
    sleep 0.1
  done
  echo "the bus has snapshot $got, not $want"
  return 1
}
start b
wait_line b ready
trade_on b 2
snap=$(snapshot_on b) || fail "$snap"
purged=$(purge_stream "$(health_of b | json_get bus stream)") || fail "$purged"
# What a start from the bus interrupted by a crash leaves (its marker, a
# snapshot file, a header-only segment) is undone first.
mkdir -p "$dir/d/snapshots" "$dir/d/journal"
echo "interrupted" >"$dir/d/snapshots/00000000000000000007.mbs"
echo "interrupted" >"$dir/d/journal/00000000000000000007.mbj"
echo "a start from a bus snapshot" >"$dir/d/standby.boot"
start d --standby
wait_line d standby 60
grep -q "a start from a bus snapshot was interrupted" "$dir/d.err" ||
  fail "d did not undo the interrupted start: $(tail -3 "$dir/d.err")"
[ ! -e "$dir/d/standby.boot" ] || fail "d left its start marker"
grep -q "starts from snapshot $snap on the bus" "$dir/d.err" ||
  fail "d did not start from the bus snapshot $snap: $(tail -3 "$dir/d.err")"
primary=b
standby=d
trade_on b 2
r=$(caught_up) || fail "d did not catch up: $r"
snap2=$(snapshot_on b) || fail "$snap2"
for _ in $(seq 300); do
  [ "$(health_of d | json_get standby lastCheckedSequence)" = "$snap2" ] && break
  sleep 0.1
done
[ "$(health_of d | json_get standby lastCheckedSequence)" = "$snap2" ] ||
  fail "d did not check its state hash at snapshot $snap2: $(health_of d)"
# The accounts and keys came with the snapshot (their records were purged):
# d serves them, the revoked key as revoked.
r=$(curl -sS -H "X-MB-ADMIN-TOKEN: $(cat "$dir/d/admin.token")" "$(base_of d)/admin/v1/accounts/$acc1")
[[ "$r" == *'"alice"'* && "$r" == *"\"$key1\""* && "$r" == *'"revoked":true'* ]] ||
  fail "d does not serve the accounts and keys of the snapshot: $r"
echo "a new standby: started from snapshot $snap on the bus ($purged messages purged from the stream), its state hash checked at $snap2"
echo "cli standby checks: ok"
