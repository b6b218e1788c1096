#!/usr/bin/env bash
# scripts/device-check.sh --dry-run on this machine: every step reports, the gpu tests of the
# build run (and skip with discovery's reason without a GPU), and both reports are written.
set -eu
SRC=$1 BUILD=$2
OUT=$(mktemp -d) LOGS=$(mktemp -d)
trap 'rm -rf "$OUT" "$LOGS"' EXIT
cd "$SRC"
OUT=$OUT SOL_DEVICE_CHECK_LOGS=$LOGS SOL_BUILD_DIR=$BUILD bash scripts/device-check.sh --dry-run
python3 - "$OUT/device-check.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
steps = {s["step"]: s for s in r["steps"]}
assert r["dry_run"] == 1, r
for name in ("machine", "build", "gpu-tests"):
    assert name in steps, (name, steps)
gpu = steps["gpu-tests"]
assert gpu["status"] in ("ok", "skipped"), gpu
if gpu["status"] == "skipped":
    assert "no CUDA device" in gpu["detail"], gpu
# A dry run names every GPU step with what it would run: the GEMM table in its own step, the
# gpu-tests step without the benches.
assert "bench_gemm" in steps["bench-gemm"]["detail"], steps["bench-gemm"]
assert steps["bench-gemm"]["status"] == "skipped", steps["bench-gemm"]
assert any(n.startswith("sanitizer-") for n in steps), steps
assert r["state"] == "complete", r
print("dry run steps:", ", ".join(f'{s["step"]}={s["status"]}' for s in r["steps"]))
PY
grep -q "| gpu-tests |" "$OUT/device-check.md"
grep -q "^GEMM table" "$OUT/device-check.md"
test -f "$OUT/gemm.jsonl"
# Everything comes back as one archive too; $OUT holds nothing else.
tar tzf "$OUT/device-check.tgz" | grep -q 'gpu-tests.log'
test "$(ls "$OUT" | wc -l)" -eq 4
