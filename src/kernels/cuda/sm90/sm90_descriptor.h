#pragma once
// The wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format", sm_90a):
//   bits  0-13  start address        (shared address & 0x3FFFF) >> 4
//   bits 16-29  leading-dim byte offset (LBO) >> 4
//   bits 32-45  stride-dim byte offset  (SBO) >> 4
//   bits 49-51  matrix base offset   (0 when the swizzle pattern starts on its period)
//   bits 62-63  layout type          0 none, 1 128B, 2 64B, 3 32B swizzle
// For a K-major operand the tensor core reads row r, byte kb of the K slice at
//   none:    start + (r / 8) * SBO + (r % 8) * 16 + (kb / 16) * LBO + kb % 16
//   swizzle: swizzle(start + (r / 8) * SBO + (r % 8) * W + kb),  W = swizzle width, kb < W
// so a TMA box of rows W bytes wide lands as 8-row groups SBO = 8 * W apart, and stepping K
// inside the swizzle width only moves the start address (the hardware swizzles the sum).
// For an MN-major operand (B stored [K, N], read with the instruction's transpose flag; PTX ISA
// "Shared Memory Matrix Layout", canonical layout ((T, W/16, m), (8, k)) : ((1, T, LBO),
// (W/16 T, SBO)), T = 16 bytes of elements) the tensor core reads column n, row k of K at
//   swizzle(start + (n / E) * LBO + (n % E) * e + (k / 8) * SBO + (k % 8) * W),  E = W / e
// (e bytes per element): rows of K are W bytes of MN, 8 rows of K one SBO apart, and each
// W-byte stretch of MN ("(swizzle-byte-size / 16) rows" of 16 bytes) one LBO from the next.

#include "kernels/cuda/sm90/sm90_swizzle.h"

namespace sol::kernels::sm90 {

// Which dimension of an operand is contiguous in shared memory: K (K-major, wgmma's default) or
// M / N (MN-major: the instruction's imm-trans flag set; bf16 and f16 only).
enum class OperandMajor : u32 { k = 0, mn = 1 };

struct SmemDescFields {
  u32 start_address = 0;  // bytes, shared window
  u32 leading_byte_offset = 0;
  u32 stride_byte_offset = 0;
  u32 base_offset = 0;  // 3 bits
  Swizzle swizzle = Swizzle::none;
};

SOL_SM90_HD constexpr u64 encode_smem_desc(const SmemDescFields& f) {
  return u64((f.start_address & 0x3FFFFu) >> 4) | (u64((f.leading_byte_offset & 0x3FFFFu) >> 4) << 16) |
         (u64((f.stride_byte_offset & 0x3FFFFu) >> 4) << 32) | (u64(f.base_offset & 7u) << 49) |
         (u64(static_cast<u32>(f.swizzle)) << 62);
}

// A K-major operand tile written by TMA with `s` swizzle: rows of swizzle_bytes(s), 8-row groups
// one period apart. LBO is ignored by the hardware here (the K slice of one wgmma, 32 bytes,
// never leaves a swizzled row); it is left 0 as the PTX ISA permits.
SOL_SM90_HD constexpr u64 kmajor_desc(u32 smem_address, Swizzle s) {
  return encode_smem_desc({smem_address, 0u, swizzle_period_bytes(s), 0u, s});
}

// An MN-major operand tile written by TMA with `s` swizzle as boxes of swizzle_bytes(s) of MN by
// rows of K: 8 rows of K one period apart (SBO), and the next W bytes of MN in the next box,
// `mn_stride_bytes` on (LBO: one box's bytes when the boxes are packed back to back).
SOL_SM90_HD constexpr u64 mnmajor_desc(u32 smem_address, Swizzle s, u32 mn_stride_bytes) {
  return encode_smem_desc({smem_address, mn_stride_bytes, swizzle_period_bytes(s), 0u, s});
}

// The address field moves by 16 bytes per unit: stepping a descriptor by `bytes` along K adds
// bytes >> 4 to its low bits (the address stays below 2^18, so the field never carries over).
SOL_SM90_HD constexpr u64 advance_smem_desc(u64 desc, u32 bytes) { return desc + u64(bytes >> 4); }

}  // namespace sol::kernels::sm90
