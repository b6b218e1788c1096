#!/usr/bin/env bash
# scripts/device-check.sh --dry-run on this machine: every step reports, the gpu tests of the
# build run (and skip with discovery's reason without a GPU), and both reports are written.
set -eu
SRC=$1 BUILD=$2
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cd "$SRC"
OUT=$OUT SOL_BUILD_DIR=$BUILD bash scripts/device-check.sh --dry-run
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
# Without a GPU the bench step names what it would run, the GEMM table among it.
assert "bench_gemm" in steps["bench"]["detail"], steps["bench"]
print("dry run steps:", ", ".join(f'{s["step"]}={s["status"]}' for s in r["steps"]))
PY
grep -q "| gpu-tests |" "$OUT/device-check.md"
grep -q "^GEMM table" "$OUT/device-check.md"
test -f "$OUT/gemm.jsonl"
