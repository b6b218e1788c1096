// The reduction kernels of the collectives: the AVX-512, AVX2 and portable paths against a
// plain reference, over sizes around the vector widths, 1 to 5 sources, aliasing and streaming;
// the AVX2 path bit for bit the portable one on infinities, signed zeros, subnormals and NaNs
// (a NaN for a NaN: the portable sum of two NaNs keeps whichever the compiler puts first).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "comm/reduce.h"
#include "kernels/reduce.h"
#include "sol/hw.h"

namespace sol::comm::detail {
namespace {

using Kernel = void (*)(void*, const void* const*, int, int64_t, DType, ReduceOp, bool);

void portable(void* d, const void* const* s, int n, int64_t e, DType t, ReduceOp op, bool stream) {
  kernels::reduce_sources_to_portable(&d, 1, s, n, e, t, op, stream);
}

void avx2(void* d, const void* const* s, int n, int64_t e, DType t, ReduceOp op, bool stream) {
  kernels::reduce_sources_to_avx2(&d, 1, s, n, e, t, op, stream);
}

void avx512(void* d, const void* const* s, int n, int64_t e, DType t, ReduceOp op, bool stream) {
  kernels::reduce_sources_to_avx512(&d, 1, s, n, e, t, op, stream);
}

// Sources stored in dtype t; the reference accumulates in f32 in source order (as specified),
// then rounds once to t.
struct Case {
  DType t;
  int sources;
  int64_t elements;
  std::vector<std::vector<std::byte>> data;
  std::vector<const void*> pointers;

  Case(DType type, int count, int64_t n, uint32_t seed) : t(type), sources(count), elements(n) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> value(-10, 10);
    for (int s = 0; s < count; ++s) {
      data.emplace_back(size_t(n) * dtype_size(t) + 64);
      for (int64_t i = 0; i < n; ++i) store_from_double(data.back().data(), t, size_t(i), value(rng));
    }
    for (auto& d : data) pointers.push_back(d.data());
  }

  std::vector<double> reference(ReduceOp op) const {
    std::vector<double> ref(static_cast<size_t>(elements));
    std::vector<std::byte> cell(4);
    for (int64_t i = 0; i < elements; ++i) {
      float acc = float(load_as_double(pointers[0], t, size_t(i)));
      for (int s = 1; s < sources; ++s) {
        float v = float(load_as_double(pointers[size_t(s)], t, size_t(i)));
        acc = op == ReduceOp::sum ? acc + v : std::max(acc, v);
      }
      store_from_double(cell.data(), t, 0, acc);
      ref[size_t(i)] = load_as_double(cell.data(), t, 0);
    }
    return ref;
  }
};

void expect_matches(Kernel kernel, bool stream, size_t dst_offset) {
  for (DType t : {DType::f32, DType::bf16})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max})
      for (int sources : {1, 2, 3, 5})
        for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 4099}) {
          Case c(t, sources, n, uint32_t(n * 7 + sources));
          std::vector<std::byte> out(size_t(n) * dtype_size(t) + 128);
          std::byte* dst = reinterpret_cast<std::byte*>(
              (reinterpret_cast<uintptr_t>(out.data()) + 63) / 64 * 64) + dst_offset * dtype_size(t);
          std::memset(dst, 0xFF, size_t(n) * dtype_size(t));  // NaN poison
          kernel(dst, c.pointers.data(), sources, n, t, op, stream);
          std::vector<double> ref = c.reference(op);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(load_as_double(dst, t, size_t(i)), ref[size_t(i)])
                << dtype_name(t) << " " << reduce_op_name(op) << " sources=" << sources << " n=" << n << " i=" << i;
        }
}

TEST(CommReduce, PortableMatchesReference) { expect_matches(portable, false, 0); }

TEST(CommReduce, Avx512MatchesReference) {
  if (!isa_at_least(Isa::avx512)) GTEST_SKIP() << "no AVX-512 here";
  expect_matches(avx512, false, 0);
  expect_matches(avx512, true, 0);
  // Misaligned destinations cannot stream: the kernel must fall back, not fault.
  expect_matches(avx512, true, 1);
}

TEST(CommReduce, Avx2MatchesReference) {
  if (!isa_at_least(Isa::avx2)) GTEST_SKIP() << "no AVX2 here";
  expect_matches(avx2, false, 0);
  expect_matches(avx2, true, 0);
  expect_matches(avx2, true, 1);
}

uint32_t element_bits(const void* p, DType t, int64_t i) {
  if (t == DType::f32) return static_cast<const uint32_t*>(p)[i];
  return static_cast<const uint16_t*>(p)[i];
}

