#!/usr/bin/env bash
# Reliability of comm under real failures: a rank that never arrives, ranks that disagree, and
# a rank killed with SIGKILL in the middle of collectives. Every surviving rank must report a
# CommError that names the op and the peer within the timeout, and /dev/shm must hold no Sol
# segment afterwards.
set -u
prog=$1
export SOL_COMM_TIMEOUT_S=2 SOL_NUM_THREADS=1
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
shm_clean() { ! ls /dev/shm 2>/dev/null | grep -q "^sol-comm\.$1\."; }
# Under the sanitizer build a finding goes to the log, and mpirun's exit code is not what these
# cases check: look for the reports themselves.
sanitizer_clean() {  # sanitizer_clean NAME (reads $log)
  local pattern="ERROR: [A-Za-z]*Sanitizer\|runtime error:"
  if grep -q "$pattern" "$log"; then fail "$1: sanitizer report"; grep -A30 "$pattern" "$log" | head -60; fi
}

# timeout: rank 0 waits for rank 1, which sleeps past the deadline.
timeout 60 "${mpirun[@]}" -np 2 "$prog" timeout >"$log" 2>&1
sanitizer_clean timeout
grep -q "rank 0 CAUGHT CommError: allreduce: timed out after .* waiting for rank 1" "$log" ||
  fail "timeout: no CommError naming allreduce and rank 1"
grep "CAUGHT" "$log"

# mismatch: both ranks see that the other called with another size.
timeout 60 "${mpirun[@]}" -np 2 "$prog" mismatch >"$log" 2>&1
sanitizer_clean mismatch
for r in 0 1; do
  grep -q "rank $r CAUGHT CommError: allreduce: ranks disagree" "$log" || fail "mismatch: rank $r did not report it"
done
grep "CAUGHT" "$log"

# nodes: the emulated nodes disagree on the size; each node agrees with itself, so only the
# cross-node messages show it, and every rank must say so instead of returning.
timeout 60 "${mpirun[@]}" -np 4 -x SOL_LOCAL_SIZE=2 "$prog" nodes >"$log" 2>&1
sanitizer_clean nodes
grep -q "NOT CAUGHT" "$log" && fail "nodes: an allreduce returned"
for r in 0 1 2 3; do
  grep -q "rank $r CAUGHT CommError: allreduce: .*cross-node" "$log" || fail "nodes: rank $r did not report it"
done
grep "CAUGHT" "$log"

# dtype and op order: the disagreement is named, not computed with.
timeout 60 "${mpirun[@]}" -np 2 "$prog" dtype >"$log" 2>&1
sanitizer_clean dtype
grep -q "rank 1 CAUGHT CommError: allreduce: ranks disagree.*dtype f32.*dtype bf16" "$log" || fail "dtype: rank 1 did not name both dtypes"
grep "CAUGHT" "$log"
timeout 60 "${mpirun[@]}" -np 3 "$prog" order >"$log" 2>&1
sanitizer_clean order
grep -q "rank 0 CAUGHT CommError: allreduce: ranks disagree.*called all_gather" "$log" || fail "order: rank 0 did not name all_gather"
grep -q "rank 2 CAUGHT CommError: all_gather: ranks disagree.*called allreduce" "$log" || fail "order: rank 2 did not name allreduce"
grep "CAUGHT" "$log"

# p2p tags: a message of another size for the tag, and a tag nobody sends (the timeout names
# what did arrive).
timeout 60 "${mpirun[@]}" -np 2 "$prog" tag_size >"$log" 2>&1
sanitizer_clean tag_size
grep -q "rank 1 CAUGHT CommError: recv: rank 0 sent 64 bytes with tag 5 but .* expects 32 bytes" "$log" ||
  fail "tag_size: rank 1 did not report the size"
