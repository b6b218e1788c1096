#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU (an H200 here): build Sol's device parts there,
# run the `gpu` tests (the GPU ceilings and the sm90 GEMM against the CPU among them),
# compute-sanitizer memcheck and racecheck on small shapes, the device benches of copy/cast and
# the memory-bound ops beside torch on the same shapes, the GEMM table beside cuBLASLt and torch,
# `sol hw` and `sol bench --device cuda` when a full build's CLI runs here, and write
# $OUT/device-check.json, $OUT/device-check.md and $OUT/gemm.jsonl. Runs from the repository
# root; docs/gpu.md says how and why.
#
#   scripts/device-check.sh              the real run (budget: under 8 minutes: build ~3, gpu tests
#                                        ~1, sanitizers ~1, row benches ~1, GEMM table 2.5 at most
#                                        (it stops starting shapes after SOL_BENCH_GEMM_SECONDS,
#                                        default 120), torch ~1)
#   scripts/device-check.sh --dry-run    no GPU needed: every step says what it would run, or
#                                        why it is skipped; uses an existing build if there is
#                                        one ($SOL_BUILD_DIR, default build/) for the gpu tests,
#                                        which then exit 77 with discovery's reason
#
# SOL_DEVICE_CHECK_BUILD=carried uses the carried build when it runs there (no native build).
# Build: first a native SOL_DEVICE_MINIMAL build (needs only CUDA, cmake, ninja, a C++20
# compiler with OpenMP: no MPI, nlohmann-json, CLI11, fmt or GoogleTest); if that fails, the
# build carried from the development machine ($SOL_CARRIED_BUILD, default build-carried/).
set -u
DRY=0
[[ "${1:-}" == "--dry-run" ]] && DRY=1
OUT=${OUT:-$PWD/device-check-out}
mkdir -p "$OUT"
START=$(date +%s)
JOBS=$(nproc)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH="$CUDA_HOME/bin:$PATH"
export LD_LIBRARY_PATH="$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SOL_CUDA_CACHE_DIR=${SOL_CUDA_CACHE_DIR:-$OUT/cuda-cache}
STEPS_JSON=()
STEPS_MD=()

# step NAME STATUS DETAIL: STATUS is ok, failed or skipped; DETAIL one line.
step() {
  local detail=${3//\\/\\\\}
  detail=${detail//\"/\\\"}
  STEPS_JSON+=("{\"step\": \"$1\", \"status\": \"$2\", \"detail\": \"$detail\", \"at_s\": $(( $(date +%s) - START ))}")
  STEPS_MD+=("| $1 | $2 | ${3//|/\\|} |")
  echo "== $1: $2 — $3"
}

# run NAME TIMEOUT_S CMD...: runs under a timeout, log in $OUT/NAME.log; 77 counts as skipped.
run() {
  local name=$1 limit=$2
  shift 2
  if (( DRY )) && [[ "$name" != gpu-tests ]]; then
    step "$name" skipped "dry run: would run: $*"
    return 0
  fi
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local last
  last=$(grep -v '^\s*$' "$OUT/$name.log" | tail -1 | tr -d '\000-\037' | cut -c1-300)
  case $rc in
    0) step "$name" ok "$last" ;;
    77) step "$name" skipped "$last" ;;
    124) step "$name" failed "timed out after ${limit}s: $last" ;;
    *) step "$name" failed "exit $rc: $last" ;;
  esac
  return $rc
}

# ---- what this machine is ------------------------------------------------------------------
GPU=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
if [[ -n "$GPU" ]]; then step machine ok "GPU: $GPU; $(nvcc --version 2>/dev/null | tail -1)"
else step machine skipped "no GPU: nvidia-smi $(command -v nvidia-smi >/dev/null && echo 'found no device' || echo 'not installed')"; fi
HAVE_GPU=$([[ -n "$GPU" ]] && echo 1 || echo 0)

# ---- build ---------------------------------------------------------------------------------
BUILD=${SOL_BUILD_DIR:-build-device}
if (( DRY )); then
  BUILD=${SOL_BUILD_DIR:-build}
  step build skipped "dry run: would run: cmake -S . -B build-device -G Ninja -DSOL_DEVICE_MINIMAL=ON -DSOL_CUDA=ON && cmake --build build-device -j$JOBS --target sol_gpu_tests (fallback: ${SOL_CARRIED_BUILD:-build-carried})"
