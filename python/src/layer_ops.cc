// The rest of an LLM layer: RMSNorm (+ residual, + FP8), LayerNorm, SwiGLU and GELU (+ FP8),
// softmax, RoPE.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.h"
#include "bindings.h"
#include "quant_args.h"
#include "sol/activation.h"
#include "sol/copy.h"
#include "sol/norm.h"
#include "sol/rope.h"
#include "sol/softmax.h"

namespace solpy {

using namespace nb::literals;

namespace {

std::vector<int64_t> shape_of(const Array& a) { return {a->shape().begin(), a->shape().end()}; }

sol::GeluForm gelu_form(const std::string& s, const char* op) {
  return choice<sol::GeluForm>(s, op, "form", {{"tanh", sol::GeluForm::tanh}, {"erf", sol::GeluForm::erf}});
}

sol::RopeLayout rope_layout(const std::string& s) {
  return choice<sol::RopeLayout>(s, "RopeConfig", "layout",
                                 {{"interleaved", sol::RopeLayout::interleaved}, {"half", sol::RopeLayout::half}});
}

void bind_norms(nb::module_& m) {
  m.def("rmsnorm", [](nb::handle x, nb::handle weight, float eps, nb::handle out) {
    Array X = input(x, "rmsnorm", "x"), W = input(weight, "rmsnorm", "weight");
    Array Y = output_or_new(out, "rmsnorm", "out", shape_of(X), X->dtype());
    released([&] { sol::rmsnorm(*X, *W, *Y, {eps}); });
    return Y.object;
  }, "x"_a, "weight"_a, nb::kw_only(), "eps"_a = 1e-6f, "out"_a = nb::none(),
  "y = x / sqrt(mean(x^2) + eps) * weight over the last dim; x [T, H] f32/bf16. Returns out.");

  m.def("add_rmsnorm", [](nb::handle x, nb::handle residual, nb::handle weight, float eps, nb::handle out) {
    const char* op = "add_rmsnorm";
    Array X = input(x, op, "x"), R = output(residual, op, "residual"), W = input(weight, op, "weight");
    Array Y = output_or_new(out, op, "out", shape_of(X), X->dtype());
    released([&] { sol::add_rmsnorm(*X, *R, *W, *Y, {eps}); });
    return Y.object;
  }, "x"_a, "residual"_a, "weight"_a, nb::kw_only(), "eps"_a = 1e-6f, "out"_a = nb::none(),
  "residual += x (in place, rounded to residual's dtype), then y = rmsnorm(residual). Returns out.");

  m.def("layernorm", [](nb::handle x, nb::handle weight, nb::handle bias, float eps, nb::handle out) {
    Array X = input(x, "layernorm", "x"), W = input(weight, "layernorm", "weight");
    std::optional<Array> B = optional_input(bias, "layernorm", "bias");
    Array Y = output_or_new(out, "layernorm", "out", shape_of(X), X->dtype());
    released([&] { sol::layernorm(*X, *W, ptr(B), *Y, {eps}); });
    return Y.object;
  }, "x"_a, "weight"_a, "bias"_a = nb::none(), nb::kw_only(), "eps"_a = 1e-6f, "out"_a = nb::none(),
  "y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim. Returns out.");

  m.def("rmsnorm_quant_fp8", [](nb::handle x, nb::handle weight, float eps, int64_t group,
                                const std::string& scale_format, nb::handle q, nb::handle scales) {
    const char* op = "rmsnorm_quant_fp8";
    Array X = input(x, op, "x"), W = input(weight, op, "weight");
    sol::QuantOptions qopt = quant_options(group, scale_format, op);
    QuantOutputs o = quant_outputs(q, scales, op, X.dim(0), X.dim(1), X.dim(0), group);
    released([&] { sol::rmsnorm_quant_fp8(*X, *W, *o.q, *o.scales, {eps}, qopt); });
    return o.result();
  }, "x"_a, "weight"_a, nb::kw_only(), "eps"_a = 1e-6f, "group"_a = 128, "scale_format"_a = "f32",
  "q"_a = nb::none(), "scales"_a = nb::none(),
  "(q, scales) = quant_fp8_per_token(bf16(rmsnorm(x))) in one pass over memory.");
}

void bind_activations(nb::module_& m) {
  m.def("silu_mul", [](nb::handle gate_up, nb::handle out) {
    Array G = input(gate_up, "silu_mul", "gate_up");
    Array Y = output_or_new(out, "silu_mul", "out", {G.dim(0), G.dim(1) / 2}, G->dtype());
    released([&] { sol::silu_mul(*G, *Y); });
    return Y.object;
  }, "gate_up"_a, nb::kw_only(), "out"_a = nb::none(),
  "y = silu(gate) * up; gate_up [T, 2I] holds gate in [0, I) and up in [I, 2I). Returns out [T, I].");

  m.def("silu_mul_quant_fp8", [](nb::handle gate_up, int64_t group, const std::string& scale_format,
                                 nb::handle q, nb::handle scales) {
    const char* op = "silu_mul_quant_fp8";
    Array G = input(gate_up, op, "gate_up");
    sol::QuantOptions qopt = quant_options(group, scale_format, op);
    QuantOutputs o = quant_outputs(q, scales, op, G.dim(0), G.dim(1) / 2, G.dim(0), group);
    released([&] { sol::silu_mul_quant_fp8(*G, *o.q, *o.scales, qopt); });
    return o.result();
  }, "gate_up"_a, nb::kw_only(), "group"_a = 128, "scale_format"_a = "f32", "q"_a = nb::none(),
  "scales"_a = nb::none(), "(q, scales) = quant_fp8_per_token(bf16(silu_mul(gate_up))) in one pass.");

  m.def("gelu", [](nb::handle x, const std::string& form, nb::handle out) {
    Array X = input(x, "gelu", "x");
    sol::GeluForm f = gelu_form(form, "gelu");
    Array Y = output_or_new(out, "gelu", "out", shape_of(X), X->dtype());
    released([&] { sol::gelu(*X, *Y, f); });
    return Y.object;
  }, "x"_a, "form"_a = "tanh", nb::kw_only(), "out"_a = nb::none(),
  "GELU elementwise, form 'tanh' (approximation) or 'erf' (exact); x [T, H] f32/bf16. Returns out.");

  m.def("gelu_quant_fp8", [](nb::handle x, const std::string& form, int64_t group, const std::string& scale_format,
                             nb::handle q, nb::handle scales) {
    const char* op = "gelu_quant_fp8";
    Array X = input(x, op, "x");
    sol::GeluForm f = gelu_form(form, op);
    sol::QuantOptions qopt = quant_options(group, scale_format, op);
    QuantOutputs o = quant_outputs(q, scales, op, X.dim(0), X.dim(1), X.dim(0), group);
    released([&] { sol::gelu_quant_fp8(*X, *o.q, *o.scales, f, qopt); });
    return o.result();
  }, "x"_a, "form"_a = "tanh", nb::kw_only(), "group"_a = 128, "scale_format"_a = "f32", "q"_a = nb::none(),
  "scales"_a = nb::none(), "(q, scales) = quant_fp8_per_token(bf16(gelu(x))) in one pass.");

  m.def("softmax", [](nb::handle x, nb::handle out) {
    Array X = input(x, "softmax", "x");
    Array Y = output_or_new(out, "softmax", "out", shape_of(X), X->dtype());
    released([&] { sol::softmax(*X, *Y); });
    return Y.object;
  }, "x"_a, nb::kw_only(), "out"_a = nb::none(),
  "Softmax over the last dim (any leading shape; out=x works in place). Returns out.");
}

void bind_rope(nb::module_& m) {
  nb::class_<sol::RopeConfig>(m, "RopeConfig", "Rotary embedding: dims, theta, YaRN scaling, pair layout.")
      .def("__init__",
           [](sol::RopeConfig* c, int64_t rope_dim, double theta, double factor, double original_max_position,
              double beta_fast, double beta_slow, double mscale, double mscale_all_dim, const std::string& layout) {
             new (c) sol::RopeConfig{rope_dim, theta, factor, original_max_position, beta_fast, beta_slow,
                                     mscale, mscale_all_dim, rope_layout(layout)};
           },
           nb::kw_only(), "rope_dim"_a = 64, "theta"_a = 10000.0, "factor"_a = 1.0,
           "original_max_position"_a = 4096.0, "beta_fast"_a = 32.0, "beta_slow"_a = 1.0, "mscale"_a = 1.0,
           "mscale_all_dim"_a = 0.0, "layout"_a = "interleaved")
      .def_rw("rope_dim", &sol::RopeConfig::rope_dim)
      .def_rw("theta", &sol::RopeConfig::theta)
      .def_rw("factor", &sol::RopeConfig::factor)
      .def_rw("original_max_position", &sol::RopeConfig::original_max_position)
      .def_rw("beta_fast", &sol::RopeConfig::beta_fast)
      .def_rw("beta_slow", &sol::RopeConfig::beta_slow)
      .def_rw("mscale", &sol::RopeConfig::mscale)
      .def_rw("mscale_all_dim", &sol::RopeConfig::mscale_all_dim)
      .def_prop_rw("layout",
                   [](const sol::RopeConfig& c) {
                     return std::string(c.layout == sol::RopeLayout::half ? "half" : "interleaved");
                   },
                   [](sol::RopeConfig& c, const std::string& s) { c.layout = rope_layout(s); });

  nb::class_<sol::RopeTable>(m, "RopeTable", "cos/sin for positions [0, max_positions), built once.")
      .def(nb::init<const sol::RopeConfig&, int64_t>(), "config"_a, "max_positions"_a)
      .def_prop_ro("config", &sol::RopeTable::config)
      .def_prop_ro("max_positions", &sol::RopeTable::max_positions);

  m.def("deepseek_v3_rope", &sol::deepseek_v3_rope, "DeepSeek-V3's RoPE: 64 dims, YaRN factor 40, interleaved.");
  m.def("rope_inv_freq", &sol::rope_inv_freq, "config"_a, "The per-pair frequencies (after YaRN).");
  m.def("rope_attention_factor", &sol::rope_attention_factor, "config"_a, "The cos/sin multiplier (YaRN mscale).");

  m.def("rope", [](nb::handle x, nb::handle positions, const sol::RopeTable& table, int64_t rope_offset,
                   nb::handle out) {
    Array P = input(positions, "rope", "positions");
    if (out.is_none()) {
      Array X = output(x, "rope", "x");
      released([&] { sol::rope(*X, *P, table, rope_offset); });
      return X.object;
    }
    // Out of place: out = x, then rotated there (e.g. a latent row's rope part written straight
    // into a KV cache row). sol::copy checks that the shapes and dtypes match.
    Array X = input(x, "rope", "x"), O = output(out, "rope", "out");
    released([&] {
      sol::copy(*X, *O);
      sol::rope(*O, *P, table, rope_offset);
    });
    return O.object;
  }, "x"_a, "positions"_a, "table"_a, "rope_offset"_a = 0, nb::kw_only(), "out"_a = nb::none(),
  "Rotates x [T, heads, head_dim] in place on dims [rope_offset, rope_offset + rope_dim) of every head; "
  "positions [T] int32. With out (x's shape and dtype, any strides, not overlapping x): x is read, out = x rotated. Returns "
  "x, or out.");
}

}  // namespace

void bind_layer_ops(nb::module_& m) {
  bind_norms(m);
  bind_activations(m);
  bind_rope(m);
}

}  // namespace solpy
