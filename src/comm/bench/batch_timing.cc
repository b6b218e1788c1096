// The comm bench's batch timing (batch_timing.h).
#include "comm/bench/batch_timing.h"

#include <algorithm>
#include <vector>

#include "comm/bench/agree.h"
#include "sol/timing.h"

namespace sol::comm::detail {

double time_batches(const Group& g, const std::function<void()>& run, int iters, int batches) {
  std::vector<double> per_batch;
  for (int b = 0; b < batches; ++b) {
    g.barrier();
    const double start = now_seconds();
    for (int i = 0; i < iters; ++i) run();
    per_batch.push_back(max_over(g, (now_seconds() - start) / iters));
  }
  std::sort(per_batch.begin(), per_batch.end());
  return per_batch[per_batch.size() / 2];
}

}  // namespace sol::comm::detail
