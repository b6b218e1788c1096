#pragma once
// MoE routing: for each token, choose top_k experts from router logits and weight them.
//
//   scores    = sigmoid(logits)               (Scoring::sigmoid, DeepSeek-V3)
//             | softmax(logits) over experts   (Scoring::softmax, Mixtral/DeepSeek-V2 style)
//   selection = scores + correction_bias       (bias only steers the choice, as V3's
//                                               e_score_correction_bias; never enters weights)
//   groups    : experts split into n_group equal groups; a group's score is the sum of its two
//               best selection scores (sigmoid) or its best one (softmax); only the topk_group best
//               groups stay eligible (group-limited routing)
//   top_k     : the best top_k eligible experts by selection score, in descending order
//   weights   = scores of the chosen experts, divided by their sum when renormalize, times scaling
//               (V3: n_group 8, topk_group 4, top_k 8, renormalize, scaling 2.5), computed in
//               f32 as score * (scaling / sum), the sum taken in the output order
//
// Ties are broken by the lower index (experts and groups alike). A NaN selection score ranks
// below every number (it is chosen only when fewer than top_k experts have numbers); a chosen
// expert whose score is NaN makes every weight of its token NaN after renormalisation — a
// wrong router output is loud, never silently renormalised away.
//
// logits [T, E] f32 or bf16; correction_bias [E] f32; topk_idx [T, top_k] i32 or i64 (the
// kernels write i32; i64 is widened from it);
// topk_weights [T, top_k] f32.
#include <cstdint>

#include "sol/tensor.h"

namespace sol {

enum class Scoring { sigmoid, softmax };

struct RoutingOptions {
  int64_t top_k = 8;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  Scoring scoring = Scoring::sigmoid;
  bool renormalize = true;
  float scaling = 1.0f;
  const Tensor* correction_bias = nullptr;
};

// DeepSeek-V3's configuration.
RoutingOptions deepseek_v3_routing(const Tensor* correction_bias);

void moe_routing(const Tensor& logits, const Tensor& topk_idx, const Tensor& topk_weights,
                 const RoutingOptions& opt = {});

}  // namespace sol
