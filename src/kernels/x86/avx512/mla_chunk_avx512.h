#pragma once
// MLA decode kernels (internal): one chunk of one sequence's paged latent cache against all of
// its query rows, the left-to-right LSE merge of two partial results, and the final
// normalisation. Declares the entry points of every ISA (avx512 in mla_chunk_avx512.cc, scalar
// in ../mla_scalar.cc); plain C++, no intrinsics, so baseline code may include it.
//
// Rows: m = i * heads + h for query i < s_q and head h < heads; row m reads
// q + i * q_stride_s + h * q_stride_h (bf16 elements, 576 dense).
// Query group i sees cache positions < visible(i) = seqlen - (causal ? s_q - 1 - i : 0).
// Partial result of a chunk (natural-exponent units, scores already times the softmax scale):
//   row_max[m] = max score seen (-inf if none), row_sum[m] = sum exp(score - row_max),
//   o[m][0..512) = sum exp(score - row_max) * v  (f32, unnormalised)
// A row that saw nothing has row_max = -inf, row_sum = 0, o = 0.
#include <cstdint>

#include "core/kernel_table.h"

namespace sol::kernels {

inline constexpr int kMlaPage = 64;
inline constexpr int kMlaDk = 576;
inline constexpr int kMlaDv = 512;
inline constexpr int kMlaMaxChunkPages = 4;

enum class MlaCacheFormat { bf16, fp8 };

struct MlaChunk {
  const uint16_t* q = nullptr;
  int64_t q_stride_s = 0, q_stride_h = 0;
  int s_q = 1, heads = 1;
  float scale = 1.0f;
  // pages[j]: token 0 of the j-th page of this chunk; tokens are token_bytes apart (1152 / 656).
  const uint8_t* pages[kMlaMaxChunkPages] = {};
  int npages = 0;
  // Where the next chunk of this thread starts (or null): prefetched while the last page runs.
  const uint8_t* next_page = nullptr;
  MlaCacheFormat format = MlaCacheFormat::bf16;
  int64_t pos0 = 0;  // cache position of token 0 of pages[0]
  int64_t seqlen = 0;
  bool causal = false;
  // The scratch still holds this q in packed form from the previous chunk (same thread, same
  // sequence): skip repacking it.
  bool q_packed = false;
  float* o = nullptr;  // [rows][512]
  float* row_max = nullptr;
  float* row_sum = nullptr;
  void* scratch = nullptr;  // mla_scratch_bytes(rows) bytes, 64-byte aligned
};

inline int64_t mla_rows_padded(int64_t rows) { return (rows + 15) / 16 * 16; }

// Enough for every ISA's chunk kernel (the FMA variant's operands are f32: twice the q and
// probability bytes, and the page's key rows widened).
inline int64_t mla_scratch_bytes(int64_t rows) {
  const int64_t mp = mla_rows_padded(rows);
  return mp * 8 * (kMlaDk / 2)        // q: bf16 pairs, or (FMA) the pairs' two f32 planes
         + mp * 4 * kMlaPage          // scores / probabilities of one page
         + mp * 8 * (kMlaPage / 2) * 4  // probability pairs (or two f32 planes), one set per fp8 scale group
         + int64_t(kMlaPage) * kMlaDv * 2  // value rows interleaved in pairs
         + int64_t(kMlaPage) * kMlaDv * 2  // fp8 latent rows widened to bf16
         + int64_t(kMlaPage) * kMlaDk * 4  // (FMA) the page's key rows widened to f32
         + mp * 4 * 4                 // per-row bookkeeping
         + 64 * 9;                    // alignment slack
}

void mla_chunk_scalar(const MlaChunk& c);
void mla_chunk_avx2(const MlaChunk& c);
void mla_chunk_avx512(const MlaChunk& c);
// The same chunk with every bf16 pair product as two f32 FMAs (kPrefersFmaBf16 cores), on
// operands widened to f32 once (q per sequence, keys and values per page, P as it is written).
void mla_chunk_fma_avx512(const MlaChunk& c);

// (o, row_max, row_sum) of rows [0, rows) = merge((o, ...), (o2, ...)); o2 is the later chunk.
void mla_merge_scalar(int64_t rows, float* o, float* row_max, float* row_sum, const float* o2,
                      const float* row_max2, const float* row_sum2);
void mla_merge_avx512(int64_t rows, float* o, float* row_max, float* row_sum, const float* o2,
                      const float* row_max2, const float* row_sum2);

// out row m = o[m] / row_sum[m] (bf16), lse[i][h] = row_max + log(row_sum); empty rows: 0, -inf.
struct MlaFinish {
  int s_q = 1, heads = 1;
  const float* o = nullptr;
  const float* row_max = nullptr;
  const float* row_sum = nullptr;
  uint16_t* out = nullptr;  // bf16; row m at out + i * out_stride_s + h * out_stride_h
  int64_t out_stride_s = 0, out_stride_h = 0;
  float* lse = nullptr;     // lse + h * lse_stride_h + i * lse_stride_s
  int64_t lse_stride_h = 0, lse_stride_s = 0;
  int64_t row_begin = 0, row_end = 0;  // the rows to finish
};
void mla_finish_scalar(const MlaFinish& f);
void mla_finish_avx512(const MlaFinish& f);

// MLA decode's kernels at one ISA level.
struct MlaKernels {
  decltype(&mla_chunk_scalar) chunk;
  decltype(&mla_merge_scalar) merge;
  decltype(&mla_finish_scalar) finish;
};
KernelTable<MlaKernels> mla_kernel_table();

}  // namespace sol::kernels