elif [[ "${SOL_DEVICE_CHECK_BUILD:-native}" == carried ]] \
     && "${SOL_CARRIED_BUILD:-build-carried}/bin/sol_gpu_tests" --list > /dev/null 2>&1; then
  # A short lease: the carried build runs here, so the native build's minutes are saved.
  BUILD=${SOL_CARRIED_BUILD:-build-carried}
  step build skipped "SOL_DEVICE_CHECK_BUILD=carried: using the carried build in $BUILD"
elif run configure 120 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOL_DEVICE_MINIMAL=ON -DSOL_CUDA=ON \
     && run build 240 cmake --build "$BUILD" -j"$JOBS" --target sol_gpu_tests; then
  :
else
  BUILD=${SOL_CARRIED_BUILD:-build-carried}
  if [[ -x "$BUILD/bin/sol_gpu_tests" ]]; then step build-fallback ok "using the carried build in $BUILD"
  else step build-fallback failed "no carried build at $BUILD/bin/sol_gpu_tests"; fi
fi
TESTS="$BUILD/bin/sol_gpu_tests"

# ---- gpu tests, sanitizers, benches --------------------------------------------------------
if [[ -x "$TESTS" ]]; then
  run gpu-tests 180 "$TESTS"
  if (( HAVE_GPU )) && command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
      SOL_GPU_TEST_SMALL=1 run "sanitizer-$tool" 120 compute-sanitizer --tool "$tool" --error-exitcode 1 \
        "$TESTS" copy_matches_host
      SOL_GPU_TEST_SMALL=1 run "sanitizer-$tool-cast" 120 compute-sanitizer --tool "$tool" --error-exitcode 1 \
        "$TESTS" cast_matches_cpu_bit_for_bit
    done
    # The memory-bound ops: memcheck on each; racecheck on softmax, the one that shares memory.
    for t in rope_matches_cpu_bit_for_bit softmax_matches_cpu_within_f32_rounding routing_matches_cpu_bit_for_bit \
             moe_permute_unpermute_match_cpu_bit_for_bit embedding_matches_cpu_bit_for_bit; do
      SOL_GPU_TEST_SMALL=1 run "sanitizer-memcheck-${t%%_*}" 120 compute-sanitizer --tool memcheck --error-exitcode 1 \
        "$TESTS" "$t"
    done
    SOL_GPU_TEST_SMALL=1 run sanitizer-racecheck-softmax 120 compute-sanitizer --tool racecheck --error-exitcode 1 \
      "$TESTS" softmax_matches_cpu_within_f32_rounding
    # The sm90 GEMMs' TMA-store epilogue (staging buffers written by the consumers, read by TMA)
    # and the fp8 consumers' issue turns: memcheck and racecheck on the small guarded shapes (the
    # JIT programs are cached by the gpu-tests step).
    for tool in memcheck racecheck; do
      run "sanitizer-$tool-gemm-store" 120 compute-sanitizer --tool "$tool" --error-exitcode 1 \
        "$TESTS" sm90_gemm_tma_store_stays_inside_d
    done
    # The contiguous grouped GEMM reads grouped_layout on the device only: a bad layout (a value
    # past the experts, a run starting inside a tile) must make no access outside the operands.
    run sanitizer-memcheck-grouped-layout 120 compute-sanitizer --tool memcheck --error-exitcode 1 \
      "$TESTS" sm90_grouped_gemm_bad_layout_is_reported
  else
    step sanitizers skipped "$( (( HAVE_GPU )) && echo 'compute-sanitizer not found' || echo 'no GPU')"
  fi
  if (( HAVE_GPU )); then
    run bench-sol 120 "$TESTS" bench_copy_cast
    run bench-sol-rows 120 "$TESTS" bench_memory_bound
    SOL_BENCH_GEMM_SECONDS=${SOL_BENCH_GEMM_SECONDS:-120} run bench-gemm 200 "$TESTS" bench_gemm
    run bench-torch 180 python3 scripts/device-check-torch.py
    # Forced sm90 configurations on representative shapes: the data the chooser is set from.
    SOL_BENCH_GEMM_SWEEP=1 run bench-gemm-sweep 150 "$TESTS" bench_gemm_sweep
  else
    step bench skipped "no GPU (would run $TESTS bench_copy_cast, bench_memory_bound, bench_gemm and scripts/device-check-torch.py)"
  fi
  # The CLI needs CLI11, fmt and MPI: a SOL_DEVICE_MINIMAL build has none, a carried full build
  # runs if its shared libraries are here. Without it the gpu tests `ceilings` and
  # `bench_cases_on_device` (full builds only) stand in for `sol hw` and `sol bench`.
  CLI=""
  for candidate in "$BUILD/bin/sol" "${SOL_CARRIED_BUILD:-build-carried}/bin/sol"; do
    if [[ -x "$candidate" ]] && "$candidate" --help > /dev/null 2>&1; then CLI=$candidate; break; fi
  done
  if [[ -z "$CLI" ]]; then
    step sol-cli skipped "no runnable sol CLI in $BUILD or ${SOL_CARRIED_BUILD:-build-carried} (the gpu tests ceilings and bench_cases_on_device stand in)"
  elif (( ! HAVE_GPU )); then
    step sol-cli skipped "no GPU (would run $CLI hw --json and bench copy/cast --device cuda)"
  else
    run sol-hw 90 "$CLI" hw --json
    run sol-bench-copy 60 "$CLI" bench copy --device cuda --n 28M --dtype bf16 --json --min-time 0.1
    run sol-bench-cast 60 "$CLI" bench cast --device cuda --n 28M --from f32 --to bf16 --json --min-time 0.1
  fi
