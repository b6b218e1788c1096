// The cuBLASLt anchor's host logic (cublaslt_anchor.h): which fp8 scaling a library and device
// offer, the scale layouts its block modes read, the argument checks. The calls into the library
// are in cublaslt_anchor_cuda.cc; a build without CUDA gets the definitions at the end, which say so.
#include "ops/gemm/cublaslt_anchor.h"

#include <cstring>

#include "sol/error.h"
#include "sol/gemm.h"

namespace sol {

namespace {

constexpr const char* kOp = "cublaslt";
constexpr int64_t kBlock = kFp8ScaleBlock;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

void check_f32_matrix(const Tensor* t, const char* name, int64_t rows, int64_t cols) {
  check(t != nullptr, kOp, name, " is missing: the scaling needs it");
  check(t->dtype() == DType::f32, kOp, name, " is ", dtype_name(t->dtype()), " but must be f32");
  check(t->ndim() == 2 && t->shape(0) == rows && t->shape(1) == cols, kOp, name, " must be [", rows, ", ", cols,
        "] (cuBLASLt's layout)");
  check(t->is_contiguous(), kOp, name, " must be contiguous");
}

}  // namespace

std::string_view cublaslt_fp8_scaling_name(CublasLtFp8Scaling s) {
  switch (s) {
    case CublasLtFp8Scaling::none: return "none";
    case CublasLtFp8Scaling::per_tensor: return "per-tensor";
    case CublasLtFp8Scaling::block_1x128_128x128: return "block 1x128/128x128";
  }
  return "none";
}

CublasLtFp8Scaling cublaslt_fp8_scaling(size_t version, int cc_major, int cc_minor) {
  const int cc = cc_major * 10 + cc_minor;
  if (cc < 89) return CublasLtFp8Scaling::none;  // fp8 tensor cores start with Ada (8.9)
  if (cc == 90 && version >= 120900) return CublasLtFp8Scaling::block_1x128_128x128;
  return CublasLtFp8Scaling::per_tensor;
}

std::string CublasLtLibrary::version_text() const {
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

Buffer cublaslt_a_block_scales(const Tensor& a_scales) {
  check(a_scales.dtype() == DType::f32 && a_scales.ndim() == 2, kOp, "a_scales must be f32 [m, k/128]");
  const int64_t m = a_scales.shape(0), kb = a_scales.shape(1);
  Buffer out(DType::f32, {kb, m});
  float* o = out.tensor().data_as<float>();
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < kb; ++j) std::memcpy(o + j * m + r, a_scales.ptr({r, j}), sizeof(float));
  return out;
}

Buffer cublaslt_b_block_scales(const Tensor& b_scales) {
  check(b_scales.dtype() == DType::f32 && b_scales.ndim() == 2, kOp, "b_scales must be f32 [ceil(n/128), k/128]");
  const int64_t nb = b_scales.shape(0), kb = b_scales.shape(1), ld = round_up(kb, 4);
  Buffer out(DType::f32, {nb, ld});
  float* o = out.tensor().data_as<float>();
  std::memset(o, 0, size_t(nb * ld) * sizeof(float));
  for (int64_t r = 0; r < nb; ++r)
    for (int64_t j = 0; j < kb; ++j) std::memcpy(o + r * ld + j, b_scales.ptr({r, j}), sizeof(float));
  return out;
}

void check_cublaslt_problem(const CublasLtProblem& p) {
  check(p.in == DType::bf16 || p.in == DType::f8e4m3, kOp, "operands are ", dtype_name(p.in),
        " but the anchor multiplies bf16 or f8e4m3");
  check(p.m >= 1 && p.n >= 1 && p.k >= 1, kOp, "m, n, k = ", p.m, ", ", p.n, ", ", p.k,
        " but each must be >= 1 (an empty product has nothing to time)");
  check(p.layout == Layout::nt || p.in == DType::bf16, kOp,
        "layout nn with f8e4m3: cuBLASLt's fp8 kernels take B stored [N, K] only (the TN form)");
  if (p.in == DType::bf16) {
    check(p.scaling == CublasLtFp8Scaling::none, kOp, "bf16 operands take no scales but the scaling is ",
          cublaslt_fp8_scaling_name(p.scaling));
    return;
  }
  check(p.scaling != CublasLtFp8Scaling::none, kOp,
        "f8e4m3 operands need a scaling (per-tensor or block 1x128/128x128), got none");
  // fp8 kernels read rows of 16-byte multiples; the block modes whole 128-element K blocks.
  check(p.k % 16 == 0, kOp, "k = ", p.k, " but fp8 needs k % 16 == 0");
  if (p.scaling == CublasLtFp8Scaling::block_1x128_128x128)
    check(p.k % kBlock == 0, kOp, "k = ", p.k, " but block scaling needs k % 128 == 0");
}

void check_cublaslt_operands(const CublasLtProblem& p, const Tensor& a, const Tensor& b, const Tensor& d,
                             const Tensor* a_scales, const Tensor* b_scales) {
  const Device dev = a.device();
  check(!dev.is_cpu(), kOp, "a is on the host but cuBLASLt needs device memory");
  for (const Tensor* t : {&b, &d, a_scales, b_scales})
    if (t) check(t->device() == dev, kOp, "operands are on ", dev, " and ", t->device(), " but must share one device");
  check(a.dtype() == p.in && b.dtype() == p.in, kOp, "a, b are ", dtype_name(a.dtype()), ", ", dtype_name(b.dtype()),
        " but the anchor was prepared for ", dtype_name(p.in));
  check(d.dtype() == DType::bf16, kOp, "d is ", dtype_name(d.dtype()), " but must be bf16");
  auto shaped = [](const Tensor& t, int64_t r, int64_t c) { return t.ndim() == 2 && t.shape(0) == r && t.shape(1) == c; };
  check(shaped(a, p.m, p.k), kOp, "a must be [", p.m, ", ", p.k, "] as prepared");
  if (p.layout == Layout::nn)
    check(shaped(b, p.k, p.n), kOp, "b must be [", p.k, ", ", p.n, "] (layout nn: B stored [K, N]) as prepared");
  else
    check(shaped(b, p.n, p.k), kOp, "b must be [", p.n, ", ", p.k, "] (weights stored [N, K]) as prepared");
  check(shaped(d, p.m, p.n), kOp, "d must be [", p.m, ", ", p.n, "] as prepared");
  check(a.is_contiguous() && b.is_contiguous() && d.is_contiguous(), kOp, "a, b and d must be contiguous");
  switch (p.scaling) {
    case CublasLtFp8Scaling::none:
      check(!a_scales && !b_scales, kOp, "bf16 operands take no scales");
      break;
    case CublasLtFp8Scaling::per_tensor:
      check_f32_matrix(a_scales, "a_scales", 1, 1);
      check_f32_matrix(b_scales, "b_scales", 1, 1);
      break;
    case CublasLtFp8Scaling::block_1x128_128x128:
      check_f32_matrix(a_scales, "a_scales", p.k / kBlock, p.m);
      check_f32_matrix(b_scales, "b_scales", (p.n + kBlock - 1) / kBlock, round_up(p.k / kBlock, 4));
      break;
  }
}

#if !SOL_HAS_CUDA
// Without the CUDA backend there is no anchor to load; the checks above still hold.
struct CublasLtGemm::State {};

const CublasLtLibrary& cublaslt_library() {
  static const CublasLtLibrary lib{false, 0, "", "built without CUDA"};
  return lib;
}

CublasLtGemm::CublasLtGemm(Device, const CublasLtProblem& p) : problem_(p) {
  check_cublaslt_problem(p);
  fail(kOp, "built without CUDA");
}
CublasLtGemm::~CublasLtGemm() = default;
CublasLtGemm::CublasLtGemm(CublasLtGemm&&) noexcept = default;
CublasLtGemm& CublasLtGemm::operator=(CublasLtGemm&&) noexcept = default;
void CublasLtGemm::run(const Tensor&, const Tensor&, const Tensor&, const Tensor*, const Tensor*) const {
  fail(kOp, "built without CUDA");
}
std::string CublasLtGemm::describe() const { return "cuBLASLt (built without CUDA)"; }
bool CublasLtGemm::has_algorithm() const { return false; }
#endif

}  // namespace sol
