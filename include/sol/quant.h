#pragma once
// FP8 quantization with DeepSeek's recipe (as DeepGEMM consumes it).
//
// Per-token groups (activations): x [T, H] f32 or bf16 -> q [T, H] f8e4m3 and one f32 scale per
// 1 x `group` block, scales [T, H / group]. Per-block (weights): w [N, K] -> q [N, K] and one
// scale per 128 x 128 block, scales [ceil(N / 128), K / 128]. H and K must be multiples of the
// group (128); N need not be (the last block row is partial).
//
// The rule, for each group g (bit-for-bit the same in every path):
//   amax = max |x| over g; a NaN anywhere in g makes amax NaN; otherwise amax = max(amax, 1e-4)
//   so an all-zero group still gets a finite scale.
//   ScaleFormat::f32:   scale = amax / 448 (f32 division); q = e4m3(x * (448 / amax)), the f32
//                       reciprocal-multiply DeepGEMM's reference uses, rounded once to e4m3.
//   ScaleFormat::ue8m0: scale = the smallest power of two >= amax / 448 (an 8-bit exponent, as
//                       UE8M0 stores it); q = e4m3(x / scale), exact scaling then one rounding.
//   e4m3 rounding is to nearest even with saturation to +-448 (sol/dtype.h); a NaN group gives
//   NaN scales and NaN codes (0x7F / 0xFF), an infinite element gives a NaN code in its group.
// Dequantization: y = x_q * scale in f32, rounded once to y's dtype (bf16 or f32).
#include <cstdint>

#include "sol/tensor.h"

namespace sol {

enum class ScaleFormat { f32, ue8m0 };

struct QuantOptions {
  int64_t group = 128;
  ScaleFormat scale = ScaleFormat::f32;
};

void quant_fp8_per_token(const Tensor& x, const Tensor& q, const Tensor& scales,
                         const QuantOptions& opt = {});
void quant_fp8_per_block(const Tensor& w, const Tensor& q, const Tensor& scales,
                         const QuantOptions& opt = {});
// Inverse of quant_fp8_per_token: q [T, H] e4m3, scales [T, H / group] -> y [T, H] bf16/f32.
void dequant_fp8_per_token(const Tensor& q, const Tensor& scales, const Tensor& y,
                           const QuantOptions& opt = {});

// The scale rule on its own, for callers that fuse quantization into another pass.
float fp8_scale_from_amax(float amax, ScaleFormat format);
// The multiplier that maps a group onto e4m3 (448 / amax, or 1 / scale for UE8M0).
float fp8_multiplier(float amax, float scale, ScaleFormat format);

}  // namespace sol
