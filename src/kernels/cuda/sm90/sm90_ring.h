#pragma once
// Position in a ring of `stages` shared-memory buffers guarded by mbarriers. An mbarrier
// completes phases 0, 1, 2, ...; a waiter names the phase it needs by its parity. Each lap of
// the ring flips the parity a stage's barriers are waited on with:
//   consumer: wait full[stage] with parity `phase`        (the producer's lap-th fill landed)
//   producer: wait empty[stage] with parity `phase ^ 1`  (the consumers freed the previous lap;
//             on the first lap that is the phase "before" phase 0, which counts as complete)
// The device roles and the CPU model walk the ring with this one struct.

#include "kernels/cuda/sm90/sm90_defs.h"

namespace sol::kernels::sm90 {

template <u32 Stages>
struct RingCursor {
  static_assert(Stages >= 1, "a ring needs a stage");
  u32 stage = 0;
  u32 phase = 0;

  SOL_SM90_HD void advance() {
    if (++stage == Stages) {
      stage = 0;
      phase ^= 1u;
    }
  }
  SOL_SM90_HD u32 full_parity() const { return phase; }
  SOL_SM90_HD u32 empty_parity() const { return phase ^ 1u; }
};

}  // namespace sol::kernels::sm90
