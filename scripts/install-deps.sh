#!/usr/bin/env bash
# Everything Sol needs on a fresh Debian 12 machine, from Debian's packages. Run as root
# (or with sudo available). Safe to run again: apt-get skips what is installed.
set -euo pipefail
pkgs=(build-essential g++ cmake ninja-build libgtest-dev libgmock-dev
      libcli11-dev nlohmann-json3-dev libfmt-dev python3
      openmpi-bin libopenmpi-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
