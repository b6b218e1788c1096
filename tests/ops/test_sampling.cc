#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "ops/common/fill.h"
#include "ops/isa_paths.h"
#include "sol/error.h"
#include "sol/sampling.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_paths::for_each_isa;

// sol/sampling.h read literally: every finite logit's probability in double, all of them
// sorted by (probability larger, id lower), then top_k, top_p and the draw. No filtering.
int32_t sample_by_sorting_everything(const std::vector<float>& l, const SamplingOptions& o, int64_t r) {
  std::vector<std::pair<double, int32_t>> c;
  double mx = -INFINITY;
  for (float x : l)
    if (!std::isnan(x)) mx = std::max(mx, double(x));
  for (size_t i = 0; i < l.size(); ++i)
    if (!std::isnan(l[i]) && l[i] > -INFINITY) c.push_back({std::exp((double(l[i]) - mx) / double(o.temperature)), int32_t(i)});
  std::sort(c.begin(), c.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  size_t keep = o.top_k > 0 ? std::min(c.size(), size_t(o.top_k)) : c.size();
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += c[i].first;
  if (o.top_p < 1.0f) {
    double run = 0;
    size_t n = 0;
    while (n < keep && run < double(o.top_p) * total) run += c[n++].first;
    keep = std::max<size_t>(n, 1);
    total = 0;
    for (size_t i = 0; i < keep; ++i) total += c[i].first;
  }
  double target = sampling_uniform(o.seed, r) * total, run = 0;
  for (size_t i = 0; i < keep; ++i)
    if ((run += c[i].first) > target) return c[i].second;
  return c[keep - 1].second;
}

// Rows long enough for many threshold updates, with heavy ties (values on a coarse grid), an
// ascending row (every element beats the threshold: the filter's worst case), NaN and -inf,
// in f32 and bf16, top_k from 1 to past the filter's reach; compared id for id.
TEST(Sampling, FilteredTopKMatchesSortingEverything) {
  for_each_isa([] {
    const int64_t rows = 6, v = 9001;
    for (DType dt : {DType::f32, DType::bf16}) {
      Buffer lb(dt, {rows, v});
      fill_random(lb, 5, 6.0);
      std::vector<std::vector<float>> rowsf(static_cast<size_t>(rows), std::vector<float>(static_cast<size_t>(v)));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < v; ++i) {
          float x = float(load_as_double(lb.tensor().data(), dt, size_t(r * v + i)));
          if (r == 1) x = std::round(x);                     // ~13 distinct values: ties everywhere
          if (r == 2) x = float(i) * 1e-3f;                  // ascending
          if (r == 3 && i % 7 == 0) x = i % 2 ? NAN : -INFINITY;
          if (r == 4) x = 0.25f;                             // all equal
          store_from_double(lb.tensor().data(), dt, size_t(r * v + i), x);
          rowsf[size_t(r)][size_t(i)] = float(load_as_double(lb.tensor().data(), dt, size_t(r * v + i)));
        }
      for (int64_t k : {1, 50, 5000, 0})
        for (float temp : {0.0f, 0.7f})
          for (float top_p : {0.3f, 1.0f}) {
            SamplingOptions o;
            o.top_k = k;
            o.temperature = temp;
            o.top_p = top_p;
            o.seed = uint64_t(k) * 31 + 7;
            std::vector<int32_t> ids(size_t(rows), -5);
            sample(lb, Tensor(ids.data(), DType::i32, {rows}), o);
            for (int64_t r = 0; r < rows; ++r) {
              int32_t want;
              if (temp == 0) {  // greedy: the first maximum logit
                want = -1;
                for (int64_t i = 0; i < v; ++i) {
                  float x = rowsf[size_t(r)][size_t(i)];
                  if (!std::isnan(x) && (want < 0 || x > rowsf[size_t(r)][size_t(want)])) want = int32_t(i);
                }
              } else {
                want = sample_by_sorting_everything(rowsf[size_t(r)], o, r);
              }
              EXPECT_EQ(ids[size_t(r)], want) << dtype_name(dt) << " row " << r << " k " << k << " T " << temp
                                              << " p " << top_p;
            }
          }
    }
  });
}

