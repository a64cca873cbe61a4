#!/usr/bin/env bash
# The history store (<data_dir>/history, docs/history.md) end to end:
#   - trades between two traders on BTCUSDT; then every public market-data
#     answer (trades, aggTrades, klines and uiKlines of several intervals,
#     ticker/24hr, ticker windows, ticker/tradingDay, avgPrice) and the
#     history of both traders (allOrders, myTrades, GET order of a filled one)
#     are the same after a stop and start, and after a SIGKILL;
#   - `matchbook verify --history` says the store equals the journal, and
#     `matchbook history rebuild` builds an equal one;
#   - a data directory from before the store (no history/) gets its whole
#     history at start;
#   - trades and historicalTrades with fromId reach trades older than the
#     read side keeps;
#   - bad inputs: a store with a file deleted is refused at start with the
#     reason and the way out, and after `history rebuild` serve answers as
#     before; verify --history of a directory without a store fails, naming it.
# Usage: tests/cli_history.sh <path to matchbook>
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
  echo "cli_history: $*" >&2
  [[ -s "$tmp/serve.err" ]] && tail -n 15 "$tmp/serve.err" >&2
  exit 1
}
# shellcheck source=tests/serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"

d=$tmp/data
start_serve "$mb" "$d" "$tmp/serve"
read -r a_id a_key a_secret <<<"$(new_trader alice USDT 1000000)"
read -r b_id b_key b_secret <<<"$(new_trader bob BTC 100)"
# 12 fills at rising prices: bob rests asks, alice takes them (two of them
# in one sweep of two levels: one aggregate trade per level).
for i in $(seq 1 10); do
  order "$b_key" "$b_secret" SELL "$((30000 + i))" 0.01 >/dev/null
  filled=$(order "$a_key" "$a_secret" BUY "$((30000 + i))" 0.01 | json_get orderId)
done
order "$b_key" "$b_secret" SELL 30100 0.01 >/dev/null
order "$b_key" "$b_secret" SELL 30101 0.01 >/dev/null
order "$a_key" "$a_secret" BUY 30101 0.02 >/dev/null
order "$b_key" "$b_secret" SELL 31000 0.5 >/dev/null  # stays open

# Everything the restart must keep (and alice's last filled order, below), with the fields that follow the clock
# (a ticker's window ends now) left out.
snapshot() {  # snapshot FILE
  {
    for p in "trades?symbol=BTCUSDT" "trades?symbol=BTCUSDT&limit=5" \
      "aggTrades?symbol=BTCUSDT" "aggTrades?symbol=BTCUSDT&fromId=3" \
      "klines?symbol=BTCUSDT&interval=1m" "klines?symbol=BTCUSDT&interval=1h" \
      "klines?symbol=BTCUSDT&interval=1d" "klines?symbol=BTCUSDT&interval=1M" \
      "uiKlines?symbol=BTCUSDT&interval=1s" "klines?symbol=BTCUSDT&interval=1d&timeZone=5:30" \
      "ticker/24hr?symbol=BTCUSDT" "ticker?symbol=BTCUSDT&windowSize=7d" \
      "ticker/tradingDay?symbol=BTCUSDT" "avgPrice?symbol=BTCUSDT"; do
      echo "== $p"
      curl -sS --fail-with-body "$base/api/v3/$p" | python3 -c '
import json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in ("openTime", "closeTime")}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
print(json.dumps(strip(json.load(sys.stdin)), sort_keys=True))'
    done
    for who in "$a_key $a_secret" "$b_key $b_secret"; do
      read -r k s <<<"$who"
      for p in "/api/v3/allOrders symbol=BTCUSDT" "/api/v3/myTrades symbol=BTCUSDT" \
        "/api/v3/myTrades symbol=BTCUSDT&fromId=4&limit=3" "/api/v3/openOrders symbol=BTCUSDT"; do
        read -r path q <<<"$p"
        echo "== $k $path $q"
        signed GET "$path" "$k" "$s" "$q"
        echo
      done
    done
  } >"$1"
}
snapshot "$tmp/before"
echo "== alice's filled order" >>"$tmp/before"
signed GET /api/v3/order "$a_key" "$a_secret" "symbol=BTCUSDT&orderId=$filled" >>"$tmp/before"
grep -q '"count": 12' "$tmp/before" || fail "12 trades expected: $(grep -A1 ticker/24hr "$tmp/before")"

