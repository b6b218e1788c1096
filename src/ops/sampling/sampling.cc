#include "sol/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/select.h"
#include "hw/kernel_select.h"
#include "core/parallel.h"
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

using CollectFn = int64_t (*)(const void*, DType, int64_t, float, int32_t, uint32_t*, int32_t*);
using KeepBestFn = uint32_t (*)(uint32_t*, int32_t*, int64_t, int64_t, uint32_t*);
using OrderFn = void (*)(uint32_t*, int32_t*, int64_t, uint64_t*);

// Per-thread buffers of the filtered pass.
struct Workspace {
  // Elements filtered between two looks at the buffer. The first chunk is small: without a
  // hint it passes whole (the threshold still -inf), and its cut raises the threshold early.
  // Later ones are longer, as each look costs a call (~500 calls a row at 256).
  static constexpr int64_t kFirstChunk = 256, kChunk = 1024;
  std::vector<Candidate> c;
  std::vector<uint32_t> key, scratch;  // candidates as order keys (kernels/select.h)
  std::vector<int32_t> idx;
  std::vector<uint64_t> words;  // order_best_first's scratch
  CollectFn collect;
  KeepBestFn keep_best;
  OrderFn order_best_first;
  float hint = -INFINITY;  // for the next row's filter (top_candidates)
};

// How a row's filtered pass ended.
enum class Pass {
  done,         // w.c holds the best k candidates (or none: no finite logit, or a +inf one)
  full_path,    // a probability tie across the k-th: order by probability over every logit
  retry,        // fewer than k logits reached the hint: the pass must run again without it
};

// The top_k path: one filtered pass collects the best k finite logits by (logit larger, id
// lower). Elements past a full buffer need logit > the k-th best to enter, since an equal one
// has a higher id. exp is monotonic, so these are the best k by (probability, id) unless a
// logit below the k-th maps to the same probability (exp underflow, or logits closer than
// exp's resolution, or -0 against +0, which the keys order): then the caller takes the full
// path, which orders by probability itself. Leaves the candidates in w.c, the row's max logit
// in *mx and the k-th best logit in *kth. Nothing after the pass reads the row again.
//
// hint (a logit, or -inf for none): only logits >= hint enter from the start, instead of every
// logit until the running k-th best has risen. Without it, a random row lets ~k ln(v / k)
// logits through the filter (~400 of 129280 for k 50, each costing a mispredicted branch) and
// needs ~7 cuts; with a hint a little below the k-th best, ~2k and one cut. The hint is only
// a guess (the caller takes it from the previous row): when fewer than k logits reach it, the
// result would be wrong, so the pass reports retry. When k or more reach it, every one of the
// best k does, and the result is exact: the hint changes the speed, never the answer.
Pass top_candidates(const void* row, DType t, int64_t v, int64_t k, double temperature, float hint, Workspace& w,
                    double* mx, float* kth) {
  // The buffer is cut to the best k once it holds more than 2k + 64: a cut costs a few passes
  // over the buffer, so cutting early keeps the threshold close to the running k-th best.
  const int64_t cut_above = 2 * k + 64;
  const size_t room = size_t(cut_above + Workspace::kChunk + kernels::kSelectSlack);
  w.key.resize(room);
  w.idx.resize(room);
  w.scratch.resize(4 * room);
  // x > at_least <=> x >= hint, for every float x (no float lies between the two).
  const float at_least = hint > -INFINITY ? std::nextafter(hint, -INFINITY) : -INFINITY;
  *kth = -INFINITY;
  bool cut = false;
  int64_t n = 0;
  const size_t es = dtype_size(t);
  for (int64_t i0 = 0, len; i0 < v; i0 += len) {
    len = std::min(i0 == 0 ? Workspace::kFirstChunk : Workspace::kChunk, v - i0);
    n += w.collect(static_cast<const char*>(row) + size_t(i0) * es, t, len, std::max(*kth, at_least), int32_t(i0),
                   w.key.data() + n, w.idx.data() + n);
    // The first cut comes as soon as k have passed (the threshold rises early); a hinted pass
    // also cuts at the end with exactly k, to learn the k-th.
    const bool last = i0 + len == v;
    if (n > cut_above || (n > k && (!cut || last)) || (last && n == k && hint > -INFINITY)) {
      *kth = kernels::key_value(w.keep_best(w.key.data(), w.idx.data(), n, k, w.scratch.data()));
      n = k;
      cut = true;
    }
  }
  // Every cut held k logits >= hint; without one, fewer than k reached the hint.
  if (hint > -INFINITY && !cut) return Pass::retry;
  w.c.clear();
  if (n == 0) return Pass::done;
  const uint32_t best = *std::max_element(w.key.begin(), w.key.begin() + n);
  *mx = kernels::key_value(best);
  if (!std::isfinite(*mx)) return Pass::done;  // a +inf logit: an error, as on the full path
  if (temperature == 0) {  // greedy: the first best (the buffer is in increasing id)
    w.c.push_back({1.0, w.idx[size_t(std::find(w.key.begin(), w.key.begin() + n, best) - w.key.begin())]});
    return Pass::done;
  }
  // Best first by (logit, id): by probability, then id, too, unless two logits share a
  // probability (the caller checks the order and sorts only then).
  w.words.resize(size_t(n + kernels::kSelectSlack));
  w.order_best_first(w.key.data(), w.idx.data(), n, w.words.data());
  auto prob = [&](double x) { return std::exp((x - *mx) / temperature); };
  for (int64_t i = 0; i < n; ++i) w.c.push_back({prob(kernels::key_value(w.key[size_t(i)])), w.idx[size_t(i)]});
  // After a cut, logits were left out, all <= the k-th best; below it, p must fall.
  return !cut || prob(std::nextafter(*kth, -INFINITY)) < prob(*kth) ? Pass::done : Pass::full_path;
}

