// Engram row sources (src/kernels/engram_rows.h): owner and address of every row, scalar and
// AVX-512 paths, against integer division — for splits from 1 row to 2^31 - 1 rows over 1 to 64
// owners, at the rows where the owner changes and at random rows. Addresses are computed, never
// dereferenced, so the tables need not exist.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/engram_rows.h"
#include "sol/hw.h"

namespace {

using sol::engram::detail::RowMap;

struct Split {
  RowMap map;
  std::vector<int64_t> begin;
  std::vector<uintptr_t> origin;
  Split(int64_t rows, int P, uint64_t row_bytes) {
    map.base = rows / P, map.extra = rows % P, map.split = map.extra * (map.base + 1);
    map.inv_big = 1.0 / double(map.base + 1);
    map.inv_base = map.base > 0 ? 1.0 / double(map.base) : 0;
    map.row_bytes = row_bytes;
    for (int r = 0; r <= P; ++r) begin.push_back(rows / P * r + std::min<int64_t>(r, rows % P));
    for (int r = 0; r < P; ++r)  // shards far apart, as separate mappings are
      origin.push_back((uintptr_t(r + 1) << 44) - uintptr_t(begin[size_t(r)]) * row_bytes);
    map.origin = origin.data();
  }
  int exact_owner(int64_t row) const { return int(std::upper_bound(begin.begin(), begin.end(), row) - begin.begin()) - 1; }
};

void expect_exact(const Split& s, const std::vector<int32_t>& idx, int64_t rows, int P) {
  const bool avx512 = sol::active_isa() >= sol::Isa::avx512;
  std::vector<const char*> scalar(idx.size()), vector(idx.size());
  sol::engram::detail::row_sources_scalar(s.map, idx.data(), int64_t(idx.size()), scalar.data());
  if (avx512) sol::engram::detail::row_sources_avx512(s.map, idx.data(), int64_t(idx.size()), vector.data());
  for (size_t i = 0; i < idx.size(); ++i) {
    const int o = s.exact_owner(idx[i]);
    const uintptr_t want = (uintptr_t(o + 1) << 44) + uintptr_t(idx[i] - s.begin[size_t(o)]) * 520;
    ASSERT_EQ(s.map.owner(idx[i]), o) << "rows " << rows << " ranks " << P << " row " << idx[i];
    ASSERT_EQ(reinterpret_cast<uintptr_t>(scalar[i]), want) << "scalar, rows " << rows << " ranks " << P;
    if (avx512) {
      ASSERT_EQ(reinterpret_cast<uintptr_t>(vector[i]), want) << "avx512, rows " << rows << " ranks " << P
                                                              << " row " << idx[i] << " at " << i;
    }
  }
}

// The reciprocal's rounding makes trunc(n * (1/d)) one short for some exact multiples: with
// d = 2045, n = 2143393130 = 2045 * 1048114 gives 1048113. 2^31 - 1 rows over 1050114 owners
// puts that quotient in the second block (base = 2045 rows per owner past the first 517).
TEST(EngramRowSources, ReciprocalRoundingCorrected) {
  const int64_t rows = (int64_t(1) << 31) - 1;
  const int P = 1050114;
  const Split s(rows, P, 520);
  ASSERT_EQ(s.map.base, 2045);
  const int64_t row = s.map.split + 2143393130;
  std::vector<int32_t> idx;
  for (int64_t d = -9; d <= 9; ++d) idx.push_back(int32_t(row + d));
  expect_exact(s, idx, rows, P);
}

TEST(EngramRowSources, OwnersAndAddressesExact) {
  const int64_t row_counts[] = {1, 2, 3, 7, 64, 1001, 4099, 1 << 20, (int64_t(1) << 31) - 1, 2147483000};
  const int ranks[] = {1, 2, 3, 4, 7, 8, 64};
  for (int64_t rows : row_counts)
    for (int P : ranks) {
      const Split s(rows, P, 520);
      std::vector<int32_t> idx;
      for (int r = 0; r < P; ++r)
        for (int64_t d : {-1, 0, 1})
          if (s.begin[size_t(r)] + d >= 0 && s.begin[size_t(r)] + d < rows) idx.push_back(int32_t(s.begin[size_t(r)] + d));
      idx.push_back(int32_t(rows - 1));
      uint64_t x = uint64_t(rows) * 31 + uint64_t(P);
      while (idx.size() < 203) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        idx.push_back(int32_t((x >> 33) % uint64_t(rows)));
      }
      expect_exact(s, idx, rows, P);
    }
}

}  // namespace
