#!/usr/bin/env bash
# Installs the Debian 12 packages lift needs to build, test and benchmark.
# Idempotent: does nothing when everything is already there.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config g++ clang-14 libclang-rt-14-dev lld-14
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcpp-httplib-dev
  libxxhash-dev libcli11-dev clang-format-14
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
fi
