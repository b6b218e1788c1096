// The DRAM ceiling loops with 1-8 interleaved streams, AVX-512 and AVX2: they must touch exactly
// the parts they claim (a copy that skipped a part, or counted bytes it never moved, would
// inflate a ceiling).
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "hw/ceiling_loops.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/tensor.h"

namespace sol {
namespace {

// One ISA's streaming loops; every test runs for each set the CPU has (the AVX2 set mirrors the
// AVX-512 one and must walk and count the same).
struct StreamLoopSet {
  const char* name;
  bool (*present)();
  double (*read)(const float*, size_t, long, int, bool);
  double (*copy)(float*, const float*, size_t, long, bool, int);
  double (*triad)(float*, const float*, const float*, size_t, long, int);
  double (*update)(float*, size_t, long, int);
  double (*write)(float*, size_t, long, int);
};

bool has_avx512_loops() {
  const CpuFeatures& f = cpu_features();
  return f.os_avx512 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
}

bool has_avx2_loops() {
  const CpuFeatures& f = cpu_features();
  return f.os_avx && f.avx2 && f.fma;
}

const StreamLoopSet kLoopSets[] = {
    {"avx512", has_avx512_loops, ceiling_loops::read, ceiling_loops::copy, ceiling_loops::triad,
     ceiling_loops::update, ceiling_loops::write},
    {"avx2", has_avx2_loops, ceiling_loops::avx2::read, ceiling_loops::avx2::copy, ceiling_loops::avx2::triad,
     ceiling_loops::avx2::update, ceiling_loops::avx2::write},
};

// Failures name the set, not its bytes.
void PrintTo(const StreamLoopSet& set, std::ostream* os) { *os << set.name; }

class StreamLoops : public ::testing::TestWithParam<StreamLoopSet> {
 protected:
  void SetUp() override {
    if (!GetParam().present()) GTEST_SKIP() << "no " << GetParam().name << " loops on this CPU";
  }
  const StreamLoopSet& loops() const { return GetParam(); }
};

// 5 blocks and a half: no stream count divides it, so every count leaves a remainder.
constexpr size_t kFloats = ceiling_loops::kStreamBlockFloats * 5 + 64;

size_t moved_floats(int streams) {
  return kFloats / size_t(streams) / ceiling_loops::kStreamBlockFloats *
         ceiling_loops::kStreamBlockFloats * size_t(streams);
}

TEST_P(StreamLoops, ReadCountsOnlyWholeParts) {
  Buffer data(kFloats * sizeof(float));
  std::memset(data.data(), 0, data.bytes());
  for (int streams : ceiling_loops::kStreamChoices)
    for (bool prefetch : {false, true}) {
      double bytes = loops().read(static_cast<float*>(data.data()), kFloats, 3, streams, prefetch);
      EXPECT_EQ(bytes, 3.0 * double(moved_floats(streams)) * sizeof(float))
          << streams << " streams, prefetch " << prefetch;
    }
}

// Each stream count copies exactly parts [0, per) of each of its S parts and nothing else.
TEST_P(StreamLoops, CopyAndTriadWriteEveryCountedElementOnly) {
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
      double bytes = loops().copy(d, s, kFloats, 1, non_temporal, streams);
      EXPECT_EQ(bytes, 2.0 * double(moved_floats(streams)) * sizeof(float));
      for (size_t i = 0; i < kFloats; ++i) {
        const bool counted = i < per * size_t(streams);
        ASSERT_EQ(d[i], counted ? s[i] : -7.0f)
            << "copy, " << streams << " streams, nt " << non_temporal << ", element " << i;
      }
    }
    std::vector<float> poison(kFloats, -7.0f);
    std::memcpy(d, poison.data(), kFloats * sizeof(float));
    // Two passes: the second pass's value (2) over every counted element. One pass: 1, never 0
    // (all-zero lines are written twice as fast here as real data: not a write ceiling).
    EXPECT_EQ(loops().write(d, kFloats, 2, streams), 2.0 * double(moved_floats(streams)) * sizeof(float));
    for (size_t i = 0; i < kFloats; ++i) {
      const bool counted = i < per * size_t(streams);
      ASSERT_EQ(d[i], counted ? 2.0f : -7.0f) << "write, " << streams << " streams, element " << i;
    }
    loops().write(d, kFloats, 1, streams);
    for (size_t i = 0; i < per * size_t(streams); ++i) ASSERT_EQ(d[i], 1.0f) << "write, one pass, element " << i;
    // In-place update, two passes: every counted element + 2, the rest untouched.
    std::memcpy(d, poison.data(), kFloats * sizeof(float));
    EXPECT_EQ(loops().update(d, kFloats, 2, streams), 2.0 * 2.0 * double(moved_floats(streams)) * sizeof(float));
    for (size_t i = 0; i < kFloats; ++i) {
      const bool counted = i < per * size_t(streams);
      ASSERT_EQ(d[i], counted ? -5.0f : -7.0f) << "update, " << streams << " streams, element " << i;
    }
    std::memcpy(d, poison.data(), kFloats * sizeof(float));
    double bytes = loops().triad(d, s, cc, kFloats, 1, streams);
    EXPECT_EQ(bytes, 3.0 * double(moved_floats(streams)) * sizeof(float));
    for (size_t i = 0; i < kFloats; ++i) {
      const bool counted = i < per * size_t(streams);
      ASSERT_EQ(d[i], counted ? s[i] + 0.5f * cc[i] : -7.0f)
          << "triad, " << streams << " streams, element " << i;
    }
  }
}