// Every finite logit as a candidate (top_k 0, or the rare probability tie above).
void all_candidates(const void* row, DType t, int64_t v, double temperature, Workspace& w, double* mx) {
  auto logit = [&](int64_t i) -> double {
    double x = t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(row)[i]) : static_cast<const float*>(row)[i];
    return std::isnan(x) ? -INFINITY : x;
  };
  *mx = -INFINITY;
  int64_t arg = -1;
  for (int64_t i = 0; i < v; ++i)
    if (double x = logit(i); x > *mx) *mx = x, arg = i;
  w.c.clear();
  if (arg < 0 || !std::isfinite(*mx)) return;
  if (temperature == 0) {
    w.c.push_back({1.0, int32_t(arg)});
    return;
  }
  for (int64_t i = 0; i < v; ++i) {
    double x = logit(i);
    if (x > -INFINITY) w.c.push_back({std::exp((x - *mx) / temperature), int32_t(i)});
  }
}

// The hint for the next row of a thread, from this row's max and k-th best logit: below the
// k-th by its distance to the max. Rows of one batch come from one model and temperature; on
// rows of i.i.d. logits (uniform or normal) the k-th best varies by ~sqrt(k) / density between
// rows and the max lies ~k / density above it, so the margin is ~sqrt(k) deviations wide and
// ~2k logits reach the hint. That needs k large enough: at k 1 the max is the k-th, the margin
// is 0 and half the rows would retry (measured: k 1 slowed with it), so small k
// take no hint (their filter lets only ~k ln(v / k) through anyway). A row that had to retry,
// or took the full path, gives no hint.
constexpr int64_t kHintFromK = 16;
float next_hint(int64_t k, double mx, float kth) {
  if (k < kHintFromK || !(kth > -INFINITY) || !std::isfinite(mx)) return -INFINITY;
  const float h = float(double(kth) - (mx - double(kth)));
  return std::isfinite(h) ? h : -INFINITY;
}

int32_t sample_row(const void* row, DType t, int64_t v, const SamplingOptions& o, int64_t r, Workspace& w) {
  const double temperature = o.temperature;
  // Greedy is top_k = 1; a top_k within reach of the filter (small against the row) takes it.
  const int64_t k = temperature == 0 ? 1 : o.top_k;
  double mx = -INFINITY;
  Pass pass = Pass::full_path;
  if (k > 0 && k <= 4096 && k < v) {
    float kth;
    pass = top_candidates(row, t, v, k, temperature, w.hint, w, &mx, &kth);
    if (pass == Pass::retry) {
      pass = top_candidates(row, t, v, k, temperature, -INFINITY, w, &mx, &kth);
      w.hint = -INFINITY;
    } else {
      w.hint = pass == Pass::done ? next_hint(k, mx, kth) : -INFINITY;
    }
  }
  if (pass == Pass::full_path) all_candidates(row, t, v, temperature, w, &mx);
  auto& c = w.c;
  if (c.empty()) return -1;  // reported by the caller, outside the parallel region
  if (temperature == 0) return c[0].id;
  int64_t keep = int64_t(c.size());
  if (o.top_k > 0 && o.top_k < keep) {
    std::nth_element(c.begin(), c.begin() + o.top_k, c.end());
    keep = o.top_k;
  }
  if (!std::is_sorted(c.begin(), c.begin() + keep)) std::sort(c.begin(), c.begin() + keep);
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
        op, "logits = ", describe_text(logits), " but expected contiguous [batch, vocab] f32 or bf16");
  check(ids.ndim() == 1 && ids.shape(0) == logits.shape(0) && ids.dtype() == DType::i32 && ids.is_contiguous(), op,
        "ids = ", describe_text(ids), " but expected contiguous [", logits.shape(0), "] i32");
  check(o.temperature >= 0.0f && std::isfinite(o.temperature), op, "temperature = ", o.temperature, " but must be >= 0");
  check(o.top_p > 0.0f && o.top_p <= 1.0f, op, "top_p = ", o.top_p, " but must be in (0, 1]");
  check(o.top_k >= 0, op, "top_k = ", o.top_k, " but must be >= 0 (0 keeps every id)");
  const int64_t b = logits.shape(0), v = logits.shape(1);
  check(v >= 1 || b == 0, op, "vocab is empty");
  check(v <= INT32_MAX, op, "vocab = ", v, " but ids are i32");
  const int64_t row_bytes = v * int64_t(dtype_size(logits.dtype()));
  const kernels::SelectKernels& k = select_kernels(kernels::select_kernel_table(), "sample");
  parallel_ranges(b, 1, [&](int64_t r0, int64_t r1) {
    Workspace w;
    w.collect = k.collect_above;
    w.keep_best = k.keep_best;
    w.order_best_first = k.order_best_first;
    for (int64_t r = r0; r < r1; ++r)
      ids.data_as<int32_t>()[r] = sample_row(logits.data_as<const char>() + r * row_bytes, logits.dtype(), v, o, r, w);
  });
  // An exception must not cross an OpenMP region, so bad rows are marked -1 and reported here.
  for (int64_t r = 0; r < b; ++r)
    check(ids.data_as<int32_t>()[r] >= 0, op, "row ", r, " of logits has no finite value (all NaN or -inf)");
}

}  // namespace sol
