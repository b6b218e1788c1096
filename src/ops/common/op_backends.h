#pragma once
// An op's whole-op entries per backend, chosen once at the op's entry by its operands' device.
// The CPU entry runs the family's per-ISA kernel sets (core/kernel_table.h); a device entry is
// the whole op on that device (its kernels are NVRTC programs, not row primitives, so they do
// not share the CPU sets' struct). An entry a build lacks is null, and backend_entry says why.
#include "sol/device.h"
#include "sol/error.h"
#include "sol/tensor.h"

namespace sol {

template <class Fn>
struct OpBackends {
  Fn cpu = nullptr;
  Fn cuda = nullptr;  // operands on one CUDA device; null in builds without the CUDA backend
  Fn for_device(DeviceType t) const { return t == DeviceType::cuda ? cuda : cpu; }
};

// The entry of `backends` for `device`, or sol::Error naming `op` when this build or this
// machine has none (the device discovery's reason).
template <class Fn>
Fn backend_entry(const OpBackends<Fn>& backends, const char* op, Device device) {
  const Fn e = backends.for_device(device.type);
  if (!e) fail(op, "operands are on ", device, " but ", cuda_discovery().reason);
  return e;
}

// The CUDA entry `fn` where this build has the backend, else null: lets a table be written
// once, without an #ifdef around its definition.
#ifdef SOL_HAS_CUDA
#define SOL_CUDA_ENTRY(fn) (fn)
#else
#define SOL_CUDA_ENTRY(fn) nullptr
#endif

}  // namespace sol
