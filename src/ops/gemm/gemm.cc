// sol::gemm: validation, then the AMX paths (decode or blocked), the AVX-512 blocked path or
// the scalar one (include/sol/gemm.h).
#include "sol/gemm.h"

#include <algorithm>

#include "ops/common/validate.h"
#include "ops/gemm/packing.h"
#include "ops/gemm/problem.h"
#include "sol/error.h"
#include "hw/kernel_select.h"
#include "ops/gemm/gemm_device.h"

namespace sol {

namespace {

using gemm_detail::GemmProblem;

void require_matrix(const char* name, const Tensor& t) {
  check(t.ndim() == 2, "gemm", name, " must be 2-D but ", name, ".shape = ", shape_text(t));
  check(t.shape(1) <= 1 || t.stride(1) == 1, "gemm", name, ".strides[1] = ", t.stride(1),
        " but the last dimension must be dense (stride 1)");
  require_data("gemm", name, t);
}

bool same_view(const Tensor& x, const Tensor& y) {
  return x.data() == y.data() && x.dtype() == y.dtype() && x.ndim() == y.ndim() &&
         std::equal(x.shape().begin(), x.shape().end(), y.shape().begin()) &&
         (x.shape(0) <= 1 || x.stride(0) == y.stride(0));
}

// The micro-kernel type of an (A, B) pair, or an error naming the pairs Sol multiplies.
DType compute_type_of(DType a, DType b) {
  if (a == DType::f32 && b == DType::f32) return DType::f32;
  if ((a == DType::bf16 || a == DType::f8e4m3) && (b == DType::bf16 || b == DType::f8e4m3) &&
      !(a == DType::f8e4m3 && b == DType::bf16))
    return DType::bf16;
  if ((a == DType::i8 || a == DType::u8) && b == DType::i8) return DType::i8;
  fail("gemm", "a.dtype = ", dtype_name(a), " with b.dtype = ", dtype_name(b),
       " is not supported (f32 x f32, bf16 x bf16, i8 x i8, u8 x i8, f8e4m3 x f8e4m3, bf16 x f8e4m3)");
}

// Checks A, D, C, bias, scales and the options; fills everything of the problem but B.
GemmProblem describe(const Tensor& a, int64_t n, DType b_dtype, const Tensor& d, const GemmOptions& opt) {
  require_matrix("a", a);
  require_matrix("d", d);
  const DType in = compute_type_of(a.dtype(), b_dtype);
  const int64_t m = a.shape(0), k = a.shape(1);
  check(d.shape(0) == m, "gemm", "d.shape[0] = ", d.shape(0), " but a.shape[0] = ", m);
  check(d.shape(1) == n, "gemm", "d.shape[1] = ", d.shape(1), " but B has n = ", n);
  if (in == DType::f32)
    check(d.dtype() == DType::f32, "gemm", "d.dtype = ", dtype_name(d.dtype()),
          " but f32 inputs give an f32 output");
  else if (in == DType::bf16)
    check(d.dtype() == DType::f32 || d.dtype() == DType::bf16, "gemm", "d.dtype = ",
          dtype_name(d.dtype()), " but ", dtype_name(a.dtype()), " x ", dtype_name(b_dtype),
          " gives an f32 or bf16 output");
  else
    check(d.dtype() == DType::i32, "gemm", "d.dtype = ", dtype_name(d.dtype()),
          " but int8 inputs give an i32 output");
  if (in == DType::i8) {
    check(opt.alpha == 1.0f, "gemm", "alpha = ", opt.alpha, " but int8 GEMM is exact: alpha must be 1");
    check(opt.beta == 0.0f || opt.beta == 1.0f, "gemm", "beta = ", opt.beta,
          " but int8 GEMM takes beta 0 or 1 (D = A*B or D = A*B + C)");
    check(!opt.bias && opt.activation == Activation::none, "gemm",
          "int8 GEMM has no bias or activation epilogue (its output is exact int32)");
  }
  check(m <= 1 || d.stride(0) >= n, "gemm", "d.strides[0] = ", d.stride(0),
        " but rows of d would overlap (needs >= ", n, ")");
  require_no_overlap("gemm", "d", d, "a", a);

  GemmProblem p;
  p.kern = &gemm_detail::gemm_kernels();
  p.m = m;
  p.n = n;
  p.k = k;
  p.in = in;
  p.a_type = a.dtype();
  p.b_type = b_dtype;
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
    check(c.shape(0) == m && c.shape(1) == n, "gemm", "c.shape = ", shape_text(c),
          " but d.shape = ", shape_text(d));
    check(c.dtype() == d.dtype(), "gemm", "c.dtype = ", dtype_name(c.dtype()), " but d.dtype = ",
          dtype_name(d.dtype()), " (C has D's dtype)");
    if (!same_view(c, d)) require_no_overlap("gemm", "c", c, "d", d);
    p.c = c.data();
    p.ldc = c.stride(0);
  }
  if (opt.bias) {
    const Tensor& bias = *opt.bias;
    check(bias.ndim() == 1 && bias.shape(0) == n, "gemm", "bias.shape = ", shape_text(bias),
          " but must be [", n, "]");
    check(bias.dtype() == DType::f32, "gemm", "bias.dtype = ", dtype_name(bias.dtype()), " but must be f32");
    check(n <= 1 || bias.stride(0) == 1, "gemm", "bias.strides[0] = ", bias.stride(0), " but must be 1");
    require_data("gemm", "bias", bias);
    require_no_overlap("gemm", "d", d, "bias", bias);
    p.bias = bias.data_as<const float>();
  }
  p.silu = opt.activation == Activation::silu;

