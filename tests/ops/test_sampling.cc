#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sol/error.h"
#include "sol/sampling.h"

namespace sol {
namespace {

TEST(Sampling, FrequenciesFollowTheFilteredDistribution) {
  // Logits ln(4), ln(3), ln(2), ln(1) give probabilities .4 .3 .2 .1; top_k 3 leaves
  // 4/9, 3/9, 2/9. Row r draws with (seed, r), so one call samples many rows at once.
  const int64_t rows = 20000;
  std::vector<float> l;
  for (int64_t r = 0; r < rows; ++r)
    for (float v : {std::log(4.0f), std::log(3.0f), std::log(2.0f), 0.0f}) l.push_back(v);
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  SamplingOptions o;
  o.top_k = 3;
  o.seed = 42;
  sample(Tensor(l.data(), DType::f32, {rows, 4}), Tensor(ids.data(), DType::i32, {rows}), o);
  std::vector<int> count(4, 0);
  for (int32_t id : ids) ++count[size_t(id)];
  EXPECT_EQ(count[3], 0);
  const double want[] = {4.0 / 9, 3.0 / 9, 2.0 / 9};
  for (int i = 0; i < 3; ++i) {
    double sigma = std::sqrt(rows * want[i] * (1 - want[i]));
    EXPECT_NEAR(count[size_t(i)], rows * want[i], 5 * sigma) << "id " << i;
  }
}

TEST(Sampling, GreedyTopOneTinyTopPAndSeeds) {
  std::vector<float> l = {0.5f, 2.0f, 2.0f, NAN, -1.0f};
  int32_t id = -7;
  Tensor lt(l.data(), DType::f32, {1, 5}), it(&id, DType::i32, {1});
  SamplingOptions greedy;
  greedy.temperature = 0;
  sample(lt, it, greedy);
  EXPECT_EQ(id, 1);  // tie between 1 and 2 goes to the lower id
  SamplingOptions k1;
  k1.top_k = 1;
  sample(lt, it, k1);
  EXPECT_EQ(id, 1);
  SamplingOptions p;
  p.top_p = 1e-6f;
  sample(lt, it, p);
  EXPECT_EQ(id, 1);
  // NaN is never drawn, whatever the seed.
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SamplingOptions s;
    s.seed = seed;
    sample(lt, it, s);
    EXPECT_NE(id, 3);
  }
}

TEST(Sampling, BadInputIsNamed) {
  std::vector<float> l = {-INFINITY, NAN, 1.0f, 2.0f};
  std::vector<int32_t> ids(2);
  Tensor lt(l.data(), DType::f32, {2, 2}), it(ids.data(), DType::i32, {2});
  try {
    sample(lt, it);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 0 of logits has no finite value"), std::string::npos) << e.what();
  }
  SamplingOptions bad;
  bad.top_p = 0;
  EXPECT_THROW(sample(lt, it, bad), Error);
  bad = {};
  bad.temperature = -1;
  EXPECT_THROW(sample(lt, it, bad), Error);
  bad = {};
  bad.top_k = -2;
  EXPECT_THROW(sample(lt, it, bad), Error);
}

}  // namespace
}  // namespace sol
