#pragma once
// One validated GEMM call, as the blocked and the scalar paths both see it: raw pointers,
// leading dimensions in elements, and where B comes from (a plain matrix or a PackedMatrix).
#include <cstdint>

#include "kernels/gemm.h"
#include "sol/dtype.h"
#include "sol/gemm.h"
#include "sol/tensor.h"
#include "sol/tuning.h"

namespace sol::gemm_detail {

// A plain B: element (k, n) lives at k * ld + n (nn) or n * ld + k (nt).
struct PlainB {
  const void* data = nullptr;
  int64_t ld = 0;
  Layout layout = Layout::nn;
  int64_t offset(int64_t k, int64_t n) const { return layout == Layout::nn ? k * ld + n : n * ld + k; }
};

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  const kernels::GemmKernels* kern = nullptr;  // the level's kernels, picked once per call
  const TuningParams* tune = &tuning().params;  // blocking and chunking, read once per call
  // What the micro-kernel multiplies: f32, bf16 (also for fp8 operands, widened while packing)
  // or i8 (u8 x s8 quads); and how A and a plain B are stored.
  DType in = DType::f32;
  DType a_type = DType::f32, b_type = DType::f32;
  const void* a = nullptr;
  int64_t lda = 0;
  PlainB b;                                     // used when packed is null
  const PackedMatrix::Impl* packed = nullptr;
  void* d = nullptr;
  int64_t ldd = 0;
  bool d_bf16 = false;  // else f32, or i32 when in == i8
  const void* c = nullptr;  // D's dtype; equals d when C is D's old contents
  int64_t ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
  const float* bias = nullptr;
  bool silu = false;
  // fp8 block scales (in == bf16 only): a_scales [m, k/128] (null: 1), b_scales
  // [ceil(n/128), k/128] (for a packed B, the PackedMatrix's own).
  const float* a_scales = nullptr;
  int64_t lds_a = 0;
  const float* b_scales = nullptr;
  int64_t lds_b = 0;

  bool c_is_d() const { return beta != 0.0f && c == d; }
};

// Checks fp8 block scales: f32 [rows, cols], last dimension dense; require_b_scales derives
// B's [ceil(n/128), k/128] (and needs k % 128 == 0).
void require_scales(const char* op, const char* name, const Tensor& scales, int64_t rows, int64_t cols);
void require_b_scales(const char* op, const Tensor& scales, int64_t n, int64_t k);

// The kernel set of the ISA level in force (the one place GEMM reads it).
const kernels::GemmKernels& gemm_kernels();

// The blocked driver over the register-tile kernels (levels whose set has them).
void gemm_blocked_tiles(const GemmProblem& p);

// The AMX paths: bf16 (and fp8, widened) and int8 at any M, where the level's set has AMX
// kernels — or the tile model while it is forced (tests). Up to kAmxDecodeRows rows (one
// accumulator tile's height) run the decode kernels, one strip of D per call over all of K;
// more run the blocked ones.
inline constexpr int64_t kAmxDecodeRows = 16;
bool amx_runs(const kernels::GemmKernels& k, int64_t m, DType in);
void gemm_amx_blocked(const GemmProblem& p);
void gemm_amx_decode(const GemmProblem& p);
// Tests only: run the AMX path on the scalar tile model (kernels::kAmxModel) even where the
// CPU has no AMX. Process-wide; returns the previous setting.
bool force_amx_model(bool on);
void gemm_scalar(const GemmProblem& p);

}  // namespace sol::gemm_detail
