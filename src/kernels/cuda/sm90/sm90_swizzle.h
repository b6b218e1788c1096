#pragma once
// Shared-memory swizzles of TMA and wgmma, as functions of the byte address.
//
// PTX ISA, "Tensor-copy swizzling modes" and the wgmma shared-memory layouts: with an N-byte
// swizzle (N = 32, 64, 128) the 16-byte chunk index inside an N-byte row is XORed with the row
// index taken modulo N/16, and the pattern repeats every 8 rows of 128 bytes, i.e. every
// N * 8 bytes. In address bits that is: bits [4, 4+b) ^= bits [7, 7+b) with b = log2(N/16).
// Both the TMA unit (writing) and the tensor cores (reading through a descriptor) apply it to
// the *absolute* shared address, so every swizzled buffer starts on a multiple of its span.

#include "kernels/cuda/sm90/sm90_defs.h"

namespace sol::kernels::sm90 {

// The numbering is the wgmma descriptor's layout-type field (bits 62-63), so the enum converts
// straight into it; TMA's CUtensorMapSwizzle numbers the same modes differently (tma_swizzle).
enum class Swizzle : u32 { none = 0, b128 = 1, b64 = 2, b32 = 3 };

// Bytes of one swizzled row (the largest inner box a TMA load may write in this mode); 16 for
// none, where the unit of the interleaved layout is one 16-byte chunk.
SOL_SM90_HD constexpr u32 swizzle_bytes(Swizzle s) {
  return s == Swizzle::b128 ? 128u : s == Swizzle::b64 ? 64u : s == Swizzle::b32 ? 32u : 16u;
}

// How many address bits take part: log2(swizzle_bytes / 16).
SOL_SM90_HD constexpr u32 swizzle_bits(Swizzle s) {
  return s == Swizzle::b128 ? 3u : s == Swizzle::b64 ? 2u : s == Swizzle::b32 ? 1u : 0u;
}

// Alignment a swizzled buffer needs: the period of the pattern (8 rows of the swizzle width).
SOL_SM90_HD constexpr u32 swizzle_period_bytes(Swizzle s) { return 8u * swizzle_bytes(s); }

// Physical byte address of logical byte address `addr` (absolute shared address, or an offset
// from a buffer aligned to swizzle_period_bytes). An involution: applying it twice is identity.
SOL_SM90_HD constexpr u32 swizzle_address(Swizzle s, u32 addr) {
  const u32 mask = ((1u << swizzle_bits(s)) - 1u) << 4;
  return addr ^ ((addr >> 3) & mask);
}

// CUtensorMapSwizzle's value for the same mode (cuda.h: NONE 0, 32B 1, 64B 2, 128B 3).
SOL_SM90_HD constexpr u32 tma_swizzle(Swizzle s) {
  return s == Swizzle::b32 ? 1u : s == Swizzle::b64 ? 2u : s == Swizzle::b128 ? 3u : 0u;
}

}  // namespace sol::kernels::sm90
