#pragma once
// Row primitives of FP8 quantization, per ISA (internal). A row is processed in three steps
// that each stay in L1: the absolute maximum of each group, the group scaled into an f32
// scratch row, and one exact bulk conversion of that row to e4m3 (kernels/convert.h).
#include <cstdint>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "core/kernel_table.h"
#include "sol/dtype.h"
#include "sol/tuning.h"

namespace sol::kernels {

// Whether this thread's MXCSR has flush-to-zero and denormals-are-zero off (the default): the
// branch-free e4m3 encoder (x86/avx512/e4m3_encode_avx512.h) passes e4m3 subnormal codes
// through f32 subnormals, so the kernels that use it need them kept. Per thread; read it once
// per call or row, not per block (stmxcsr is slow).
inline bool mxcsr_keeps_subnormals() {
#if defined(__x86_64__)
  return (_mm_getcsr() & 0x8040u) == 0;
#else
  return false;
#endif
}

// Scale and multiplier of a group whose abs-max is finite, by the rule of sol/quant.h (the same
// bits as the reference's): amax floored at 1e-4; scale = amax / 448, rounded up to a power of
// two for UE8M0; multiplier 448 / amax, or 1 / scale for UE8M0. Inline: the row kernels call it
// once per group.
inline void fp8_group_scale(float amax, bool ue8m0, float& scale, float& mult) {
  const float a = amax > 1e-4f ? amax : 1e-4f;
  scale = a / 448.0f;
  if (!ue8m0) {
    mult = 448.0f / a;
    return;
  }
  uint32_t b;
  __builtin_memcpy(&b, &scale, 4);
  if (b & 0x7FFFFFu) b = (b & 0xFF800000u) + 0x800000u;
  __builtin_memcpy(&scale, &b, 4);
  mult = 1.0f / scale;
}

// max |x[i]| over n elements of f32 or bf16; NaN if any element is NaN.
float abs_max_scalar(const void* x, DType t, int64_t n);
float abs_max_avx2(const void* x, DType t, int64_t n);
float abs_max_avx512(const void* x, DType t, int64_t n);

// out[i] = f32(x[i]) * m (one f32 multiply, rounded to nearest even).
void scale_to_f32_scalar(const void* x, DType t, float m, float* out, int64_t n);
void scale_to_f32_avx2(const void* x, DType t, float m, float* out, int64_t n);
void scale_to_f32_avx512(const void* x, DType t, float m, float* out, int64_t n);

// out[i] = e4m3_to_f32(q[i]) * s, for dequantization.
void dequant_scale_scalar(const uint8_t* q, float s, float* out, int64_t n);
void dequant_scale_avx2(const uint8_t* q, float s, float* out, int64_t n);
void dequant_scale_avx512(const uint8_t* q, float s, float* out, int64_t n);

// One whole row, fused: per group of `group` elements (a multiple of 16) the absolute maximum,
// the scale by the rule of sol/quant.h (ue8m0: power-of-two scales), and the e4m3 codes, with
// the row read from L1 a second time rather than staged through memory. Bit-identical to the
// composition of the primitives above with convert_scalar. stream: q is written with
// non-temporal stores (when it is 64-byte aligned and the rows are bf16 with groups a multiple
// of 64), followed by _mm_sfence() unless fence is false: then the caller issues one
// stream_fence_avx512() (kernels/copy.h) after its batch of rows (a fence per row waits for the
// row's lines to drain: dequantization -10 to -20% without it, docs/perf/layer-ops.md). The
// abs-max pass requests the row tp.pass_prefetch_bytes ahead into L1 and, where q streams,
// tp.pass_l2_prefetch_bytes ahead into L2 (0: none) (speed only).
void quant_row_e4m3_avx512(const void* x, DType t, int64_t cols, int64_t group, bool ue8m0,
                           uint8_t* q, float* scales, int64_t scale_stride, bool stream, const TuningParams& tp,
                           bool fence = true);

// quant_row_e4m3_avx512 of a bf16 row whose groups' partial maxima of |x| are given (32 bf16
// magnitude words per group, as rms_apply_bf16_amax_avx512 makes them); group a multiple of 64.
void quant_row_bf16_amax_avx512(const uint16_t* x, int64_t cols, int64_t group, const uint16_t* amax32, bool ue8m0,
                                uint8_t* q, float* scales, int64_t scale_stride, bool stream);

// Per-block (128 x 128) quantization of bf16 rows by column panels (cols a multiple of 128).
// A panel: `rows` rows of `cols` bf16 (a multiple of 128) at x, `stride` elements apart, and
// acc, 32 words per 128-wide group that hold the running maximum of |x| as bf16 magnitude
// bits (the caller zeroes them; rows = 0: no panel).
struct PanelAmax {
  const uint16_t* x = nullptr;
  int64_t stride = 0, rows = 0, cols = 0;
  uint16_t* acc = nullptr;
};
// Lines to request into L2: `lines` 64-byte lines from each of `rows` rows, `stride` bytes
// apart, from base (rows = 0: none).
struct PanelPrefetch {
  const char* base = nullptr;
  int64_t stride = 0, rows = 0, lines = 0;
};
// Every row of a panel folded into its acc, row r of `next` requested into L2 beside row r.
void block_amax_rows_bf16_avx512(const PanelAmax& panel, const PanelPrefetch& next);
// One group's amax from its 32 words of acc: the largest |x| (a bf16 value), NaN when a NaN
// was seen.
float block_amax_finish_avx512(const uint16_t* acc32);
// e4m3 codes of a panel, group g (128 wide) multiplied by mult[g]; special[g] != 0 when that
// group's block holds NaN or inf; ue8m0: the multipliers are powers of two. Bit-identical to
// the scalar composition; stream as above (one fence per panel). While row r is encoded, row r
// of `next` is folded into next.acc and row r of `far` requested into L2.
void quant_panel_mults_bf16_avx512(const uint16_t* x, int64_t x_stride, int64_t rows, int64_t cols, const float* mult,
                                   const uint8_t* special, bool ue8m0, uint8_t* q, int64_t q_stride, bool stream,
                                   const PanelAmax& next, const PanelPrefetch& far);

// w's elements reordered for rms_quant_row_bf16_avx512: in each block of 32, the 16 even
// elements, then the 16 odd ones (n a multiple of 32).
void even_odd_order_avx512(const float* w, float* w_eo, int64_t n);
// RMSNorm fused with per-token quantization, one bf16 row: codes and scales of the bf16 values
// bf16((x[i] * inv) * w[i]), which are never stored; w_eo is w in even_odd_order_avx512's
// order. Bit-identical to rms_apply_avx512 into a bf16 row then quant_row_e4m3_avx512. Groups
// of 64 or 128 only (returns false, touching nothing, otherwise). stream as
// quant_row_e4m3_avx512; next_row (may be null): a bf16 row of cols elements to prefetch.
// tp.quant_pipeline_groups: how many groups are normalised ahead of the one encoded.
bool rms_quant_row_bf16_avx512(const uint16_t* x, float inv, const float* w_eo, int64_t cols, int64_t group,
                               bool ue8m0, uint8_t* q, float* scales, int64_t scale_stride, bool stream,
                               const uint16_t* next_row, const TuningParams& tp);
// One row of dequantization: y[i] = round_y(e4m3_to_f32(q[i]) * scales[(i / group) * stride]).
// Handles groups that are a multiple of 64 (returns false, touching nothing, otherwise);
// stream and fence as quant_row_e4m3_avx512, for y. The codes are requested `ahead` bytes on
// (tp.pass_prefetch_bytes): the hardware prefetchers alone left the pass at ~0.7x the time it
// takes with them.
bool dequant_row_avx512(const uint8_t* q, const float* scales, int64_t scale_stride, int64_t cols, int64_t group,
                        void* y, DType yt, bool stream, int64_t ahead, bool fence = true);

// The quantization family's kernels at one ISA level. The portable primitives exist at every
// level; the fused row and panel kernels are null below AVX-512 (the op composes the
// primitives there). to_f8e4m3 / from_f32: bulk conversions of a row staged in f32.
struct QuantKernels {
  float (*abs_max)(const void* x, DType t, int64_t n);
  void (*scale_to_f32)(const void* x, DType t, float m, float* out, int64_t n);
  void (*dequant_scale)(const uint8_t* q, float s, float* out, int64_t n);
  void (*from_f32)(const float* in, void* out, DType t, int64_t n);
  decltype(&quant_row_e4m3_avx512) quant_row_e4m3;
  decltype(&quant_row_bf16_amax_avx512) quant_row_bf16_amax;
  decltype(&block_amax_rows_bf16_avx512) block_amax_rows_bf16;
  decltype(&block_amax_finish_avx512) block_amax_finish;
  decltype(&quant_panel_mults_bf16_avx512) quant_panel_mults_bf16;
  decltype(&even_odd_order_avx512) even_odd_order;
  decltype(&rms_quant_row_bf16_avx512) rms_quant_row_bf16;
  decltype(&dequant_row_avx512) dequant_row;
  void (*stream_fence)();  // after a batch of streamed rows; null where nothing streams
};
KernelTable<QuantKernels> quant_kernel_table();

}  // namespace sol::kernels
