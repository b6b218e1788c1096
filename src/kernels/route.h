#pragma once
// Vector pieces of MoE routing (internal, AVX-512): the selection scores as int32 order keys,
// the group choice, and the top k by ranking a small superset of it in registers, so routing a
// token costs a few hundred vector operations instead of an insertion per expert.
//
// Order key: an int32 whose signed order is sol/routing.h's ranking of selection scores:
// numbers by value, NaN below every number (selection scores are never -0, which would key
// below +0). Ties of equal keys go to the
// lower index, as in the ranking.
#include <cstdint>
#include <cstring>

#include "core/kernel_table.h"
#include "kernels/sigmoid.h"
#include "kernels/softmax.h"
#include "sol/dtype.h"

namespace sol::kernels {

constexpr int32_t kRouteNanKey = INT32_MIN + 1;  // below -inf's key; INT32_MIN marks "not eligible"

// The score a key stands for (NaN read back as a quiet NaN).
inline float route_key_score(int32_t k) {
  if (k == kRouteNanKey) return __builtin_nanf("");
  uint32_t b = uint32_t(k) ^ (k < 0 ? 0x7FFFFFFFu : 0u);
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// key[i] = key of scores[i] + bias[i] (bias may be null). When n_group > 1 (needs n_group <= 16
// and e / n_group a multiple of 16): each group's score is the sum of its two largest selection
// scores (top2) or its largest (NaN when the group has fewer numbers than that), and
// group_ok[g] = 1 for the topk_group best groups (ties: lower group), else 0.
void route_keys_avx512(const float* scores, const float* bias, int64_t e, int64_t n_group, int64_t topk_group,
                       bool top2, int32_t* key, uint8_t* group_ok);

// The best k experts among the eligible ones (group_ok[i / per_group] != 0; group_ok null: all),
// by key. First every expert that can be among them is collected, in increasing index, into
// cand_key / cand_idx (room for e + 16 entries each); the count is returned. When it is at most
// 16 the candidates are ranked in registers and best[0..k) receives the chosen experts, best
// first; otherwise best is untouched and the caller ranks the candidates itself.
int64_t route_topk_avx512(const int32_t* key, int64_t e, int64_t per_group, const uint8_t* group_ok, int64_t k,
                          int32_t* cand_key, int32_t* cand_idx, int32_t* best);

// The whole sigmoid routing of tokens [t0, t1), one token at a time from its logit row to its
// outputs (AVX-512): scores, order keys, group top-2 sums, the group choice and the top k, with
// the scores and keys of a token in a small stack row (no call per stage, no scratch rows), the
// group top-2 sums of all groups taken together by a transposed fold. Same results, bit for bit,
// as sigmoid_row_avx512 + route_keys_avx512 + route_topk_avx512 + the scalar weighting.
struct RouteSigmoidRows {
  const void* logits;  // [tokens, e] f32 or bf16, contiguous
  DType dtype;
  int64_t e, n_group, topk_group, k;
  const float* bias;  // [e] or null
  bool renormalize;
  float scaling;
  int32_t* idx;  // [tokens, k]
  float* weights;  // [tokens, k]
};
// Shapes the fused kernel takes: e a multiple of 16 and at most 256, n_group 1, 2, 4 or 8 with
// groups of whole vectors, 1 <= k <= topk_group * e / n_group.
inline bool route_sigmoid_rows_fits(int64_t e, int64_t n_group) {
  const bool groups_ok = n_group == 1 || n_group == 2 || n_group == 4 || n_group == 8;
  return e % 16 == 0 && e >= 16 && e <= 256 && groups_ok && (e / n_group) % 16 == 0;
}
void route_sigmoid_rows_avx512(const RouteSigmoidRows& r, int64_t t0, int64_t t1);

// Softmax routing with few experts (f32 logits, e <= 16, no groups, k <= 8), 16 tokens per
// step with one token per lane: the row-at-a-time path spends ~250 cycles per token on a few
// experts (reductions across lanes, calls, a rank of 16 lanes), the lanes ~10. Scores are the
// same bits as softmax_row_avx512 for the row (the same exponential on max - x, the sum taken
// in expert order from +0, 1 / sum, each exponential times it); the top k is a per-lane sorted
// insertion in expert order on the order keys (strictly larger moves up, so ties keep the lower
// index); weights as route_sigmoid_rows.
struct RouteSoftmaxLanes {
  const float* logits;  // [tokens, e], contiguous
  int64_t e, k;
  const float* bias;  // [e] or null
  bool renormalize;
  float scaling;
  int32_t* idx;  // [tokens, k]
  float* weights;  // [tokens, k]
};
inline bool route_softmax_lanes_fit(int64_t e, int64_t k, int64_t n_group, DType t) {
  return t == DType::f32 && e >= 1 && e <= 16 && k >= 1 && k <= 8 && k <= e && n_group == 1;
}
void route_softmax_lanes_avx512(const RouteSoftmaxLanes& r, int64_t t0, int64_t t1);

// Routing's kernels at one ISA level: the score rows (every level) and the key ranking and
// fused routers (null below AVX-512: the op ranks with its scalar insertion there).
struct RoutingKernels {
  decltype(&sigmoid_row_scalar) sigmoid_row;
  decltype(&softmax_row_scalar) softmax_row;
  decltype(&route_keys_avx512) keys;
  decltype(&route_topk_avx512) topk;
  decltype(&route_sigmoid_rows_avx512) sigmoid_rows;
  decltype(&route_softmax_lanes_avx512) softmax_lanes;
};
KernelTable<RoutingKernels> routing_kernel_table();

}  // namespace sol::kernels
