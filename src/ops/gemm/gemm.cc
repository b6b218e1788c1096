// sol::gemm: validation, then the AVX-512 blocked path or the scalar one (include/sol/gemm.h).
#include "sol/gemm.h"

#include <algorithm>

#include "ops/common/validate.h"
#include "ops/gemm/packing.h"
#include "ops/gemm/problem.h"
#include "sol/error.h"
#include "sol/hw.h"

namespace sol {

namespace {

using gemm_detail::GemmProblem;

bool is_gemm_input(DType t) { return t == DType::f32 || t == DType::bf16; }

void require_matrix(const char* name, const Tensor& t) {
  check(t.ndim() == 2, "gemm", name, " must be 2-D but ", name, ".shape = ", t.shape_string());
  check(t.shape(1) <= 1 || t.stride(1) == 1, "gemm", name, ".strides[1] = ", t.stride(1),
        " but the last dimension must be dense (stride 1)");
  require_data("gemm", name, t);
}

bool same_view(const Tensor& x, const Tensor& y) {
  return x.data() == y.data() && x.dtype() == y.dtype() && x.ndim() == y.ndim() &&
         std::equal(x.shape().begin(), x.shape().end(), y.shape().begin()) &&
         (x.shape(0) <= 1 || x.stride(0) == y.stride(0));
}

// Checks A, D, C, bias and the options; fills everything of the problem but B.
GemmProblem describe(const Tensor& a, int64_t n, DType b_dtype, const Tensor& d, const GemmOptions& opt) {
  require_matrix("a", a);
  require_matrix("d", d);
  check(is_gemm_input(a.dtype()), "gemm", "a.dtype = ", dtype_name(a.dtype()), " but must be f32 or bf16");
  check(b_dtype == a.dtype(), "gemm", "a.dtype = ", dtype_name(a.dtype()), " but b.dtype = ",
        dtype_name(b_dtype), " (both must match)");
  const int64_t m = a.shape(0);
  check(d.shape(0) == m, "gemm", "d.shape[0] = ", d.shape(0), " but a.shape[0] = ", m);
  check(d.shape(1) == n, "gemm", "d.shape[1] = ", d.shape(1), " but B has n = ", n);
  if (a.dtype() == DType::f32)
    check(d.dtype() == DType::f32, "gemm", "d.dtype = ", dtype_name(d.dtype()),
          " but f32 inputs give an f32 output");
  else
    check(d.dtype() == DType::f32 || d.dtype() == DType::bf16, "gemm", "d.dtype = ",
          dtype_name(d.dtype()), " but bf16 inputs give an f32 or bf16 output");
  check(m <= 1 || d.stride(0) >= n, "gemm", "d.strides[0] = ", d.stride(0),
        " but rows of d would overlap (needs >= ", n, ")");
  require_no_overlap("gemm", "d", d, "a", a);

  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = a.shape(1);
  p.in = a.dtype();
  p.a = a.data();
  p.lda = a.stride(0);
  p.d = d.data();
  p.ldd = d.stride(0);
  p.d_bf16 = d.dtype() == DType::bf16;
  p.alpha = opt.alpha;
  p.beta = opt.beta;
  p.c = d.data();
  p.ldc = d.stride(0);
  if (opt.c && opt.beta != 0.0f) {
    const Tensor& c = *opt.c;
    require_matrix("c", c);
    check(c.shape(0) == m && c.shape(1) == n, "gemm", "c.shape = ", c.shape_string(),
          " but d.shape = ", d.shape_string());
    check(c.dtype() == d.dtype(), "gemm", "c.dtype = ", dtype_name(c.dtype()), " but d.dtype = ",
          dtype_name(d.dtype()), " (C has D's dtype)");
    if (!same_view(c, d)) require_no_overlap("gemm", "c", c, "d", d);
    p.c = c.data();
    p.ldc = c.stride(0);
  }
  if (opt.bias) {
    const Tensor& bias = *opt.bias;
    check(bias.ndim() == 1 && bias.shape(0) == n, "gemm", "bias.shape = ", bias.shape_string(),
          " but must be [", n, "]");
    check(bias.dtype() == DType::f32, "gemm", "bias.dtype = ", dtype_name(bias.dtype()), " but must be f32");
    check(n <= 1 || bias.stride(0) == 1, "gemm", "bias.strides[0] = ", bias.stride(0), " but must be 1");
    require_data("gemm", "bias", bias);
    require_no_overlap("gemm", "d", d, "bias", bias);
    p.bias = bias.data_as<const float>();
  }
  p.silu = opt.activation == Activation::silu;
  return p;
}

void run(const GemmProblem& p) {
  if (p.m == 0 || p.n == 0) return;
  if (isa_at_least(Isa::avx512)) gemm_detail::gemm_blocked_avx512(p);
  else gemm_detail::gemm_scalar(p);
}

}  // namespace

void gemm(const Tensor& a, const Tensor& b, const Tensor& d, const GemmOptions& opt) {
  require_matrix("b", b);
  const bool nn = opt.layout == Layout::nn;
  const int64_t k = nn ? b.shape(0) : b.shape(1), n = nn ? b.shape(1) : b.shape(0);
  if (a.ndim() == 2)
    check(a.shape(1) == k, "gemm", "a.shape[1] = ", a.shape(1), " but b.shape[", nn ? 0 : 1, "] = ", k,
          nn ? "" : " (layout nt: b is [N, K])");
  GemmProblem p = describe(a, n, b.dtype(), d, opt);
  require_no_overlap("gemm", "d", d, "b", b);
  p.b = {b.data(), b.stride(0), opt.layout};
  run(p);
}

void gemm(const Tensor& a, const PackedMatrix& b, const Tensor& d, const GemmOptions& opt) {
  check(!b.empty(), "gemm", "b is an empty PackedMatrix (moved from, or never packed)");
  if (a.ndim() == 2)
    check(a.shape(1) == b.k(), "gemm", "a.shape[1] = ", a.shape(1), " but packed b.k = ", b.k());
  GemmProblem p = describe(a, b.n(), b.dtype(), d, opt);
  p.packed = &b.impl();
  run(p);
}

}  // namespace sol
