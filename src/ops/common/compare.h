#pragma once
// Comparisons for checks: bit-exact comparison for ops that must reproduce the reference
// exactly (copy, cast), and the relative error norm ||out - ref|| / ||ref|| for the rest.
#include <cstdint>
#include <functional>
#include <string>

#include "sol/registry.h"
#include "sol/tensor.h"

namespace sol {

// pass iff every element has the same bits; error is the relative norm over non-NaN pairs
// (a NaN where the reference has none counts as a failure on its own). NanBits::any lets a NaN
// match a NaN of any payload and sign, for ops that promise a NaN but not which one: a GPU's
// arithmetic does not carry an operand's payload through as x86 does (docs/gpu.md).
enum class NanBits { exact, any };
CheckResult compare_bitwise(const Tensor& out, const Tensor& ref, NanBits nan_bits = NanBits::exact);
CheckResult compare_relative(const Tensor& out, const Tensor& ref, double tolerance);
// FP8 outputs (codes + scales) against expected ones, bit for bit; scales are reported first.
CheckResult compare_quantized(const Tensor& q, const Tensor& scales, const Tensor& q_ref,
                              const Tensor& scales_ref);
// A fused "op then per-token FP8 quant" must equal the composition bit for bit: unfused(act)
// writes the op's bf16 output [rows, h] into act, which is quantized; run_fused() writes q and
// scales (poisoned first); the two are compared.
CheckResult check_fused_quant(int64_t rows, int64_t h, const std::function<void(const Tensor& act)>& unfused,
                              const std::function<void()>& run_fused, const Tensor& q, const Tensor& scales);

}  // namespace sol
