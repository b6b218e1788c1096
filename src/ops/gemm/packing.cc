#include "ops/gemm/packing.h"

#include <algorithm>
#include <cstring>

namespace sol::gemm_detail {

namespace {

using kernels::kGemmMR;
using kernels::kGemmNR;

// Elements are copied as bits (uint32_t for f32, uint16_t for bf16): packing never rounds
// or quiets a NaN. A panel is written K step by K step, 12 rows at a time, so the stores are
// contiguous and the 12 row streams are read sequentially (a row-by-row copy scattered its
// stores 48 bytes apart and ran at ~4 cycles per element). Rows past the end of a short
// panel repeat its last row: the micro-kernel for `rows` rows never reads them, and the loop
// keeps its constant trip count.
template <class Row>
void row_pointers(const Row* a, int64_t lda, int64_t first_row, int64_t rows, int64_t k0,
                  const Row* (&out)[kGemmMR]) {
  for (int64_t i = 0; i < kGemmMR; ++i) out[i] = a + (first_row + std::min(i, rows - 1)) * lda + k0;
}

void pack_a_f32(const uint32_t* a, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                uint32_t* dst) {
  uint32_t* panel = dst;
  for (int64_t r0 = 0, h; r0 < mc; r0 += h, panel += kc * kGemmMR) {
    h = a_panel_rows(mc, r0);
    const uint32_t* rows[kGemmMR];
    row_pointers(a, lda, m0 + r0, h, k0, rows);
    for (int64_t k = 0; k < kc; ++k)
      for (int i = 0; i < kGemmMR; ++i) panel[k * kGemmMR + i] = rows[i][k];
  }
}

// bf16 rows travel as (k, k+1) pairs, one uint32_t each; an odd kc ends in (k, 0).
void pack_a_bf16(const uint16_t* a, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                 uint32_t* dst) {
  const int64_t pairs = (kc + 1) / 2, full = kc / 2;
  uint32_t* panel = dst;
  for (int64_t r0 = 0, h; r0 < mc; r0 += h, panel += pairs * kGemmMR) {
    h = a_panel_rows(mc, r0);
    const uint16_t* rows[kGemmMR];
    row_pointers(a, lda, m0 + r0, h, k0, rows);
    for (int64_t p = 0; p < full; ++p)
      for (int i = 0; i < kGemmMR; ++i) std::memcpy(panel + p * kGemmMR + i, rows[i] + 2 * p, 4);
    if (pairs > full)
      for (int i = 0; i < kGemmMR; ++i) panel[full * kGemmMR + i] = rows[i][2 * full];
  }
}

// nn: B row k is contiguous along N, so each row is read once, left to right, and dealt out
// 32 columns to a panel (walking a panel's rows instead jumped ldb apart on every 128 bytes).
// nt: B row n is contiguous along K; 32 rows are read side by side, one K step at a time.
void pack_b_f32(const PlainB& b, int64_t n_total, int64_t k0, int64_t kc, int64_t n0,
                int64_t nc, uint32_t* dst, int64_t panel_elems) {
  const uint32_t* src = static_cast<const uint32_t*>(b.data);
  if (b.layout == Layout::nn) {
    for (int64_t k = 0; k < kc; ++k) {
      const uint32_t* row = src + b.offset(k0 + k, 0);
      for (int64_t j0 = 0; j0 < nc; j0 += kGemmNR) {
        uint32_t* out = dst + (j0 / kGemmNR) * panel_elems + k * kGemmNR;
        const int64_t cols = std::clamp<int64_t>(n_total - (n0 + j0), 0, kGemmNR);
        for (int64_t c = 0; c < kGemmNR; ++c) out[c] = c < cols ? row[n0 + j0 + c] : 0u;
      }
    }
    return;
  }
  for (int64_t j0 = 0; j0 < nc; j0 += kGemmNR) {
    uint32_t* panel = dst + (j0 / kGemmNR) * panel_elems;
    const int64_t cols = std::clamp<int64_t>(n_total - (n0 + j0), 0, kGemmNR);
    if (cols == 0) {
      std::fill(panel, panel + kc * kGemmNR, 0u);
      continue;
    }
    const uint32_t* rows[kGemmNR];
    for (int64_t c = 0; c < kGemmNR; ++c) rows[c] = src + b.offset(k0, n0 + j0 + std::min(c, cols - 1));
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t c = 0; c < kGemmNR; ++c) panel[k * kGemmNR + c] = c < cols ? rows[c][k] : 0u;
  }
}

// Pairs (k, k+1) of each column, interleaved; the same two traversals as for f32.
void pack_b_bf16(const PlainB& b, int64_t n_total, int64_t k0, int64_t kc, int64_t n0,
                 int64_t nc, uint16_t* dst, int64_t panel_elems) {
  const uint16_t* src = static_cast<const uint16_t*>(b.data);
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t j0 = 0; j0 < nc; j0 += kGemmNR) {
    uint16_t* panel = dst + (j0 / kGemmNR) * panel_elems;
    const int64_t cols = std::clamp<int64_t>(n_total - (n0 + j0), 0, kGemmNR);
    if (cols == 0) {
      std::fill(panel, panel + pairs * 2 * kGemmNR, uint16_t(0));
      continue;
    }
    // Element (k, column c) of this panel, for k < kc.
    const uint16_t* cols_at[kGemmNR];
    for (int64_t c = 0; c < kGemmNR; ++c) cols_at[c] = src + b.offset(k0, n0 + j0 + std::min(c, cols - 1));
    const int64_t k_stride = b.layout == Layout::nn ? b.ld : 1;
    for (int64_t p = 0; p < pairs; ++p) {
      uint16_t* out = panel + p * 2 * kGemmNR;
      const bool second = 2 * p + 1 < kc;
      for (int64_t c = 0; c < kGemmNR; ++c) {
        const bool valid = c < cols;
        out[2 * c] = valid ? cols_at[c][2 * p * k_stride] : 0;
        out[2 * c + 1] = valid && second ? cols_at[c][(2 * p + 1) * k_stride] : 0;
      }
    }
  }
}

}  // namespace

void pack_a_block(const void* a, int64_t lda, DType in, int64_t m0, int64_t mc, int64_t k0,
                  int64_t kc, void* dst) {
  if (in == DType::bf16)
    pack_a_bf16(static_cast<const uint16_t*>(a), lda, m0, mc, k0, kc, static_cast<uint32_t*>(dst));
  else
    pack_a_f32(static_cast<const uint32_t*>(a), lda, m0, mc, k0, kc, static_cast<uint32_t*>(dst));
}

void pack_b_block(const PlainB& b, DType in, int64_t n_total, int64_t k0, int64_t kc,
                  int64_t n0, int64_t nc, void* dst, int64_t panel_elems) {
  if (in == DType::bf16)
    pack_b_bf16(b, n_total, k0, kc, n0, nc, static_cast<uint16_t*>(dst), panel_elems);
  else
    pack_b_f32(b, n_total, k0, kc, n0, nc, static_cast<uint32_t*>(dst), panel_elems);
}

}  // namespace sol::gemm_detail