// Logits closer than exp's resolution in double have equal probabilities: the order is then by
// id, not by logit. With top_k 1 the single kept candidate is the lower id, whatever the draw.
TEST(Sampling, EqualProbabilitiesFromDistinctLogitsGoToTheLowerId) {
  for_each_isa([] {
    std::vector<float> l(3000, -5.0f);
    l[17] = -1e-40f;  // p = exp(-1e-40) = 1 in double, like p(0)
    l[2500] = 0.0f;
    int32_t id = -1;
    SamplingOptions o;
    o.top_k = 1;
    sample(Tensor(l.data(), DType::f32, {1, 3000}), Tensor(&id, DType::i32, {1}), o);
    EXPECT_EQ(id, 17);
  });
}

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

// A row's filter starts from a hint taken from the previous row of its thread (when the
// previous row's k-th best equals its max, the hint is exactly that value). The rows below
// chain hints that fail (fewer than k logits reach them: the pass must run again), that are
// reached by exactly k logits, that sit on many ties at the k-th, and that meet NaN and -inf;
// vocab is not a multiple of 16. One thread, so every row gets its predecessor's hint; then two.
TEST(Sampling, HintFromThePreviousRowNeverChangesTheAnswer) {
  const int64_t k = 50, v = 3001;
  std::vector<std::vector<float>> rows;
  std::mt19937 rng(9);
  auto random_row = [&](float lo, float hi) {
    std::vector<float> r(static_cast<size_t>(v));
    for (auto& x : r) x = std::uniform_real_distribution<float>(lo, hi)(rng);
    return r;
  };
  auto put = [&](std::vector<float> r, float value, int64_t count, int64_t stride, int64_t first) {
    for (int64_t j = 0; j < count; ++j) r[size_t((first + j * stride) % v)] = value;
    return r;
  };
  rows.push_back(random_row(-8, 8));                                 // no hint (first row)
  rows.push_back(put(random_row(-8, 0.5f), 1.0f, 2 * k, 29, 3));     // flat top: hint 1.0 next
  rows.push_back(put(random_row(-8, 0.9f), 1.0f, k - 1, 31, 7));     // k - 1 reach it: retry
  rows.push_back(put(random_row(-8, 0.5f), 1.0f, 3 * k, 13, 11));    // flat top again
  rows.push_back(put(random_row(-8, 0.9f), 1.0f, k, 37, 5));         // exactly k reach it
  rows.push_back(put(random_row(-8, 0.5f), 1.0f, 2 * k, 17, 1));     // flat top again
  rows.push_back(put(put(random_row(-8, 0.9f), 1.0f, 3 * k, 19, 2), 2.0f, k / 2, 41, 0));  // ties at the k-th
  std::vector<float> sparse(static_cast<size_t>(v), -INFINITY);      // k - 3 finite, NaN: retry, then < k
  for (int64_t j = 0; j < k - 3; ++j) sparse[size_t(j * 53 + 4)] = float(j % 7);
  sparse[10] = NAN;
  rows.push_back(sparse);
  rows.push_back(put(random_row(-8, 0.5f), 1.0f, 2 * k, 23, 9));     // flat top after a retry
  rows.push_back(random_row(-1000, -990));                           // far below the hint
  const int64_t b = int64_t(rows.size());
  std::vector<float> flat;
  for (auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (float temp : {0.0f, 0.7f})
      for (float top_p : {0.5f, 1.0f}) {
        SamplingOptions o;
        o.top_k = k, o.temperature = temp, o.top_p = top_p, o.seed = 1234;
        std::vector<int32_t> ids(static_cast<size_t>(b), -5);
        sample(Tensor(flat.data(), DType::f32, {b, v}), Tensor(ids.data(), DType::i32, {b}), o);
        for (int64_t r = 0; r < b; ++r) {
          SamplingOptions ref = o;
          if (temp == 0) ref.temperature = 1e-30f, ref.top_k = 1;  // greedy: the first best logit
          EXPECT_EQ(ids[size_t(r)], sample_by_sorting_everything(rows[size_t(r)], ref, r))
              << "row " << r << " threads " << threads << " T " << temp << " p " << top_p;
        }
      }
  }
  set_num_threads(0);
}

TEST(Sampling, BadInputIsNamed) {
  std::vector<float> inf_row(100, 1.0f);
  inf_row[40] = INFINITY;
  int32_t one_id = 0;
  SamplingOptions k5;
  k5.top_k = 5;
  for (SamplingOptions o : {SamplingOptions{}, k5})  // +inf logit: an error on either path
    EXPECT_THROW(sample(Tensor(inf_row.data(), DType::f32, {1, 100}), Tensor(&one_id, DType::i32, {1}), o), Error);
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