grep "CAUGHT" "$log"
timeout 60 "${mpirun[@]}" -np 2 "$prog" tag_none >"$log" 2>&1
sanitizer_clean tag_none
grep -q "rank 1 CAUGHT CommError: recv: timed out .* waiting for rank 0.*tag 2.*unmatched: tag 1 (64 bytes)" "$log" ||
  fail "tag_none: rank 1 did not name the tags"
grep "CAUGHT" "$log"

# fence: a window fence that one rank never starts ends in a CommError naming it and the fence.
timeout 60 "${mpirun[@]}" -np 2 "$prog" fence >"$log" 2>&1
sanitizer_clean fence
grep -q "rank 0 CAUGHT CommError: window fence: timed out after .* waiting for rank 1 .*: it to start fence 1 (it has started 0)" "$log" ||
  fail "fence: no CommError naming the window fence and rank 1"
grep "CAUGHT" "$log"

# kill: SIGKILL rank 1 in the middle of a stream of 4 MiB allreduces, within one node (3 ranks)
# and across two emulated nodes (4 ranks: the survivors wait in shared memory and in MPI).
ms() { echo $(($(date +%s%N) / 1000000)); }
kill_test() {  # kill_test NAME MPIRUN-ARGS...
  local name=$1; shift
  # Empty the log here, not by the job's redirection: that runs in the forked job, maybe after
  # the pid loop below has already read the previous case's "rank 1 pid" from it (then a long
  # gone pid was "killed" and the job ran to the 60 s timeout).
  : >"$log"
  timeout 60 "${mpirun[@]}" "$@" "$prog" kill >>"$log" 2>&1 &
  local job=$!
  for _ in $(seq 300); do grep -q "rank 1 pid" "$log" && break; sleep 0.1; done
  local victim pids start took
  victim=$(sed -n 's/^rank 1 pid \([0-9]*\)$/\1/p' "$log")
  if [ -z "$victim" ]; then  # nothing to kill: say so rather than time a kill never sent
    local rc=0
    if kill -0 $job 2>/dev/null; then
      wait $job || rc=$?
      fail "$name: rank 1 did not report its pid within 30 s (the job was still starting: a loaded machine), exit $rc"
    else
      wait $job || rc=$?
      fail "$name: the job ended (exit $rc) before rank 1 reported its pid"
    fi
    tail -n 40 "$log" | sed "s/^/  $name log: /"
    return
  fi
  sleep 0.5
  pids=$(sed -n 's/^rank [0-9] pid \([0-9]*\)$/\1/p' "$log")
  start=$(ms)
  local gone=0
  kill -9 "$victim" 2>/dev/null || gone=1
  wait $job
  took=$(($(ms) - start))
  sanitizer_clean "$name"
  echo "$name: job ended ${took} ms after SIGKILL"
  grep "CAUGHT" "$log"
  [ $gone = 0 ] || fail "$name: rank 1 (pid $victim) had exited before the SIGKILL"
  [ "$took" -lt $(((SOL_COMM_TIMEOUT_S + 10) * 1000)) ] || fail "$name: the job took ${took} ms to end"
  # What every rank and mpirun said, when the case failed: a rank that ends on its own or a
  # survivor that never reports leaves no other trace.
  [ $gone = 0 ] && [ "$took" -lt $(((SOL_COMM_TIMEOUT_S + 10) * 1000)) ] || tail -n 60 "$log"
  grep -q "NOT CAUGHT" "$log" && fail "$name: a collective returned"
  grep -q "CAUGHT CommError: [a-z_]*: .*rank 1 .*exited\|CAUGHT CommError: [a-z_]*: timed out" "$log" ||
    echo "note: mpirun ended every survivor before one reported"
  for p in $pids; do shm_clean "$p" || fail "$name: /dev/shm still holds segments of pid $p"; done
}
kill_test "kill (2 ranks)" -np 2
kill_test "kill (3 ranks, one node)" -np 3
kill_test "kill (4 ranks, two nodes)" -np 4 -x SOL_LOCAL_SIZE=2

[ $failures = 0 ] && echo "failure tests passed" || echo "$failures failure test(s) failed"
exit $failures
