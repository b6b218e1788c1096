#pragma once
// The copy family's entries per backend (ops/common/op_backends.h), chosen by the operands'
// device. copy_cuda and cast_cuda exist only in builds with the CUDA backend (SOL_HAS_CUDA).
#include "ops/common/op_backends.h"
#include "sol/tensor.h"

namespace sol {

using CopyEntry = void (*)(const Tensor& src, const Tensor& dst);

const OpBackends<CopyEntry>& copy_backends();
const OpBackends<CopyEntry>& cast_backends();

void copy_cpu(const Tensor& src, const Tensor& dst);
void cast_cpu(const Tensor& src, const Tensor& dst);
#ifdef SOL_HAS_CUDA
void copy_cuda(const Tensor& src, const Tensor& dst);
void cast_cuda(const Tensor& src, const Tensor& dst);
#endif

// The entry for the operands' device, which must be one device; sol::Error naming `op` when
// this build or this machine has none.
CopyEntry copy_entry(const OpBackends<CopyEntry>& backends, const char* op, const Tensor& src, const Tensor& dst);

}  // namespace sol
