#!/usr/bin/env bash
# Installs every Debian package kvq needs to build, test and run. Idempotent: quiet and quick
# when everything is already there. Runs as root, or through sudo when available.
#
# Usage: scripts/install-deps.sh [--test | --bench]
#   --test   also headless Chromium, which the dashboard's test drives (tests/e2e/test_dashboard.py),
#            clang-format (scripts/check-format.sh), and beanstalkd with PHP's pheanstalk client
#            (tests/e2e/test_beanstalk_clients.py).
#   --bench  also the peers `make bench` compares kvq with (beanstalkd, PostgreSQL, Redis), their
#            client libraries, and matplotlib for the chart.
set -euo pipefail

packages=(
  build-essential cmake pkg-config make lld
  liblmdb-dev lmdb-utils
  libjemalloc-dev
  nlohmann-json3-dev libsimdjson-dev
  libboost-dev
  etcd-server etcd-client openssl libssl-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  python3
  libspdlog-dev libcli11-dev
  libabsl-dev tzdata
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
)
if [ "${1:-}" = "--test" ]; then
  # The clients' own test runners (clients/: go test, node --test with typescript from npm),
  # the OpenAPI check (python3-jsonschema, python3-yaml), the packaging tests (dpkg-dev,
  # systemd-analyze, lintian) and the power-loss test's reflink snapshots (xfsprogs).
  packages+=(chromium clang-format golang-go python3-jsonschema python3-yaml dpkg-dev systemd
             lintian xfsprogs)
  # The beanstalkd protocol's test: the real beanstalkd to prove the scenarios, and PHP's
  # pheanstalk to drive them (npm's jackd comes from the npm registry, pinned by its lock file).
  packages+=(beanstalkd php-cli php-pda-pheanstalk)
  # Node.js 18 or later (its built-in fetch) with npm: Debian's, unless a node is already there
  # (a machine may carry another vendor's build, which Debian's npm would conflict with).
  command -v node >/dev/null || packages+=(nodejs)
  command -v npm >/dev/null || packages+=(npm)
fi
if [ "${1:-}" = "--bench" ]; then
  packages+=(beanstalkd postgresql redis-server libpq-dev libhiredis-dev python3-matplotlib)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
