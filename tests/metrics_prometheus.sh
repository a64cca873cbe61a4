#!/usr/bin/env bash
# /metrics against the real Prometheus tools: a server with some traffic
# (accounts, deposits, orders that trade) is scraped once for
# `promtool check metrics`, which must find nothing to say, then a
# `prometheus` server scrapes it every second and must answer queries on
# Matchbook's metrics. The alerting rules (deploy/prometheus/alerts.yml) pass
# `promtool check rules` and their unit tests (deploy/prometheus/alerts_test.yml)
# and load into that server; every query of every panel of the Grafana
# dashboard (deploy/grafana/matchbook.json) returns data while orders flow.
# Usage: tests/metrics_prometheus.sh <path to matchbook>
set -euo pipefail
mb=$1
prometheus=$(cd "$(dirname "$0")/../deploy/prometheus" && pwd)
grafana=$(cd "$(dirname "$0")/../deploy/grafana" && pwd)
tmp=$(mktemp -d)
mb_pid=""
prom_pid=""

stop() {
  for pid in $prom_pid $mb_pid ${serve_pid:-}; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$tmp"
}
trap stop EXIT

fail() {
  echo "metrics_prometheus: $*" >&2
  for f in serve.err prometheus.log; do
    if [[ -s "$tmp/$f" ]]; then
      echo "--- last lines of $f:" >&2
      tail -n 20 "$tmp/$f" >&2
    fi
  done
  exit 1
}

# shellcheck source=tests/serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"

