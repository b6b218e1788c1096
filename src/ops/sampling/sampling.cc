#include "sol/sampling.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/common/splitmix.h"
#include "sol/error.h"

namespace sol {

namespace {

// Candidate order: larger probability first, then the lower id.
struct Candidate {
  double p;
  int32_t id;
  bool operator<(const Candidate& o) const { return p != o.p ? p > o.p : id < o.id; }
};

int32_t sample_row(const void* row, DType t, int64_t v, const SamplingOptions& o, int64_t r, std::vector<Candidate>& c) {
  auto logit = [&](int64_t i) -> double {
    double x = t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(row)[i]) : static_cast<const float*>(row)[i];
    return std::isnan(x) ? -INFINITY : x;
  };
  double mx = -INFINITY;
  int64_t arg = -1;
  for (int64_t i = 0; i < v; ++i)
    if (double x = logit(i); x > mx) mx = x, arg = i;
  if (arg < 0 || !std::isfinite(mx)) return -1;  // reported by the caller, outside the parallel region
  if (o.temperature == 0.0f) return int32_t(arg);
  c.clear();
  for (int64_t i = 0; i < v; ++i) {
    double x = logit(i);
    if (x > -INFINITY) c.push_back({std::exp((x - mx) / double(o.temperature)), int32_t(i)});
  }
  int64_t keep = int64_t(c.size());
  if (o.top_k > 0 && o.top_k < keep) {
    std::nth_element(c.begin(), c.begin() + o.top_k, c.end());
    keep = o.top_k;
  }
  std::sort(c.begin(), c.begin() + keep);
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += c[size_t(i)].p;
  if (o.top_p < 1.0f) {
    double need = double(o.top_p) * total, run = 0;
    int64_t n = 0;
    while (n < keep && run < need) run += c[size_t(n++)].p;
    keep = std::max<int64_t>(n, 1);
    total = 0;
    for (int64_t i = 0; i < keep; ++i) total += c[size_t(i)].p;
  }
  const double target = sampling_uniform(o.seed, r) * total;
  double run = 0;
  for (int64_t i = 0; i < keep; ++i) {
    run += c[size_t(i)].p;
    if (run > target) return c[size_t(i)].id;
  }
  return c[size_t(keep - 1)].id;  // u * total rounded up to the very end of the cumulative sum
}

}  // namespace

double sampling_uniform(uint64_t seed, int64_t row) {
  return double(splitmix64(splitmix64(seed) ^ uint64_t(row)) >> 11) * 0x1p-53;
}

void sample(const Tensor& logits, const Tensor& ids, const SamplingOptions& o) {
  const char* op = "sample";
  check(logits.ndim() == 2 && logits.is_contiguous() && (logits.dtype() == DType::f32 || logits.dtype() == DType::bf16),
        op, "logits = ", logits.describe(), " but expected contiguous [batch, vocab] f32 or bf16");
  check(ids.ndim() == 1 && ids.shape(0) == logits.shape(0) && ids.dtype() == DType::i32 && ids.is_contiguous(), op,
        "ids = ", ids.describe(), " but expected contiguous [", logits.shape(0), "] i32");
  check(o.temperature >= 0.0f && std::isfinite(o.temperature), op, "temperature = ", o.temperature, " but must be >= 0");
  check(o.top_p > 0.0f && o.top_p <= 1.0f, op, "top_p = ", o.top_p, " but must be in (0, 1]");
  check(o.top_k >= 0, op, "top_k = ", o.top_k, " but must be >= 0 (0 keeps every id)");
  const int64_t b = logits.shape(0), v = logits.shape(1);
  check(v >= 1 || b == 0, op, "vocab is empty");
  const int64_t row_bytes = v * int64_t(dtype_size(logits.dtype()));
  parallel_ranges(b, 1, [&](int64_t r0, int64_t r1) {
    std::vector<Candidate> c;
    c.reserve(static_cast<size_t>(v));
    for (int64_t r = r0; r < r1; ++r)
      ids.data_as<int32_t>()[r] = sample_row(logits.data_as<const char>() + r * row_bytes, logits.dtype(), v, o, r, c);
  });
  // An exception must not cross an OpenMP region, so bad rows are marked -1 and reported here.
  for (int64_t r = 0; r < b; ++r)
    check(ids.data_as<int32_t>()[r] >= 0, op, "row ", r, " of logits has no finite value (all NaN or -inf)");
}

}  // namespace sol
