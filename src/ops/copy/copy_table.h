#pragma once
// The copy family's kernel table: one entry per backend, chosen by the operands' device.
// copy_cuda and cast_cuda exist only in builds with the CUDA backend (SOL_HAS_CUDA).
#include "sol/tensor.h"

namespace sol {

using CopyEntry = void (*)(const Tensor& src, const Tensor& dst);

struct CopyTable {
  CopyEntry cpu = nullptr;
  CopyEntry cuda = nullptr;  // contiguous tensors on one CUDA device
  CopyEntry for_device(DeviceType t) const { return t == DeviceType::cuda ? cuda : cpu; }
};

const CopyTable& copy_table();
const CopyTable& cast_table();

void copy_cpu(const Tensor& src, const Tensor& dst);
void cast_cpu(const Tensor& src, const Tensor& dst);
#ifdef SOL_HAS_CUDA
void copy_cuda(const Tensor& src, const Tensor& dst);
void cast_cuda(const Tensor& src, const Tensor& dst);
#endif

// The entry of `table` for the operands' device, or sol::Error naming `op` when this build or
// this backend has none.
CopyEntry copy_entry(const CopyTable& table, const char* op, const Tensor& src, const Tensor& dst);

}  // namespace sol
