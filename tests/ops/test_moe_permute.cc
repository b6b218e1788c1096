#include <gtest/gtest.h>

#include <cstring>

#include "ops/common/fill.h"
#include "sol/error.h"
#include "sol/moe_permute.h"
#include "sol/registry.h"

namespace sol {
namespace {

TEST(MoePermute, LayoutByHandWithPaddingAndMaskedEntries) {
  // 3 tokens, k = 2, 3 experts, alignment 4; (1,1) is masked (-1). By expert: 0: (2,1);
  // 1: (0,1), (2,0); 2: (0,0), (1,0).
  const int32_t idx[] = {2, 1, 2, -1, 1, 0};
  Buffer ids(DType::i32, {3, 2});
  std::memcpy(ids.data(), idx, sizeof(idx));
  EXPECT_EQ(moe_permuted_rows(ids, 3, 4), 12);
  Buffer x(DType::f32, {3, 2}), perm(DType::f32, {12, 2}), layout(DType::i32, {12}), row_of(DType::i32, {3, 2});
  for (int i = 0; i < 6; ++i) x.tensor().data_as<float>()[i] = float(10 * (i / 2) + i % 2 + 1);
  poison(perm);
  moe_permute(x, ids, 3, 4, perm, layout, row_of);
  const int32_t want_layout[] = {0, -1, -1, -1, 1, 1, -1, -1, 2, 2, -1, -1};
  EXPECT_EQ(std::memcmp(layout.data(), want_layout, sizeof(want_layout)), 0);
  const int32_t want_rows[] = {8, 4, 9, -1, 5, 0};
  EXPECT_EQ(std::memcmp(row_of.data(), want_rows, sizeof(want_rows)), 0);
  const float* p = perm.tensor().data_as<float>();
  EXPECT_EQ(p[0], 21.0f);   // row 0 = token 2
  EXPECT_EQ(p[2], 0.0f);    // padding is zeroed
  EXPECT_EQ(p[16], 1.0f);   // row 8 = token 0
  // Combine back with weights: token 1 only has its expert-2 row, weight 0.5.
  Buffer w(DType::f32, {3, 2}), out(DType::f32, {3, 2});
  const float wt[] = {0.25f, 0.75f, 0.5f, 9.0f, 1.0f, 2.0f};
  std::memcpy(w.data(), wt, sizeof(wt));
  moe_unpermute(perm, row_of, w, out);
  EXPECT_FLOAT_EQ(out.tensor().data_as<float>()[0], 1.0f);   // 0.25 * 1 + 0.75 * 1
  EXPECT_FLOAT_EQ(out.tensor().data_as<float>()[2], 5.5f);   // 0.5 * 11, the masked weight ignored
  EXPECT_FLOAT_EQ(out.tensor().data_as<float>()[4], 63.0f);  // 1 * 21 + 2 * 21
}

TEST(MoePermute, BadInputIsNamed) {
  Buffer ids(DType::i32, {2, 2});
  const int32_t bad[] = {0, 1, 5, 0};
  std::memcpy(ids.data(), bad, sizeof(bad));
  try {
    moe_permuted_rows(ids, 4, 128);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("topk_idx[1, 0] = 5 outside [0, 4)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(moe_permuted_rows(ids, 8, 0), Error);
  const int32_t ok[] = {0, 1, 2, 3};
  std::memcpy(ids.data(), ok, sizeof(ok));
  Buffer x(DType::f32, {2, 4}), perm(DType::f32, {3, 4}), layout(DType::i32, {3}), row_of(DType::i32, {2, 2});
  EXPECT_THROW(moe_permute(x, ids, 4, 128, perm, layout, row_of), Error);  // needs 512 rows
}

}  // namespace
}  // namespace sol
