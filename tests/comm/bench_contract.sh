#!/usr/bin/env bash
# The contract of `sol comm bench` (DESIGN.md §6) through the real binary under mpirun: exit
# codes, the JSON record's fields, nccl-tests bus factors, #wrong = 0 for every op. Skipped
# (77) while the binary lacks the comm subcommand.
set -u
sol=$1
"$sol" --help 2>&1 | grep -q "^  comm " || { echo "sol has no comm subcommand: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME=$tmp/cache SOL_COMM_TIMEOUT_S=30
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
source "$(dirname "$0")/../contract_checks.sh"
err_lines=5
quick=(--min-bytes 8 --max-bytes 64K --factor 32 --iters 3 --batches 1)

expect_rc 2 "unknown op" "$sol" comm bench nosuchop
expect_rc 2 "bad size" "$sol" comm bench allreduce --max-bytes 12q
grep -q -- "--max-bytes" "$tmp/err" && pass "bad size names --max-bytes" || fail "bad size names --max-bytes"
expect_rc 2 "i8 cannot be reduced" "${mpirun[@]}" -np 2 "$sol" comm bench allreduce --dtype i8 "${quick[@]}"
grep -q "i8 cannot be reduced" "$tmp/err" && pass "the dtype is named" || fail "the dtype is named"

expect_rc 0 "allreduce --json --anchor mpi" "${mpirun[@]}" -np 3 "$sol" comm bench allreduce --json --anchor mpi "${quick[@]}"
python3 - "$tmp/out" <<'PY' && pass "records have every field, exact bus factor, no wrong values" || fail "allreduce records"
import json, sys
records = json.load(open(sys.argv[1]))
assert len(records) == 3, records
for r in records:
    for k in ("op", "bytes", "count", "dtype", "ranks", "time_s", "algbw", "busbw", "ceiling_gbps", "sol_pct", "wrong"):
        assert k in r, k
    assert r["op"] == "allreduce" and r["ranks"] == 3 and r["wrong"] == 0 and r["anchor_mpi"]["wrong"] == 0
    assert r["time_s"] > 0 and r["busbw"] > 0, r  # the batch timer (batch_timing.h) timed something
    assert abs(r["busbw"] - r["algbw"] * 4 / 3) <= 1e-9 * max(1, r["busbw"]), r
    assert r["ceiling_gbps"] > 0 and abs(r["sol_pct"] - 100 * r["busbw"] / r["ceiling_gbps"]) < 1e-6 * max(1, r["sol_pct"])
PY

for op in reduce_scatter all_gather all_to_all all_to_all_v broadcast sendrecv; do
  expect_rc 0 "$op" "${mpirun[@]}" -np 2 "$sol" comm bench "$op" --json "${quick[@]}"
  python3 -c "import json,sys; rs=json.load(open(sys.argv[1])); assert rs and all(r['wrong']==0 for r in rs)" "$tmp/out" \
    && pass "$op: no wrong values" || fail "$op: records"
done
expect_rc 0 "bf16 max, private buffers, two emulated nodes" env SOL_LOCAL_SIZE=2 "${mpirun[@]}" -np 4 -x SOL_LOCAL_SIZE \
  "$sol" comm bench allreduce --dtype bf16 --reduce max --private "${quick[@]}"
grep -q "4 ranks on 2 node(s)" "$tmp/out" && pass "table names ranks and nodes" || fail "table header"

# `sol hw` carries the inter-process copy ceiling (forked ranks, no mpirun), cached per machine.
expect_rc 0 "sol hw --json" "$sol" hw --json
python3 -c "
import json,sys
rows=json.load(open(sys.argv[1]))['interprocess_copy']
assert any(r['ranks']==2 and r['bytes']==16<<20 and r['gbps']>0 for r in rows), rows" "$tmp/out" \
  && pass "sol hw reports the 2-rank copy ceiling at 16 MiB" || fail "sol hw interprocess_copy"
[ -s "$XDG_CACHE_HOME/sol/comm_ceiling.json" ] && pass "the ceiling is cached" || fail "no comm_ceiling.json"

[ $failures = 0 ] && echo "comm bench contract passed" || echo "$failures check(s) failed"
exit $failures
