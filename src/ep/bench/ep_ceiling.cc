// The put ceiling of `sol comm bench ep-dispatch | ep-ll-dispatch` (see ep_ceiling.h).
#include "ep/bench/ep_ceiling.h"


#include <algorithm>
#include <vector>

#include "comm/bench/ceiling_batches.h"
#include "comm/group_state.h"
#include "hw/kernel_select.h"
#include "kernels/move_bytes.h"
#include "hw/streaming.h"
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
  const kernels::MoveKernels& mk = select_kernels(kernels::move_kernel_table(), "ep ceiling");
  const bool stream = should_stream(int64_t(written));  // as the dispatch decides
  return median_round_rate(group, double(written), iters, batches, [&] {
    for (int64_t r = 0; r < rows; ++r)
      for (int f = 0; f < fanout; ++f)
        mk.copy(peer_dst + (r * fanout + f) * row_bytes, source.data() + r * row_bytes, row_bytes, stream, /*fence=*/true);
    return true;
  });
}

}  // namespace sol::comm