  const bool fp8 = a.dtype() == DType::f8e4m3 || b_dtype == DType::f8e4m3;
  if (fp8)
    check(k % kFp8ScaleBlock == 0, "gemm", "k = ", k, " but fp8 block scales need k % ",
          kFp8ScaleBlock, " == 0");
  if (a.dtype() == DType::f8e4m3) {
    check(opt.a_scales != nullptr, "gemm", "an f8e4m3 a needs a_scales (f32 [M, K/128])");
    gemm_detail::require_scales("gemm", "a_scales", *opt.a_scales, m, k / kFp8ScaleBlock);
    p.a_scales = opt.a_scales->data_as<const float>();
    p.lds_a = opt.a_scales->stride(0);
  } else {
    check(opt.a_scales == nullptr, "gemm", "a_scales given but a.dtype = ", dtype_name(a.dtype()),
          " (only f8e4m3 takes them)");
  }
  return p;
}

void run(const GemmProblem& p) {
  if (p.m == 0 || p.n == 0) return;
  if (gemm_detail::amx_runs(*p.kern, p.m, p.in)) {
    if (p.m <= gemm_detail::kAmxDecodeRows) gemm_detail::gemm_amx_decode(p);
    else gemm_detail::gemm_amx_blocked(p);
  } else if (p.kern->tile_f32) gemm_detail::gemm_blocked_tiles(p);
  else gemm_detail::gemm_scalar(p);
}

}  // namespace

namespace gemm_detail {
const kernels::GemmKernels& gemm_kernels() { return select_kernels(kernels::gemm_kernel_table(), "gemm"); }

void require_scales(const char* op, const char* name, const Tensor& t, int64_t rows, int64_t cols) {
  check(t.ndim() == 2, op, name, " must be 2-D but ", name, ".shape = ", shape_text(t));
  check(t.dtype() == DType::f32, op, name, ".dtype = ", dtype_name(t.dtype()), " but must be f32");
  check(t.shape(0) == rows && t.shape(1) == cols, op, name, ".shape = ", shape_text(t), " but must be [",
        rows, ", ", cols, "]");
  check(t.shape(1) <= 1 || t.stride(1) == 1, op, name, ".strides[1] = ", t.stride(1), " but must be 1");
  require_data(op, name, t);
}

void require_b_scales(const char* op, const Tensor& t, int64_t n, int64_t k) {
  check(k % kFp8ScaleBlock == 0, op, "k = ", k, " but fp8 block scales need k % ", kFp8ScaleBlock, " == 0");
  require_scales(op, "b_scales", t, (n + kFp8ScaleBlock - 1) / kFp8ScaleBlock, k / kFp8ScaleBlock);
}
}  // namespace gemm_detail

void gemm(const Tensor& a, const Tensor& b, const Tensor& d, const GemmOptions& opt) {
  if (gemm_on_device(a, b, d)) return gemm_device(a, b, d, opt);
  require_matrix("b", b);
  const bool nn = opt.layout == Layout::nn;
  const int64_t k = nn ? b.shape(0) : b.shape(1), n = nn ? b.shape(1) : b.shape(0);
  if (a.ndim() == 2)
    check(a.shape(1) == k, "gemm", "a.shape[1] = ", a.shape(1), " but b.shape[", nn ? 0 : 1, "] = ", k,
          nn ? "" : " (layout nt: b is [N, K])");
  GemmProblem p = describe(a, n, b.dtype(), d, opt);
  require_no_overlap("gemm", "d", d, "b", b);
  p.b = {b.data(), b.stride(0), opt.layout};
  if (b.dtype() == DType::f8e4m3) {
    check(opt.b_scales != nullptr, "gemm", "an f8e4m3 b needs b_scales (f32 [ceil(N/128), K/128])");
    gemm_detail::require_b_scales("gemm", *opt.b_scales, n, k);
    p.b_scales = opt.b_scales->data_as<const float>();
    p.lds_b = opt.b_scales->stride(0);
  } else {
    check(opt.b_scales == nullptr, "gemm", "b_scales given but b.dtype = ", dtype_name(b.dtype()),
          " (only f8e4m3 takes them)");
  }
  run(p);
}

void gemm(const Tensor& a, const PackedMatrix& b, const Tensor& d, const GemmOptions& opt) {
  check(!b.empty(), "gemm", "b is an empty PackedMatrix (moved from, or never packed)");
  if (a.ndim() == 2)
    check(a.shape(1) == b.k(), "gemm", "a.shape[1] = ", a.shape(1), " but packed b.k = ", b.k());
  GemmProblem p = describe(a, b.n(), b.dtype(), d, opt);
  check(opt.b_scales == nullptr, "gemm", "b_scales given with a PackedMatrix (it carries its own)");
  p.packed = &b.impl();
  if (b.dtype() == DType::f8e4m3) {
    p.b_scales = b.impl().scales.tensor().data_as<const float>();
    p.lds_b = b.impl().scales.tensor().stride(0);
  }
  run(p);
}

}  // namespace sol
