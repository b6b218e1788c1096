#pragma once
// Device-only basics the other sm90 headers build on: shared-window addresses, proxy fences,
// register reallocation and warpgroup roles. Compiled by nvcc or NVRTC for sm_90a only.

#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#error "sm90 device headers are compiled by nvcc or NVRTC only"
#endif

#include "kernels/cuda/sm90/sm90_defs.h"

namespace sol::kernels::sm90 {

// 32-bit shared-window address of a pointer into shared memory: what mbarrier, TMA and the
// wgmma descriptors take.
SOL_SM90_DEVICE u32 smem_address(const void* p) { return static_cast<u32>(__cvta_generic_to_shared(p)); }

// Orders this thread's generic-proxy shared-memory accesses before later async-proxy ones
// (TMA store reading what threads wrote, or TMA load overwriting what they read).
SOL_SM90_DEVICE void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Warpgroups: 4 warps, 128 threads; wgmma and setmaxnreg are warpgroup-collective.
constexpr u32 kWarpgroupThreads = 128;

SOL_SM90_DEVICE u32 warpgroup_index() { return threadIdx.x / kWarpgroupThreads; }
SOL_SM90_DEVICE u32 thread_in_warpgroup() { return threadIdx.x % kWarpgroupThreads; }

// Register reallocation between warpgroups (setmaxnreg): the producer gives registers back so
// the consumers' accumulators fit. Counts are multiples of 8 in 24..256; every thread of the
// warpgroup executes it.
template <u32 Regs>
SOL_SM90_DEVICE void setmaxnreg_dec() {
  static_assert(Regs % 8 == 0 && Regs >= 24 && Regs <= 256, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Regs));
}

template <u32 Regs>
SOL_SM90_DEVICE void setmaxnreg_inc() {
  static_assert(Regs % 8 == 0 && Regs >= 24 && Regs <= 256, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Regs));
}

}  // namespace sol::kernels::sm90
