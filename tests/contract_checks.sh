# Sourced by the scripts that test a contract through the real sol binary (tests/cli/contract.sh,
# tests/comm/bench_contract.sh): the failure count and the checks that feed it. The sourcing
# script sets $tmp, a scratch folder, first; expect_rc leaves the command's output in $tmp/out
# and $tmp/err for the greps that follow it.
failures=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
# expect_rc WANT NAME CMD...: on a wrong exit code, shows the last $err_lines lines of the
# command's stderr (all of it when err_lines is unset).
expect_rc() {
  local want=$1 name=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" = "$want" ]; then pass "$name (rc $rc)"; else fail "$name: rc $rc, want $want"; tail -n "${err_lines:-+1}" "$tmp/err"; fi
}
