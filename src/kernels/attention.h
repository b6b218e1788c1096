#pragma once
// Tile primitives of flash attention, per ISA. The blocked loops, packing and threading live in
// src/ops/attention; a primitive multiplies one register tile or transforms a few score rows.
//
// Panels (built by src/ops/attention/packing.cc) are 32 columns wide and K-major:
//   f32  b[k][32]         bf16  b[k/2][32][2]   (the (k, k+1) pairs vdpbf16ps multiplies)
// A operands are row-major with a row stride: f32 elements are broadcast one by one, bf16 ones
// two at a time as a 32-bit pair, so A needs no packing (Q, dO, K, V gathered from the inputs;
// P and dS from the scratch rows the row primitives write). A set whose bf16 tile multiplies by
// f32 FMAs reads its bf16 A rows widened instead: f32 rows holding bf16 values (gather_widened
// writes them from the inputs, the row primitives with p_widened / out_widened), so the tile
// broadcasts two f32 from memory per pair rather than widening A in registers on every use.
#include <cstdint>

#include "core/kernel_table.h"

namespace sol::kernels {

inline constexpr int kAttnTileRows = 12;  // rows of a register tile (24 accumulators)
inline constexpr int kAttnPanel = 32;     // columns of a tile and of a packed panel

// C[m x 32] = A[m x K] * B, or C = row_scale (.) C + A * B when accumulate (row_scale null: 1).
// Only the first n columns of C are written.
struct AttnGemmTile {
  int m = 0, n = kAttnPanel;   // 1..kAttnTileRows, 1..kAttnPanel
  int64_t k_steps = 0;         // f32: K; bf16: K / 2 (K even)
  const void* a = nullptr;     // element [0][0]
  int64_t lda = 0;             // elements
  const void* b = nullptr;     // panel at its first k step
  float* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
  const float* row_scale = nullptr;
};

// Online-softmax step over rows of raw scores s (m rows, n columns, n a multiple of 16), row i
// seeing columns [lo[i], hi[i]) (others are masked): updates the running maximum (scaled) and
// sum, writes P = exp(scale * s - max) (0 where masked) as f32 or bf16 (ldp elements apart), and
// alpha = exp(old max - new max), the factor earlier output rows must be rescaled by.
struct AttnSoftmaxRows {
  int m = 0, n = 0;
  const float* s = nullptr;
  int64_t lds = 0;
  const int* lo = nullptr;
  const int* hi = nullptr;
  float scale = 1;
  float* row_max = nullptr;
  float* row_sum = nullptr;
  float* alpha = nullptr;
  void* p = nullptr;
  int64_t ldp = 0;
  bool p_bf16 = false;
  bool p_widened = false;  // with p_bf16: P rounded to bf16, stored as f32 (widened A rows)
};

// Gradient of the scores over rows of s and dp (m rows, n columns, n a multiple of 16, both ld
// apart): P = exp(scale * s - lse), dS = P (.) (dp - delta), both 0 outside [lo[i], hi[i]).
// lse and delta are per row (lse[i]) or, when per_column, per column (lse[j]: the transposed
// tiles of the key-block pass, rows = keys, columns = queries). P is written when p is not null.
struct AttnGradRows {
  int m = 0, n = 0;
  const float* s = nullptr;
  const float* dp = nullptr;
  int64_t ld = 0;
  const int* lo = nullptr;
  const int* hi = nullptr;
  float scale = 1;
  const float* lse = nullptr;
  const float* delta = nullptr;
  bool per_column = false;
  void* p = nullptr;
  void* ds = nullptr;
  int64_t ldo = 0;
  bool out_bf16 = false;
  bool out_widened = false;  // with out_bf16: rounded to bf16, stored as f32 (widened A rows)
};

// out row i = acc row i * row_scale[i] (row_scale null: 1) * scale, n columns, as f32 or bf16
// (round to nearest even); acc rows lda floats apart, out rows ldo elements apart.
struct AttnStoreRows {
  int64_t m = 0, n = 0;
  const float* acc = nullptr;
  int64_t lda = 0;
  const float* row_scale = nullptr;
  float scale = 1;
  void* out = nullptr;
  int64_t ldo = 0;
  bool bf16 = false;
};

// Panel packing (layouts above) of a rows x cols matrix with row stride ld (elements), zero-
// padded to whole panels: transposed = the source's rows become panel columns (32 per panel,
// k = source column; bf16 cols even), interleaved = the source's columns become panel columns
// (k = source row; bf16 pairs rows 2r, 2r+1).
void attn_pack_transposed_avx512(const void* src, int64_t ld, bool bf16, int64_t rows, int64_t cols, void* dst);
void attn_pack_interleaved_avx512(const void* src, int64_t ld, bool bf16, int64_t rows, int64_t cols, void* dst);

void attn_store_rows_scalar(const AttnStoreRows& r);
void attn_store_rows_avx512(const AttnStoreRows& r);

void attn_gemm_tile_f32_scalar(const AttnGemmTile& t);
void attn_gemm_tile_bf16_scalar(const AttnGemmTile& t);
void attn_softmax_rows_scalar(const AttnSoftmaxRows& r);
void attn_grad_rows_scalar(const AttnGradRows& r);

// The scalar f32 tile's bits, eight columns a vector; the bf16 tile and gather of the avx512
// level's FMA variant (attn_gemm_tile_bf16_widened_avx512), its bits (x86/avx2/attention_avx2.cc).
void attn_gemm_tile_f32_avx2(const AttnGemmTile& t);
void attn_gemm_tile_bf16_widened_avx2(const AttnGemmTile& t);
void attn_gather_widened_avx2(const void* src, int64_t stride_bytes, int64_t rows, int64_t cols, float* dst);
// attn_softmax_rows_avx512 / attn_grad_rows_avx512 eight columns a vector (exp8 for exp).
void attn_softmax_rows_avx2(const AttnSoftmaxRows& r);
void attn_store_rows_avx2(const AttnStoreRows& r);  // the scalar bits
void attn_grad_rows_avx2(const AttnGradRows& r);

void attn_gemm_tile_f32_avx512(const AttnGemmTile& t);
void attn_gemm_tile_bf16_avx512(const AttnGemmTile& t);
// acc = fma(a1, b1, fma(a0, b0, acc)) per k pair, in k order, A as widened rows (f32 holding
// bf16 values, lda in floats): the avx512 level's variant for cores whose FMA pipes outrun their
// bf16 dot product (kPrefersFmaBf16).
void attn_gemm_tile_bf16_widened_avx512(const AttnGemmTile& t);
// rows x cols bf16 (rows stride_bytes apart) into f32 rows of cols (exact widening), dense.
void attn_gather_widened_avx512(const void* src, int64_t stride_bytes, int64_t rows, int64_t cols, float* dst);
void attn_softmax_rows_avx512(const AttnSoftmaxRows& r);
void attn_grad_rows_avx512(const AttnGradRows& r);

// Flash attention's kernels at one ISA level: the tile kernels (every level) and the vector
// packers (null below AVX-512, where the op packs with plain loops).
struct AttentionKernels {
  decltype(&attn_gemm_tile_f32_scalar) gemm_f32;
  decltype(&attn_gemm_tile_bf16_scalar) gemm_bf16;
  decltype(&attn_softmax_rows_scalar) softmax_rows;
  decltype(&attn_grad_rows_scalar) grad_rows;
  decltype(&attn_store_rows_scalar) store_rows;
  decltype(&attn_pack_transposed_avx512) pack_transposed;
  decltype(&attn_pack_interleaved_avx512) pack_interleaved;
  // Non-null when gemm_bf16 reads A widened (f32 rows of bf16 values): the A rows' gather.
  decltype(&attn_gather_widened_avx512) gather_widened;
};
KernelTable<AttentionKernels> attention_kernel_table();

}  // namespace sol::kernels
