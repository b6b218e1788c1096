#pragma once
// CPU model of wgmma.mma_async m64nNk* with both operands in shared memory, A K-major and B
// K-major or (imm-trans-b, bf16) MN-major: decodes the
// 64-bit descriptors field by field (PTX ISA "Matrix Descriptor Format", restated here so that
// an encoding mistake in sm90_descriptor.h shows up), reads the operands by the ISA's canonical
// layouts (restated here too) through the swizzle address function the hardware applies, and scatters D into the 128 threads' registers by the
// PTX ISA's D-fragment figure, written as the element -> (thread, register) direction (the
// device code uses the inverse, sm90_fragment.h). Sums are f32 in K order; the hardware's order
// and internal width are not specified, so tests compare with error norms.

#include <vector>

#include "kernels/cuda/sm90/model/sm90_smem_model.h"
#include "sol/dtype.h"

namespace sol::kernels::sm90::model {

enum class Operand { bf16, e4m3 };

struct DecodedDesc {
  u32 start_address, leading_byte_offset, stride_byte_offset, base_offset;
  Swizzle swizzle;
};

inline DecodedDesc decode_desc(u64 d) {
  return {u32(d & 0x3FFF) << 4, u32((d >> 16) & 0x3FFF) << 4, u32((d >> 32) & 0x3FFF) << 4, u32((d >> 49) & 7),
          static_cast<Swizzle>(u32(d >> 62))};
}

// Byte address of byte `kb` of row `r` of a K-major operand (sm90_descriptor.h's comment).
inline u32 operand_address(const DecodedDesc& d, u32 r, u32 kb) {
  if (d.swizzle == Swizzle::none)
    return d.start_address + (r / 8) * d.stride_byte_offset + (r % 8) * 16 + (kb / 16) * d.leading_byte_offset + kb % 16;
  const u32 width = swizzle_bytes(d.swizzle);
  return swizzle_address(d.swizzle, d.start_address + (r / 8) * d.stride_byte_offset + (r % 8) * width + kb);
}

// Byte address of element (mn, k) of an MN-major operand with a swizzled layout (PTX ISA
// "Shared Memory Matrix Layout", canonical layout ((T, W/16, m), (8, k)) : ((1, T, LBO),
// (W/16 T, SBO)) in elements, T of them per 16 bytes): each row of K holds W bytes of MN, 8 rows
// of K are one SBO apart, and each W bytes of MN one LBO from the next.
inline u32 mn_major_address(const DecodedDesc& d, u32 mn, u32 k, u32 element_bytes) {
  check(d.swizzle != Swizzle::none, "sm90 model", "an interleaved (unswizzled) MN-major operand is not modelled");
  const u32 width = swizzle_bytes(d.swizzle), per_row = width / element_bytes;
  return swizzle_address(d.swizzle, d.start_address + (mn / per_row) * d.leading_byte_offset +
                                        (mn % per_row) * element_bytes + (k / 8) * d.stride_byte_offset + (k % 8) * width);
}

// Per-thread accumulator registers of one warpgroup: reg[thread][i].
struct WarpgroupAccum {
  u32 n;
  std::vector<float> reg;  // 128 * n/2
  explicit WarpgroupAccum(u32 n_) : n(n_), reg(128u * (n_ / 2), 0.0f) {}
  float& at(u32 thread, u32 i) { return reg[thread * (n / 2) + i]; }
};

// Element (r, k) of an operand: r its row (M or N), k its K index.
inline float load_operand(SharedMemory& smem, const DecodedDesc& d, u32 r, u32 k, Operand t, bool mn_major = false) {
  if (t == Operand::e4m3) {
    check(!mn_major, "sm90 model", "an fp8 wgmma operand is K-major only");
    return e4m3_to_f32(*smem.at(operand_address(d, r, k), 1));
  }
  const u8* lo = smem.at(mn_major ? mn_major_address(d, r, k, 2) : operand_address(d, r, 2 * k), 2);
  return bf16_to_f32(u16(lo[0] | (lo[1] << 8)));
}

// One wgmma: D(64 x n) (+)= A(64 x K) * B(n x K)^T, K = 32 bytes of operand; b_mn_major is the
// instruction's imm-trans-b (B read MN-major).
inline void wgmma(SharedMemory& smem, u64 desc_a, u64 desc_b, WarpgroupAccum& acc, Operand t, bool scale_d,
                  bool b_mn_major = false) {
  const DecodedDesc a = decode_desc(desc_a), b = decode_desc(desc_b);
  for (const DecodedDesc* d : {&a, &b})
    if (d->swizzle != Swizzle::none)
      check(d->base_offset == 0 && ((d->start_address >> 7) & 7) == 0, "sm90 model",
            "descriptor start ", d->start_address, " is not on its swizzle pattern's row 0 (base offset not modelled)");
  const u32 k_elems = t == Operand::bf16 ? 16 : 32;
  std::vector<float> av(64 * k_elems), bv(acc.n * k_elems);
  for (u32 r = 0; r < 64; ++r)
    for (u32 k = 0; k < k_elems; ++k) av[r * k_elems + k] = load_operand(smem, a, r, k, t);
  for (u32 c = 0; c < acc.n; ++c)
    for (u32 k = 0; k < k_elems; ++k) bv[c * k_elems + k] = load_operand(smem, b, c, k, t, b_mn_major);
  for (u32 r = 0; r < 64; ++r)
    for (u32 c = 0; c < acc.n; ++c) {
      float sum = 0.0f;
      for (u32 k = 0; k < k_elems; ++k) sum += av[r * k_elems + k] * bv[c * k_elems + k];
      const u32 thread = 32 * (r / 16) + 4 * (r % 8) + (c % 8) / 2;
      const u32 i = 4 * (c / 8) + 2 * ((r % 16) / 8) + c % 2;
      float& out = acc.at(thread, i);
      out = scale_d ? out + sum : sum;
    }
}

}  // namespace sol::kernels::sm90::model
