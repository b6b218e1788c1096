#include "ops/common/fill.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/parallel.h"
#include "ops/common/splitmix.h"
#include "sol/error.h"

namespace sol {

namespace {
// Uniform in [-1, 1), a pure function of (seed, i) so threads need no shared state.
double uniform(uint64_t seed, int64_t i) {
  return double(splitmix64(seed * 0x100000001B3ull + uint64_t(i)) >> 11) * 0x1p-52 - 1.0;
}

double special_value(DType t, uint64_t r) {
  double inf = std::numeric_limits<double>::infinity();
  double biggest = t == DType::f8e4m3 ? 448.0 : t == DType::f8e5m2 ? 57344.0
                 : t == DType::f16 ? 65504.0 : 3.0e38;
  double tiny = t == DType::f8e4m3 ? 0x1p-9 : t == DType::f8e5m2 ? 0x1p-16
              : t == DType::f16 ? 0x1p-24 : t == DType::bf16 ? 0x1p-133 : 0x1p-149;
  const double choices[] = {0.0, -0.0, inf, -inf, std::nan(""), tiny, -3 * tiny, biggest,
                            -biggest, 1.0};
  return choices[r % (sizeof(choices) / sizeof(choices[0]))];
}

void require_contiguous(const Tensor& t, const char* who) {
  check(t.is_contiguous(), who, "tensor ", describe_text(t), " must be contiguous");
}
}  // namespace

void fill_random(const Tensor& t, uint64_t seed, double scale) {
  require_contiguous(t, "fill_random");
  // f32 and bf16 (most benchmark inputs, hundreds of MB) skip the generic per-element switch.
  parallel_ranges(t.numel(), 4096, [&](int64_t b, int64_t e) {
    if (t.dtype() == DType::f32) {
      for (int64_t i = b; i < e; ++i) t.data_as<float>()[i] = float(scale * uniform(seed, i));
    } else if (t.dtype() == DType::bf16) {
      for (int64_t i = b; i < e; ++i) t.data_as<uint16_t>()[i] = f32_to_bf16(float(scale * uniform(seed, i)));
    } else {
      for (int64_t i = b; i < e; ++i) store_from_double(t.data(), t.dtype(), size_t(i), scale * uniform(seed, i));
    }
  });
}

void fill_random_with_specials(const Tensor& t, uint64_t seed, int every) {
  fill_random(t, seed);
  check(every >= 1, "fill_random_with_specials", "every = ", every, " but must be >= 1");
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint64_t r = splitmix64(seed ^ (uint64_t(i) * 0x2545F4914F6CDD1Dull));
    if (r % uint64_t(every) == 0)
      store_from_double(t.data(), t.dtype(), size_t(i), special_value(t.dtype(), r >> 8));
  }
}

void poison(const Tensor& t) {
  require_contiguous(t, "poison");
  std::memset(t.data(), 0xFF, size_t(t.nbytes()));
}

}  // namespace sol
