#include <gtest/gtest.h>

#include <cstring>

#include "ops/common/fill.h"
#include "sol/embedding.h"
#include "sol/error.h"

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
