// The DRAM ceiling loops with 1-8 interleaved streams: they must touch exactly the parts they
// claim (a copy that skipped a part, or counted bytes it never moved, would inflate a ceiling).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "hw/ceiling_loops.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/tensor.h"

namespace sol {
namespace {

bool has_loops() {
  const CpuFeatures& f = cpu_features();
  return f.os_avx512 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
}

// 5 blocks and a half: no stream count divides it, so every count leaves a remainder.
constexpr size_t kFloats = ceiling_loops::kStreamBlockFloats * 5 + 64;

size_t moved_floats(int streams) {
  return kFloats / size_t(streams) / ceiling_loops::kStreamBlockFloats *
         ceiling_loops::kStreamBlockFloats * size_t(streams);
}

TEST(StreamLoops, ReadCountsOnlyWholeParts) {
  if (!has_loops()) GTEST_SKIP() << "no AVX-512";
  Buffer data(kFloats * sizeof(float));
  std::memset(data.data(), 0, data.bytes());
  for (int streams : ceiling_loops::kStreamChoices)
    for (bool prefetch : {false, true}) {
      double bytes = ceiling_loops::read(static_cast<float*>(data.data()), kFloats, 3, streams, prefetch);
      EXPECT_EQ(bytes, 3.0 * double(moved_floats(streams)) * sizeof(float))
          << streams << " streams, prefetch " << prefetch;
    }
}

// Each stream count copies exactly parts [0, per) of each of its S parts and nothing else.
TEST(StreamLoops, CopyAndTriadWriteEveryCountedElementOnly) {
  if (!has_loops()) GTEST_SKIP() << "no AVX-512";
  Buffer src(kFloats * sizeof(float)), dst(kFloats * sizeof(float)), c(kFloats * sizeof(float));
  float* s = static_cast<float*>(src.data());
  float* d = static_cast<float*>(dst.data());
  float* cc = static_cast<float*>(c.data());
  for (size_t i = 0; i < kFloats; ++i) {
    s[i] = float(i) + 1.0f;
    cc[i] = 2.0f * float(i);
  }
  for (int streams : ceiling_loops::kStreamChoices) {
    const size_t per = moved_floats(streams) / size_t(streams);
    for (bool non_temporal : {false, true}) {
      std::vector<float> poison(kFloats, -7.0f);
      std::memcpy(d, poison.data(), kFloats * sizeof(float));
      double bytes = ceiling_loops::copy(d, s, kFloats, 1, non_temporal, streams);
      EXPECT_EQ(bytes, 2.0 * double(moved_floats(streams)) * sizeof(float));
      for (size_t i = 0; i < kFloats; ++i) {
        const bool counted = i < per * size_t(streams);
        ASSERT_EQ(d[i], counted ? s[i] : -7.0f)
            << "copy, " << streams << " streams, nt " << non_temporal << ", element " << i;
      }
    }
    std::vector<float> poison(kFloats, -7.0f);
    std::memcpy(d, poison.data(), kFloats * sizeof(float));
    double bytes = ceiling_loops::triad(d, s, cc, kFloats, 1, streams);
    EXPECT_EQ(bytes, 3.0 * double(moved_floats(streams)) * sizeof(float));
    for (size_t i = 0; i < kFloats; ++i) {
      const bool counted = i < per * size_t(streams);
      ASSERT_EQ(d[i], counted ? s[i] + 0.5f * cc[i] : -7.0f)
          << "triad, " << streams << " streams, element " << i;
    }
  }
}

TEST(StreamLoops, UnbuiltStreamCountIsAnError) {
  if (!has_loops()) GTEST_SKIP() << "no AVX-512";
  Buffer data(kFloats * sizeof(float));
  EXPECT_THROW(ceiling_loops::read(static_cast<float*>(data.data()), kFloats, 1, 3), Error);
}

}  // namespace
}  // namespace sol
