#pragma once
// moe_routing's whole-op entries per backend (ops/common/op_backends.h), chosen once by the
// logits' device after the shared checks (shapes, dtypes, options, one device).
#include "ops/common/op_backends.h"
#include "sol/routing.h"

namespace sol {

using RoutingEntry = void (*)(const Tensor& logits, const Tensor& topk_idx, const Tensor& topk_weights,
                              const RoutingOptions& o);
const OpBackends<RoutingEntry>& routing_backends();

void moe_routing_cpu(const Tensor& logits, const Tensor& topk_idx, const Tensor& topk_weights, const RoutingOptions& o);
#ifdef SOL_HAS_CUDA
void moe_routing_cuda(const Tensor& logits, const Tensor& topk_idx, const Tensor& topk_weights, const RoutingOptions& o);
#endif

}  // namespace sol