TEST_P(StreamLoops, UnbuiltStreamCountIsAnError) {
  Buffer data(kFloats * sizeof(float));
  EXPECT_THROW(loops().read(static_cast<float*>(data.data()), kFloats, 1, 3, false), Error);
}

// The floats a loop moves of an array of `floats`: whole blocks in each of the streams' parts.
size_t moved_floats_of(size_t floats, int streams) {
  return floats / size_t(streams) / ceiling_loops::kStreamBlockFloats * ceiling_loops::kStreamBlockFloats *
         size_t(streams);
}

// Arrays too small for one block per stream: nothing is moved, counted or written (a loop that
// rounded the parts up would read and write past the arrays), and no passes move nothing.
TEST_P(StreamLoops, LessThanOneBlockPerStreamMovesNothing) {
  constexpr size_t kMax = ceiling_loops::kStreamBlockFloats * 8;
  Buffer src(kMax * sizeof(float)), dst(kMax * sizeof(float)), c(kMax * sizeof(float));
  float* s = static_cast<float*>(src.data());
  float* d = static_cast<float*>(dst.data());
  for (size_t i = 0; i < kMax; ++i) s[i] = c.tensor().data_as<float>()[i] = 1.0f;
  for (int streams : ceiling_loops::kStreamChoices) {
    const size_t floats = ceiling_loops::kStreamBlockFloats * size_t(streams) - 16;
    for (size_t i = 0; i < kMax; ++i) d[i] = -7.0f;
    EXPECT_EQ(loops().read(s, floats, 2, streams, true), 0.0) << streams;
    EXPECT_EQ(loops().copy(d, s, floats, 2, true, streams), 0.0) << streams;
    EXPECT_EQ(loops().copy(d, s, floats, 2, false, streams), 0.0) << streams;
    EXPECT_EQ(loops().triad(d, s, c.tensor().data_as<float>(), floats, 2, streams), 0.0) << streams;
    EXPECT_EQ(loops().write(d, floats, 2, streams), 0.0) << streams;
    EXPECT_EQ(loops().update(d, floats, 2, streams), 0.0) << streams;
    for (size_t i = 0; i < kMax; ++i) ASSERT_EQ(d[i], -7.0f) << streams << " streams wrote element " << i;
    EXPECT_EQ(loops().read(s, kMax, 0, streams, false), 0.0) << streams << " streams, no passes";
  }
}

// Arrays that end exactly at an unmapped page: any load or store past the counted parts faults
// (software prefetches past the end do not). Sizes that every stream count divides, and one that
// leaves a remainder of less than a block.
TEST_P(StreamLoops, NothingTouchedPastTheArrays) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), bytes = 16 * page;
  for (size_t floats : {bytes / sizeof(float), bytes / sizeof(float) - 3 * ceiling_loops::kStreamBlockFloats - 16}) {
    // Three arrays, each followed by a guard page.
    char* base[3];
    float* arr[3];
    for (int a = 0; a < 3; ++a) {
      void* m = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(m, MAP_FAILED);
      base[a] = static_cast<char*>(m);
      ASSERT_EQ(mprotect(base[a] + bytes, page, PROT_NONE), 0);
      arr[a] = reinterpret_cast<float*>(base[a] + bytes - floats * sizeof(float));
      for (size_t i = 0; i < floats; ++i) arr[a][i] = float(i % 97);
    }
    for (int streams : ceiling_loops::kStreamChoices) {
      const double moved = double(moved_floats_of(floats, streams)) * sizeof(float);
      EXPECT_EQ(loops().read(arr[0], floats, 1, streams, false), moved) << streams;
      EXPECT_EQ(loops().read(arr[0], floats, 1, streams, true), moved) << streams;
      EXPECT_EQ(loops().copy(arr[1], arr[0], floats, 1, true, streams), 2 * moved) << streams;
      EXPECT_EQ(loops().copy(arr[1], arr[0], floats, 1, false, streams), 2 * moved) << streams;
      EXPECT_EQ(loops().triad(arr[2], arr[0], arr[1], floats, 1, streams), 3 * moved) << streams;
      EXPECT_EQ(loops().write(arr[2], floats, 1, streams), moved) << streams;
      EXPECT_EQ(loops().update(arr[2], floats, 1, streams), 2 * moved) << streams;
    }
    for (int a = 0; a < 3; ++a) munmap(base[a], bytes + page);
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, StreamLoops, ::testing::ValuesIn(kLoopSets),
                         [](const ::testing::TestParamInfo<StreamLoopSet>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace sol
