#pragma once
// Router scores of one token on the active path (sigmoid or softmax of the logits, in f32).
// Shared by moe_routing and its reference, so the reference checks the selection and weighting
// logic on exactly the scores the op saw; the score kernels are checked against fp64 on their own.
#include <cstdint>

#include "sol/routing.h"

namespace sol::routing_detail {
using ScoreFn = void (*)(const void* logits, DType t, int64_t experts, Scoring s, float* out, float* scratch);
ScoreFn score_function();  // picks the ISA once per call
}  // namespace sol::routing_detail
