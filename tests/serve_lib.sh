# Shell helpers for tests that drive `matchbook serve` with curl (sourced).
#   start_serve BIN DATA_DIR OUT [ARGS...]  starts serve on an ephemeral port;
#                             sets serve_pid and base (http://127.0.0.1:PORT)
#                             once it printed "ready"; its stdout/stderr go to
#                             OUT.out / OUT.err
#   admin METHOD PATH [JSON]  an operator call to $base with $token
#   new_trader NAME ASSET AMOUNT   -> "accountId apiKey secretKey", funded
#   order KEY SECRET SIDE PRICE QTY   a signed LIMIT GTC order on BTCUSDT
#   signed METHOD PATH KEY SECRET [QUERY]   any signed request
#   json_get KEY...           a (nested) field of the JSON on stdin
# The caller defines fail() (reports and exits).

json_get() {
  python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v if not isinstance(v, (dict, list)) else json.dumps(v, sort_keys=True))' "$@"
}

# A TCP port nobody listens on right now (the kernel's choice).
free_port() {
  python3 -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

start_serve() {  # start_serve BIN DATA_DIR OUT [ARGS...]
  local bin=$1 dir=$2 out=$3
  shift 3
  # An earlier run's output must not be read as this one's "ready": the
  # shell truncates the file in the child, after this loop may have looked.
  rm -f "$out.out" "$out.err"
  "$bin" serve --data-dir "$dir" --port 0 "$@" >"$out.out" 2>"$out.err" &
  serve_pid=$!
  base=""
  for _ in $(seq 1 300); do
    kill -0 "$serve_pid" 2>/dev/null || fail "matchbook serve exited before it was ready ($out.err)"
    if grep -qx "ready" "$out.out"; then
      base=$(sed -n 's|^api: \(https\{0,1\}://127\.0\.0\.1:[0-9]*\)/api/v3$|\1|p' "$out.out")
      break
    fi
    sleep 0.1
  done
  [[ -n "$base" ]] || fail "no 'api: http(s)://127.0.0.1:PORT/api/v3' and 'ready' within 30 s"
  token=$(cat "$dir/admin.token")
}

admin() {  # admin METHOD PATH [JSON body]
  curl -sS --fail-with-body -X "$1" -H "X-MB-ADMIN-TOKEN: $token" \
    -H "Content-Type: application/json" ${3:+--data "$3"} "$base/admin/v1/$2"
}

new_trader() {  # new_trader NAME ASSET AMOUNT -> "accountId apiKey secretKey"
  local id keys
  id=$(admin POST accounts "{\"name\":\"$1\"}" | json_get accountId)
  keys=$(admin POST "accounts/$id/apiKeys" "{}")
  admin POST deposits "{\"accountId\":$id,\"asset\":\"$2\",\"amount\":\"$3\",\"ref\":\"$1-$2\"}" \
    >/dev/null
  echo "$id $(json_get apiKey <<<"$keys") $(json_get secretKey <<<"$keys")"
}

signed() {  # signed METHOD PATH KEY SECRET [QUERY]
  local q sig
  q="${5:+$5&}timestamp=$(date +%s%3N)"
  sig=$(printf '%s' "$q" | openssl dgst -sha256 -hmac "$4" | sed 's/^.*= //')
  curl -sS --fail-with-body -X "$1" -H "X-MBX-APIKEY: $3" "$base$2?$q&signature=$sig"
}

order() {  # order KEY SECRET SIDE PRICE QTY: a signed LIMIT GTC order on BTCUSDT
  signed POST /api/v3/order "$1" "$2" \
    "symbol=BTCUSDT&side=$3&type=LIMIT&timeInForce=GTC&price=$4&quantity=$5&newOrderRespType=RESULT"
}
