# Bad input found by hand and by fuzz/ (issue 26), through the real binary: each ends with a
# message naming the file, line or argument and exit 2, never a crash, "internal error" or a
# silent wrong answer. Sourced by contract.sh ($sol, $tmp, expect_rc, pass, fail).
clean_error() {  # NAME WANT-IN-STDERR: exit 2 was checked; the message names it, no internal error
  grep -q -- "$2" "$tmp/err" && ! grep -q "internal error" "$tmp/err" && pass "$1 names it" \
    || { fail "$1 names it"; cat "$tmp/err"; }
}

# An op with no work has no SOL% (it printed 405% and "the ceiling is wrong").
expect_rc 0 "gemm --m 0" "$sol" bench gemm --m 0 --n 256 --k 256 --no-pair --min-time 0.01 --json
python3 - "$tmp/out" <<'PY' && pass "gemm --m 0: sol_pct null" || fail "gemm --m 0: sol_pct null"
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["sol_pct"] is None and r["sol_pct_cached"] is None and r["sol_over_100"] is False, r
PY
expect_rc 0 "softmax --tokens 0" "$sol" bench softmax --tokens 0 --no-pair --min-time 0.01
grep -q "tokens=0 .* - " "$tmp/out" && ! grep -q "WARNING" "$tmp/err" && pass "no-work SOL% prints -" \
  || fail "no-work SOL% prints -"

# The tile compiler: nesting past the parser's limits, huge tiles and unrolls, bad bytes.
python3 -c "print('kernel k(X: f32[N]) grid(b = N) {\n  alloc t: fragment f32[4]\n  parallel i in t {\n    t[i] = ' + '(' * 30000 + '1.0' + ')' * 30000 + '\n  }\n}')" >"$tmp/deep.tile"
expect_rc 2 "compile: 30000 nested parentheses" "$sol" compile "$tmp/deep.tile"
clean_error "compile: 30000 nested parentheses" "deep.tile:4: expressions nest deeper than 200 levels"
printf 'kernel k(X: f32[N]) grid(b = N) {\n  alloc t: fragment f32[4294967296, 4294967296]\n  copy X[0] -> t\n}\n' >"$tmp/big.tile"
expect_rc 2 "compile: a 2^64-element tile" "$sol" compile "$tmp/big.tile" --emit cpp
clean_error "compile: a 2^64-element tile" "kernel k, line 2: tile t .* 64 MiB"
expect_rc 2 "bench tile-program: a 2^64-element tile" "$sol" bench tile-program --file "$tmp/big.tile" --dims N=64
clean_error "bench tile-program: a 2^64-element tile" "64 MiB"
printf 'kernel k(X: f32[N]) grid(b = N) {\n  alloc t: fragment f32[4]\n  for i in 0 .. 1000000000 unroll {\n    fill t, 1.0\n  }\n}\n' >"$tmp/unroll.tile"
expect_rc 2 "compile: unroll 10^9" "$sol" compile "$tmp/unroll.tile"
clean_error "compile: unroll 10^9" "line 3: unroll of 1000000000 iterations"
printf 'kernel k(X: f32[N]) grid(b = N) {\n  alloc t: fragment f32[4]\n  fill t, 1.0 \000\303\n}\n' >"$tmp/nul.tile"
expect_rc 2 "compile: a NUL byte" "$sol" compile "$tmp/nul.tile"
clean_error "compile: a NUL byte" "nul.tile:3: unexpected character '\\\\x00'"
expect_rc 2 "compile: a directory" "$sol" compile "$tmp"
clean_error "compile: a directory" "is a directory"

# The model's JSON: integers past 32 bits, numbers past a double, a directory.
printf '{"name": "p", "devices": 8, "dp": 8, "micro_batches": 4294967296}' >"$tmp/mb.json"
expect_rc 2 "model: micro_batches 2^32" "$sol" model --model llama-3-70b --hw h100 --plan "$tmp/mb.json" \
  --workload pretrain-4k-small
clean_error "model: micro_batches 2^32" "mb.json: key 'micro_batches'"
printf '{"name": "p", "devices": 1, "dp": 4294967297}' >"$tmp/dp.json"
expect_rc 2 "model: dp 2^32 + 1" "$sol" model --model llama-3-70b --hw h100 --plan "$tmp/dp.json"
clean_error "model: dp 2^32 + 1" "dp.json: key 'dp'"
sed 's/"bandwidth_gb_s": 3350/"bandwidth_gb_s": 1e400/' "$(dirname "${BASH_SOURCE[0]}")/../../hardware/h100.json" >"$tmp/hw.json"
expect_rc 2 "model: 1e400" "$sol" model --model llama-3-70b --hw "$tmp/hw.json"
clean_error "model: 1e400" "hw.json: not valid JSON.*number overflow"
expect_rc 2 "model: --model DIRECTORY" "$sol" model --model "$tmp" --hw h100
clean_error "model: --model DIRECTORY" "is a directory, not a JSON file"
expect_rc 2 "model sweep: tp 1.5" "$sol" model sweep --param tp --values 1.5 --model llama-3-70b --hw h100
# A bad value fails its own row (the row says why) and, with no other row, the sweep.
clean_error "model sweep: tp 1.5" "no value of --param tp gave a prediction"
grep -q -- "--param tp: expected an integer" "$tmp/out" && pass "model sweep: tp 1.5 row names it" \
  || { fail "model sweep: tp 1.5 row names it"; cat "$tmp/out"; }

# Bytes of the command line are echoed printable.
expect_rc 2 "bench: a control byte in an op name" "$sol" bench "$(printf 'co\001py')"
clean_error "bench: a control byte in an op name" "unknown op 'co\\\\x01py'"
