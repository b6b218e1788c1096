#pragma once
// Router scores of one token on the active path (sigmoid or softmax of the logits, in f32).
// Shared by moe_routing and its reference, so the reference checks the selection and weighting
// logic on exactly the scores the op saw; the score kernels are checked against fp64 on their own.
#include <cstdint>

#include "kernels/route.h"
#include "sol/routing.h"
#include "sol/tuning.h"

namespace sol::routing_detail {
// The selection scores of one token's logits with one level's kernels and the tuning in force
// (both picked once per call).
struct ScoreRow {
  const kernels::RoutingKernels* k;
  const TuningParams* tp;
  void operator()(const void* logits, DType t, int64_t experts, Scoring s, float* out, float* scratch) const {
    if (s == Scoring::sigmoid) k->sigmoid_row(logits, t, out, experts);
    else k->softmax_row(logits, t, out, DType::f32, experts, scratch, false, *tp);
  }
};
const kernels::RoutingKernels& routing_kernels();
inline ScoreRow score_function() { return {&routing_kernels(), &tuning().params}; }
}  // namespace sol::routing_detail
