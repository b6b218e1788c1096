// MoE grouped GEMM (include/sol/gemm.h): one ordinary GEMM per expert's rows, on 2-D views
// of A, B[g] and D. Each call is threaded over its own rows or columns and keeps GEMM's fixed
// summation order, so the result of a row never depends on the other experts or on threads.
#include <cstdint>
#include <span>
#include <vector>

#include "ops/gemm/gemm_device.h"
#include "ops/gemm/gemm_sm90_persistent.h"
#include "ops/common/validate.h"
#include "ops/common/rows.h"
#include "sol/error.h"
#include "sol/gemm.h"

namespace sol {

namespace {

void require_b(const char* op, const Tensor& b) {
  check(b.ndim() == 3, op, "b must be [G, N, K] but b.shape = ", shape_text(b));
  check(b.dtype() == DType::bf16 || b.dtype() == DType::f8e4m3, op, "b.dtype = ",
        dtype_name(b.dtype()), " but must be bf16 or f8e4m3");
  require_data(op, "b", b);
}

void require_i32_vector(const char* op, const char* name, const Tensor& t, int64_t n) {
  check(t.ndim() == 1 && t.shape(0) == n, op, name, ".shape = ", shape_text(t), " but must be [", n, "]");
  check(t.dtype() == DType::i32, op, name, ".dtype = ", dtype_name(t.dtype()), " but must be i32");
  require_data(op, name, t);
}

// b_scales [G, ceil(N/128), K/128] for an fp8 B: the leading dimension must match the experts.
void require_b_scales_for(const char* op, const Tensor& b, const GroupedGemmOptions& opt) {
  if (b.dtype() != DType::f8e4m3) {
    check(opt.b_scales == nullptr, op, "b_scales given but b.dtype = ", dtype_name(b.dtype()));
    return;
  }
  check(opt.b_scales != nullptr, op, "an f8e4m3 b needs b_scales (f32 [G, ceil(N/128), K/128])");
  check(opt.b_scales->ndim() == 3 && opt.b_scales->shape(0) == b.shape(0), op, "b_scales.shape = ",
        shape_text(*opt.b_scales), " but must be [", b.shape(0), ", ceil(N/128), K/128]");
}

GemmOptions expert_options(const Tensor& b, int64_t g, const GroupedGemmOptions& opt, Tensor& a_scales,
                           Tensor& b_scales) {
  GemmOptions o;
  o.layout = Layout::nt;
  if (opt.a_scales) o.a_scales = &a_scales;
  if (b.dtype() == DType::f8e4m3) {
    b_scales = plane(*opt.b_scales, g);
    o.b_scales = &b_scales;
  }
  return o;
}

// The experts' weights as [G, N, K] plain (with b_scales for fp8) or as G PackedMatrix.
struct ExpertWeights {
  const Tensor* plain = nullptr;
  std::span<const PackedMatrix> packed;
  int64_t groups() const { return plain ? plain->shape(0) : int64_t(packed.size()); }
  int64_t n() const { return plain ? plain->shape(1) : packed.empty() ? 0 : packed[0].n(); }
  int64_t k() const { return plain ? plain->shape(2) : packed.empty() ? 0 : packed[0].k(); }
};

void require_weights(const char* op, const ExpertWeights& w, const GroupedGemmOptions& opt) {
  if (w.plain) {
    require_b(op, *w.plain);
    require_b_scales_for(op, *w.plain, opt);
    return;
  }
  check(opt.b_scales == nullptr, op, "b_scales given with packed experts (each PackedMatrix carries its own)");
  for (size_t g = 0; g < w.packed.size(); ++g) {
    const PackedMatrix& e = w.packed[g];
    check(!e.empty(), op, "expert ", g, " is an empty PackedMatrix");
    check(e.n() == w.n() && e.k() == w.k() && e.dtype() == w.packed[0].dtype(), op, "expert ", g, " is [n = ",
          e.n(), ", k = ", e.k(), ", ", dtype_name(e.dtype()), "] but expert 0 is [n = ", w.n(), ", k = ", w.k(),
          ", ", dtype_name(w.packed[0].dtype()), "] (all experts must match)");
    check(e.dtype() == DType::bf16 || e.dtype() == DType::f8e4m3, op, "expert ", g, " is ", dtype_name(e.dtype()),
          " but must be bf16 or f8e4m3");
  }
}

// D rows = A rows x expert e.
void multiply_expert(const ExpertWeights& w, int64_t e, const Tensor& a, const Tensor& d,
                     const GroupedGemmOptions& opt, Tensor& a_scales) {
  Tensor b_scales;
  if (w.plain) {
    const GemmOptions o = expert_options(*w.plain, e, opt, a_scales, b_scales);
    return gemm(a, plane(*w.plain, e), d, o);
  }
  GemmOptions o;
  if (opt.a_scales) o.a_scales = &a_scales;
  gemm(a, w.packed[size_t(e)], d, o);
}

void contiguous(const Tensor& a, const ExpertWeights& w, const Tensor& grouped_layout, const Tensor& d,
                const GroupedGemmOptions& opt) {
  const char* op = "grouped_gemm_contiguous";
  require_weights(op, w, opt);
  check(a.ndim() == 2, op, "a must be [M, K] but a.shape = ", shape_text(a));
  check(d.ndim() == 2, op, "d must be [M, N] but d.shape = ", shape_text(d));
  const int64_t m = a.shape(0), groups = w.groups();
  check(a.shape(1) == w.k(), op, "a.shape[1] = ", a.shape(1), " but the experts have k = ", w.k(),
        " (b is [G, N, K])");
  check(d.shape(0) == m && d.shape(1) == w.n(), op, "d.shape = ", shape_text(d), " but must be [", m, ", ",
        w.n(), "]");
  require_i32_vector(op, "grouped_layout", grouped_layout, m);
  if (opt.a_scales)
    check(opt.a_scales->ndim() == 2 && opt.a_scales->shape(0) == m, op, "a_scales.shape = ",
          shape_text(*opt.a_scales), " but must be [", m, ", K/128]");

  // Maximal runs of equal expert ids; every id is checked before anything is computed.
  struct Run {
    int64_t begin, end, expert;
  };
  std::vector<Run> runs;
  const Tensor layout = grouped_layout;
  for (int64_t i = 0; i < m; ++i) {
    const int32_t e = *static_cast<const int32_t*>(layout.ptr({i}));
    check(e >= -1 && e < groups, op, "grouped_layout[", i, "] = ", e, " but must be -1 (padding) or in [0, ",
          groups, ")");
    if (e < 0) continue;
    if (!runs.empty() && runs.back().expert == e && runs.back().end == i) runs.back().end = i + 1;
    else runs.push_back({i, i + 1, e});
  }
  for (const Run& r : runs) {
    Tensor a_scales = opt.a_scales ? opt.a_scales->slice(0, r.begin, r.end) : Tensor();
    multiply_expert(w, r.expert, a.slice(0, r.begin, r.end), d.slice(0, r.begin, r.end), opt, a_scales);
  }
}

void masked(const Tensor& a, const ExpertWeights& w, const Tensor& masked_m, const Tensor& d,
            const GroupedGemmOptions& opt) {
  const char* op = "grouped_gemm_masked";
  require_weights(op, w, opt);
  const int64_t groups = w.groups();
  check(a.ndim() == 3 && a.shape(0) == groups, op, "a must be [G, max_m, K] with G = ", groups,
        " but a.shape = ", shape_text(a));
  const int64_t max_m = a.shape(1);
  check(a.shape(2) == w.k(), op, "a.shape[2] = ", a.shape(2), " but the experts have k = ", w.k(),
        " (b is [G, N, K])");
  check(d.ndim() == 3 && d.shape(0) == groups && d.shape(1) == max_m && d.shape(2) == w.n(), op,
        "d.shape = ", shape_text(d), " but must be [", groups, ", ", max_m, ", ", w.n(), "]");
  require_i32_vector(op, "masked_m", masked_m, groups);
  if (opt.a_scales)
    check(opt.a_scales->ndim() == 3 && opt.a_scales->shape(0) == groups && opt.a_scales->shape(1) == max_m, op,
          "a_scales.shape = ", shape_text(*opt.a_scales), " but must be [", groups, ", ", max_m, ", K/128]");
  std::vector<int64_t> rows(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) {
    const int32_t r = *static_cast<const int32_t*>(masked_m.ptr({g}));
    check(r >= 0 && r <= max_m, op, "masked_m[", g, "] = ", r, " but must be in [0, ", max_m, "]");
    rows[size_t(g)] = r;
  }
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t r = rows[size_t(g)];
    if (r == 0) continue;
    Tensor a_scales = opt.a_scales ? plane(*opt.a_scales, g).slice(0, 0, r) : Tensor();
    multiply_expert(w, g, plane(a, g).slice(0, 0, r), plane(d, g).slice(0, 0, r), opt, a_scales);
  }
}

}  // namespace

