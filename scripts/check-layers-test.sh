#!/usr/bin/env bash
# The layer check on planted trees: an upward include (kernels -> ops, ops -> comm through a
# public header) must fail it and be named; downward includes and the same layer must pass.
set -u
script="$(cd "$(dirname "$0")" && pwd)/check-layers.py"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/src/kernels" "$root/src/ops/norm" "$root/include/sol"
printf '#include "sol/dtype.h"\n' > "$root/src/kernels/row.h"
printf '#include "kernels/row.h"\n#include "ops/norm/other.h"\n' > "$root/src/ops/norm/op.cc"
printf '#pragma once\n' > "$root/src/ops/norm/other.h"
printf '#pragma once\n' > "$root/include/sol/dtype.h"
python3 "$script" "$root" > "$root/clean.txt" || { echo "FAIL: a clean tree was rejected"; cat "$root/clean.txt"; exit 1; }

printf '#include "ops/norm/other.h"\n' >> "$root/src/kernels/row.h"
if python3 "$script" "$root" > "$root/up.txt"; then echo "FAIL: kernels -> ops passed"; exit 1; fi
grep -q 'src/kernels/row.h:2: kernels includes ops/norm/other.h (ops)' "$root/up.txt" ||
  { echo "FAIL: the upward include is not named"; cat "$root/up.txt"; exit 1; }

printf '#include "sol/dtype.h"\n' > "$root/src/kernels/row.h"
printf '#pragma once\n' > "$root/include/sol/comm.h"
printf '#include "sol/comm.h"\n' >> "$root/src/ops/norm/op.cc"
if python3 "$script" "$root" > "$root/up2.txt"; then echo "FAIL: ops -> sol/comm.h passed"; exit 1; fi
grep -q 'ops includes sol/comm.h (comm)' "$root/up2.txt" || { echo "FAIL: not named"; cat "$root/up2.txt"; exit 1; }
echo "PASS"
