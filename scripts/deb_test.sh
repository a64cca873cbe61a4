#!/usr/bin/env bash
# The Debian package, end to end on this machine:
#   1. `cpack -G DEB` in the build directory makes matchbook_<version>_amd64.deb;
#   2. lintian finds no error in it;
#   3. `dpkg -i` installs it: the matchbook system user, /var/lib/matchbook
#      (owned by it, 0750), /etc/matchbook/matchbook.toml registered as a
#      conffile, the unit /lib/systemd/system/matchbook.service, which
#      `systemd-analyze verify` accepts;
#   4. the installed binary runs as the matchbook user, exactly as the unit's
#      ExecStart (on the installed configuration, in the unit's working
#      directory), until /admin/v1/ready answers; an operator call with the
#      token it wrote creates an account; SIGTERM (the unit's KillSignal)
#      stops it with status 0;
#   5. `dpkg -r` removes every file of the package but the conffile and the
#      data; `dpkg -P` then removes those too. Only the matchbook user stays
#      (Debian keeps system users).
# Needs root (dpkg); exits 77 (skipped, saying why) without it or when a
# matchbook package is already installed (this test never touches one it
# did not install).
# Usage: scripts/deb_test.sh [BUILD_DIR]   (default build/release)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$src/build/release}")

skip() {
  echo "deb test: skipped: $*"
  exit 77
}
fail() {
  echo "deb test: FAIL: $*" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || skip "needs root (dpkg -i / -r / -P)"
for tool in cpack dpkg lintian systemd-analyze setpriv curl python3; do
  command -v "$tool" >/dev/null || skip "$tool is not installed"
done
if dpkg-query -W -f='${Status}' matchbook 2>/dev/null | grep -q "installed\|config-files"; then
  skip "a matchbook package is installed already; remove it first (dpkg -P matchbook)"
fi
[ -e /var/lib/matchbook ] && skip "/var/lib/matchbook exists; move it away first"
[ -e /etc/matchbook ] && skip "/etc/matchbook exists; move it away first"

work=$(mktemp -d /tmp/mb_deb_test.XXXXXX)
pid=""
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  if dpkg-query -W -f='${Status}' matchbook 2>/dev/null | grep -q "installed\|config-files"; then
    dpkg -P matchbook >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== 1. cpack -G DEB"
(cd "$build" && cpack -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log"; fail "cpack failed"; }
deb=$(ls "$work"/pkg/matchbook_*_amd64.deb)
version=$(dpkg-deb -f "$deb" Version)
[[ "$(basename "$deb")" == "matchbook_${version}_amd64.deb" ]] || fail "package name $(basename "$deb")"
echo "$(basename "$deb") ($(stat -c %s "$deb") bytes)"
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\.||' > "$work/files"

echo "== 2. lintian"
lintian --fail-on error "$deb" 2>&1 | grep -v "running with root privileges" || true
lintian --fail-on error "$deb" >/dev/null 2>&1 || fail "lintian reports errors"

echo "== 3. dpkg -i"
dpkg -i "$deb" > "$work/dpkg-i.log" 2>&1 || { cat "$work/dpkg-i.log"; fail "dpkg -i failed"; }
getent passwd matchbook >/dev/null || fail "no matchbook user after install"
[ "$(stat -c '%U:%G %a' /var/lib/matchbook)" = "matchbook:matchbook 750" ] ||
  fail "/var/lib/matchbook is $(stat -c '%U:%G %a' /var/lib/matchbook)"
dpkg-query -W -f='${Conffiles}\n' matchbook | grep -q "^ /etc/matchbook/matchbook.toml " ||
  fail "/etc/matchbook/matchbook.toml is not a conffile"
unit=/lib/systemd/system/matchbook.service
[ -f "$unit" ] || fail "no $unit"
systemd-analyze verify "$unit" || fail "systemd-analyze verify $unit"
[ -x /usr/bin/matchbook ] || fail "no /usr/bin/matchbook"

echo "== 4. the installed binary as the matchbook user"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
workdir=$(sed -n 's/^WorkingDirectory=//p' "$unit")
[ "$exec_start" = "/usr/bin/matchbook serve --config /etc/matchbook/matchbook.toml" ] ||
  fail "unexpected ExecStart: $exec_start"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# shellcheck disable=SC2086 # ExecStart is words
(cd "$workdir" && exec setpriv --reuid=matchbook --regid=matchbook --init-groups \
  env MATCHBOOK_PORT="$port" $exec_start) \
  > "$work/serve.out" 2> "$work/serve.err" &
pid=$!
# serve prints where its admin token is, then "ready"; /admin/v1/ready
# (with the token, as every operator call) must then say so too.
ready=""
for _ in $(seq 1 300); do
  if grep -q '^ready$' "$work/serve.out"; then
    ready=yes
    break
  fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$ready" ] || { tail -20 "$work/serve.err"; fail "serve did not become ready"; }
token_file=$(sed -n 's/^admin token: //p' "$work/serve.out")
[[ "$token_file" == /var/lib/matchbook/* ]] || fail "admin token at '$token_file'"
[ "$(stat -c %U "$token_file")" = "matchbook" ] || fail "$token_file is not the matchbook user's"
token=$(cat "$token_file")
curl -fsS -H "X-MB-ADMIN-TOKEN: $token" "http://127.0.0.1:$port/admin/v1/ready" |
  grep -q '"ready":true' || fail "/admin/v1/ready does not say ready"
pgrep -u matchbook -f "^/usr/bin/matchbook serve --config /etc/matchbook/matchbook.toml" \
  >/dev/null || fail "no serve process of the matchbook user"
answer=$(curl -fsS -X POST -H "X-MB-ADMIN-TOKEN: $token" -H 'Content-Type: application/json' \
  -d '{"name":"deb-test"}' "http://127.0.0.1:$port/admin/v1/accounts") ||
  fail "creating an account failed"
echo "$answer" | grep -q '"accountId"' || fail "account answer: $answer"
[ -d /var/lib/matchbook/journal ] || [ -n "$(ls /var/lib/matchbook)" ] || fail "nothing in /var/lib/matchbook"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
[ "$status" = 0 ] || { tail -20 "$work/serve.err"; fail "serve exited $status on SIGTERM"; }
echo "ready on port $port as matchbook, account created, SIGTERM -> exit 0"

echo "== 5. dpkg -r, dpkg -P"
dpkg -r matchbook > "$work/dpkg-r.log" 2>&1 || { cat "$work/dpkg-r.log"; fail "dpkg -r failed"; }
while read -r f; do
  [ -z "$f" ] || [ -d "$f" ] && continue
  if [ "$f" = /etc/matchbook/matchbook.toml ]; then
    [ -f "$f" ] || fail "dpkg -r removed the conffile $f"
  elif [ -e "$f" ]; then
    fail "dpkg -r left $f"
  fi
done < "$work/files"
[ -d /var/lib/matchbook ] || fail "dpkg -r removed the data in /var/lib/matchbook"
dpkg -P matchbook > "$work/dpkg-p.log" 2>&1 || { cat "$work/dpkg-p.log"; fail "dpkg -P failed"; }
while read -r f; do
  [ -z "$f" ] && continue
  if [ -e "$f" ] && [ ! -d "$f" ]; then fail "dpkg -P left $f"; fi
done < "$work/files"
for d in /etc/matchbook /var/lib/matchbook /usr/share/doc/matchbook /usr/share/matchbook; do
  [ ! -e "$d" ] || fail "dpkg -P left $d"
done
dpkg-query -W -f='${Status}' matchbook 2>/dev/null | grep -q "installed\|config-files" &&
  fail "dpkg still knows the package"
echo "deb test: ok"
