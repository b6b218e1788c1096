#pragma once
// Row primitives of the norms, per ISA (internal). Elements are f32 or bf16; arithmetic in f32.
#include <cstdint>

#include "core/kernel_table.h"
#include "sol/dtype.h"
#include "sol/tuning.h"

namespace sol::kernels {

// Sum of x[i]^2 in f32 over 64 partial sums (one FMA each): for f32, element i goes into
// partial sum i % 64; for bf16, whose vector path widens 32 elements at a time into even and
// odd elements without a shuffle, element j of each block of 64 goes into 16 (2 (j / 32) +
// j % 2) + (j % 32) / 2. Partial sums k, k + 16, k + 32, k + 48 combine as (p0 + p1) + (p2 + p3),
// then the 16 results in order. Every path uses this order, so they agree bit for bit.
// A pass that reads a row from memory requests it tp.pass_prefetch_bytes ahead (every kernel
// here that takes a TuningParams; the scalar ones ignore it): tp moves speed, never bits.
float sum_squares_scalar(const void* x, DType t, int64_t n, const TuningParams& tp);
float sum_squares_avx512(const void* x, DType t, int64_t n, const TuningParams& tp);

// Residual fusion: s[i] = round_rt(r[i] + x[i]) (s may be r itself), and the sum of s[i]^2 as
// stored, in sum_squares order.
float add_sum_squares_avx512(const void* x, DType xt, const void* r, DType rt, void* s, int64_t n,
                             const TuningParams& tp);

// Rows the caller reads next (up to two, any may be null), prefetched by the output passes as
// they go (the lines of the next row's same 32 elements, per 32 elements of this row): a row's
// first pass then finds it in cache instead of waiting on DRAM while the arithmetic of the
// previous row leaves the memory idle.
struct NextRows {
  const void* row[2] = {nullptr, nullptr};
  int64_t element_bytes[2] = {0, 0};
};

// y[i] = round_y((x[i] * inv) * w[i]) as scale_by_weight, with the weight already in f32.
// stream: non-temporal stores for the lines of y when y is element-aligned, NOT fenced: the
// caller issues one stream_fence_avx512() (kernels/copy.h) after its last row, before the
// output is read (an sfence per row stalls each row until its lines have drained).
void rms_apply_avx512(const void* x, DType xt, float inv, const float* w, void* y, DType yt, int64_t n,
                      bool stream, const NextRows& next = {});

// rms_apply with bf16 x, weight and y: the same bits from the bf16 weight itself (it widens
// exactly), in half the L1 bytes of an f32 copy.
void rms_apply_bf16w_avx512(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n, bool stream,
                            const NextRows& next = {});

// rms_apply_bf16w, returning sum_squares of the next row x_next (n elements) taken in the same
// loop (bit for bit sum_squares_avx512's result). x_next is requested ahead of the loop (into
// L2 and L1, tp.pass_l2_prefetch_bytes and tp.pass_prefetch_bytes ahead), up to ahead_bytes past
// its end: the bytes of the caller's following rows when they follow x_next contiguously, 0
// when none do.
float rms_apply_bf16w_next_avx512(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n, bool stream,
                                  const uint16_t* x_next, int64_t ahead_bytes, const TuningParams& tp);

// rms_apply to a bf16 row (no streaming: the row is for the fused quantization, in L1), also
// giving the largest |y| of each group of `group` elements (n and group multiples of 32) as 32
// partial maxima of bf16 magnitude bits, amax32[32 g ... 32 g + 31] for group g; the abs-max
// then costs the output pass two integer ops per 32 instead of a pass of its own.
void rms_apply_bf16_amax_avx512(const void* x, DType xt, float inv, const float* w, uint16_t* y, int64_t n,
                                int64_t group, uint16_t* amax32, const NextRows& next = {});

// y[i] = round_y((x[i] * inv) * w[i]).
void scale_by_weight_scalar(const void* x, DType xt, float inv, const void* w, DType wt, void* y,
                            DType yt, int64_t n);

// LayerNorm statistics, 64 partial sums each, ordered and combined as in sum_squares: the sum
// of x (of the row's first elements, for the shift), and the sums of d = x - shift and of d^2
// around that shift (one pass over the row). The caller corrects the shift by the mean of d, so
// the statistics stay accurate when the mean is large next to the spread.
float sum_scalar(const void* x, DType t, int64_t n, const TuningParams& tp);
float sum_avx512(const void* x, DType t, int64_t n, const TuningParams& tp);
void shifted_sums_scalar(const void* x, DType t, float shift, int64_t n, float* sum_d, float* sum_d2,
                         const TuningParams& tp);
void shifted_sums_avx512(const void* x, DType t, float shift, int64_t n, float* sum_d, float* sum_d2,
                         const TuningParams& tp);

// y[i] = round_y(fma(fma(x[i] - shift, inv, -dm_inv), w[i], b[i])) (without b: a product), where
// the mean is shift + dm, kept in two parts (x - shift is exact for x near the mean; a rounded
// f32 mean would not be), and dm_inv = round(dm * inv): ((x - shift) - dm) * inv with one
// rounding fewer and one op fewer. |dm| is at most a few standard deviations (the shift is a
// mean of part of the row), so dm_inv's rounding is a few f32 ulps of an O(1) value. b may be null.
void layernorm_apply_scalar(const void* x, DType xt, float shift, float dm_inv, float inv, const void* w,
                            const void* b, DType wt, void* y, DType yt, int64_t n);

// layernorm_apply with f32 weight and bias (b may be null), streaming (unfenced) as rms_apply.
void layernorm_apply_f32w_avx512(const void* x, DType xt, float shift, float dm_inv, float inv, const float* w,
                                 const float* b, void* y, DType yt, int64_t n, bool stream, const NextRows& next = {});

// layernorm_apply for bf16 weight and bias given as wb[i] = w_bits[i] << 16 | b_bits[i] (from
// pack_bf16_pairs): the same values as the f32 kernel gets (bf16 widens exactly), so the same
// bits, in half the bytes (the row, its weight and its bias then fit in L1 together).
void layernorm_apply_packed_avx512(const void* x, DType xt, float shift, float dm_inv, float inv, const uint32_t* wb,
                                   void* y, DType yt, int64_t n, bool stream, const NextRows& next = {});
// layernorm_apply with bf16 x, weight, bias and y (even/odd as rms_apply_bf16w): the same bits.
void layernorm_apply_bf16w_avx512(const uint16_t* x, float shift, float dm_inv, float inv, const uint16_t* w,
                                  const uint16_t* b, uint16_t* y, int64_t n, bool stream, const NextRows& next = {});
// layernorm_apply_bf16w, also giving shifted_sums of the next row x_next around shift_next,
// taken in the same loop (bit for bit shifted_sums_avx512's results); ahead_bytes as for
// rms_apply_bf16w_next.
void layernorm_apply_bf16w_next_avx512(const uint16_t* x, float shift, float dm_inv, float inv, const uint16_t* w,
                                       const uint16_t* b, uint16_t* y, int64_t n, bool stream, const uint16_t* x_next,
                                       float shift_next, float* sum_d, float* sum_d2, int64_t ahead_bytes,
                                       const TuningParams& tp);
// out[i] = hi[i] << 16 | lo[i].
void pack_bf16_pairs_avx512(const uint16_t* hi, const uint16_t* lo, uint32_t* out, int64_t n);

// r[i] = round_r(r[i] + x[i]).
void add_into_scalar(const void* x, DType xt, void* r, DType rt, int64_t n);
void add_into_avx512(const void* x, DType xt, void* r, DType rt, int64_t n);

// AVX2: the portable members above, bit for bit (norm_avx2.cc).
float sum_squares_avx2(const void* x, DType t, int64_t n, const TuningParams& tp);
float sum_avx2(const void* x, DType t, int64_t n, const TuningParams& tp);
void shifted_sums_avx2(const void* x, DType t, float shift, int64_t n, float* sum_d, float* sum_d2,
                       const TuningParams& tp);
void scale_by_weight_avx2(const void* x, DType xt, float inv, const void* w, DType wt, void* y, DType yt, int64_t n);
void layernorm_apply_avx2(const void* x, DType xt, float shift, float dm_inv, float inv, const void* w,
                          const void* b, DType wt, void* y, DType yt, int64_t n);
void add_into_avx2(const void* x, DType xt, void* r, DType rt, int64_t n);
float add_sum_squares_avx2(const void* x, DType xt, const void* r, DType rt, void* s, int64_t n,
                           const TuningParams& tp);
// The bf16 row pipelines of rmsnorm and layernorm at AVX2, as the AVX-512 members (streaming
// only where y's row is 64-byte aligned; the output loop runs in blocks of 64 from the row's
// start): norm_rows_avx2.cc.
void rms_apply_bf16w_avx2(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n, bool stream,
                          const NextRows& next = {});
float rms_apply_bf16w_next_avx2(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n, bool stream,
                                const uint16_t* x_next, int64_t ahead_bytes, const TuningParams& tp);
void layernorm_apply_bf16w_avx2(const uint16_t* x, float shift, float dm_inv, float inv, const uint16_t* w,
                                const uint16_t* b, uint16_t* y, int64_t n, bool stream, const NextRows& next = {});
void layernorm_apply_bf16w_next_avx2(const uint16_t* x, float shift, float dm_inv, float inv, const uint16_t* w,
                                     const uint16_t* b, uint16_t* y, int64_t n, bool stream, const uint16_t* x_next,
                                     float shift_next, float* sum_d, float* sum_d2, int64_t ahead_bytes,
                                     const TuningParams& tp);

// The norms' kernels at one ISA level. The portable row kernels (sums, scale_by_weight,
// add_into, layernorm_apply) exist at every level (vectorized from AVX2 up); the fused and
// streaming row pipeline is AVX-512's, with the bf16 members of rmsnorm (and its residual add)
// and layernorm also at AVX2; an op whose member is null takes the portable route.
struct NormKernels {
  decltype(&sum_squares_scalar) sum_squares;
  decltype(&sum_scalar) sum;
  decltype(&shifted_sums_scalar) shifted_sums;
  decltype(&scale_by_weight_scalar) scale_by_weight;
  decltype(&add_into_scalar) add_into;
  decltype(&layernorm_apply_scalar) layernorm_apply;
  // Row pipeline (null below AVX-512, but the bf16 members of rmsnorm, its residual add and
  // layernorm, and the fence, at AVX2).
  decltype(&add_sum_squares_avx512) add_sum_squares;
  decltype(&rms_apply_avx512) rms_apply;
  decltype(&rms_apply_bf16w_avx512) rms_apply_bf16w;
  decltype(&rms_apply_bf16w_next_avx512) rms_apply_bf16w_next;
  decltype(&rms_apply_bf16_amax_avx512) rms_apply_bf16_amax;
  decltype(&layernorm_apply_f32w_avx512) layernorm_apply_f32w;
  decltype(&layernorm_apply_packed_avx512) layernorm_apply_packed;
  decltype(&layernorm_apply_bf16w_avx512) layernorm_apply_bf16w;
  decltype(&layernorm_apply_bf16w_next_avx512) layernorm_apply_bf16w_next;
  decltype(&pack_bf16_pairs_avx512) pack_bf16_pairs;
  void (*widen_to_f32)(const void* src, DType t, float* dst, int64_t n);  // a weight, once per call
  void (*stream_fence)();  // after a thread's streamed rows
};
KernelTable<NormKernels> norm_kernel_table();

}  // namespace sol::kernels