# What serve answers now against what it answered before; LABEL names the case.
same_as_before() {  # same_as_before LABEL
  snapshot "$tmp/after"
  echo "== alice's filled order" >>"$tmp/after"
  signed GET /api/v3/order "$a_key" "$a_secret" "symbol=BTCUSDT&orderId=$filled" >>"$tmp/after"
  diff "$tmp/before" "$tmp/after" >"$tmp/diff" || fail "$1: $(head -20 "$tmp/diff")"
}

stop_serve() {
  kill -TERM "$serve_pid"
  wait "$serve_pid" 2>/dev/null || true
  serve_pid=""
}

restart() {  # restart TERM|KILL
  kill -"$1" "$serve_pid"
  wait "$serve_pid" 2>/dev/null || true
  serve_pid=""
  start_serve "$mb" "$d" "$tmp/serve"
}
for how in TERM KILL; do
  restart "$how"
  same_as_before "after a $how and a start"
  echo "market data and account history the same after SIG$how: ok"
done

stop_serve
"$mb" verify --history "$d" >"$tmp/vh.out" 2>&1 || fail "verify --history: $(cat "$tmp/vh.out")"
grep -q "^history: ok" "$tmp/vh.out" || fail "verify --history: $(cat "$tmp/vh.out")"
"$mb" history rebuild "$d" >"$tmp/rb.out" 2>&1 || fail "history rebuild: $(cat "$tmp/rb.out")"
"$mb" verify --history "$d" >"$tmp/vh.out" 2>&1 || fail "verify after rebuild: $(cat "$tmp/vh.out")"
echo "verify --history, history rebuild: ok"

# A damaged store: an SST file gone. Refused, named, with the way out.
sst=$(find "$d/history" -name '*.sst' | head -1)
[[ -n "$sst" ]] || fail "the store has no SST file after a rebuild"
rm -f "$sst"
if "$mb" serve --data-dir "$d" --port 0 >"$tmp/bad.out" 2>"$tmp/bad.err"; then
  fail "serve started over a store with a file missing"
fi
grep -q "history rebuild" "$tmp/bad.err" || fail "the refusal does not name the way out: $(tail -3 "$tmp/bad.err")"
"$mb" history rebuild "$d" >"$tmp/rb.out" 2>&1 || fail "history rebuild of a damaged store: $(cat "$tmp/rb.out")"
start_serve "$mb" "$d" "$tmp/serve"
same_as_before "after a rebuild"
echo "a damaged store is refused; rebuilt, it answers as before: ok"

# A data directory from before the history store (no history/): serve
# builds it from the journal at start, with the whole history.
stop_serve
rm -rf "$d/history"
start_serve "$mb" "$d" "$tmp/serve"
same_as_before "a directory without a store"
echo "a data directory without a history store gets its whole history at start: ok"

# Older trades and candles than the read side keeps (recent_trades = 4 and
# klines_per_interval = 1 here): trades and historicalTrades with fromId, and
# klines reaching past the held candles, come from the history store. Three
# more fills a second apart make three 1s candles.
for i in 1 2 3; do
  sleep 1.1
  order "$b_key" "$b_secret" SELL "$((30200 + i))" 0.01 >/dev/null
  order "$a_key" "$a_secret" BUY "$((30200 + i))" 0.01 >/dev/null
