#pragma once
// rope's whole-op entries per backend (ops/common/op_backends.h), chosen once by x's device.
#include <cstdint>

#include "ops/common/op_backends.h"
#include "sol/rope.h"

namespace sol {

using RopeEntry = void (*)(const Tensor& x, const Tensor& positions, const RopeTable& table, int64_t rope_offset);
const OpBackends<RopeEntry>& rope_backends();

// The checks that read no element (both backends, before either runs), and the positions'
// range check on host memory (each backend reads the positions where they are).
void rope_validate(const Tensor& x, const Tensor& positions, const RopeTable& table, int64_t rope_offset);
void rope_check_positions(const int32_t* pos, int64_t tokens, const RopeTable& table);

void rope_cpu(const Tensor& x, const Tensor& positions, const RopeTable& table, int64_t rope_offset);
#ifdef SOL_HAS_CUDA
void rope_cuda(const Tensor& x, const Tensor& positions, const RopeTable& table, int64_t rope_offset);
#endif

}  // namespace sol
