#pragma once
// What the blocked forward and backward share: block sizes, the tile primitives of the active
// path, and the cost-balanced static partition of tasks over threads.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/attention.h"
#include "ops/attention/packing.h"
#include "ops/attention/problem.h"
#include "ops/common/thread_workspace.h"
#include "hw/kernel_select.h"
#include "sol/tensor.h"
#include "sol/threads.h"

namespace sol::attention_detail {

// A query block (forward, dq pass) is kQueryBlock rows in tiles of 12; each key block of
// kKeyBlock keys streams once per query block (its K and V panels, 64 KiB at D = 128, from L2 or
// L3) and is reused by the block's 16 row tiles. Measured at S = 4096, 32 heads, 1 thread (CPU
// time): 48 rows 229, 96 rows 268, 192 rows 279 GFLOP/s -- a head's K and V (2 MiB) outgrow
// L2, so fewer passes over them pay; 128-key blocks beat 64 and 32 (228 / 207 / 176 at S =
// 2048) by halving the per-block softmax, rescale and call overheads.
inline constexpr int64_t kQueryBlock = 192;
inline constexpr int64_t kKeyBlock = 128;
// The dk/dv pass: kKeyBlock keys own their gradient rows, queries go by in chunks of kQueryChunk
// (128 rather than 64: the dV and dK tiles load and store their accumulators half as often).
inline constexpr int64_t kQueryChunk = 128;

struct TileKernels {
  void (*gemm)(const kernels::AttnGemmTile&);
  void (*softmax)(const kernels::AttnSoftmaxRows&);
  void (*grad)(const kernels::AttnGradRows&);
  void (*store)(const kernels::AttnStoreRows&);
  const kernels::AttentionKernels* set;  // the level's whole set (the packers)
  bool widened = false;                  // bf16 A rows as f32 (kernels/attention.h)
  int64_t a_es = 4;                      // bytes of an element of A's rows
};

// One register-tile product, C[m x n] = A * panel, or C = row_scale (.) C + A * panel when
// accumulate (see kernels::AttnGemmTile).
inline kernels::AttnGemmTile gemm_tile(int m, int n, int64_t k_steps, const void* a, int64_t lda, const void* b,
                                       float* c, int64_t ldc, bool accumulate, const float* row_scale = nullptr) {
  return {.m = m, .n = n, .k_steps = k_steps, .a = a, .lda = lda, .b = b, .c = c, .ldc = ldc,
          .accumulate = accumulate, .row_scale = row_scale};
}

// acc[mt x n] = row_scale (.) acc + A * B, 32 columns at a time: A is mt rows (lda apart) of
// the ncols columns [col0, col0 + ncols) (P or dS), B those rows of an interleaved packing whose
// panels are panel_elems apart (V, Q, dO or K).
inline void accumulate_panels(const TileKernels& kern, DType dtype, int mt, int64_t n, const void* a, int64_t lda,
                              const char* packed, int64_t panel_elems, int64_t col0, int64_t ncols, float* acc,
                              int64_t ldacc, const float* row_scale = nullptr) {
  const int64_t steps = dtype == DType::bf16 ? ncols / 2 : ncols;
  for (int64_t c = 0; c < n; c += 32)
    kern.gemm(gemm_tile(mt, int(std::min<int64_t>(32, n - c)), steps, a, lda,
                        panel_at(packed, dtype, panel_elems, c, col0), acc + c, ldacc, true, row_scale));
}

// Writes m rows of n accumulated floats (lda apart) to out (ldo elements apart, f32 or bf16),
// each times row_scale[i] (null: 1) times scale.
inline void store_rows(const TileKernels& kern, bool bf16, const float* acc, int64_t lda, int64_t m, int64_t n,
                       const float* row_scale, float scale, void* out, int64_t ldo) {
  kern.store({.m = m, .n = n, .acc = acc, .lda = lda, .row_scale = row_scale, .scale = scale, .out = out, .ldo = ldo,
              .bf16 = bf16});
}

// The tile kernels of the level in force, picked once per op call.
inline TileKernels tile_kernels(bool bf16) {
  const kernels::AttentionKernels& k = select_kernels(kernels::attention_kernel_table(), "attention");
  const bool widened = bf16 && k.gather_widened;
  return {bf16 ? k.gemm_bf16 : k.gemm_f32, k.softmax_rows, k.grad_rows, k.store_rows, &k, widened,
          bf16 && !widened ? 2 : 4};
}

// The rows of one block (queries; keys in the dk/dv pass), the columns [lo, hi) each sees, and
// for one register tile of them the 32-column panels it needs from one block of columns.
struct BlockRows {
  std::vector<int64_t> lo, hi;  // per row of the block, absolute columns
  int rel_lo[kernels::kAttnTileRows], rel_hi[kernels::kAttnTileRows];  // the tile's, from col0