else
  step gpu-tests failed "no test binary at $TESTS"
fi

# ---- report --------------------------------------------------------------------------------
{
  echo "{\"machine\": \"${GPU:-no GPU}\", \"dry_run\": $DRY, \"seconds\": $(( $(date +%s) - START )), \"steps\": ["
  (IFS=,; echo "${STEPS_JSON[*]}")
  echo "], \"bench\": ["
  cat "$OUT"/bench-sol.log "$OUT"/bench-sol-rows.log "$OUT"/bench-gemm.log "$OUT"/bench-torch.log 2>/dev/null \
    | sed -n 's/^BENCH //p' | paste -sd, -
  echo "], \"ceilings\": ["
  sed -n 's/^CEILING //p' "$OUT"/gpu-tests.log 2>/dev/null | paste -sd, -
  echo "]}"
} > "$OUT/device-check.json"
{
  echo "# Sol device check"
  echo
  echo "Machine: ${GPU:-no GPU}. Dry run: $DRY. Took $(( $(date +%s) - START )) s."
  echo
  echo "| step | status | detail |"
  echo "|---|---|---|"
  printf '%s\n' "${STEPS_MD[@]}"
  echo
  echo "GPU ceilings (Sol's loops, raw units/s, datasheet beside; gpu test \`ceilings\`):"
  echo
  echo '```'
  sed -n 's/^CEILING //p' "$OUT"/gpu-tests.log 2>/dev/null
  echo '```'
  echo
  echo "Benchmarks (one JSON record per line; sol_pct against the copy ceiling measured beside it):"
  echo
  echo '```'
  cat "$OUT"/bench-sol.log "$OUT"/bench-sol-rows.log "$OUT"/bench-torch.log 2>/dev/null | sed -n 's/^BENCH //p' \
    | grep -v '"op": "torch \(matmul\|_scaled_mm\)'
  echo '```'
  echo
  echo "GEMM table (\`sol_gpu_tests bench_gemm\`: Sol, cuBLASLt, floor = max(FLOPs / measured wgmma peak,"
  echo "bytes / measured HBM read); SOL% per implementation; records in gemm.jsonl with torch's):"
  echo
  echo '```'
  sed -n 's/^TABLE //p' "$OUT"/bench-gemm.log 2>/dev/null
  grep -h '^ceilings\|^device ' "$OUT"/bench-gemm.log 2>/dev/null
  grep -h '^torch fp8' "$OUT"/bench-torch.log 2>/dev/null
  echo '```'
  echo
  echo "sm90 GEMM sweep (\`sol_gpu_tests bench_gemm_sweep\`: forced configurations):"
  echo
  echo '```'
  grep -h '^SWEEP' "$OUT"/bench-gemm-sweep.log 2>/dev/null
  echo '```'
} > "$OUT/device-check.md"
# The GEMM records, one JSON object a line: Sol's and cuBLASLt's (floor, SOL%, check against Sol)
# and torch's (time only; the floor of the same shape is in Sol's record).
{
  sed -n 's/^BENCH //p' "$OUT"/bench-gemm.log 2>/dev/null
  sed -n 's/^BENCH //p' "$OUT"/bench-torch.log 2>/dev/null | grep '"op": "torch \(matmul\|_scaled_mm\)'
} > "$OUT/gemm.jsonl"
echo "report: $OUT/device-check.json, $OUT/device-check.md"
grep -q '"status": "failed"' "$OUT/device-check.json" && exit 1
exit 0
