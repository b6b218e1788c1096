#pragma once
// Comparisons for checks: bit-exact comparison for ops that must reproduce the reference
// exactly (copy, cast), and the relative error norm ||out - ref|| / ||ref|| for the rest.
#include <cstdint>
#include <functional>
#include <string>

#include "sol/device.h"
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
// A fused "op then per-token FP8 quant" must equal the composition bit for bit: quant_fp8_per_token
// of the op's own bf16 output [rows, h], which unfused(act) writes into act on `device` (poisoned
// first). The activations promise that output within 1 ulp, not its bits, so the CPU's and a
// GPU's may differ, and with them the codes (docs/gpu.md): the composition must be the one of
// the backend that runs the fused op. check_act holds that output to the op's own reference
// first; the quantization itself is the CPU's, bit-identical to every device's. run_fused()
// writes q and scales (host views, poisoned first) and the two are compared.
CheckResult check_fused_quant(Device device, int64_t rows, int64_t h,
                              const std::function<void(const Tensor& act)>& unfused,
                              const std::function<CheckResult(const Tensor& act)>& check_act,
                              const std::function<void()>& run_fused, const Tensor& q, const Tensor& scales);

}  // namespace sol
