#pragma once
// Where each looked-up row lies: rows are split in blocks across ranks (the first `extra` ranks
// hold base + 1 rows, the rest base), and origin[o] is where row 0 would lie if owner o's shard
// extended down to it, so row r of owner o is at origin[o] + r * row_bytes (wrapping integer
// arithmetic; only real rows are ever dereferenced).
//
// The owner's quotient is trunc(n * fl(1/d)) in doubles, raised by one where it fell short (a
// 64-bit division per index cost a third as much as copying a 512-byte row). For n, d < 2^31
// the product is within n * 2^-52 < 2^-21 of n / d: it can never reach the next integer from
// below (that needs a distance of at least 1/d > 2^-31 covered by an error that small only
// when n >= 2^52), but it can round to just under an exact quotient: n = 2143393130 = 2045 *
// 1048114 gives 1048113.99999999... (tests/engram/test_row_sources.cc). So one upward check.
#include <cstdint>

namespace sol::engram::detail {

struct RowMap {
  int64_t base = 0, extra = 0, split = 0;  // split = extra * (base + 1)
  double inv_big = 0, inv_base = 0;        // 1 / (base + 1), 1 / base (0 when base = 0)
  const uintptr_t* origin = nullptr;       // per owner
  uint64_t row_bytes = 0;

  static int64_t quotient(int64_t n, int64_t d, double inv) {
    const int64_t q = int64_t(double(n) * inv);
    return (q + 1) * d <= n ? q + 1 : q;
  }
  int owner(int64_t row) const {
    if (row < split) return int(quotient(row, base + 1, inv_big));
    return int(extra + quotient(row - split, base, inv_base));
  }
};

// sources[i] = address of row idx[i], i in [0, n); every idx[i] must be a row of the table.
void row_sources_scalar(const RowMap& m, const int32_t* idx, int64_t n, const char** sources);
void row_sources_avx512(const RowMap& m, const int32_t* idx, int64_t n, const char** sources);

}  // namespace sol::engram::detail
