#include "kernels/engram_hash.h"

namespace sol::engram::detail {

void hash_row_scalar(const HashParams& p, const int32_t* ids, int64_t begin, int64_t end, int32_t* out) {
  const int heads = p.heads();
  for (int64_t t = begin; t < end; ++t) hash_token(p, ids, t, out + t * heads);
}

}  // namespace sol::engram::detail
