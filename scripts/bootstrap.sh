#!/usr/bin/env bash
# Installs every Debian 12 package Matchbook needs to build, test and run
# (e2fsprogs, mount and util-linux: the power-cut and full-disk tests make
# ext4 file systems on loop devices; nats-server: the bus tests start their
# own, on loopback ports; lintian and systemd: the Debian package's test checks
# the package and its unit; zlib1g-dev: the web assets' test inflates their
# gzip copies; chromium: the browser tests of the web pages, tests/browser;
# tcpdump: the capture test, tests/cli_capture.sh, reads the loopback).
# Idempotent: packages already present are skipped, so a second run is quick.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ccache
  clang-14 libclang-rt-14-dev clang-format clang-tidy-14
  libgtest-dev libgmock-dev libbenchmark-dev
  libtomlplusplus-dev libxxhash-dev libcli11-dev libfmt-dev
  libzstd-dev libconcurrentqueue-dev libboost1.81-dev libssl-dev
  libsqlite3-dev libpq-dev postgresql-15 librocksdb-dev
  libnats-dev nats-server
  libspdlog-dev prometheus curl python3 openssl
  lintian systemd adduser init-system-helpers
  e2fsprogs mount util-linux iproute2 tcpdump
  zlib1g-dev chromium
)
# The end-to-end tests drive the server with the real ccxt client (npm). A
# Node.js already on the machine (e.g. from NodeSource) is used as it is.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all ${#packages[@]} packages present"
  exit 0
fi

echo "bootstrap: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
# Debian's prometheus package enables a server on port 9090 for every
# interface; Matchbook's tests start their own, so the packaged one is stopped.
if command -v systemctl >/dev/null 2>&1 && systemctl is-enabled prometheus >/dev/null 2>&1; then
  "${sudo_cmd[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