done
candles() {  # candles QUERY: the open times and trade counts of klines?QUERY
  curl -sS --fail-with-body "$base/api/v3/klines?symbol=BTCUSDT&$1" |
    python3 -c 'import json,sys; print(" ".join(f"{k[0]}:{k[8]}" for k in json.load(sys.stdin)))'
}
all_1s=$(candles "interval=1s&limit=1000")
first_1s=${all_1s%%:*}
[[ $(wc -w <<<"$all_1s") -ge 3 ]] || fail "expected at least three 1s candles: $all_1s"
from_1s=$(candles "interval=1s&startTime=$first_1s&limit=2")
aggs() {  # aggs QUERY: aggTrades?QUERY as "a:f-l:q" words
  curl -sS --fail-with-body "$base/api/v3/aggTrades?symbol=BTCUSDT&$1" |
    python3 -c 'import json,sys; print(" ".join("%s:%s-%s:%s" % (x["a"], x["f"], x["l"], x["q"]) for x in json.load(sys.stdin)))'
}
first_ms=$(curl -sS --fail-with-body "$base/api/v3/trades?symbol=BTCUSDT&fromId=1&limit=1" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["time"])')
late_ms=$(curl -sS --fail-with-body "$base/api/v3/trades?symbol=BTCUSDT&fromId=1&limit=1000" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)[-2]["time"])')
agg_queries=("fromId=1&limit=1000" "fromId=4&limit=3" "startTime=$first_ms&limit=4"
  "startTime=$first_ms&endTime=$((first_ms + 1))" "fromId=1&startTime=$late_ms&limit=2"
  "fromId=1&endTime=$late_ms&limit=1000")
agg_before=()
for q in "${agg_queries[@]}"; do agg_before+=("$(aggs "$q")"); done
[[ $(wc -w <<<"${agg_before[0]}") -ge 12 ]] || fail "aggTrades?fromId=1: ${agg_before[0]}"
stop_serve
sed -e 's/^recent_trades = .*/recent_trades = 4/' \
  -e 's/^klines_per_interval = .*/klines_per_interval = 1/' \
  "$(dirname "$0")/../config/matchbook.toml" >"$tmp/small.toml"
grep -q '^klines_per_interval = 1$' "$tmp/small.toml" || fail "could not write the configuration"
start_serve "$mb" "$d" "$tmp/serve" --config "$tmp/small.toml"
[[ "$(candles "interval=1s&limit=1000")" == "$all_1s" ]] ||
  fail "klines 1s after a restart keeping one candle: $(candles "interval=1s&limit=1000"), before: $all_1s"
[[ "$(candles "interval=1s&startTime=$first_1s&limit=2")" == "$from_1s" ]] ||
  fail "klines 1s from the first candle: $(candles "interval=1s&startTime=$first_1s&limit=2"), before: $from_1s"
echo "klines older than the read side keeps come from the store: ok"
for i in "${!agg_queries[@]}"; do
  got=$(aggs "${agg_queries[$i]}")
  [[ "$got" == "${agg_before[$i]}" ]] ||
    fail "aggTrades?${agg_queries[$i]} keeping 4 trades: $got, before: ${agg_before[$i]}"
done
echo "aggTrades older than the read side keeps come from the store: ok"
recent=$(curl -sS --fail-with-body "$base/api/v3/trades?symbol=BTCUSDT" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[[ "$recent" == 4 ]] || fail "trades without fromId: $recent trades, the read side keeps 4"
for p in historicalTrades trades; do
  n=$(curl -sS --fail-with-body "$base/api/v3/$p?symbol=BTCUSDT&fromId=1&limit=1000" |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
  [[ "$n" == 15 ]] || fail "$p?fromId=1: $n trades, the store holds 15"
done
echo "trades older than the read side keeps come from the store: ok"

if "$mb" verify --history "$tmp/nowhere" >"$tmp/vn.out" 2>&1; then
  fail "verify --history of a directory without a store passed"
fi
echo "cli_history: all passed"