# --- the server ---
mkdir -p "$tmp/data"
start_serve "$mb" "$tmp/data" "$tmp/serve"
mb_pid=$serve_pid
port=${base##*:}

# --- traffic: two funded accounts whose orders trade ---
buyer=$(new_trader buyer USDT 100000) || fail "could not create the buyer"
seller=$(new_trader seller BTC 10) || fail "could not create the seller"
read -r _ buyer_key buyer_secret <<<"$buyer"
read -r _ seller_key seller_secret <<<"$seller"

for i in 1 2 3; do
  order "$seller_key" "$seller_secret" SELL "3000$i.00" 0.01 >/dev/null ||
    fail "sell order $i refused"
  status=$(order "$buyer_key" "$buyer_secret" BUY "3000$i.00" 0.01 | json_get status) ||
    fail "buy order $i refused"
  [[ "$status" == "FILLED" ]] || fail "buy order $i: status $status, expected FILLED"
done

# --- promtool: the exposition is clean ---
curl -sS --fail-with-body "$base/metrics" >"$tmp/m.txt" || fail "GET /metrics failed"
[[ -s "$tmp/m.txt" ]] || fail "GET /metrics answered nothing"
set +e
lint=$(promtool check metrics <"$tmp/m.txt" 2>&1)
lint_rc=$?
set -e
if [[ $lint_rc -ne 0 || -n "$lint" ]]; then
  echo "$lint" >&2
  fail "promtool check metrics: exit $lint_rc"
fi

# --- the alerting rules: valid, and each fires when it should and only then ---
promtool check rules "$prometheus/alerts.yml" >"$tmp/rules.log" 2>&1 ||
  { cat "$tmp/rules.log" >&2; fail "promtool check rules deploy/prometheus/alerts.yml"; }
(cd "$prometheus" && promtool test rules alerts_test.yml) >"$tmp/rules_test.log" 2>&1 ||
  { cat "$tmp/rules_test.log" >&2; fail "promtool test rules deploy/prometheus/alerts_test.yml"; }
echo "alerting rules: $(grep -c '^      - alert:' "$prometheus/alerts.yml") alerts checked and unit-tested"

# --- prometheus: scrapes the server and answers queries ---
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $prometheus/alerts.yml
scrape_configs:
  - job_name: matchbook
    scrape_interval: 1s
    metrics_path: /metrics
    static_configs:
      - targets: ["127.0.0.1:$port"]
EOF
prom_port=""
# The port is free when chosen; another process may take it before
# prometheus binds it, so a failed start is retried on a new port.
for attempt in 1 2 3 4 5; do
  candidate=$(free_port)
  (cd "$tmp" && exec prometheus --config.file="$tmp/prometheus.yml" \
    --storage.tsdb.path="$tmp/tsdb" --web.listen-address="127.0.0.1:$candidate" \
    >"$tmp/prometheus.log" 2>&1) &
  prom_pid=$!
  for _ in $(seq 1 200); do
    kill -0 "$prom_pid" 2>/dev/null || break
    if curl -sf "http://127.0.0.1:$candidate/-/ready" >/dev/null 2>&1; then
      prom_port=$candidate
      break
    fi
    sleep 0.1
  done
  [[ -n "$prom_port" ]] && break
  kill -TERM "$prom_pid" 2>/dev/null || true
  wait "$prom_pid" 2>/dev/null || true
  prom_pid=""
  echo "prometheus did not start on port $candidate (attempt $attempt)" >&2
done
[[ -n "$prom_port" ]] || fail "prometheus did not start"

# The first sample of a query's result vector, or nothing when it is empty.
query() {
  curl -sS -G "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
    python3 -c '
import json, sys
r = json.load(sys.stdin)
if r.get("status") == "success" and r["data"]["result"]:
    print(r["data"]["result"][0]["value"][1])'
}

checks=('up{job="matchbook"} == 1'
  'matchbook_journal_durable_sequence{job="matchbook"} > 0'
  'sum(matchbook_stage_latency_seconds_count{job="matchbook"}) > 0')
deadline=$((SECONDS + 60))
for check in "${checks[@]}"; do
  while true; do
    value=$(query "$check" || true)
    if [[ -n "$value" ]]; then
      echo "$check: $value"
      break
    fi
    ((SECONDS < deadline)) || fail "no answer to '$check' within 60 s"
    sleep 0.5
  done
done
# The rules loaded into the server.
loaded=$(curl -sS "http://127.0.0.1:$prom_port/api/v1/rules" | python3 -c '
import json, sys
print(sum(len(g["rules"]) for g in json.load(sys.stdin)["data"]["groups"]))')
[[ "$loaded" == "$(grep -c '^      - alert:' "$prometheus/alerts.yml")" ]] ||
  fail "prometheus loaded $loaded alerting rules"

# --- the dashboard: every panel query returns data while orders flow ---
(
  end=$((SECONDS + 20))
  i=0
  while ((SECONDS < end)); do
    i=$((i + 1))
    order "$seller_key" "$seller_secret" SELL "3100$((i % 10)).00" 0.01 >/dev/null || true
    order "$buyer_key" "$buyer_secret" BUY "3100$((i % 10)).00" 0.01 >/dev/null || true
    sleep 0.05
  done
) &
traffic_pid=$!
python3 - "$grafana/matchbook.json" "http://127.0.0.1:$prom_port" <<'PY' || fail "a dashboard query returned no data"
import json, sys, time, urllib.parse, urllib.request
dashboard, prom = sys.argv[1], sys.argv[2]
def targets(panels):
    for p in panels:
        yield from targets(p.get("panels", []))
        for t in p.get("targets", []):
            yield p["title"], t["expr"]
queries = list(targets(json.load(open(dashboard))["panels"]))
assert queries, "the dashboard has no queries"
pending = dict.fromkeys(queries)
deadline = time.time() + 60
while pending and time.time() < deadline:
    for title, expr in list(pending):
        q = expr.replace("$__rate_interval", "1m").replace("$instance", ".*")
        url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
        r = json.load(urllib.request.urlopen(url))
        if r["status"] != "success":
            sys.exit(f"{title}: {q}: {r}")
        values = [s["value"][1] for s in r["data"]["result"]]
        if values and any(v not in ("NaN",) for v in values):
            print(f"dashboard: {title}: {q[:70]}... = {values[0]}")
            del pending[(title, expr)]
    time.sleep(1)
for title, expr in pending:
    print(f"dashboard: NO DATA: {title}: {expr}", file=sys.stderr)
sys.exit(1 if pending else 0)
PY
kill "$traffic_pid" 2>/dev/null || true
wait "$traffic_pid" 2>/dev/null || true
echo "metrics prometheus checks: ok"
