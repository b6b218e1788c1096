#!/usr/bin/env bash
# Installs the already-built tree into a temporary prefix and builds a consumer against it.
# Each step's output is kept and shown when the step fails (ctest shows it on failure).
set -u
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
step() {  # step NAME COMMAND...
  local name=$1; shift
  "$@" >"$tmp/log" 2>&1 && return 0
  echo "install.consumer: $name failed: $*"
  cat "$tmp/log"
  exit 1
}
step install cmake --install "$build" --prefix "$tmp/prefix"
step configure cmake -S "$src/tests/install/consumer" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix"
step build cmake --build "$tmp/build"
"$tmp/build/consumer"