void grouped_gemm_contiguous(const Tensor& a, const Tensor& b, const Tensor& grouped_layout, const Tensor& d,
                             const GroupedGemmOptions& opt) {
  if (grouped_on_device(a, b, d))
    return grouped_gemm_device(kernels::sm90::GemmGrouping::contiguous, a, b, grouped_layout, d, opt,
                               "grouped_gemm_contiguous");
  contiguous(a, ExpertWeights{&b, {}}, grouped_layout, d, opt);
}
void grouped_gemm_contiguous(const Tensor& a, std::span<const PackedMatrix> b, const Tensor& grouped_layout,
                             const Tensor& d, const GroupedGemmOptions& opt) {
  check(!b.empty(), "grouped_gemm_contiguous", "no experts (the span of PackedMatrix is empty)");
  contiguous(a, ExpertWeights{nullptr, b}, grouped_layout, d, opt);
}
void check_grouped_layouts(Device device) {
  if (device.is_cpu()) return;
  check_sm90_contiguous_layouts(device, "check_grouped_layouts");
}
void grouped_gemm_masked(const Tensor& a, const Tensor& b, const Tensor& masked_m, const Tensor& d,
                         const GroupedGemmOptions& opt) {
  if (grouped_on_device(a, b, d))
    return grouped_gemm_device(kernels::sm90::GemmGrouping::masked, a, b, masked_m, d, opt, "grouped_gemm_masked");
  masked(a, ExpertWeights{&b, {}}, masked_m, d, opt);
}
void grouped_gemm_masked(const Tensor& a, std::span<const PackedMatrix> b, const Tensor& masked_m, const Tensor& d,
                         const GroupedGemmOptions& opt) {
  check(!b.empty(), "grouped_gemm_masked", "no experts (the span of PackedMatrix is empty)");
  masked(a, ExpertWeights{nullptr, b}, masked_m, d, opt);
}

}  // namespace sol
