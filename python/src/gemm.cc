// GEMM: D = act(alpha * A * op(B) + beta * C + bias), plain or pre-packed B.
#include <nanobind/stl/string.h>

#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "packed_experts.h"
#include "sol/gemm.h"
#include "sol/registry.h"

namespace solpy {

using namespace nb::literals;

namespace {

// D's dtype when the caller names none: integer products accumulate in i32, fp8 ones give
// bf16 (DeepGEMM's output), float inputs keep their type.
sol::DType default_out_dtype(sol::DType a) {
  const std::string_view name = sol::dtype_name(a);
  if (name == "i8" || name == "u8") return sol::parse_dtype("i32");
  if (name == "f8e4m3") return sol::DType::bf16;
  return a;
}

// Expert g of a [G, ...] tensor, as a view with one dimension less.
sol::Tensor expert(const sol::Tensor& t, int64_t g) {
  auto shape = t.shape().subspan(1), strides = t.strides().subspan(1);
  char* base = static_cast<char*>(t.data()) + g * t.stride(0) * int64_t(sol::dtype_size(t.dtype()));
  return sol::Tensor(base, t.dtype(), shape, strides);
}

// The grouped GEMMs take B as a [G, N, K] array (`plain`) or as PackedExperts.
template <class Run>
void with_grouped_b(nb::handle b, const std::optional<Array>& plain, Run&& run) {
  if (plain) {
    released([&] { run(plain->tensor); });
    return;
  }
  const auto& packed = nb::cast<const PackedExperts&>(b).experts;
  released([&] { run(std::span<const sol::PackedMatrix>(packed)); });
}

int64_t grouped_n(nb::handle b, const std::optional<Array>& plain) {
  if (nb::isinstance<PackedExperts>(b)) {
    const auto& packed = nb::cast<const PackedExperts&>(b).experts;
    return packed.empty() ? 0 : packed.front().n();
  }
  return plain ? plain->dim(1) : 0;
}

// The body both grouped GEMMs share: a, an int32 index tensor (grouped_layout or masked_m),
// optional scales, b as an array or PackedExperts, and out given or allocated as zeros in the
// shape out_shape(A, N) (bf16 unless out_dtype). run(a, experts, index, out, options) calls the op.
template <class OutShape, class Run>
nb::object grouped_gemm(const char* op, nb::handle a, nb::handle b, nb::handle index, const char* index_name,
                        nb::handle a_scales, nb::handle b_scales, nb::handle out, nb::handle out_dtype,
                        OutShape&& out_shape, Run&& run) {
  Array A = input(a, op, "a"), I = input(index, op, index_name);
  std::optional<Array> As = optional_input(a_scales, op, "a_scales"), Bs = optional_input(b_scales, op, "b_scales");
  const sol::DType dt = out_dtype.is_none() ? sol::DType::bf16 : dtype_arg(out_dtype, op, "out_dtype");
  std::optional<Array> B;
  if (!nb::isinstance<PackedExperts>(b)) B = input(b, op, "b");
  Array D = output_or_new(out, op, "out", out_shape(A, grouped_n(b, B)), dt, Fill::zeros);
  with_grouped_b(b, B, [&](const auto& experts) {
    run(*A, experts, *I, *D, sol::GroupedGemmOptions{ptr(As), ptr(Bs)});
  });
  return D.object;
}

sol::Layout layout_arg(const std::string& s, const char* op) {
  return choice<sol::Layout>(s, op, "layout", {{"nn", sol::Layout::nn}, {"nt", sol::Layout::nt}});
}

nb::object gemm(nb::handle a, nb::handle b, nb::handle out, float alpha, float beta, const std::string& layout,
                nb::handle c, nb::handle bias, const std::string& activation, nb::handle a_scales,
                nb::handle b_scales, nb::handle out_dtype) {
  const char* op = "gemm";
  Array A = input(a, op, "a");
  sol::GemmOptions opt;
  opt.alpha = alpha;
  opt.beta = beta;
  opt.layout = layout_arg(layout, op);
  opt.activation = choice<sol::Activation>(activation, op, "activation",
                                           {{"none", sol::Activation::none}, {"silu", sol::Activation::silu}});
  std::optional<Array> C = optional_input(c, op, "c"), Bias = optional_input(bias, op, "bias");
  opt.c = ptr(C);
  opt.bias = ptr(Bias);
  std::optional<Array> As = optional_input(a_scales, op, "a_scales"), Bs = optional_input(b_scales, op, "b_scales");
  opt.a_scales = ptr(As);
  opt.b_scales = ptr(Bs);
  const sol::DType d_dtype = out_dtype.is_none() ? default_out_dtype(A->dtype()) : dtype_arg(out_dtype, op, "out_dtype");
  if (nb::isinstance<sol::PackedMatrix>(b)) {
    const sol::PackedMatrix& packed = nb::cast<const sol::PackedMatrix&>(b);
    sol::check(!packed.empty(), op, "b is an empty PackedMatrix");
    Array D = output_or_new(out, op, "out", {A.dim(0), packed.n()}, d_dtype);
    released([&] { sol::gemm(*A, packed, *D, opt); });
    return D.object;
  }
  Array B = input(b, op, "b");
  const int64_t n = opt.layout == sol::Layout::nn ? B.dim(1) : B.dim(0);
  Array D = output_or_new(out, op, "out", {A.dim(0), n}, d_dtype);
  released([&] { sol::gemm(*A, *B, *D, opt); });
  return D.object;
}

}  // namespace

void bind_gemm(nb::module_& m) {
  nb::class_<sol::PackedMatrix>(m, "PackedMatrix",
                                "B laid out once in the order the micro-kernel reads it (sol.pack_b); "
                                "owns its memory.")
      .def_prop_ro("k", &sol::PackedMatrix::k)
      .def_prop_ro("n", &sol::PackedMatrix::n)
      .def_prop_ro("dtype", [](const sol::PackedMatrix& p) { return std::string(sol::dtype_name(p.dtype())); })
      .def("__repr__", [](const sol::PackedMatrix& p) {
        if (p.empty()) return std::string("PackedMatrix(empty)");
        return "PackedMatrix(k=" + std::to_string(p.k()) + ", n=" + std::to_string(p.n()) + ", dtype=" +
               std::string(sol::dtype_name(p.dtype())) + ")";
      });

  m.def("pack_b", [](nb::handle b, const std::string& layout, nb::handle b_scales) {
    Array B = input(b, "pack_b", "b");
    std::optional<Array> S = optional_input(b_scales, "pack_b", "b_scales");
    sol::Layout l = layout_arg(layout, "pack_b");
    sol::PackedMatrix packed;
    released([&] { packed = sol::pack_b(*B, l, ptr(S)); });
    return packed;
  }, "b"_a, "layout"_a = "nn", "b_scales"_a = nb::none(),
  "Packs B ([K, N] for 'nn', [N, K] for 'nt': weights as DeepGEMM stores them; f32, bf16, i8 or "
  "float8_e4m3fn with its 128 x 128 b_scales) for repeated gemm calls.");

  nb::class_<PackedExperts>(m, "PackedExperts", "One PackedMatrix per expert (sol.pack_experts), for the grouped GEMMs.")
      .def("__len__", [](const PackedExperts& p) { return p.experts.size(); })
      .def_prop_ro("k", [](const PackedExperts& p) { return p.experts.empty() ? int64_t(0) : p.experts[0].k(); },
                   "Each matrix's K (they share their shape; 0 when empty).")
      .def_prop_ro("n", [](const PackedExperts& p) { return p.experts.empty() ? int64_t(0) : p.experts[0].n(); },
                   "Each matrix's N.");

  m.def("pack_experts", [](nb::handle b, nb::handle b_scales) {
    const char* op = "pack_experts";
    Array B = input(b, op, "b");
    std::optional<Array> S = optional_input(b_scales, op, "b_scales");
    sol::check(B->ndim() == 3, op, "b must be [G, N, K] but is ", B->describe());
    sol::check(!S || (S->tensor.ndim() == 3 && S->tensor.shape(0) == B->shape(0)), op,
               "b_scales must be [G, ceil(N/128), K/128] but is ", S ? S->tensor.describe() : "");
    auto packed = std::make_unique<PackedExperts>();
    released([&] {
      for (int64_t g = 0; g < B->shape(0); ++g) {
        sol::Tensor scales = S ? expert(S->tensor, g) : sol::Tensor();
        packed->experts.push_back(sol::pack_b(expert(*B, g), sol::Layout::nt, S ? &scales : nullptr));
      }
    });
    return packed.release();
  }, "b"_a, "b_scales"_a = nb::none(),
  "Packs each expert of b [G, N, K] ('nt', as DeepGEMM stores MoE weights; fp8 with b_scales "
  "[G, ceil(N/128), K/128]) once, for grouped_gemm_contiguous / grouped_gemm_masked.");

  m.def("grouped_gemm_contiguous", [](nb::handle a, nb::handle b, nb::handle grouped_layout, nb::handle a_scales,
                                      nb::handle b_scales, nb::handle out, nb::handle out_dtype) {
    return grouped_gemm(
        "grouped_gemm_contiguous", a, b, grouped_layout, "grouped_layout", a_scales, b_scales, out, out_dtype,
        [](const Array& A, int64_t n) { return std::vector<int64_t>{A.dim(0), n}; },
        [](const auto&... args) { sol::grouped_gemm_contiguous(args...); });
  }, "a"_a, "b"_a, "grouped_layout"_a, nb::kw_only(), "a_scales"_a = nb::none(), "b_scales"_a = nb::none(),
  "out"_a = nb::none(), "out_dtype"_a = nb::none(),
  "DeepGEMM's contiguous grouped GEMM: a [M, K], b [G, N, K] or PackedExperts, grouped_layout int32 [M] "
  "(expert of each row, -1: padding, left untouched; zeros when out is allocated) -> out [M, N] (bf16 "
  "unless out_dtype). Pad each expert's rows to 128 (moe_permute's alignment); on a CUDA device a "
  "layout breaking that is reported only by check_grouped_layouts.");

  m.def("check_grouped_layouts", [](const std::string& device) {
    const sol::Device d = sol::parse_device(device, "check_grouped_layouts: device");
    released([&] { sol::check_grouped_layouts(d); });
  }, "device"_a = "cuda",
  "Raises if a grouped_gemm_contiguous on the device (cpu, cuda or cuda:N) met a grouped_layout value "
  "that is not -1 or an expert, or a tile (64 or 128 rows) mixing experts; the rows it names were not "
  "written. On a CUDA device the kernel reads the layout alone (no wait), so this check is the only "
  "report: it waits for the device (call it outside a CUDA-graph capture), clears the record and names "
  "the first bad row. On the CPU every call checks itself and this does nothing.");

  m.def("grouped_gemm_masked", [](nb::handle a, nb::handle b, nb::handle masked_m, nb::handle a_scales,
                                  nb::handle b_scales, nb::handle out, nb::handle out_dtype) {
    return grouped_gemm(
        "grouped_gemm_masked", a, b, masked_m, "masked_m", a_scales, b_scales, out, out_dtype,
        [](const Array& A, int64_t n) { return std::vector<int64_t>{A.dim(0), A.dim(1), n}; },
        [](const auto&... args) { sol::grouped_gemm_masked(args...); });
  }, "a"_a, "b"_a, "masked_m"_a, nb::kw_only(), "a_scales"_a = nb::none(), "b_scales"_a = nb::none(),
  "out"_a = nb::none(), "out_dtype"_a = nb::none(),
  "DeepGEMM's masked grouped GEMM (decode): a [G, max_m, K], b [G, N, K] or PackedExperts, masked_m "
  "int32 [G] -> out [G, max_m, N]; rows at or past masked_m[g] are left untouched (zeros when out is "
  "allocated).");

  m.def("gemm", &gemm, "a"_a, "b"_a, nb::kw_only(), "out"_a = nb::none(), "alpha"_a = 1.0f, "beta"_a = 0.0f,
        "layout"_a = "nn", "c"_a = nb::none(), "bias"_a = nb::none(), "activation"_a = "none",
        "a_scales"_a = nb::none(), "b_scales"_a = nb::none(), "out_dtype"_a = nb::none(),
        "D = act(alpha * A @ op(B) + beta * C + bias). a [M, K]; b [K, N] ('nn'), [N, K] ('nt') or a "
        "PackedMatrix; c [M, N] (beta != 0; None: out's old contents); bias [N] f32; activation 'none' "
        "or 'silu'. f32 x f32 -> f32, bf16 x bf16 -> f32 or bf16 (default bf16), i8/u8 x i8 -> i32, "
        "fp8 x fp8 (a_scales [M, K/128], b_scales [ceil(N/128), K/128]) and bf16 x fp8 -> bf16 (default) or "
        "f32. Returns out.");
}

}  // namespace solpy
