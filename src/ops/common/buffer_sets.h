#pragma once
// Input/output buffer sets for benchmark cases. Cold mode allocates enough sets that their
// combined size exceeds `cold_bytes`, so rotating through them defeats the caches.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "sol/tensor.h"

namespace sol {

inline int sets_for(int64_t bytes_per_set, int64_t cold_bytes) {
  if (cold_bytes <= 0 || bytes_per_set <= 0) return 1;
  // The count is bounded by bytes, not by a fixed number: a 16-row decode case needs hundreds.
  return int(std::min<int64_t>(4096, (cold_bytes + bytes_per_set - 1) / bytes_per_set));
}

}  // namespace sol
