#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU (an H200 here): build Sol's device parts there (or
# use a carried build), run the `gpu` correctness tests (the GPU ceilings and the sm90 GEMM against
# the CPU among them), the device benches of copy/cast and the memory-bound ops, the GEMM table
# beside cuBLASLt, the sm90 GEMM sweep, compute-sanitizer memcheck and racecheck on small shapes,
# torch on the benches' shapes, and `sol hw` / `sol bench --device cuda` when a full build's CLI
# runs here. Runs from the repository root; docs/gpu.md ("The device check") says how and why.
#
#   scripts/device-check.sh              the real run
#   scripts/device-check.sh --dry-run    no GPU needed: every step says what it would run, or why
#                                        it is skipped; uses an existing build ($SOL_BUILD_DIR,
#                                        default build/) for the gpu tests, which then exit 77 with
#                                        discovery's reason (with SOL_DEVICE_CHECK_BUILD=carried it
#                                        probes the carried binary for real: that needs no GPU)
#
# Order, and why: machine, build (or the carried binary's probe), the gpu correctness tests
# (`sol_gpu_tests --no-bench`: every test but the benches), then the benches in their own steps
# (copy/cast, memory-bound rows, the GEMM table, the sweep, a full build's bench cases), then
# the sanitizers, then torch's anchors, then the CLI. Correctness first: it is what a short lease
# must not lose. The benches next: they are the numbers only a GPU gives, and the anchors are
# worth little without them. The sanitizers after them: each reruns small shapes of tests that
# already passed. torch last: its numbers do not change with Sol's code, so a later lease can
# take them. Budget on an H200 with a carried build: gpu tests ~1 min (most of it JIT), row
# benches ~1, GEMM table <= 2.5 (it starts no shape after SOL_BENCH_GEMM_SECONDS, default 120,
# cut to the step's time), sweep ~1, sanitizers ~1.5, torch ~1; a native build adds ~3.
#
# Output: $OUT (default ./device-check-out) receives exactly four files, so a device tool that
# returns a few files returns them all: device-check.json, device-check.md, gemm.jsonl and
# device-check.tgz (every step's log and the three reports). The logs themselves are written to
# $SOL_DEVICE_CHECK_LOGS (default a new /tmp/sol-device-check.XXXXXX). The reports and the
# archive are rewritten after every step and on exit, and a TERM, INT or HUP (an outer timeout)
# stops the running step, records it as interrupted and writes them: a cut run still reports.
# Report lines are taken whole only: a BENCH/CEILING record must be a complete JSON object.
# Under a device tool with a 600 s limit: `timeout -k 20 570 scripts/device-check.sh`, so the
# deadline (480 s), a last step's kill grace (10 s) and the report fit before the outer timeout,
# and the outer timeout's TERM still finds the trap in time.
#
# Environment:
#   OUT                               where the four files go
#   SOL_DEVICE_CHECK_BUILD=carried    use the carried build ($SOL_CARRIED_BUILD, default
#                                     build-carried/); its probe (`sol_gpu_tests --list`) failing
#                                     is a failed build step with the probe's output and ldd, and
#                                     no native build follows unless SOL_DEVICE_CHECK_NATIVE_FALLBACK=1
#                                     (default: native, a SOL_DEVICE_MINIMAL build in $SOL_BUILD_DIR,
#                                     default build-device/, falling back to a carried build whose
#                                     probe passes)
#   SOL_DEVICE_CHECK_DEADLINE_S=480   overall deadline: a step that would start later is recorded
#                                     as skipped ("deadline"), and each step's timeout is cut to
#                                     what is left (timeout -k 10: a step ignoring TERM is killed)
#   SOL_DEVICE_CHECK_STEPS=a,b        run only these steps (bash patterns: sanitizer-*,bench-gemm);
#                                     machine and build always run. Names: gpu-tests,
#                                     first-run-<test> (one per first-run test), bench-sol,
#                                     bench-sol-rows, bench-gemm, bench-gemm-sweep, bench-cases,
#                                     sanitizer-*, bench-torch, sol-hw, sol-bench-copy, sol-bench-cast
#   SOL_CUDA_CACHE_DIR                the JIT kernel cache (default /tmp/sol-device-check-cuda-cache,
#                                     outside $OUT: it is not a result)
#   SOL_BENCH_GEMM_SECONDS            the GEMM table's budget (default 120)
#   SOL_DEVICE_CHECK_LOGS             where the logs go (default a new /tmp/sol-device-check.XXXXXX)
set -u
DRY=0
[[ "${1:-}" == "--dry-run" ]] && DRY=1
OUT=${OUT:-$PWD/device-check-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOGS=${SOL_DEVICE_CHECK_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/sol-device-check.XXXXXX")}
mkdir -p "$LOGS"
LOGS=$(cd "$LOGS" && pwd)
START=$(date +%s)
DEADLINE_S=${SOL_DEVICE_CHECK_DEADLINE_S:-480}
ONLY=${SOL_DEVICE_CHECK_STEPS:-}
MIN_STEP_S=15   # a step with less time than this left is skipped, not started
JOBS=$(nproc)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CARRIED=${SOL_CARRIED_BUILD:-build-carried}
export PATH="$CUDA_HOME/bin:$PATH"
export LD_LIBRARY_PATH="$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SOL_CUDA_CACHE_DIR=${SOL_CUDA_CACHE_DIR:-${TMPDIR:-/tmp}/sol-device-check-cuda-cache}
STDBUF=()
command -v stdbuf > /dev/null && STDBUF=(stdbuf -oL -eL)
HAVE_PY=0
command -v python3 > /dev/null && HAVE_PY=1
STEPS_JSON=()
STEPS_MD=()
GPU=""
CUR_PID=""      # the running step's `timeout` process (its own process group)
CUR_STEP=""
INTERRUPTED=""
FINISHED=0

elapsed() { echo $(( $(date +%s) - START )); }
# Printable ASCII only, at most 300 characters: safe inside JSON strings and table cells.
clean() { LC_ALL=C tr -cd '\040-\176' | cut -c1-300; }

# step NAME STATUS DETAIL: STATUS is ok, failed or skipped; DETAIL one line.
step() {
  local detail
  detail=$(printf '%s' "$3" | clean)
  local j=${detail//\\/\\\\}
  j=${j//\"/\\\"}
  STEPS_JSON+=("{\"step\": \"$1\", \"status\": \"$2\", \"detail\": \"$j\", \"at_s\": $(elapsed)}")
  STEPS_MD+=("| $1 | $2 | ${detail//|/\\|} |")
  echo "== $1: $2 - $detail"
}

# selected NAME: whether SOL_DEVICE_CHECK_STEPS (empty: all) names the step; entries are patterns.
# The build's steps always run: every other step needs the binary.
selected() {
  [[ -z "$ONLY" || "$1" == configure || "$1" == build || "$1" == build-carried ]] && return 0
  local pat pats
  IFS=, read -ra pats <<< "$ONLY"  # split only: a pattern is never expanded against files
  for pat in "${pats[@]}"; do
    # shellcheck disable=SC2053
    [[ "$1" == $pat ]] && return 0
  done
  return 1
}

# The whole lines of the files (a last line without its newline was cut: dropped).
whole_lines() {
  local f
  for f; do
    [[ -s "$f" ]] || continue
    if [[ -n "$(tail -c1 "$f")" ]]; then sed '$d' "$f"; else cat "$f"; fi
  done
}

# Keeps the stdin lines that are complete JSON objects (no NaN or Infinity), one a line.
json_objects() {
  if (( HAVE_PY )); then
    python3 -c '
import json, sys
def reject(c): raise ValueError(c)
for line in sys.stdin:
    line = line.strip()
    try:
        if isinstance(json.loads(line, parse_constant=reject), dict): print(line)
    except ValueError:
        pass'
  else
    grep -E '^\{.*\}$'
  fi
}

# records PREFIX FILE...: the JSON records of lines "PREFIX {...}".
records() {
  local prefix=$1 f any=0
  shift
  for f; do [[ -s "$f" ]] && any=1; done
  (( any )) || return 0
  whole_lines "$@" | sed -n "s/^$prefix //p" | json_objects
}

# The GEMM table's records: the final ones when the bench finished, else those printed as each
# shape was timed (BENCH-EARLY, against the ceilings of before the table) and the budget's skips.
gemm_records() {
  local f=$LOGS/bench-gemm.log
  [[ -s "$f" ]] || return 0
  if whole_lines "$f" | grep -q '^bench_gemm: done'; then records BENCH "$f"
  else whole_lines "$f" | grep -E '^BENCH-EARLY |^BENCH .*"skipped"' | sed -E 's/^BENCH(-EARLY)? //' | json_objects; fi
}
gemm_table() {
  local f=$LOGS/bench-gemm.log
  if whole_lines "$f" | grep -q '^bench_gemm: done'; then whole_lines "$f" | sed -n 's/^TABLE //p'
  elif [[ -s "$f" ]]; then
    echo "(cut short: the rows timed before the cut, against the ceilings of before the table)"
    whole_lines "$f" | sed -n 's/^TABLE-EARLY //p'
  fi
}

# report: device-check.json, device-check.md, gemm.jsonl, then device-check.tgz (all in $OUT).
report() {
  local state="complete"
  (( FINISHED )) || state="running"
  [[ -n "$INTERRUPTED" ]] && state="interrupted by SIG$INTERRUPTED"
  local torch_gemm='"op": "torch \(matmul\|_scaled_mm\)'
  local sol_rows gemm torch ceilings
  sol_rows=$(records BENCH "$LOGS"/bench-sol.log "$LOGS"/bench-sol-rows.log)
  gemm=$(gemm_records)
  torch=$(records BENCH "$LOGS"/bench-torch.log)
  ceilings=$(records CEILING "$LOGS"/gpu-tests.log)
  # lines TEXT...: each non-empty text, one a line.
  lines() { local t; for t; do [[ -n "$t" ]] && printf '%s\n' "$t"; done; return 0; }
  {
    echo "{\"machine\": \"$(printf '%s' "${GPU:-no GPU}" | clean | sed 's/["\\]//g')\", \"dry_run\": $DRY, \"state\": \"$state\","
    echo " \"seconds\": $(elapsed), \"deadline_s\": $DEADLINE_S, \"only\": \"$(printf '%s' "$ONLY" | clean | sed 's/["\\]//g')\","
    echo " \"logs\": \"device-check.tgz\", \"steps\": ["
    (IFS=,; echo "${STEPS_JSON[*]}")
    echo "], \"bench\": ["
    lines "$sol_rows" "$gemm" "$torch" | paste -sd, -
    echo "], \"ceilings\": ["
    lines "$ceilings" | paste -sd, -
    echo "]}"
  } > "$OUT/device-check.json.tmp"
  mv -f "$OUT/device-check.json.tmp" "$OUT/device-check.json"
  {
    echo "# Sol device check"
    echo
    echo "Machine: ${GPU:-no GPU}. Dry run: $DRY. State: $state after $(elapsed) s (deadline ${DEADLINE_S} s)."
    [[ -n "$ONLY" ]] && echo "Steps asked for: $ONLY."
    echo "Every step's log: device-check.tgz."
    echo
    echo "| step | status | detail |"
    echo "|---|---|---|"
    (( ${#STEPS_MD[@]} )) && printf '%s\n' "${STEPS_MD[@]}"
    echo
    echo "GPU ceilings (Sol's loops, raw units/s, datasheet beside; gpu test \`ceilings\`):"
    echo
    echo '```'
    lines "$ceilings"
    echo '```'
    echo
    echo "Benchmarks (one JSON record per line; sol_pct against the copy ceiling measured beside it):"
    echo
    echo '```'
    lines "$sol_rows" "$torch" | grep -v "$torch_gemm"
    echo '```'
    echo
    echo "GEMM table (\`sol_gpu_tests bench_gemm\`: Sol, cuBLASLt, floor = max(FLOPs / measured wgmma peak,"
    echo "bytes / measured HBM read); SOL% per implementation; records in gemm.jsonl with torch's):"
    echo
    echo '```'
    gemm_table
    whole_lines "$LOGS"/bench-gemm.log | grep '^ceilings\|^device '
    whole_lines "$LOGS"/bench-torch.log | grep '^torch fp8'
    echo '```'
    echo
    echo "sm90 GEMM sweep (\`sol_gpu_tests bench_gemm_sweep\`: forced configurations):"
    echo
    echo '```'
    whole_lines "$LOGS"/bench-gemm-sweep.log | grep '^SWEEP'
    echo '```'
  } > "$OUT/device-check.md.tmp"
  mv -f "$OUT/device-check.md.tmp" "$OUT/device-check.md"
  # The GEMM records, one JSON object a line: Sol's and cuBLASLt's (floor, SOL%, check against
  # Sol) and torch's (time only; the floor of the same shape is in Sol's record).
  { lines "$gemm"; lines "$torch" | grep "$torch_gemm"; } > "$OUT/gemm.jsonl.tmp"
  mv -f "$OUT/gemm.jsonl.tmp" "$OUT/gemm.jsonl"
  # One archive of every log and the reports (written beside, then renamed: never half a file).
  cp -f "$OUT/device-check.json" "$OUT/device-check.md" "$OUT/gemm.jsonl" "$LOGS"/ 2>/dev/null
  # GNU tar exits 1 for a file that changed while read (a log still growing): the archive is whole.
  tar czf "$OUT/device-check.tgz.tmp" -C "$LOGS" --exclude=device-check.tgz --exclude='*.tmp' . 2>/dev/null
  if (( $? <= 1 )); then mv -f "$OUT/device-check.tgz.tmp" "$OUT/device-check.tgz"
  else rm -f "$OUT/device-check.tgz.tmp"; fi
}

# shellcheck disable=SC2317  # finish and on_signal run from traps
# finish (the EXIT trap): the reports once more, the exit status: 1 if a step failed.
finish() {
  local rc=$?
  trap '' TERM INT HUP  # the last report is written whole, whatever arrives now
  trap - EXIT
  [[ -z "$INTERRUPTED" ]] && FINISHED=1
  report
  echo "report: $OUT/device-check.json, $OUT/device-check.md, $OUT/device-check.tgz (logs: $LOGS)"
  (( rc == 0 )) && grep -q '"status": "failed"' "$OUT/device-check.json" && rc=1
  exit "$rc"
}

# shellcheck disable=SC2317
# on_signal SIG: stop the running step (TERM to its timeout, which passes it on; KILL to its
# process group after 5 s), record it as interrupted, and exit through finish.
on_signal() {
  local sig=$1
  trap '' TERM INT HUP
  INTERRUPTED=$sig
  if [[ -n "$CUR_PID" ]]; then
    kill -TERM "$CUR_PID" 2> /dev/null
    local _
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$CUR_PID" 2> /dev/null || break; sleep 0.5; done
    kill -KILL -- "-$CUR_PID" 2> /dev/null
    local last
    last=$(whole_lines "$LOGS/$CUR_STEP.log" | grep -v '^\s*$' | tail -1)
    step "$CUR_STEP" failed "interrupted by SIG$sig at $(elapsed)s: $last"
  fi
  step check failed "interrupted by SIG$sig at $(elapsed)s (an outer timeout?); later steps did not run"
  case $sig in INT) exit 130 ;; HUP) exit 129 ;; *) exit 143 ;; esac
}
trap finish EXIT
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
trap 'on_signal HUP' HUP

# launch LIMIT LOG CMD...: CMD under `timeout -k 10 LIMIT`, output to LOG, in the background and
# then `wait`: a trapped signal interrupts `wait` at once (a foreground command would delay the
# trap until it ended), so an outer timeout still gets a report. The caller sets CUR_STEP.
launch() {
  local limit=$1 log=$2
  shift 2
  timeout -k 10 "$limit" "$@" > "$log" 2>&1 < /dev/null &
  CUR_PID=$!
  wait "$CUR_PID"
  local rc=$?
  CUR_PID=""
  return $rc
}

# run NAME TIMEOUT_S CMD...: runs under a timeout cut to the deadline, log in $LOGS/NAME.log; 77
# counts as skipped. Returns the command's status (1 when not started for the deadline).
run() {
  local name=$1 want=$2
  shift 2
  selected "$name" || return 0
  if (( DRY )) && [[ "$name" != gpu-tests ]]; then
    step "$name" skipped "dry run: would run: $*"
    return 0
  fi
  local left=$(( DEADLINE_S - $(elapsed) ))
  if (( left < MIN_STEP_S )); then
    step "$name" skipped "deadline: ${left}s left of SOL_DEVICE_CHECK_DEADLINE_S=$DEADLINE_S (would run: $*)"
    return 1
  fi
  local limit=$want cut=""
  (( left < want )) && limit=$left && cut=" (cut from ${want}s to the deadline)"
  local buf=("${STDBUF[@]}")
  [[ "$1" == compute-sanitizer || "$*" == *" compute-sanitizer "* ]] && buf=()  # its own environment
  local t0 rc
  t0=$(elapsed)
  CUR_STEP=$name
  launch "$limit" "$LOGS/$name.log" "${buf[@]}" "$@"
  rc=$?
  local last took=$(( $(elapsed) - t0 ))
  last=$(whole_lines "$LOGS/$name.log" | grep -v '^\s*$' | tail -1)
  case $rc in
    0) step "$name" ok "${took}s: $last" ;;
    77) step "$name" skipped "$last" ;;
    124|137)
      # Cut short by the deadline, not by its own limit: the lease ran out, not the code.
      if [[ -n "$cut" ]]; then step "$name" skipped "deadline: stopped after ${limit}s$cut: $last"
      else step "$name" failed "timed out after ${limit}s: $last"; fi ;;
    *) step "$name" failed "exit $rc after ${took}s: $last" ;;
  esac
  report
  return $rc
}

