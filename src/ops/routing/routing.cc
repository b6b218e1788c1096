#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "kernels/route.h"
#include "hw/kernel_select.h"
#include "core/parallel.h"
#include "ops/common/validate.h"
#include "ops/routing/routing_backends.h"
#include "ops/routing/scores.h"
#include "sol/error.h"
#include "sol/routing.h"
#include "sol/tensor.h"

namespace sol {

namespace routing_detail {

const kernels::RoutingKernels& routing_kernels() {
  return select_kernels(kernels::routing_kernel_table(), "moe_routing");
}

}  // namespace routing_detail

namespace {

// The ranking of sol/routing.h: numbers above NaN, larger first, then the lower index.
bool better(float sa, int64_t ia, float sb, int64_t ib) {
  const bool na = std::isnan(sa), nb = std::isnan(sb);
  if (na != nb) return nb;
  if (!na && sa != sb) return sa > sb;
  return ia < ib;
}

// Keeps the best `k` (value, index) pairs seen, sorted best first; insertion is cheap for the
// k <= 16 routing uses and needs no allocation.
struct TopK {
  static constexpr int kMax = 64;
  int64_t k, size = 0;
  std::array<float, kMax> val;
  std::array<int64_t, kMax> idx;
  explicit TopK(int64_t k_) : k(k_) {}
  void offer(float v, int64_t i) {
    if (size == k && !better(v, i, val[size_t(k - 1)], idx[size_t(k - 1)])) return;
    int64_t pos = size < k ? size++ : k - 1;
    while (pos > 0 && better(v, i, val[size_t(pos - 1)], idx[size_t(pos - 1)])) {
      val[size_t(pos)] = val[size_t(pos - 1)];
      idx[size_t(pos)] = idx[size_t(pos - 1)];
      --pos;
    }
    val[size_t(pos)] = v;
    idx[size_t(pos)] = i;
  }
};

void validate(const Tensor& logits, const Tensor& idx, const Tensor& w, const RoutingOptions& o) {
  const char* op = "moe_routing";
  check(logits.ndim() == 2 && (logits.dtype() == DType::f32 || logits.dtype() == DType::bf16), op,
        "logits must be [tokens, experts] f32 or bf16, got ", describe_text(logits));
  check(logits.is_contiguous(), op, "logits must be contiguous");
  const int64_t t = logits.shape(0), e = logits.shape(1);
  check(e >= 1, op, "logits.shape[1] = 0: no experts");
  check(o.n_group >= 1 && e % o.n_group == 0, op, "n_group = ", o.n_group, " must divide the ", e, " experts");
  check(o.topk_group >= 1 && o.topk_group <= o.n_group, op, "topk_group = ", o.topk_group,
        " but must be in [1, n_group = ", o.n_group, "]");
  const int64_t eligible = o.topk_group * (e / o.n_group);
  check(o.top_k >= 1 && o.top_k <= eligible && o.top_k <= TopK::kMax, op, "top_k = ", o.top_k,
        " but must be in [1, ", std::min<int64_t>(eligible, TopK::kMax), "] (", eligible,
        " experts are eligible, at most ", TopK::kMax, " supported)");
  check(o.scoring != Scoring::sigmoid || o.n_group == 1 || e / o.n_group >= 2, op,
        "sigmoid group scores sum each group's best two experts, so groups need >= 2 experts");
  check(std::isfinite(o.scaling), op, "scaling = ", o.scaling, " but must be finite");
  check(idx.ndim() == 2 && idx.shape(0) == t && idx.shape(1) == o.top_k &&
            (idx.dtype() == DType::i32 || idx.dtype() == DType::i64) && idx.is_contiguous(),
        op, "topk_idx = ", describe_text(idx), " but expected contiguous [", t, ", ", o.top_k, "] i32 or i64");
  check(w.ndim() == 2 && w.shape(0) == t && w.shape(1) == o.top_k && w.dtype() == DType::f32 && w.is_contiguous(),
        op, "topk_weights = ", describe_text(w), " but expected contiguous [", t, ", ", o.top_k, "] f32");
  if (const Tensor* b = o.correction_bias)
    check(b->ndim() == 1 && b->shape(0) == e && b->dtype() == DType::f32 && b->is_contiguous(), op,
          "correction_bias = ", describe_text(*b), " but expected [", e, "] f32");
  require_same_device(op, "logits", logits, "topk_idx", idx);
  require_same_device(op, "logits", logits, "topk_weights", w);
  if (const Tensor* b = o.correction_bias) require_same_device(op, "logits", logits, "correction_bias", *b);
  require_no_overlap(op, "topk_idx", idx, "topk_weights", w);
}

}  // namespace

RoutingOptions deepseek_v3_routing(const Tensor* correction_bias) {
  RoutingOptions o;
  o.top_k = 8;
  o.n_group = 8;
  o.topk_group = 4;
  o.scoring = Scoring::sigmoid;
  o.renormalize = true;
  o.scaling = 2.5f;
  o.correction_bias = correction_bias;
  return o;
}

namespace {

// Per-thread rows of one token's routing.
struct TokenScratch {
  std::vector<float> scores, sel, scratch;
  std::vector<char> eligible;
  std::vector<int32_t> key, cand_key, cand_idx;
  std::vector<uint8_t> group_ok;
  TokenScratch(int64_t e, int64_t n_group)
      : scores(size_t(e)), sel(size_t(e)), scratch(size_t(e)), eligible(size_t(e)), key(size_t(e)),
        cand_key(size_t(e + 16)), cand_idx(size_t(e + 16)), group_ok(size_t(n_group)) {}
};

// The scalar choice: every expert offered to the bounded insertion.
void choose_scalar(const RoutingOptions& o, int64_t e, const float* bias, TokenScratch& s, TopK& top) {
  const int64_t per_group = e / o.n_group;
  for (int64_t i = 0; i < e; ++i) s.sel[size_t(i)] = bias ? s.scores[size_t(i)] + bias[i] : s.scores[size_t(i)];
  if (o.n_group > 1) {
    TopK groups(o.topk_group);
    for (int64_t g = 0; g < o.n_group; ++g) {
      TopK best(o.scoring == Scoring::sigmoid ? 2 : 1);
      for (int64_t i = g * per_group; i < (g + 1) * per_group; ++i) best.offer(s.sel[size_t(i)], i);
      groups.offer(o.scoring == Scoring::sigmoid ? best.val[0] + best.val[1] : best.val[0], g);
    }
    std::fill(s.eligible.begin(), s.eligible.end(), 0);
    for (int64_t j = 0; j < groups.size; ++j)
      std::fill_n(s.eligible.begin() + groups.idx[size_t(j)] * per_group, per_group, 1);
  }
  for (int64_t i = 0; i < e; ++i)
    if (o.n_group == 1 || s.eligible[size_t(i)]) top.offer(s.sel[size_t(i)], i);
}

// The vector choice, same ranking on order keys (kernels/route.h): groups and the top k are
// ranked in registers; only when more than 16 experts could reach the top k (ties, NaN, k > 16)
// are the candidates offered to the insertion. Writes the choice, best first, to best.
void choose_vector(const kernels::RoutingKernels& k, const RoutingOptions& o, int64_t e, const float* bias,
                   TokenScratch& s, int32_t* best) {
  k.keys(s.scores.data(), bias, e, o.n_group, o.topk_group, o.scoring == Scoring::sigmoid, s.key.data(),
         s.group_ok.data());
  const int64_t n = k.topk(s.key.data(), e, e / o.n_group, o.n_group > 1 ? s.group_ok.data() : nullptr, o.top_k,
                           s.cand_key.data(), s.cand_idx.data(), best);
  if (n <= 16) return;
  TopK top(o.top_k);
  for (int64_t j = 0; j < n; ++j) top.offer(kernels::route_key_score(s.cand_key[size_t(j)]), s.cand_idx[size_t(j)]);
  for (int64_t j = 0; j < o.top_k; ++j) best[j] = int32_t(top.idx[size_t(j)]);
}

}  // namespace

namespace {

// The routing itself, into i32 indices (validated by the caller).
void route_i32(const Tensor& logits, const Tensor& topk_idx, const Tensor& topk_weights, const RoutingOptions& o) {
  const int64_t tokens = logits.shape(0), e = logits.shape(1), per_group = e / o.n_group;
  const kernels::RoutingKernels& k = routing_detail::routing_kernels();
  const routing_detail::ScoreRow scores_of{&k, &tuning().params};
  const float* bias = o.correction_bias ? o.correction_bias->data_as<const float>() : nullptr;
  const int64_t row_bytes = e * int64_t(dtype_size(logits.dtype()));
  // The vector choice needs groups of whole 16-lane vectors (DeepSeek-V3: 32 experts), at most
  // 16 of them; other shapes take the scalar choice on every path.
  const bool vector_choice = k.keys && (o.n_group == 1 || (per_group % 16 == 0 && o.n_group <= 16));
  if (k.sigmoid_rows && o.scoring == Scoring::sigmoid && kernels::route_sigmoid_rows_fits(e, o.n_group)) {
    const kernels::RouteSigmoidRows r{logits.data(), logits.dtype(), e, o.n_group, o.topk_group, o.top_k, bias,
                                      o.renormalize, o.scaling, topk_idx.data_as<int32_t>(), topk_weights.data_as<float>()};
    parallel_ranges(tokens, 16, [&](int64_t t0, int64_t t1) { k.sigmoid_rows(r, t0, t1); });
    return;
  }
  if (k.softmax_lanes && o.scoring == Scoring::softmax &&
      kernels::route_softmax_lanes_fit(e, o.top_k, o.n_group, logits.dtype())) {
    const kernels::RouteSoftmaxLanes r{logits.data_as<const float>(), e, o.top_k, bias, o.renormalize, o.scaling,
                                       topk_idx.data_as<int32_t>(), topk_weights.data_as<float>()};
    parallel_ranges(tokens, 16, [&](int64_t t0, int64_t t1) { k.softmax_lanes(r, t0, t1); });
    return;
  }
  parallel_ranges(tokens, 16, [&](int64_t t0, int64_t t1) {
    TokenScratch s(e, o.n_group);
    for (int64_t t = t0; t < t1; ++t) {
      // The rows are small (1 KiB for V3) and the work per row large: fetch a few rows ahead,
      // as the hardware prefetcher does not keep up with a stream this slow.
      if (t + 4 < tokens)
        for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(logits.data_as<const char>() + (t + 4) * row_bytes + b);
      scores_of(logits.data_as<const char>() + t * row_bytes, logits.dtype(), e, o.scoring, s.scores.data(),
                s.scratch.data());
      int32_t* out_idx = topk_idx.data_as<int32_t>() + t * o.top_k;
      if (vector_choice) {
        choose_vector(k, o, e, bias, s, out_idx);
      } else {
        TopK top(o.top_k);
        choose_scalar(o, e, bias, s, top);
        for (int64_t j = 0; j < o.top_k; ++j) out_idx[j] = int32_t(top.idx[size_t(j)]);
      }
      float* out_w = topk_weights.data_as<float>() + t * o.top_k;
      float sum = 0;
      for (int64_t j = 0; j < o.top_k; ++j) {
        out_w[j] = s.scores[size_t(out_idx[j])];
        sum += out_w[j];
      }
      const float factor = o.renormalize ? o.scaling / sum : o.scaling;
      for (int64_t j = 0; j < o.top_k; ++j) out_w[j] *= factor;
    }
  });
}

}  // namespace

const OpBackends<RoutingEntry>& routing_backends() {
  static const OpBackends<RoutingEntry> b{moe_routing_cpu, SOL_CUDA_ENTRY(moe_routing_cuda)};
  return b;
}

void moe_routing(const Tensor& logits, const Tensor& topk_idx, const Tensor& topk_weights, const RoutingOptions& o) {
  validate(logits, topk_idx, topk_weights, o);
  backend_entry(routing_backends(), "moe_routing", logits.device())(logits, topk_idx, topk_weights, o);
}

void moe_routing_cpu(const Tensor& logits, const Tensor& topk_idx, const Tensor& topk_weights, const RoutingOptions& o) {
  if (topk_idx.dtype() == DType::i32) return route_i32(logits, topk_idx, topk_weights, o);
  // i64 indices (DeepEP's and PyTorch's topk_idx type): the kernels write i32 (half the bytes,
  // twice the lanes), widened afterwards; 32 KiB per 1,024 tokens of V3, noise beside the logits.
  Buffer narrow(DType::i32, {topk_idx.shape(0), topk_idx.shape(1)});
  route_i32(logits, narrow.tensor(), topk_weights, o);
  const int32_t* from = narrow.tensor().data_as<const int32_t>();
  int64_t* to = topk_idx.data_as<int64_t>();
  parallel_ranges(topk_idx.numel(), 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) to[i] = from[i];
  });
}

}  // namespace sol
