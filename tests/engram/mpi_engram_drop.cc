// A lookup handle dropped after its wait() failed must not wait again. Rank 1 starts an async
// lookup with rank 0 (its opening fence needs every rank) and then sleeps past the deadline
// without finishing it; rank 0's wait() times out at the closing fence naming rank 1, and
// destroying its handle must then return at once instead of spending another
// SOL_COMM_TIMEOUT_S on the same dead lookup. One node (the one-sided path): across nodes the
// rows travel as MPI messages that Open MPI may complete without rank 1's help, so whether
// rank 0's wait fails there is a race. Output (rank 0): "CAUGHT CommError: ..." then "dropped
// the failed handle in S s: ok" or "...: FAIL (waited again)". Run with 2 ranks.
#include <unistd.h>

#include <cstdio>
#include <optional>

#include "sol/comm.h"
#include "sol/engram.h"
#include "sol/timing.h"

using namespace sol;

int main() {
  const comm::Group& world = comm::Group::world();
  const int me = world.rank();
  const double limit = comm::timeout_seconds();
  const int64_t rows = 64, dim = 8, tokens = 4, heads = 2;
  engram::ShardedTable table(world, rows, dim, DType::f32);
  Buffer idx(DType::i32, {tokens, heads}), out(DType::f32, {tokens, heads, dim});
  for (int64_t i = 0; i < tokens * heads; ++i) idx.tensor().data_as<int32_t>()[i] = int32_t(i * 7 % rows);
  if (me != 0) {
    engram::LookupHandle h = table.lookup_async(idx.tensor(), out.tensor());
    ::sleep(unsigned(limit * 3 + 1));
    return 0;
  }
  std::optional<engram::LookupHandle> h(table.lookup_async(idx.tensor(), out.tensor()));
  try {
    h->wait();
    std::printf("rank 0: NOT CAUGHT: wait() returned\n");
  } catch (const CommError& e) {
    std::printf("rank 0 CAUGHT CommError: %s\n", e.what());
  }
  const double start = now_seconds();
  h.reset();
  const double took = now_seconds() - start;
  const bool ok = took < limit / 2;
  std::printf("rank 0 dropped the failed handle in %.3f s: %s\n", took, ok ? "ok" : "FAIL (waited again)");
  std::fflush(stdout);
  // A failed rank exits without MPI_Finalize and mpirun then ends the job (rank 1 included).
  return ok ? 0 : 1;
}
