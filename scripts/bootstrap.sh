#!/usr/bin/env bash
# Installs the Debian 12 packages lift needs to build, test and benchmark (and Node.js + npm
# for the HTTP tests, qemu-user for running the tests on emulated CPUs without AVX-512/AVX2,
# nginx for the replicas test: tests/deploy/replicas_test.py runs its own instance, on loopback).
# Idempotent: does nothing when everything is already there.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config g++ clang-14 libclang-rt-14-dev lld-14
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcpp-httplib-dev
  libxxhash-dev libcli11-dev libpcre2-dev clang-format-14 qemu-user python3-jinja2 nginx
  libopenmpi-dev openmpi-bin
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm run the HTTP tests (tests/http, scripts/http_tests.sh): Debian 12's `nodejs`
# (18.x) and `npm`. A node already on the PATH (e.g. NodeSource's, which bundles npm) is kept.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
fi
