#pragma once
// The issue order of the fp8 GEMM's two consumers (sm90_gemm_fp8_block.cuh), as host-callable
// rules the CPU model runs too. Strict alternation over the kernel's life: consumer 0 issues a
// K block's QGMMAs and passes the turn; consumer 1 waits for it, issues the same block, passes
// it back; consumer 0 waits for that before its next block (of this tile or the next). Each
// pass is consumed by the partner's wait before the same consumer can pass again, so a named
// barrier never holds two passes; consumer 0 takes consumer 1's last pass after its last tile,
// so none is left half-arrived at exit.

#include "kernels/cuda/sm90/sm90_defs.h"

namespace sol::kernels::sm90 {

// Whether `consumer` waits for its turn before its block number `issued` (0-based, counted over
// all its tiles).
SOL_SM90_HD constexpr bool fp8_waits_turn(u32 consumer, u32 issued) { return consumer == 1 || issued > 0; }

// Whether consumer 0 takes one more turn after its last block: it issued any.
SOL_SM90_HD constexpr bool fp8_takes_last_turn(u32 consumer, u32 issued) { return consumer == 0 && issued > 0; }

}  // namespace sol::kernels::sm90
