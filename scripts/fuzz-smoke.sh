#!/usr/bin/env bash
# A short fuzz run for CI (docs/fuzzing.md): builds the libFuzzer harnesses of fuzz/ with the
# `fuzz` preset (clang, ASan + UBSan) and runs each for FUZZ_SECONDS (default 45) from seed
# corpora gathered from the repository's own files, the three side by side (on two cores each
# runs 1.5x FUZZ_SECONDS of wall time, so that each still gets FUZZ_SECONDS of a core). Exit 1
# on any finding: the failing input is left in build-fuzz/findings/ with the harness's report
# beside it.
#   bash scripts/fuzz-smoke.sh              # about 2.5 minutes on 2 cores, build included
#   FUZZ_SECONDS=600 FUZZ_SEED=0 bash scripts/fuzz-smoke.sh   # longer, and a random seed (0)
# The default seed is fixed so that a CI run explores the same inputs as the run that passed here.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-45}
build=build-fuzz

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"${FUZZ_JOBS:-2}"

# Seeds: the repository's tile programs and JSON inputs as they are; for the CLI harness, one
# input per op-argument line of the README's examples ("OP\nNAME=VALUE...").
seeds=$build/seeds
rm -rf "$seeds" && mkdir -p "$seeds/cli"
n=0
grep -ho 'sol bench [a-z0-9-]*\( --[a-z_]* [^ ]*\)*' README.md | sort -u | while read -r _ _ op rest; do
  n=$((n + 1))
  { echo "$op"; set -- $rest; while [ $# -ge 2 ]; do echo "${1#--}=$2"; shift 2; done; } >"$seeds/cli/$n"
done
# The stand-in ops' own parameters (fuzz/fuzz_ops.cc), each kind once.
printf 'gemm\nm=4K\nn=16Mi\ndtype=e4m3\nlayout=nt\n' >"$seeds/cli/typed"

mkdir -p "$build/findings"
# The harnesses check for leaks: the same LSan workaround as the sanitizer stage
# (cmake/SolSanitize.cmake; clang 16's runtime has the __tls_get_addr heuristic too).
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}intercept_tls_get_addr=0
# Three harnesses share the cores: each runs long enough to get `seconds` of one.
harnesses=3
cores=$(nproc)
wall=$(((seconds * harnesses + (cores < harnesses ? cores : harnesses) - 1) / (cores < harnesses ? cores : harnesses)))
start() {  # NAME SEED-DIRS...: runs in the background, its log in findings/NAME.log
  local name=$1; shift
  local corpus=$build/corpus/$name
  mkdir -p "$corpus"
  echo "== $name: ${wall}s of wall time"
  "$build/fuzz/$name" -max_total_time="$wall" -seed="${FUZZ_SEED:-1}" -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$build/findings/$name-" "$corpus" "$@" >"$build/findings/$name.log" 2>&1 &
  pids[$name]=$!
}
declare -A pids
start fuzz_tile examples/tile tests/compiler/golden
start fuzz_model_json models hardware plans workloads
start fuzz_cli_args "$seeds/cli"
failed=0
for name in fuzz_tile fuzz_model_json fuzz_cli_args; do
  if ! wait "${pids[$name]}"; then
    echo "FINDING in $name: see $build/findings/$name.log"; grep -a -m3 -E "FUZZ FINDING|ERROR|SUMMARY" \
      "$build/findings/$name.log" || tail -20 "$build/findings/$name.log"
    failed=1
  fi
  echo "$name: $(grep -a -E "^stat::number_of_executed_units|^Done" "$build/findings/$name.log" | tr '\n' ' ')"
done
exit $failed
