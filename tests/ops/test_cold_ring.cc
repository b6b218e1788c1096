// `sol tune`'s cold rings: every byte is taken once before any is taken again, and the rings
// cover more than the LLC, so a row case's tensors come from DRAM.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "ops/tune/cold_ring.h"
#include "sol/error.h"

namespace sol {
namespace {

TEST(ColdRing, SizedPastTheLlcWithinBounds) {
  CoreShape core;
  core.l3_bytes = 300L << 20;  // a guest reporting the host's L3
  EXPECT_EQ(cold_ring_bytes(core), 375L << 20);
  core.l3_bytes = 32L << 20;
  EXPECT_EQ(cold_ring_bytes(core), 64L << 20);  // at least 64 MiB
  core.l3_bytes = 4L << 30;
  EXPECT_EQ(cold_ring_bytes(core), 1L << 30);   // at most 1 GiB
}

TEST(ColdRing, TakesEveryByteOnceBeforeWrapping) {
  constexpr int64_t bytes = 64 * 4096 + 100;
  ColdRing ring(bytes, false);
  std::set<const char*> seen;
  const char* first = nullptr;
  const char* last = nullptr;
  for (int i = 0; i < 64; ++i) {  // 3000 bytes of bf16, one 4 KiB step each
    const Tensor t = ring.take(DType::bf16, {10, 150});
    const char* p = static_cast<const char*>(t.data());
    if (!first) first = p;
    if (last) {
      EXPECT_EQ(p - last, 4096) << i;
    }
    EXPECT_TRUE(seen.insert(p).second) << "taken twice before the ring ran out: " << i;
    EXPECT_EQ(t.shape(0), 10);
    EXPECT_EQ(t.shape(1), 150);
    last = p;
  }
  EXPECT_EQ(static_cast<const char*>(ring.take(DType::bf16, {1500}).data()), first);  // wraps
  EXPECT_THROW(ring.take(DType::f32, {bytes}), Error);  // larger than the ring
}

TEST(ColdRing, RandomRingHoldsOrdinaryNumbers) {
  constexpr int64_t bytes = (16L << 20) + (1L << 20);  // one filled piece and part of a copy
  ColdRing ring(bytes, true);
  const Tensor head = ring.take(DType::bf16, {8L << 20});
  const Tensor tail = ring.take(DType::bf16, {1L << 19});  // where the copy begins
  int nonzero = 0;
  for (const Tensor& t : {head, tail})
    for (int64_t i = 0; i < t.numel(); i += 997) {
      uint32_t bits = uint32_t(t.data_as<const uint16_t>()[i]) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      EXPECT_TRUE(std::isfinite(v) && std::fabs(v) <= 1.0f) << i;
      nonzero += v != 0;
    }
  EXPECT_GT(nonzero, 1000);
}

}  // namespace
}  // namespace sol
