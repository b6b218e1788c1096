// Engram row sources, one index at a time (kernels/engram_rows.h); the vector path's tail.
#include "kernels/engram_rows.h"

namespace sol::engram::detail {

void row_sources_scalar(const RowMap& m, const int32_t* idx, int64_t n, const char** sources) {
  for (int64_t i = 0; i < n; ++i)
    sources[i] = reinterpret_cast<const char*>(m.origin[m.owner(idx[i])] + uint64_t(idx[i]) * m.row_bytes);
}

}  // namespace sol::engram::detail
