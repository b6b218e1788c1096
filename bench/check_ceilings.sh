#!/usr/bin/env bash
# Cross-checks the ceilings `sol hw` measures against bench/ceilings_independent.cc, a separate
# hand-written benchmark (fp32 FMA, DRAM read and copy; one thread and all threads). The
# independent figures are the better of a run before and a run after Sol's, since neighbours
# on shared hosts slow runs down for seconds at a time. Any disagreement over 10% is flagged
# and makes the exit status 1.
#
#   bench/check_ceilings.sh            # uses build/bin/sol
#   SOL=path/to/sol BUILD_DIR=build-x bench/check_ceilings.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
sol=${SOL:-$build/bin/sol}
independent=$build/bin/ceilings_independent

[[ -x $sol ]] || { echo "check_ceilings: no sol CLI at $sol (build it, or set SOL)" >&2; exit 2; }
mkdir -p "$build/bin"
g++ -O2 -march=native -fopenmp "$root/bench/ceilings_independent.cc" -o "$independent"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "independent benchmark (before) ..." >&2
"$independent" >"$work/before.txt"
echo "sol hw --json --remeasure ..." >&2
"$sol" hw --json --remeasure >"$work/sol.json"
echo "independent benchmark (after) ..." >&2
"$independent" >"$work/after.txt"

python3 - "$work" <<'PY'
import json, sys

work = sys.argv[1]
independent = {}
for name in ("before.txt", "after.txt"):
    for line in open(f"{work}/{name}"):
        unit, threads, value = line.split()
        key = (unit, int(threads))
        independent[key] = max(independent.get(key, 0.0), float(value))

profile = json.load(open(f"{work}/sol.json"))
ceilings = {c["unit"]: c for c in profile["ceilings"]}
scale = {"fma_f32": (1e9, "GFLOP/s"), "mem_read": (1e9, "GB/s"), "mem_copy": (1e9, "GB/s")}

print(f"{profile['cpu_model']}, {profile['cores']} CPUs")
print(f"{'unit':<10} {'threads':>7} {'sol':>10} {'independent':>12} {'ratio':>7}  unit")
flagged = 0
for (unit, threads), theirs in sorted(independent.items()):
    c = ceilings.get(unit)
    if c is None or not c["available"]:
        print(f"{unit:<10} {threads:>7}  sol reports it unavailable: {c and c['note']}")
        flagged += 1
        continue
    if threads == 1:
        ours = c["one_thread"]
    elif threads == c["threads"]:
        ours = c["all_threads"]
    else:
        print(f"{unit:<10} {threads:>7}  skipped: sol measured all threads as {c['threads']}")
        continue
    div, label = scale[unit]
    ratio = ours / theirs
    flag = ""
    if abs(ratio - 1) > 0.10:
        flag = "  <-- disagree by more than 10%"
        flagged += 1
    print(f"{unit:<10} {threads:>7} {ours / div:>10.1f} {theirs / div:>12.1f} {ratio:>7.2f}"
          f"  {label}{flag}")
sys.exit(1 if flagged else 0)
PY
