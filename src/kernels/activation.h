#pragma once
// Row primitives of the activations, per ISA (internal). f32 or bf16 elements, f32 arithmetic.
#include <cstdint>

#include "core/kernel_table.h"
#include "sol/dtype.h"
#include "sol/tuning.h"

namespace sol::kernels {

// stream: y is not read again soon (the whole output is larger than the cache), so whole
// lines may be written with non-temporal stores; a hint, the values are the same either way.
// tp: the vector kernels request their rows tp.row_prefetch_bytes ahead (speed only; the scalar
// ones ignore it).

// y[i] = round_y(silu(g[i]) * u[i]); a bf16 y within 1 ulp of the correctly rounded value (the
// AVX-512 kernel's bf16 outputs come from a cheaper kernel than its f32 ones). next_u: the u row of the next call, or null: a kernel that
// prefetches ahead turns to it when g's row runs out (the prefetches past the end of u already
// reach the next row's g in gate_up's [g | u] layout).
void silu_mul_scalar(const void* g, const void* u, DType t, void* y, DType yt, int64_t n, bool stream,
                     const void* next_u, const TuningParams& tp);
void silu_mul_avx2(const void* g, const void* u, DType t, void* y, DType yt, int64_t n, bool stream,
                   const void* next_u, const TuningParams& tp);
void silu_mul_avx512(const void* g, const void* u, DType t, void* y, DType yt, int64_t n, bool stream,
                     const void* next_u, const TuningParams& tp);

// Two rows per call, their lines read in turn: two independent DRAM streams when the rows lie
// far apart (the ops pair row r with one half a thread's range away). Same results as two
// calls of the one-row kernel. AVX-512 only; the ops call the one-row kernel otherwise.
struct SiluMulRow {
  const void* g;
  const void* u;
  void* y;
  const void* next_u;
};
void silu_mul2_avx512(const SiluMulRow& a, const SiluMulRow& b, DType t, DType yt, int64_t n, bool stream,
                      const TuningParams& tp);

// y[i] = round_y(gelu(x[i])), tanh form or erf form; a bf16 y within 1 ulp, as silu-mul's.
void gelu_scalar(const void* x, DType t, void* y, DType yt, int64_t n, bool erf_form, bool stream,
                 const TuningParams& tp);
void gelu_avx2(const void* x, DType t, void* y, DType yt, int64_t n, bool erf_form, bool stream,
               const TuningParams& tp);
void gelu_avx512(const void* x, DType t, void* y, DType yt, int64_t n, bool erf_form, bool stream,
                 const TuningParams& tp);
// Rows xa -> ya and xb -> yb together (as silu_mul2_avx512).
void gelu2_avx512(const void* xa, void* ya, const void* xb, void* yb, DType t, DType yt, int64_t n, bool erf_form,
                  bool stream, const TuningParams& tp);

// ---- fused with per-token FP8 quantization (AVX-512) ----

// Where one row's codes and scales go. stream: q's lines are written with non-temporal stores
// when q is 64-byte aligned, NOT fenced: the caller issues one stream_fence_avx512()
// (kernels/copy.h) after its last row (an sfence per row waits for each row's lines to drain).
struct QuantRowOut {
  uint8_t* q;
  float* scales;
  int64_t scale_stride;
  bool stream;
};

// q, scales of one row = quant_fp8_per_token (groups of `group`, UE8M0 scales when ue8m0) of
// the bf16 row the plain kernel writes (gelu_avx512 / silu_mul_avx512 with a bf16 y), bit for
// bit; buf: n words of 64-byte aligned scratch (it ends up holding that bf16 row, but for
// f32-subnormal results, which are zeros of their sign there: their codes are the same). Handles
// group a multiple of 64 with n a multiple of group, and returns false (touching nothing)
// otherwise. Needs MXCSR's flush-to-zero and denormals-are-zero off (the encoder relies on
// f32 subnormal results: e4m3_encode_avx512.h); see mxcsr_keeps_subnormals (kernels/quant.h).
bool gelu_quant_row_avx512(const void* x, DType t, int64_t n, bool erf_form, int64_t group, bool ue8m0,
                           uint16_t* buf, const QuantRowOut& out, const TuningParams& tp);
bool silu_mul_quant_row_avx512(const void* g, const void* u, DType t, int64_t n, const void* next_u, int64_t group,
                               bool ue8m0, uint16_t* buf, const QuantRowOut& out, const TuningParams& tp);

// The activations' kernels at one ISA level: one row (every level), two rows interleaved and
// the fused quantizing rows (null below AVX-512: the op runs rows one at a time and quantizes
// through a buffer there).
struct ActivationKernels {
  decltype(&silu_mul_scalar) silu_mul;
  decltype(&silu_mul2_avx512) silu_mul2;
  decltype(&silu_mul_quant_row_avx512) silu_mul_quant_row;
  decltype(&gelu_scalar) gelu;
  decltype(&gelu2_avx512) gelu2;
  decltype(&gelu_quant_row_avx512) gelu_quant_row;
};
KernelTable<ActivationKernels> activation_kernel_table();

}  // namespace sol::kernels
