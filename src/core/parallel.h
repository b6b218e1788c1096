#pragma once
// Static partition of a 1-D range over Sol's threads: thread t gets one contiguous piece,
// boundaries rounded to `grain` so pieces start on cache-line (or page) boundaries.
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "sol/threads.h"

namespace sol {

template <class Fn>
void parallel_ranges(int64_t n, int64_t grain, Fn&& fn) {
  int threads = int(std::min<int64_t>(num_threads(), std::max<int64_t>(1, n / std::max<int64_t>(grain, 1))));
  if (threads <= 1) {
    if (n > 0) fn(int64_t(0), n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    auto bound = [&](int i) { return std::min(n, (n * i / nt + grain - 1) / grain * grain); };
    int64_t begin = t == 0 ? 0 : bound(t), end = t + 1 == nt ? n : bound(t + 1);
    if (end > begin) fn(begin, end);
  }
}

}  // namespace sol
