#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "ops/common/fill.h"
#include "sol/copy.h"
#include "ops/isa_paths.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_paths::for_each_isa;

TEST(Copy, ContiguousOddSizesAndOffsetsEveryPath) {
  for_each_isa([] {
    for (int64_t n : {0, 1, 7, 63, 64, 255, 257, 4099, 100003}) {
      for (int64_t off : {0, 1, 3}) {
        Buffer src(DType::bf16, {n + off + 8}), dst(DType::bf16, {n + off + 8});
        fill_random(src, uint64_t(n + off));
        poison(dst);
        copy(src.tensor().slice(0, off, off + n), dst.tensor().slice(0, off, off + n));
        auto* s = src.tensor().data_as<uint16_t>();
        auto* d = dst.tensor().data_as<uint16_t>();
        EXPECT_EQ(std::memcmp(s + off, d + off, size_t(n) * 2), 0) << "n=" << n << " off=" << off;
        for (int64_t i = 0; i < off; ++i) EXPECT_EQ(d[i], 0xFFFF) << "wrote before the view";
        for (int64_t i = off + n; i < n + off + 8; ++i) EXPECT_EQ(d[i], 0xFFFF) << "wrote past the view";
      }
    }
  });
}

TEST(Copy, LargeStreamingCopyBothThreadCounts) {
  // 48 MiB output: larger than half the LLC, so the non-temporal path runs.
  const int64_t n = int64_t(12) << 20;
  Buffer src(DType::f32, {n}), dst(DType::f32, {n});
  fill_random(src, 5);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    poison(dst);
    copy(src, dst);
    EXPECT_EQ(std::memcmp(src.data(), dst.data(), size_t(n) * 4), 0) << threads << " threads";
  }
  set_num_threads(0);
}

TEST(Copy, StridedViews) {
  Buffer a(DType::f32, {5, 7}), b(DType::f32, {7, 5});
  fill_random(a, 1);
  poison(b);
  // Transposed view of b: shape [5, 7], strides [1, 5].
  const int64_t shape[] = {5, 7}, strides[] = {1, 5};
  Tensor bt(b.data(), DType::f32, shape, strides);
  copy(a, bt);
  auto* pa = a.tensor().data_as<float>();
  auto* pb = b.tensor().data_as<float>();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) EXPECT_EQ(pb[j * 5 + i], pa[i * 7 + j]);
}

TEST(Copy, BadInputThrows) {
  Buffer a(DType::f32, {16}), b(DType::f32, {8}), c(DType::bf16, {16});
  EXPECT_THROW(copy(a, b), Error);  // shape
  EXPECT_THROW(copy(a, c), Error);  // dtype
  Tensor t = a.tensor();
  EXPECT_THROW(copy(t.slice(0, 0, 8), t.slice(0, 4, 12)), Error);  // overlap
  const int64_t shape[] = {8}, zero[] = {0};
  EXPECT_THROW(copy(b, Tensor(a.data(), DType::f32, shape, zero)), Error);  // broadcast write
  try {
    copy(a, c);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("copy: src.dtype = f32 but dst.dtype = bf16"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sol
