// The put ceiling of `sol comm bench ep-dispatch | ep-ll-dispatch` (see ep_ceiling.h).
#include "comm/bench/ep_ceiling.h"

#include <mpi.h>

#include <algorithm>
#include <vector>

#include "comm/group_state.h"
#include "ops/common/copy_bytes.h"
#include "ops/common/streaming.h"
#include "sol/timing.h"

namespace sol::comm {

double ep_put_ceiling(const Group& group, int64_t rows, int64_t row_bytes, int fanout, int iters, int batches) {
  const Group& local = group.local();
  detail::GroupState& s = local.state();
  fanout = std::max(fanout, 1);
  const size_t written = size_t(rows) * size_t(row_bytes) * size_t(fanout);
  std::vector<std::byte> source(size_t(rows) * size_t(row_bytes), std::byte{0x5A});
  auto* dst = static_cast<std::byte*>(local.heap_alloc(std::max<size_t>(written, 1)));
  const int peer = (s.rank + 1) % s.size;
  std::byte* peer_dst = s.shm->base(peer) + (dst - s.shm->base(s.rank));
  const Isa isa = active_isa();
  const bool stream = should_stream(int64_t(written));  // as the dispatch decides
  std::vector<double> per_batch;
  for (int b = 0; b < std::max(batches, 1); ++b) {
    local.barrier();
    const double start = now_seconds();
    for (int i = 0; i < iters; ++i)
      for (int64_t r = 0; r < rows; ++r)
        for (int f = 0; f < fanout; ++f)
          copy_bytes(isa, peer_dst + (r * fanout + f) * row_bytes, source.data() + r * row_bytes, row_bytes, stream);
    const double mine = (now_seconds() - start) / iters;
    double slowest = 0;
    local.barrier();
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, s.comm);
    per_batch.push_back(slowest);
  }
  local.barrier();
  local.heap_reset();
  std::sort(per_batch.begin(), per_batch.end());
  const double t = per_batch[per_batch.size() / 2];
  double rate = t > 0 ? double(written) / t : 0, lowest = 0;
  MPI_Allreduce(&rate, &lowest, 1, MPI_DOUBLE, MPI_MIN, group.state().comm);
  return lowest;
}

}  // namespace sol::comm
