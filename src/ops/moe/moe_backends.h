#pragma once
// moe_permute's and moe_unpermute's whole-op entries per backend (ops/common/op_backends.h),
// chosen once by the routing's device, and the pieces both backends share: the permutation plan
// (computed on the host from host routing: the CPU's order, bit for bit, on either backend)
// and unpermute's checks.
#include <cstdint>

#include "ops/common/op_backends.h"
#include "sol/moe_permute.h"

namespace sol {

using PermuteEntry = void (*)(const Tensor& x, const Tensor& topk_idx, int64_t experts, int64_t alignment,
                              const Tensor& x_perm, const Tensor& grouped_layout, const Tensor& row_of);
using UnpermuteEntry = void (*)(const Tensor& y_perm, const Tensor& row_of, const Tensor& topk_weights,
                                const Tensor& out);
const OpBackends<PermuteEntry>& permute_backends();
const OpBackends<UnpermuteEntry>& unpermute_backends();

// A host copy of a device topk_idx (checked to be a contiguous matrix first).
Buffer moe_routing_on_host(const char* op, const Tensor& topk_idx);
// Checks every operand of moe_permute (topk_idx on the host) and writes the plan: row_of's
// [tokens * k] entries to `ro`, grouped_layout's to `gl` (host memory); returns the rows.
int64_t moe_permute_plan(const Tensor& x, const Tensor& topk_idx_host, int64_t experts, int64_t alignment,
                         const Tensor& x_perm, const Tensor& grouped_layout, const Tensor& row_of, int32_t* ro,
                         int32_t* gl);
// moe_unpermute's checks that read no element, and the range check of row_of (host memory).
void moe_unpermute_validate(const Tensor& y_perm, const Tensor& row_of, const Tensor& w, const Tensor& out);
void moe_unpermute_check_rows(const int32_t* ro, int64_t tokens, int64_t k, int64_t rows);

void moe_permute_cpu(const Tensor& x, const Tensor& topk_idx, int64_t experts, int64_t alignment,
                     const Tensor& x_perm, const Tensor& grouped_layout, const Tensor& row_of);
void moe_unpermute_cpu(const Tensor& y_perm, const Tensor& row_of, const Tensor& w, const Tensor& out);
#ifdef SOL_HAS_CUDA
void moe_permute_cuda(const Tensor& x, const Tensor& topk_idx, int64_t experts, int64_t alignment,
                      const Tensor& x_perm, const Tensor& grouped_layout, const Tensor& row_of);
void moe_unpermute_cuda(const Tensor& y_perm, const Tensor& row_of, const Tensor& w, const Tensor& out);
#endif

}  // namespace sol
