// FP8 quantization (DeepSeek's recipe): per-token groups, 128 x 128 weight blocks, dequant.
// The fused forms (rmsnorm_quant_fp8, silu_mul_quant_fp8, gelu_quant_fp8) live with their ops
// and share quant_outputs() from here.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "arrays.h"
#include "bindings.h"
#include "quant_args.h"
#include "sol/quant.h"

namespace solpy {

using namespace nb::literals;

sol::QuantOptions quant_options(int64_t group, const std::string& scale_format, const char* op) {
  sol::QuantOptions q;
  q.group = group;
  q.scale = choice<sol::ScaleFormat>(scale_format, op, "scale_format",
                                     {{"f32", sol::ScaleFormat::f32}, {"ue8m0", sol::ScaleFormat::ue8m0}});
  return q;
}

QuantOutputs quant_outputs(nb::handle q, nb::handle scales, const char* op, int64_t rows, int64_t cols,
                           int64_t scale_rows, int64_t group) {
  const int64_t scale_cols = group > 0 ? cols / group : 0;
  return {output_or_new(q, op, "q", {rows, cols}, sol::DType::f8e4m3),
          output_or_new(scales, op, "scales", {scale_rows, scale_cols}, sol::DType::f32)};
}

void bind_quant(nb::module_& m) {
  m.def("quant_fp8_per_token", [](nb::handle x, int64_t group, const std::string& scale_format, nb::handle q,
                                  nb::handle scales) {
    const char* op = "quant_fp8_per_token";
    Array X = input(x, op, "x");
    sol::QuantOptions opt = quant_options(group, scale_format, op);
    QuantOutputs o = quant_outputs(q, scales, op, X.dim(0), X.dim(1), X.dim(0), group);
    released([&] { sol::quant_fp8_per_token(*X, *o.q, *o.scales, opt); });
    return o.result();
  }, "x"_a, nb::kw_only(), "group"_a = 128, "scale_format"_a = "f32", "q"_a = nb::none(),
  "scales"_a = nb::none(),
  "x [T, H] f32/bf16 -> (q [T, H] float8_e4m3fn, scales [T, H / group] f32); scale_format 'f32' or "
  "'ue8m0' (powers of two).");

  m.def("quant_fp8_per_block", [](nb::handle w, int64_t group, const std::string& scale_format, nb::handle q,
                                  nb::handle scales) {
    const char* op = "quant_fp8_per_block";
    Array W = input(w, op, "w");
    sol::QuantOptions opt = quant_options(group, scale_format, op);
    const int64_t block_rows = group > 0 ? (W.dim(0) + group - 1) / group : 0;
    QuantOutputs o = quant_outputs(q, scales, op, W.dim(0), W.dim(1), block_rows, group);
    released([&] { sol::quant_fp8_per_block(*W, *o.q, *o.scales, opt); });
    return o.result();
  }, "w"_a, nb::kw_only(), "group"_a = 128, "scale_format"_a = "f32", "q"_a = nb::none(),
  "scales"_a = nb::none(),
  "w [N, K] f32/bf16 -> (q [N, K] float8_e4m3fn, scales [ceil(N / 128), K / 128] f32), one scale per "
  "128 x 128 block.");

  m.def("dequant_fp8_per_token", [](nb::handle q, nb::handle scales, int64_t group, const std::string& scale_format,
                                    nb::handle out, nb::handle out_dtype) {
    const char* op = "dequant_fp8_per_token";
    Array Q = input(q, op, "q"), S = input(scales, op, "scales");
    sol::QuantOptions opt = quant_options(group, scale_format, op);
    sol::DType dt = out_dtype.is_none() ? sol::DType::f32 : dtype_arg(out_dtype, op, "out_dtype");
    Array Y = output_or_new(out, op, "out", {Q.dim(0), Q.dim(1)}, dt);
    released([&] { sol::dequant_fp8_per_token(*Q, *S, *Y, opt); });
    return Y.object;
  }, "q"_a, "scales"_a, nb::kw_only(), "group"_a = 128, "scale_format"_a = "f32", "out"_a = nb::none(),
  "out_dtype"_a = nb::none(),
  "y = q * scale per group, rounded once to out's dtype (f32 by default, or bf16). Returns out.");

  m.def("fp8_scale_from_amax", [](float amax, const std::string& scale_format) {
    return sol::fp8_scale_from_amax(amax, quant_options(128, scale_format, "fp8_scale_from_amax").scale);
  }, "amax"_a, "scale_format"_a = "f32", "The scale Sol stores for a group whose largest |x| is amax.");
}

}  // namespace solpy
