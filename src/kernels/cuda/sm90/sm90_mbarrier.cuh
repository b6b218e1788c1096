#pragma once
// mbarrier operations (PTX ISA, "Parallel synchronization: mbarrier"). A barrier completes a
// phase when its pending arrivals reach zero and its transaction count (bytes announced with
// expect_tx, taken off as TMA lands them) is zero; waiters name the phase by its parity
// (sm90_ring.h says which parity each role waits on).

#include "kernels/cuda/sm90/sm90_device.cuh"

namespace sol::kernels::sm90 {

// `bar` is the shared-window address of an 8-byte aligned u64.
SOL_SM90_DEVICE void mbar_init(u32 bar, u32 arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}

// Makes initialised barriers visible to the async proxy (TMA completes on them) and to the
// other threads; follow with a block-wide barrier.
SOL_SM90_DEVICE void mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

SOL_SM90_DEVICE void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// One arrival that also announces `bytes` of TMA traffic the phase must wait for.
SOL_SM90_DEVICE void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

SOL_SM90_DEVICE bool mbar_try_wait(u32 bar, u32 parity) {
  u32 done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// Spins until the phase with this parity has completed (try_wait itself suspends the thread
// for a hardware-chosen time, so the loop does not hammer the barrier).
SOL_SM90_DEVICE void mbar_wait(u32 bar, u32 parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

}  // namespace sol::kernels::sm90
