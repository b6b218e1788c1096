#!/usr/bin/env bash
# Every test, after the release build (README's test command; CI runs exactly this, .ci/run):
# the sanitizer build, the release suite, the sanitizer stage (the tests that matter most for
# memory safety rebuilt with ASan + UBSan and run with leak checking, docs/sanitizers.md), then
# a short fuzz run (docs/fuzzing.md). Stops at the first stage that fails; prints each stage's
# minutes.
#
# The fault tests (label `fault`: comm.fault, comm.failure) mostly wait on deadlines (16 CPU s
# in 163 s of a release build): rather than hold one of ctest's two slots, each build's fault
# tests run beside a stage that keeps both cores busy and runs no ctest in that build's folder
# (docs/sanitizers.md, "CI's time").
set -euo pipefail
cd "$(dirname "$0")/.."

stage() {  # NAME CMD...
  local name=$1 start=$SECONDS; shift
  echo "== $name"
  "$@"
  echo "== $name: done in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
}

# with_faults PRESET CMD...: CMD, and beside it the fault tests of PRESET's build; fails if
# either fails. The fault tests' output follows CMD's.
with_faults() {
  local preset=$1 log rc=0 faults_rc=0; shift
  log=$(mktemp)
  ctest --preset "$preset" -L fault >"$log" 2>&1 &
  local pid=$!
  "$@" || rc=$?
  wait "$pid" || faults_rc=$?
  echo "-- the fault tests of preset $preset, run beside it:"
  cat "$log"
  rm -f "$log"
  [ "$rc" = 0 ] && [ "$faults_rc" = 0 ]
}

stage "sanitizer build, release fault tests beside it" \
  with_faults release bash -c "cmake --preset asan >/dev/null && cmake --build --preset asan-ci"
stage "release tests, sanitizer fault tests beside them" \
  with_faults asan-ci ctest --preset release -j2 -LE fault
stage "sanitizer tests" ctest --preset asan-ci -j2 -LE fault
stage "fuzz smoke" bash scripts/fuzz-smoke.sh