bool is_nan_bits(uint32_t bits, DType t) {
  return t == DType::f32 ? (bits & 0x7FFFFFFF) > 0x7F800000 : (bits & 0x7FFF) > 0x7F80;
}

// Values where orders of evaluation and NaN rules show: the AVX2 level must give the portable
// path's bits (a maximum keeps the running value when either side is NaN, like std::max), and a
// NaN wherever it gives one.
TEST(CommReduce, Avx2GivesThePortableBitsOnSpecialValues) {
  if (!isa_at_least(Isa::avx2)) GTEST_SKIP() << "no AVX2 here";
  const uint32_t specials[] = {0x7FC00000, 0xFFC00001, 0x7F800001, 0x7F800000, 0xFF800000, 0x00000000,
                               0x80000000, 0x00000001, 0x807FFFFF, 0x00010000, 0x3F808000, 0x3F818000,
                               0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000};
  std::mt19937 rng(3);
  for (DType t : {DType::f32, DType::bf16})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max})
      for (int sources : {1, 2, 3, 4})
        for (int64_t n : {5, 8, 37, 200}) {
          std::vector<std::vector<uint32_t>> data(static_cast<size_t>(sources), std::vector<uint32_t>(static_cast<size_t>(n)));
          std::vector<const void*> pointers;
          for (auto& d : data) {
            for (auto& x : d) x = specials[rng() % std::size(specials)];
            if (t == DType::bf16) {  // the high halves, packed as bf16 codes
              auto* codes = reinterpret_cast<uint16_t*>(d.data());
              for (int64_t i = 0; i < n; ++i) codes[i] = uint16_t(d[size_t(i)] >> 16);
            }
            pointers.push_back(d.data());
          }
          std::vector<uint32_t> want(size_t(n), 0xFFFFFFFF), got(size_t(n), 0xFFFFFFFF);
          portable(want.data(), pointers.data(), sources, n, t, op, false);
          avx2(got.data(), pointers.data(), sources, n, t, op, false);
          for (int64_t i = 0; i < n; ++i) {
            const uint32_t w = element_bits(want.data(), t, i), g = element_bits(got.data(), t, i);
            ASSERT_TRUE(w == g || (is_nan_bits(w, t) && is_nan_bits(g, t)))
                << dtype_name(t) << " " << reduce_op_name(op) << " sources=" << sources << " n=" << n << " i=" << i
                << std::hex << " portable 0x" << w << " avx2 0x" << g;
          }
        }
}

TEST(CommReduce, DestinationMayAliasASource) {
  Case c(DType::f32, 3, 1000, 5);
  std::vector<double> ref = c.reference(ReduceOp::sum);
  void* dst = const_cast<void*>(c.pointers[1]);
  reduce_sources(dst, c.pointers.data(), 3, 1000, DType::f32, ReduceOp::sum);
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(static_cast<float*>(dst)[i], float(ref[size_t(i)])) << i;
}

// The push allreduce writes each result to every rank's output, one of which may be a source.
TEST(CommReduce, EveryDestinationGetsTheResult) {
  for (Isa level : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (!isa_at_least(level)) continue;
    for (DType t : {DType::f32, DType::bf16})
      for (bool stream : {false, true}) {
        Case c(t, 3, 1001, 11);
        const std::vector<double> ref = c.reference(ReduceOp::max);
        std::vector<std::byte> a(1001 * 4 + 64), b(1001 * 4 + 64);
        std::memset(a.data(), 0xFF, a.size());
        std::memset(b.data(), 0xFF, b.size());
        // Aligned, misaligned (no streaming for anyone), and a source as the third destination.
        void* dsts[] = {a.data(), b.data() + dtype_size(t), const_cast<void*>(c.pointers[2])};
        const auto kernel = level == Isa::avx512 ? kernels::reduce_sources_to_avx512
                            : level == Isa::avx2 ? kernels::reduce_sources_to_avx2
                                                 : kernels::reduce_sources_to_portable;
        kernel(dsts, 3, c.pointers.data(), 3, 1001, t, ReduceOp::max, stream);
        for (void* d : dsts)
          for (int64_t i = 0; i < 1001; ++i)
            ASSERT_EQ(load_as_double(d, t, size_t(i)), ref[size_t(i)]) << dtype_name(t) << " i=" << i;
      }
  }
}

TEST(CommReduce, OnlyFloatTypesReduce) {
  EXPECT_TRUE(reducible(DType::f32));
  EXPECT_TRUE(reducible(DType::bf16));
  EXPECT_FALSE(reducible(DType::i32));
  EXPECT_FALSE(reducible(DType::f16));
}

}  // namespace
}  // namespace sol::comm::detail
