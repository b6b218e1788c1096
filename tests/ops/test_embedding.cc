#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ops/common/fill.h"
#include "ops/stream_threshold.h"
#include "sol/embedding.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/moe_permute.h"

namespace sol {
namespace {

TEST(Embedding, GathersRowsIncludingRepeats) {
  Buffer table(DType::bf16, {10, 33}), ids(DType::i32, {5}), out(DType::bf16, {5, 33});
  fill_random(table, 1);
  const int32_t want[] = {9, 0, 9, 3, 3};
  std::memcpy(ids.data(), want, sizeof(want));
  poison(out);
  embedding(table, ids, out);
  for (int t = 0; t < 5; ++t)
    EXPECT_EQ(std::memcmp(static_cast<char*>(out.data()) + t * 66, static_cast<char*>(table.data()) + want[t] * 66, 66), 0);
}

// Rows longer than 2 KiB are copied two at a time (row t with row t + half of a thread's range,
// kernels/x86/avx512/gather_avx512.cc) and the odd last row alone; rows whose destinations start
// at different offsets in a line go one at a time. Every token count around the pairing, aligned
// (2048 bf16) and unaligned (1031 bf16, 2062-byte rows) rows, and a streamed output.
TEST(Embedding, LongRowsTwoAtATime) {
  const testing_stream::LowStreamThreshold low;
  for (int64_t hidden : {2048, 1031})
    for (int64_t tokens : {int64_t(1), int64_t(2), int64_t(3), int64_t(8), int64_t(13),
                           testing_stream::kStreamBytes / (2 * hidden) + 3}) {
      const int64_t vocab = 97, rb = hidden * 2;
      Buffer table(DType::bf16, {vocab, hidden}), ids(DType::i32, {tokens}), out(DType::bf16, {tokens, hidden});
      fill_random(table, uint64_t(hidden));
      for (int64_t t = 0; t < tokens; ++t) ids.tensor().data_as<int32_t>()[t] = int32_t((t * 37 + 5) % vocab);
      poison(out);
      embedding(table, ids, out);
      int64_t wrong = 0;
      for (int64_t t = 0; t < tokens; ++t)
        wrong += std::memcmp(static_cast<char*>(out.data()) + t * rb,
                             static_cast<char*>(table.data()) + ids.tensor().data_as<int32_t>()[t] * rb, size_t(rb)) != 0;
      EXPECT_EQ(wrong, 0) << "hidden " << hidden << " tokens " << tokens;
    }
}

// The MoE permutation gathers through the same kernel, with padding rows (zeros) between the
// experts' rows: pairs holding a padding row go one row at a time.
TEST(Embedding, PermutedLongRowsWithPaddingTwoAtATime) {
  const int64_t tokens = 37, k = 2, experts = 5, alignment = 4, hidden = 1536;  // 3 KiB rows
  Buffer ids(DType::i32, {tokens, k}), x(DType::bf16, {tokens, hidden});
  for (int64_t i = 0; i < tokens * k; ++i) ids.tensor().data_as<int32_t>()[i] = int32_t((i * 7 + i / 3) % experts);
  fill_random(x, 3);
  const int64_t rows = moe_permuted_rows(ids, experts, alignment);
  Buffer perm(DType::bf16, {rows, hidden}), layout(DType::i32, {rows}), row_of(DType::i32, {tokens, k});
  poison(perm);
  moe_permute(x, ids, experts, alignment, perm, layout, row_of);
  const int64_t rb = hidden * 2;
  std::vector<char> want(size_t(rows * rb), 0);
  for (int64_t i = 0; i < tokens * k; ++i) {
    const int32_t r = row_of.tensor().data_as<int32_t>()[i];
    ASSERT_GE(r, 0);
    std::memcpy(want.data() + r * rb, static_cast<char*>(x.data()) + (i / k) * rb, size_t(rb));
  }
  int64_t wrong = 0;
  for (int64_t r = 0; r < rows; ++r)
    wrong += std::memcmp(static_cast<char*>(perm.data()) + r * rb, want.data() + r * rb, size_t(rb)) != 0;
  EXPECT_EQ(wrong, 0);
}

TEST(Embedding, BadIdsAreNamedAndNothingIsWritten) {
  Buffer table(DType::f32, {10, 4}), ids(DType::i32, {3}), out(DType::f32, {3, 4});
  const int32_t bad[] = {1, 10, 2};
  std::memcpy(ids.data(), bad, sizeof(bad));
  poison(out);
  try {
    embedding(table, ids, out);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ids[1] = 10 outside the vocabulary [0, 10)"), std::string::npos) << e.what();
  }
  for (int i = 0; i < 12; ++i) EXPECT_EQ(static_cast<uint32_t*>(out.data())[i], 0xFFFFFFFFu);
  int32_t neg = -1;
  std::memcpy(ids.data(), &neg, 4);
  EXPECT_THROW(embedding(table, ids, out), Error);
  EXPECT_THROW(embedding(table, Buffer(DType::f32, {3}).tensor(), out), Error);
  EXPECT_THROW(embedding(table, ids, Buffer(DType::bf16, {3, 4}).tensor()), Error);
}

}  // namespace
}  // namespace sol
