# Shared by the matchbook-load tests: start a throw-away `matchbook serve`
# (rate limits off, port 0) and stop it on exit.
# Usage: source common.sh; start_server MATCHBOOK_BIN [SERVE_ARGS...] -> sets PORT, TOKEN,
# SERVER_PID, DATA_DIR.

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

start_server() {
  DATA_DIR=$(mktemp -d)
  mkfifo "$DATA_DIR/stdout.fifo"
  "$1" serve --data-dir "$DATA_DIR" --port 0 --weight-per-minute 0 --ip-weight-per-minute 0 \
    "${@:2}" >"$DATA_DIR/stdout.fifo" 2>"$DATA_DIR/stderr" &
  SERVER_PID=$!
  trap stop_server EXIT
  PORT=
  # Read stdout until `ready` (the api: line comes first); a server that dies
  # closes the pipe and ends the loop.
  exec 3<"$DATA_DIR/stdout.fifo"
  while IFS= read -r -t 60 line <&3; do
    case "$line" in
      api:*) PORT=${line##*:}; PORT=${PORT%%/*} ;;
      ready) break ;;
    esac
  done
  [ -n "$PORT" ] || { cat "$DATA_DIR/stderr" >&2; fail "server did not start"; }
  # Keep draining its stdout so the server never blocks on a full pipe.
  cat <&3 >/dev/null &
  exec 3<&-
  TOKEN=$(cat "$DATA_DIR/admin.token")
}

stop_server() {
  if [ -n "${SERVER_PID:-}" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
  fi
  rm -rf "$DATA_DIR"
}

# check_json FILE [SUBSCRIBERS>0 [PRESET]]: the last line parses and carries every
# interface field with requests > 0 and errors == 0.
check_json() {
  python3 - "$@" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().strip().splitlines()
if not lines:
    sys.exit("no output")
r = json.loads(lines[-1])
need = ["requests", "errors", "dropped", "achieved_rate_per_s", "order_p50_ms", "order_p99_ms",
        "order_max_ms", "delivery_p99_ms", "freshness_p99_ms", "loadgen_cpu_percent"]
missing = [k for k in need if k not in r]
if missing:
    sys.exit("missing fields: %s" % missing)
problems = []
if not r["requests"] > 0: problems.append("requests == 0")
if r["errors"] != 0: problems.append("errors %s: %s" % (r["errors"], r.get("errors_by_code")))
if r.get("aborted") is not None: problems.append("aborted: %s" % r["aborted"])
# max reports 0 when no step passed (checked by the caller).
if not r["achieved_rate_per_s"] > 0 and (len(sys.argv) < 4 or sys.argv[3] != "max"):
    problems.append("achieved_rate_per_s == 0")
if not (0 < r["order_p50_ms"] <= r["order_p99_ms"] <= r["order_max_ms"]):
    problems.append("order percentiles out of order")
if len(sys.argv) > 2 and int(sys.argv[2]) > 0:
    if not r["delivery_p99_ms"] > 0: problems.append("delivery not measured")
    if not r["freshness_p99_ms"] > 0: problems.append("freshness not measured")
    if r.get("subscriber_drops", 0) != 0: problems.append("subscriber drops")
if problems:
    sys.exit("; ".join(problems) + "\n" + lines[-1][:2000])
print("%s: %d requests, %.1f/s, p99 %.3f ms, delivery p99 %.3f ms, freshness p99 %.3f ms" % (
    r["preset"], r["requests"], r["achieved_rate_per_s"], r["order_p99_ms"], r["delivery_p99_ms"],
    r["freshness_p99_ms"]))
PY
}
