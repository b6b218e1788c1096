#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "kernels/convert.h"
#include "ops/common/fill.h"
#include "sol/copy.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/threads.h"

namespace sol {
namespace {

constexpr DType kFloats[] = {DType::f32, DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2};

// Every pair, every path, odd sizes, specials: sol::cast must equal the scalar conversions bit
// for bit, and leave the bytes around the output untouched.
TEST(Cast, EveryPairEveryPathMatchesScalarBits) {
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (isa > cpu_features().best_isa) continue;
    setenv("SOL_ISA", std::string(isa_name(isa)).c_str(), 1);
    for (DType from : kFloats)
      for (DType to : kFloats)
        for (int64_t n : {1, 31, 1000, 65537}) {
          SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(dtype_name(from)) + "->" +
                       std::string(dtype_name(to)) + " n=" + std::to_string(n));
          Buffer src(from, {n}), dst(to, {n + 64}), ref(to, {n});
          fill_random_with_specials(src, uint64_t(n) * 31 + uint64_t(from), 8);
          poison(dst);
          cast(src, dst.tensor().slice(0, 0, n));
          kernels::convert_scalar(src.data(), from, ref.data(), to, n);
          ASSERT_EQ(std::memcmp(dst.data(), ref.data(), size_t(n) * dtype_size(to)), 0);
          auto* tail = static_cast<unsigned char*>(dst.data()) + n * int64_t(dtype_size(to));
          for (int i = 0; i < 64 * int(dtype_size(to)); ++i) ASSERT_EQ(tail[i], 0xFF) << "wrote past dst";
        }
  }
  unsetenv("SOL_ISA");
}

TEST(Cast, ThreadCountDoesNotChangeBits) {
  const int64_t n = (int64_t(1) << 22) + 13;
  Buffer src(DType::f32, {n}), one(DType::f8e4m3, {n}), two(DType::f8e4m3, {n});
  fill_random(src, 3, 600.0);
  set_num_threads(1);
  cast(src, one);
  set_num_threads(2);
  cast(src, two);
  set_num_threads(0);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), size_t(n)), 0);
}

TEST(Cast, BadInputThrows) {
  Buffer a(DType::f32, {16}), b(DType::bf16, {8}), i(DType::i32, {16}), c(DType::bf16, {4, 4});
  EXPECT_THROW(cast(a, b), Error);
  EXPECT_THROW(cast(a, i), Error);
  EXPECT_THROW(cast(c.tensor().slice(1, 0, 2), Buffer(DType::f32, {4, 2}).tensor()), Error);
  try {
    cast(a, i);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cast: cannot convert f32 to i32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sol