  explicit BlockRows(int64_t capacity) : lo(size_t(capacity)), hi(size_t(capacity)) {}

  // Rows [r0, r0 + m) of sequence s: queries (query_rows) or keys.
  void see(const Problem& p, const Sequence& s, bool query_rows, int64_t r0, int64_t m) {
    for (int64_t i = 0; i < m; ++i) {
      const Range r = p.visible(s, query_rows, r0 + i);
      lo[size_t(i)] = r.lo;
      hi[size_t(i)] = r.hi;
    }
  }

  // The columns [col0, col1) that tile rows [t0, t0 + mt) need from the column block
  // [block, block + width): whole panels from the one holding the first column some row sees;
  // empty (col0 == col1) when none does. Sets rel_lo / rel_hi: the rows' ranges from col0,
  // clamped to the span.
  Range tile_columns(int64_t t0, int mt, int64_t block, int64_t width) {
    const int64_t a = std::max(lo[size_t(t0)], block), b = std::min(hi[size_t(t0 + mt - 1)], block + width);
    if (a >= b) return {};
    const int64_t col0 = block + (a - block) / 32 * 32, col1 = block + round_up(b - block, 32), ncols = col1 - col0;
    for (int i = 0; i < mt; ++i) {
      rel_lo[i] = int(std::clamp<int64_t>(lo[size_t(t0 + i)] - col0, 0, ncols));
      rel_hi[i] = int(std::clamp<int64_t>(hi[size_t(t0 + i)] - col0, 0, ncols));
    }
    return {col0, col1};
  }

  // Walks rows [0, m) of the block over the columns they see, in blocks of `width` columns from
  // the first seen column rounded down to `align`, and in each block over the register tiles:
  // body(t0, mt, col0, col1) for each tile that sees some of the block (tile_columns' span,
  // rel_lo / rel_hi set).
  template <class Body>
  void for_each_tile(int64_t m, int64_t align, int64_t width, Body&& body) {
    const int64_t first = lo[0] / align * align, end = hi[size_t(m - 1)];
    for (int64_t block = first; block < end; block += width)
      for (int64_t t0 = 0; t0 < m; t0 += kernels::kAttnTileRows) {
        const int mt = int(std::min<int64_t>(kernels::kAttnTileRows, m - t0));
        const Range cols = tile_columns(t0, mt, block, width);
        if (!cols.empty()) body(t0, mt, cols.lo, cols.hi);
      }
  }
};

// Rows of a block gathered densely (row stride = width): in the inputs, rows of one head are
// H * D elements apart (4 KiB for 16 heads of 128 bf16), and 12 rows at such a stride share one
// L1 set and evict each other between the k steps of a tile.
inline void gather_rows(const char* first, int64_t stride_bytes, int64_t rows, int64_t row_bytes, char* dst) {
  for (int64_t i = 0; i < rows; ++i) std::memcpy(dst + i * row_bytes, first + i * stride_bytes, size_t(row_bytes));
}

// Rows of a block gathered as A rows of the tile kernels: as they are, or widened to f32 where
// the bf16 tile reads A widened. cols elements a row; dst rows are cols * kern.a_es bytes.
inline void gather_a_rows(const TileKernels& kern, const char* first, int64_t stride_bytes, int64_t rows, int64_t cols,
                          char* dst) {
  if (kern.widened) kern.set->gather_widened(first, stride_bytes, rows, cols, reinterpret_cast<float*>(dst));
  else gather_rows(first, stride_bytes, rows, cols * kern.a_es, dst);
}

// Runs body(begin, end) on contiguous task ranges of near-equal total cost, one per thread.
// Which thread runs a task never changes a result: every task owns its outputs.
template <class Body>
void run_balanced(const std::vector<double>& cost, Body&& body) {
  const int64_t n = int64_t(cost.size());
  const int threads = int(std::min<int64_t>(num_threads(), n));
  if (threads <= 1) {
    if (n > 0) body(int64_t(0), n);
    return;
  }
  std::vector<double> prefix(size_t(n) + 1, 0.0);
  for (int64_t i = 0; i < n; ++i) prefix[size_t(i) + 1] = prefix[size_t(i)] + cost[size_t(i)];
  std::vector<int64_t> bound(size_t(threads) + 1, n);
  bound[0] = 0;
  for (int t = 1; t < threads; ++t) {
    const double target = prefix.back() * t / threads;
    bound[size_t(t)] = std::lower_bound(prefix.begin(), prefix.end(), target) - prefix.begin();
    bound[size_t(t)] = std::clamp<int64_t>(bound[size_t(t)], bound[size_t(t) - 1], n);
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    if (t < threads && bound[size_t(t) + 1] > bound[size_t(t)]) body(bound[size_t(t)], bound[size_t(t) + 1]);
  }
}

}  // namespace sol::attention_detail
