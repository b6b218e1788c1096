// The Engram hash: a hand-worked case, the AVX-512 and scalar paths bit-identical to the
// reference (including multipliers that make the 64-bit products wrap, and moduli near 2^40),
// DeepSeek-style configurations, and bad input.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "sol/engram.h"
#include "sol/error.h"
#include "sol/hw.h"

namespace {

using sol::Buffer;
using sol::DType;
using sol::engram::HashConfig;

struct IsaGuard {
  explicit IsaGuard(const char* isa) { setenv("SOL_ISA", isa, 1); }
  ~IsaGuard() { unsetenv("SOL_ISA"); }
};

Buffer random_ids(int64_t b, int64_t t, uint64_t vocab, uint64_t seed) {
  Buffer ids(DType::i32, {b, t});
  uint64_t x = seed;
  for (int64_t i = 0; i < b * t; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids.tensor().data_as<int32_t>()[i] = int32_t((x >> 33) % vocab);
  }
  return ids;
}

void expect_all_paths_exact(const HashConfig& c, const Buffer& ids, bool offsets) {
  const int64_t b = ids.tensor().shape(0), t = ids.tensor().shape(1);
  Buffer ref(DType::i32, {b, t, int64_t(c.heads())});
  sol::engram::ngram_hash_reference(ids, ref, c, offsets);
  for (const char* isa : {"scalar", "avx512"}) {
    IsaGuard guard(isa);
    Buffer out(DType::i32, {b, t, int64_t(c.heads())});
    std::memset(out.data(), 0xFF, out.bytes());
    sol::engram::ngram_hash(ids, out, c, offsets);
    EXPECT_EQ(0, std::memcmp(out.data(), ref.data(), ref.bytes())) << isa << " b=" << b << " t=" << t;
  }
}

TEST(EngramHash, HandWorkedBigram) {
  HashConfig c{2, 1, {1, 3}, {7}, 0};
  int32_t ids[2] = {5, 2};
  int32_t out[2] = {-1, -1};
  // t=0: 5*1 ^ pad(0)*3 = 5 -> 5; t=1: 2*1 ^ 5*3 = 2 ^ 15 = 13 -> 6.
  sol::engram::ngram_hash(sol::Tensor(ids, DType::i32, {1, 2}), sol::Tensor(out, DType::i32, {1, 2, 1}), c);
  EXPECT_EQ(out[0], 5);
  EXPECT_EQ(out[1], 6);
}

TEST(EngramHash, PathsMatchReferenceOnDeepSeekConfig) {
  const std::vector<int64_t> sizes = {129280 * 5, 129280 * 5};
  const std::vector<int> layers = {1, 15};
  auto configs = sol::engram::make_hash_configs(sizes, 3, 8, layers, 129280, 0, 2);
  ASSERT_EQ(configs.size(), 2u);
  std::set<int64_t> primes;
  for (const auto& c : configs) {
    for (uint64_t m : c.multipliers) EXPECT_EQ(m % 2, 1u);
    for (int64_t p : c.moduli) {
      EXPECT_TRUE(sol::engram::is_prime(uint64_t(p)));
      EXPECT_GE(p, 129280 * 5);
      EXPECT_TRUE(primes.insert(p).second) << "prime " << p << " used twice";
    }
    const auto offsets = sol::engram::table_offsets(c);
    EXPECT_EQ(offsets[0], 0);
    EXPECT_EQ(offsets[1], c.moduli[0]);
    for (int64_t t : {1, 2, 3, 7, 8, 9, 16, 33, 257})
      for (bool with_offsets : {true, false}) expect_all_paths_exact(c, random_ids(3, t, 129280, uint64_t(t)), with_offsets);
  }
  EXPECT_NE(configs[0].multipliers, configs[1].multipliers);
}

TEST(EngramHash, WrappingProductsAndLargeModuli) {
  // Multipliers near 2^64 make the products wrap; moduli up to the i32 limit and as small as
  // 2 stress the vector path's two-step reduction; ids and padding up to 2^31 - 1.
  HashConfig c;
  c.max_ngram = 4;
  c.heads_per_ngram = 2;
  c.multipliers = {0xFFFFFFFFFFFFFFFFull, 0x9E3779B97F4A7C15ull, 0xD1B54A32D192ED03ull, 3};
  c.moduli = {2, 3, 1000003, 2147483647, 2147483629, 1073741789};
  c.pad_id = 2147483647;
  for (int64_t p : c.moduli) ASSERT_TRUE(sol::engram::is_prime(uint64_t(p))) << p;
  for (int64_t t : {1, 3, 8, 11, 64, 129}) expect_all_paths_exact(c, random_ids(2, t, 2147483647ull, 7 + uint64_t(t)), false);
}

TEST(EngramHash, BadInput) {
  HashConfig good{2, 1, {1, 3}, {7}, 0};
  Buffer ids(DType::i32, {1, 4}), out(DType::i32, {1, 4, 1});
  std::memset(ids.data(), 0, ids.bytes());
  HashConfig even = good;
  even.multipliers[1] = 4;
  EXPECT_THROW(sol::engram::ngram_hash(ids, out, even), sol::Error);
  HashConfig few = good;
  few.moduli.clear();
  EXPECT_THROW(sol::engram::ngram_hash(ids, out, few), sol::Error);
  Buffer wrong(DType::i32, {1, 4, 2});
  EXPECT_THROW(sol::engram::ngram_hash(ids, wrong, good), sol::Error);
  ids.tensor().data_as<int32_t>()[2] = -5;
  EXPECT_THROW(sol::engram::ngram_hash(ids, out, good), sol::Error);
  const std::vector<int64_t> huge = {int64_t(1) << 30};
  const int layer = 0;
  EXPECT_THROW(sol::engram::total_rows(sol::engram::make_hash_configs(huge, 2, 4, {&layer, 1}, 1000, 0, 0).front()),
               sol::Error);
}

}  // namespace
