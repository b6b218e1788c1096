#pragma once
// Comparisons for checks: bit-exact comparison for ops that must reproduce the reference
// exactly (copy, cast), and the relative error norm ||out - ref|| / ||ref|| for the rest.
#include <cstdint>
#include <string>

#include "sol/registry.h"
#include "sol/tensor.h"

namespace sol {

// pass iff every element has the same bits; error is the relative norm over non-NaN pairs
// (a NaN where the reference has none counts as a failure on its own).
CheckResult compare_bitwise(const Tensor& out, const Tensor& ref);
CheckResult compare_relative(const Tensor& out, const Tensor& ref, double tolerance);
// FP8 outputs (codes + scales) against expected ones, bit for bit; scales are reported first.
CheckResult compare_quantized(const Tensor& q, const Tensor& scales, const Tensor& q_ref,
                              const Tensor& scales_ref);

}  // namespace sol