# probe BIN: `BIN --list` (no GPU needed) into $LOGS/build-probe.log; on failure also `ldd BIN`.
probe() {
  local bin=$1
  if [[ ! -x "$bin" ]]; then
    echo "no executable $bin" > "$LOGS/build-probe.log"
    return 1
  fi
  timeout -k 5 30 "$bin" --list > "$LOGS/build-probe.log" 2>&1 < /dev/null && return 0
  local rc=$?
  { echo "== exit $rc"; echo "== ldd $bin"; ldd "$bin" 2>&1; } >> "$LOGS/build-probe.log"
  return 1
}
probe_detail() {
  local bin=$1 missing first
  first=$(whole_lines "$LOGS/build-probe.log" | grep -v '^==' | head -1)
  missing=$(grep 'not found' "$LOGS/build-probe.log" | awk '{print $1}' | paste -sd' ' -)
  echo "probe '$bin --list' failed${missing:+ (ldd: not found: $missing)}: $first (build-probe.log: output, ldd)"
}

# ---- what this machine is ------------------------------------------------------------------
GPU=$(timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
if [[ -n "$GPU" ]]; then step machine ok "GPU: $GPU; $(nvcc --version 2>/dev/null | tail -1); logs in $LOGS"
else step machine skipped "no GPU: nvidia-smi $(command -v nvidia-smi >/dev/null && echo 'found no device' || echo 'not installed'); logs in $LOGS"; fi
HAVE_GPU=$([[ -n "$GPU" ]] && echo 1 || echo 0)
# The GPU steps are listed (a dry run names each with what it would run) or run.
GPU_STEPS=$(( HAVE_GPU || DRY ))
report

# ---- build ---------------------------------------------------------------------------------
BUILD=${SOL_BUILD_DIR:-build-device}
MODE=${SOL_DEVICE_CHECK_BUILD:-native}
native_build() {
  run configure 120 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOL_DEVICE_MINIMAL=ON -DSOL_CUDA=ON \
    && run build 240 cmake --build "$BUILD" -j"$JOBS" --target sol_gpu_tests
}
if [[ "$MODE" == carried ]]; then
  # A short lease: the carried build runs here, so the native build's minutes are saved. Its
  # probe failing is a result to see (a missing library, a newer glibc), not a cue to spend up
  # to 6 minutes on a native build nobody asked for.
  if probe "$CARRIED/bin/sol_gpu_tests"; then
    BUILD=$CARRIED
    step build-carried ok "SOL_DEVICE_CHECK_BUILD=carried: the carried build in $BUILD runs here ($(wc -l < "$LOGS/build-probe.log") tests)"
  else
    step build-carried failed "SOL_DEVICE_CHECK_BUILD=carried: $(probe_detail "$CARRIED/bin/sol_gpu_tests")"
    if [[ "${SOL_DEVICE_CHECK_NATIVE_FALLBACK:-0}" == 1 ]] && (( ! DRY )); then
      native_build
    elif (( DRY )); then
      BUILD=${SOL_BUILD_DIR:-build}
      step build-native skipped "dry run: the gpu tests of $BUILD stand in"
    else
      BUILD=""
      step build-native skipped "not built: SOL_DEVICE_CHECK_NATIVE_FALLBACK=1 asks for a native build after a failed probe"
    fi
  fi
  report
elif (( DRY )); then
  BUILD=${SOL_BUILD_DIR:-build}
  step build skipped "dry run: would run: cmake -S . -B build-device -G Ninja -DSOL_DEVICE_MINIMAL=ON -DSOL_CUDA=ON && cmake --build build-device -j$JOBS --target sol_gpu_tests (fallback: $CARRIED if its probe passes)"
  report
elif native_build; then
  :
elif probe "$CARRIED/bin/sol_gpu_tests"; then
  BUILD=$CARRIED
  step build-fallback ok "the native build failed; the carried build in $BUILD runs here"
  report
else
  step build-fallback failed "the native build failed, and $(probe_detail "$CARRIED/bin/sol_gpu_tests")"
  BUILD=""
  report
fi
TESTS=${BUILD:+$BUILD/bin/sol_gpu_tests}

# ---- gpu correctness tests, benches, sanitizers, torch, CLI --------------------------------
if [[ -n "$TESTS" && -x "$TESTS" ]]; then
  # Every test but the benches: the benches run below, each in its own step with its budget.
  run gpu-tests 180 "$TESTS" --no-bench
  if (( GPU_STEPS )); then
    run bench-sol 120 "$TESTS" bench_copy_cast
    run bench-sol-rows 120 "$TESTS" bench_memory_bound
    # The GEMM table starts no shape after its budget: the budget is cut to leave the step 50 s
    # for the shape in flight, the second ceiling measurement and the final records.
    if selected bench-gemm; then
      left=$(( DEADLINE_S - $(elapsed) ))
      lim=$(( left < 200 ? left : 200 ))
      budget=${SOL_BENCH_GEMM_SECONDS:-120}
      (( budget > lim - 50 )) && budget=$(( lim > 60 ? lim - 50 : 10 ))
      run bench-gemm 200 env SOL_BENCH_GEMM_SECONDS="$budget" "$TESTS" bench_gemm
    fi
  fi
  # Kernels that have never run on a device, one step each after the proven tests and GEMM
  # table (a hang costs only its own step; its JIT programs, cached, serve the sweep below).
  for t in $(timeout 30 "$TESTS" --list-first-run 2>/dev/null); do
    run "first-run-$t" 150 "$TESTS" "$t"
  done
  if (( GPU_STEPS )); then
    # Forced sm90 configurations on representative shapes: the data the chooser is set from.
    run bench-gemm-sweep 150 env SOL_BENCH_GEMM_SWEEP=1 "$TESTS" bench_gemm_sweep
    # A full build's bench cases (`sol bench` through the registry, with their SOL% checks).
    full=$(timeout 30 "$TESTS" --list-benches 2>/dev/null | grep -E '^(bench_cases_on_device|gemm_bench_case_on_device)$' | paste -sd' ' -)
    if [[ -n "$full" ]]; then
      # shellcheck disable=SC2086
      run bench-cases 150 "$TESTS" $full
    elif selected bench-cases; then
      step bench-cases skipped "not in this build (full builds only: bench_cases_on_device, gemm_bench_case_on_device)"
    fi
  else
    step bench skipped "no GPU (would run $TESTS bench_copy_cast, bench_memory_bound, bench_gemm, bench_gemm_sweep)"
  fi

  # compute-sanitizer: probed once on a trivial run; if that fails ("Device not supported", no
  # driver support), every sanitizer step is skipped with its reason instead of failing one by one.
  SAN=unprobed
  sanitize() {  # sanitize NAME TOOL TEST [small]
    local name=$1 tool=$2 test=$3 small=${4:-}
    selected "$name" || return 0
    if [[ "$SAN" == unprobed ]]; then
      if (( DRY )); then SAN=ok
      elif (( DEADLINE_S - $(elapsed) < MIN_STEP_S )); then SAN="deadline"
      else
        CUR_STEP=sanitizer-probe
        local left=$(( DEADLINE_S - $(elapsed) ))
        launch $(( left < 60 ? left : 60 )) "$LOGS/sanitizer-probe.log" compute-sanitizer --tool memcheck --error-exitcode 1 "$TESTS" discovery
        local rc=$?
        if (( rc == 0 )); then SAN=ok
        else
          SAN="compute-sanitizer's probe (memcheck on the gpu test discovery) exit $rc: $(whole_lines "$LOGS/sanitizer-probe.log" | grep -v '^\s*$' | tail -1 | clean)"
          if grep -qi 'not supported' "$LOGS/sanitizer-probe.log"; then step sanitizer-probe skipped "$SAN"
          else step sanitizer-probe failed "$SAN"; fi
          report
        fi
      fi
    fi
    if [[ "$SAN" != ok && "$SAN" != deadline ]]; then step "$name" skipped "$SAN"; return 0; fi
    run "$name" 120 env ${small:+SOL_GPU_TEST_SMALL=1} compute-sanitizer --tool "$tool" --error-exitcode 1 "$TESTS" "$test"
  }
  if (( GPU_STEPS )) && { (( DRY )) || command -v compute-sanitizer > /dev/null; }; then
    for tool in memcheck racecheck; do
      sanitize "sanitizer-$tool" "$tool" copy_matches_host small
      sanitize "sanitizer-$tool-cast" "$tool" cast_matches_cpu_bit_for_bit small
    done
    # The memory-bound ops: memcheck on each; racecheck on softmax, the one that shares memory.
    for t in rope_matches_cpu_bit_for_bit softmax_matches_cpu_within_f32_rounding routing_matches_cpu_bit_for_bit \
             moe_permute_unpermute_match_cpu_bit_for_bit embedding_matches_cpu_bit_for_bit; do
      sanitize "sanitizer-memcheck-${t%%_*}" memcheck "$t" small
    done
    sanitize sanitizer-racecheck-softmax racecheck softmax_matches_cpu_within_f32_rounding small
    # The sm90 GEMMs' TMA-store epilogue (staging buffers written by the consumers, read by TMA)
    # and the fp8 consumers' issue turns: memcheck and racecheck on the small guarded shapes (the
    # JIT programs are cached by the gpu-tests step).
    for tool in memcheck racecheck; do
      sanitize "sanitizer-$tool-gemm-store" "$tool" sm90_gemm_tma_store_stays_inside_d
    done
    # The contiguous grouped GEMM reads grouped_layout on the device only: a bad layout (a value
    # past the experts, a run starting inside a tile) must make no access outside the operands.
    sanitize sanitizer-memcheck-grouped-layout memcheck sm90_grouped_gemm_bad_layout_is_reported
  elif [[ -z "$ONLY" || ",$ONLY," == *,sanitizer* ]]; then
    step sanitizers skipped "$( (( HAVE_GPU )) && echo 'compute-sanitizer not found' || echo 'no GPU')"
  fi

  if (( GPU_STEPS )); then run bench-torch 180 python3 -u scripts/device-check-torch.py
  elif selected bench-torch; then step bench-torch skipped "no GPU (would run python3 -u scripts/device-check-torch.py)"; fi

  # The CLI needs CLI11, fmt and MPI: a SOL_DEVICE_MINIMAL build has none, a carried full build
  # runs if its shared libraries are here. Without it the gpu tests `ceilings` and
  # `bench_cases_on_device` (full builds only) stand in for `sol hw` and `sol bench`.
  if selected sol-hw || selected sol-bench-copy || selected sol-bench-cast; then
    CLI=""
    where=$BUILD
    [[ "$BUILD" != "$CARRIED" ]] && where="$BUILD or $CARRIED"
    for candidate in "$BUILD/bin/sol" "$CARRIED/bin/sol"; do
      if [[ -x "$candidate" ]] && timeout 20 "$candidate" --help > /dev/null 2>&1; then CLI=$candidate; break; fi
    done
    if [[ -z "$CLI" ]]; then
      step sol-cli skipped "no runnable sol CLI in $where (the gpu tests ceilings and bench_cases_on_device stand in)"
    else
      run sol-hw 90 "$CLI" hw --json
      run sol-bench-copy 60 "$CLI" bench copy --device cuda --n 28M --dtype bf16 --json --min-time 0.1
      run sol-bench-cast 60 "$CLI" bench cast --device cuda --n 28M --from f32 --to bf16 --json --min-time 0.1
    fi
  fi
else
  step gpu-tests failed "no test binary${TESTS:+ at $TESTS} (see the build step)"
fi
exit 0  # finish (the EXIT trap) writes the reports and sets the status
