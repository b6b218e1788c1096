#pragma once
// Where wgmma leaves the accumulator D of an m64nNk* instruction (PTX ISA, "Register fragments
// and shared memory matrix layouts", the m64nNk16 / m64nNk32 D figure, f32 accumulators): the
// warpgroup's warp w holds rows 16w .. 16w+15; in it, lane l and register i (0 <= i < N/2) hold
//   row = 16w + l / 4 + 8 * ((i / 2) % 2)
//   col = 8 * (i / 4) + 2 * (l % 4) + i % 2
// so registers i, i+1 (i even) are two adjacent columns of one row: one packed bf16x2 store.

#include "kernels/cuda/sm90/sm90_defs.h"

namespace sol::kernels::sm90 {

// Accumulator registers per thread of an m64nN instruction.
SOL_SM90_HD constexpr u32 accum_regs(u32 n) { return n / 2; }

// thread: 0..127 within the warpgroup; reg: 0..N/2-1.
// Which of a thread's two rows register `reg` lies in (0: the upper, 1: eight rows below): code
// that needs a per-row value (a scale) loads two per thread and picks by this.
SOL_SM90_HD constexpr u32 accum_row_half(u32 reg) { return (reg / 2u) % 2u; }

SOL_SM90_HD constexpr u32 accum_row(u32 thread, u32 reg) {
  return 16u * (thread / 32u) + (thread % 32u) / 4u + 8u * accum_row_half(reg);
}

SOL_SM90_HD constexpr u32 accum_col(u32 thread, u32 reg) {
  return 8u * (reg / 4u) + 2u * (thread % 4u) + reg % 2u;
}

}  // namespace sol::kernels::sm90
