// plan_gemm_sm90 (gemm_sm90.h): argument checks and the launch of the sm90 GEMM tile kernels.
#include "ops/gemm/gemm_sm90.h"

#include "sol/device.h"
#include "sol/error.h"

namespace sol {

namespace {

constexpr const char* kOp = "gemm_sm90";

void check_matrix(const Tensor& t, const char* name, int64_t rows, int64_t cols) {
  check(t.ndim() == 2, kOp, name, " has ", t.ndim(), " dims (", shape_text(t), ") but must be 2-d");
  check(t.shape(0) == rows && t.shape(1) == cols, kOp, name, ".shape = ", shape_text(t), " but must be [", rows, ", ",
        cols, "]");
  check(cols <= 1 || t.stride(1) == 1, kOp, name, " has column stride ", t.stride(1), " but its rows must be contiguous");
}

void check_scales(const Tensor& s, const char* name, int64_t rows, int64_t cols, Device device) {
  check(s.dtype() == DType::f32, kOp, name, ".dtype = ", dtype_name(s.dtype()), " but must be f32");
  check_matrix(s, name, rows, cols);
  check(s.is_contiguous(), kOp, name, " must be contiguous");
  check(s.device() == device, kOp, name, " is on ", s.device(), " but A is on ", device);
}

}  // namespace

Sm90GemmLaunch plan_gemm_sm90(const Tensor& a, const Tensor& b, const Tensor& d, const Tensor* a_scales,
                              const Tensor* b_scales, Layout layout) {
  using namespace kernels::sm90;
  check(a.ndim() == 2 && b.ndim() == 2, kOp, "a and b must be 2-d but are ", shape_text(a), " and ", shape_text(b));
  const bool nn = layout == Layout::nn;
  const int64_t m = a.shape(0), k = a.shape(1), n = b.shape(nn ? 1 : 0);
  check(!a.device().is_cpu(), kOp, "a is on the host but the sm90 kernels need device memory");
  check(b.device() == a.device() && d.device() == a.device(), kOp, "a, b, d are on ", a.device(), ", ", b.device(),
        ", ", d.device(), " but must share one CUDA device");
  check(a.dtype() == b.dtype() && (a.dtype() == DType::bf16 || a.dtype() == DType::f8e4m3), kOp, "a, b dtypes = ",
        dtype_name(a.dtype()), ", ", dtype_name(b.dtype()), " but must be both bf16 or both f8e4m3");
  check(d.dtype() == DType::bf16, kOp, "d.dtype = ", dtype_name(d.dtype()), " but must be bf16");
  check(!nn || a.dtype() == DType::bf16, kOp, "layout nn with ", dtype_name(a.dtype()),
        ": fp8 wgmma reads K-major operands only, so an f8e4m3 b must be stored [N, K] (layout nt)");
  check_matrix(a, "a", m, k);
  check_matrix(b, "b", nn ? k : n, nn ? n : k);
  check_matrix(d, "d", m, n);
  check(d.is_contiguous(), kOp, "d must be contiguous");
  check((a_scales == nullptr) == (b_scales == nullptr), kOp, "give both a_scales and b_scales, or neither");
  const bool scaled = a_scales != nullptr;
  check(!scaled || a.dtype() == DType::f8e4m3, kOp, "block scales are for f8e4m3 operands, not ",
        dtype_name(a.dtype()));
  if (scaled) {
    check(k % sol::kFp8ScaleBlock == 0, kOp, "k = ", k, " but fp8 block scales need a multiple of ", sol::kFp8ScaleBlock);
    const int64_t kb = k / sol::kFp8ScaleBlock;
    check_scales(*a_scales, "a_scales", m, kb, a.device());
    check_scales(*b_scales, "b_scales", (n + sol::kFp8ScaleBlock - 1) / sol::kFp8ScaleBlock, kb, a.device());
  }
  Sm90GemmLaunch r;
  if (m == 0 || n == 0) return r;
  GemmTileProblem p;
  p.a = a.device_data();
  p.b = b.device_data();
  p.d = d.device_data();
  p.m = uint64_t(m), p.n = uint64_t(n), p.k = uint64_t(k);
  p.lda = uint64_t(m > 1 ? a.stride(0) : k);
  p.ldb = uint64_t(nn ? (k > 1 ? b.stride(0) : n) : (n > 1 ? b.stride(0) : k));
  p.scaled = scaled;
  if (nn) {
    r.kernel = "sol_sm90_gemm_bf16_nn_128x128x64_s4";
    r.launch = plan_gemm_tile_launch<GemmBf16NnPlan128x128>(p, kOp);
  } else if (a.dtype() == DType::bf16) {
    r.kernel = "sol_sm90_gemm_bf16_128x128x64_s4";
    r.launch = plan_gemm_tile_launch<GemmBf16Plan128x128>(p, kOp);
  } else {
    r.kernel = scaled ? "sol_sm90_gemm_e4m3_scaled_128x128x128_s4" : "sol_sm90_gemm_e4m3_128x128x128_s4";
    r.launch = plan_gemm_tile_launch<GemmE4m3Plan128x128>(p, kOp);
  }
  return r;
}

#if !SOL_HAS_CUDA
void gemm_sm90(const Tensor& a, const Tensor& b, const Tensor& d, const Tensor* a_scales, const Tensor* b_scales,
               Layout layout) {
  plan_gemm_sm90(a, b, d, a_scales, b_scales, layout);
  fail(kOp, cuda_discovery().reason);
}
#endif

}  // namespace sol
