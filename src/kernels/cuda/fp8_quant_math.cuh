#pragma once
// The FP8 quantization rule of sol/quant.h, written once for the device kernels and for the host
// test that compares it with the CPU path (tests/device/test_cuda_quant_math.cc).
//   abs-max: the largest |x| bit pattern of a group, as an unsigned integer. For non-NaN values
//   that order is the order of |x|, and every NaN pattern lies above inf's (0x7f800000), so one
//   integer max (exact, any order: threads combine it with shuffles) also says "NaN seen".
//   scale and multiplier: the CPU's fp8_group_scale / fp8_scale_from_amax, division by division.
//   codes: e4m3(x * mult). A group that holds a NaN has NaN scale (0x7fc00000, the CPU's bits)
//   and code 0x7F throughout; in a group whose abs-max is inf, mult is 0 and each infinite
//   element gives 0xFF (x86's inf * 0 is the negative "indefinite" NaN), the others +-0.
#include "kernels/cuda/float_ops.cuh"

namespace sol_cuda {

SOL_HD u32 abs_bits(float x) { return bits_of(x) & 0x7fffffffu; }
SOL_HD u32 max_u32(u32 a, u32 b) { return a > b ? a : b; }

struct Fp8Scale {
  float scale;  // stored beside the codes
  float mult;   // what x is multiplied by before rounding to e4m3
  u32 special;  // 0 finite group; 1 abs-max inf; 2 NaN seen
};

SOL_HD Fp8Scale fp8_scale_of(u32 amax_bits, bool ue8m0) {
  Fp8Scale s;
  if (amax_bits > 0x7f800000u) {
    s.scale = s.mult = float_of(0x7fc00000u);
    s.special = 2;
    return s;
  }
  s.special = amax_bits == 0x7f800000u ? 1u : 0u;
  float a = float_of(amax_bits);
  a = a > 1e-4f ? a : 1e-4f;
  s.scale = div_rn(a, 448.0f);
  if (!ue8m0) {
    s.mult = div_rn(448.0f, a);
    return s;
  }
  // The smallest power of two >= amax / 448 (inf stays inf): an exact reciprocal.
  u32 b = bits_of(s.scale);
  if (b & 0x7fffffu) b = (b & 0xff800000u) + 0x800000u;
  s.scale = float_of(b);
  s.mult = div_rn(1.0f, s.scale);
  return s;
}

// Where a kernel writes per-token codes and scales (a kernel parameter: the host fills the
// same struct). group_lanes = group / 16, a power of two <= 32.
struct QuantOut {
  u8* q;
  long long q_stride;  // elements between rows of q
  float* scales;
  long long scale_stride0, scale_stride1;
  int group_lanes;
  int ue8m0;
  int vec_q;  // q rows 16-byte aligned
};

// The e4m3 codes of two elements of a group with scale s, packed lo | hi << 8.
SOL_HD u32 fp8_codes2(float lo, float hi, const Fp8Scale& s) {
  const u32 codes = e4m3x2_of(mul_rn(lo, s.mult), mul_rn(hi, s.mult));
  if (s.special == 0) return codes;
  if (s.special == 2) return 0x7f7fu;
  const u32 code_lo = abs_bits(lo) == 0x7f800000u ? 0xffu : (codes & 0xffu);
  const u32 code_hi = abs_bits(hi) == 0x7f800000u ? 0xff00u : (codes & 0xff00u);
  return code_lo | code_hi;
}

}  // namespace sol_cuda
