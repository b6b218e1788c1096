#!/usr/bin/env bash
# Every test, after the release build (README's test command; CI runs exactly this, .ci/run):
# the release suite, a short fuzz run (docs/fuzzing.md), then the sanitizer stage: the tests
# that matter most for memory safety rebuilt with ASan + UBSan and run with leak checking
# (docs/sanitizers.md). Stops at the first stage that fails; prints each stage's minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

stage() {  # NAME CMD...
  local name=$1 start=$SECONDS; shift
  echo "== $name"
  "$@"
  echo "== $name: done in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
}

stage "release tests" ctest --preset release -j2
stage "fuzz smoke" bash scripts/fuzz-smoke.sh
stage "sanitizer build" bash -c "cmake --preset asan >/dev/null && cmake --build --preset asan-ci"
stage "sanitizer tests" ctest --preset asan-ci -j2
