#include "ops/gemm/packing.h"

#include <algorithm>
#include <cstring>

#include "kernels/e4m3_bf16_table.h"

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

struct SameBits {
  uint16_t operator()(uint16_t x) const { return x; }
};
struct SameByte {
  uint8_t operator()(uint8_t x) const { return x; }
};
struct E4m3ToBf16 {
  uint16_t operator()(uint8_t x) const { return kernels::kE4m3CodesToBf16.bits[x]; }
};

// bf16 rows travel as (k, k+1) pairs, one uint32_t each; an odd kc ends in (k, 0). fp8 rows
// are widened to bf16 on the way (Src = uint8_t with the e4m3 table).
template <class Src, class Widen>
void pack_a_pairs(const Src* a, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                  uint32_t* dst, Widen widen) {
  const int64_t pairs = (kc + 1) / 2, full = kc / 2;
  uint32_t* panel = dst;
  for (int64_t r0 = 0, h; r0 < mc; r0 += h, panel += pairs * kGemmMR) {
    h = a_panel_rows(mc, r0);
    const Src* rows[kGemmMR];
    row_pointers(a, lda, m0 + r0, h, k0, rows);
    for (int64_t p = 0; p < full; ++p)
      for (int i = 0; i < kGemmMR; ++i)
        panel[p * kGemmMR + i] = uint32_t(widen(rows[i][2 * p])) | uint32_t(widen(rows[i][2 * p + 1])) << 16;
    if (pairs > full)
      for (int i = 0; i < kGemmMR; ++i) panel[full * kGemmMR + i] = widen(rows[i][2 * full]);
  }
}

// int8 rows travel as (k..k+3) quads of u8, one uint32_t each: an s8 A is shifted by +128
// (flip = 0x80) so vpdpbusd can take it as its unsigned operand. The pad of a partial quad is
// a u8 zero, which adds nothing.
void pack_a_quads(const uint8_t* a, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                  uint32_t* dst, uint8_t flip) {
  const int64_t quads = (kc + 3) / 4, full = kc / 4;
  const uint32_t flip4 = uint32_t(flip) * 0x01010101u;
  uint32_t* panel = dst;
  for (int64_t r0 = 0, h; r0 < mc; r0 += h, panel += quads * kGemmMR) {
    h = a_panel_rows(mc, r0);
    const uint8_t* rows[kGemmMR];
    row_pointers(a, lda, m0 + r0, h, k0, rows);
    for (int64_t q = 0; q < full; ++q)
      for (int i = 0; i < kGemmMR; ++i) {
        uint32_t v;
        std::memcpy(&v, rows[i] + 4 * q, 4);
        panel[q * kGemmMR + i] = v ^ flip4;
      }
    if (quads > full)
      for (int i = 0; i < kGemmMR; ++i) {
        uint32_t v = 0;
        for (int64_t j = 0; j < kc - 4 * full; ++j) v |= uint32_t(rows[i][4 * full + j] ^ flip) << (8 * j);
        panel[full * kGemmMR + i] = v;
      }
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

// Pairs (k, k+1) of each column, interleaved; the same two traversals as for f32. fp8 columns
// are widened to bf16 on the way.
template <class Src, class Dst, class Widen>
void pack_b_pairs(const PlainB& b, int64_t n_total, int64_t k0, int64_t kc, int64_t n0,
                  int64_t nc, Dst* dst, int64_t panel_elems, Widen widen) {
  const Src* src = static_cast<const Src*>(b.data);
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t j0 = 0; j0 < nc; j0 += kGemmNR) {
    Dst* panel = dst + (j0 / kGemmNR) * panel_elems;
    const int64_t cols = std::clamp<int64_t>(n_total - (n0 + j0), 0, kGemmNR);
    if (cols == 0) {
      std::fill(panel, panel + pairs * 2 * kGemmNR, Dst(0));
      continue;
    }
    // Element (k, column c) of this panel, for k < kc.
    const Src* cols_at[kGemmNR];
    for (int64_t c = 0; c < kGemmNR; ++c) cols_at[c] = src + b.offset(k0, n0 + j0 + std::min(c, cols - 1));
    const int64_t k_stride = b.layout == Layout::nn ? b.ld : 1;
    for (int64_t p = 0; p < pairs; ++p) {
      Dst* out = panel + p * 2 * kGemmNR;
      const bool second = 2 * p + 1 < kc;
      for (int64_t c = 0; c < kGemmNR; ++c) {
        const bool valid = c < cols;
        out[2 * c] = valid ? widen(cols_at[c][2 * p * k_stride]) : 0;
        out[2 * c + 1] = valid && second ? widen(cols_at[c][(2 * p + 1) * k_stride]) : 0;
      }
    }
  }
}

// Quads (k..k+3) of each s8 column, interleaved, and each column's sum for the s8 x s8
// correction.
void pack_b_quads(const PlainB& b, int64_t n_total, int64_t k0, int64_t kc, int64_t n0,
                  int64_t nc, int8_t* dst, int64_t panel_elems, int32_t* start) {
  const int8_t* src = static_cast<const int8_t*>(b.data);
  const int64_t quads = (kc + 3) / 4;
  const int64_t k_stride = b.layout == Layout::nn ? b.ld : 1;
  for (int64_t j0 = 0; j0 < nc; j0 += kGemmNR) {
    int8_t* panel = dst + (j0 / kGemmNR) * panel_elems;
    const int64_t cols = std::clamp<int64_t>(n_total - (n0 + j0), 0, kGemmNR);
    for (int64_t c = 0; c < kGemmNR; ++c) {
      const int8_t* col = c < cols ? src + b.offset(k0, n0 + j0 + c) : nullptr;
      int32_t sum = 0;
      for (int64_t k = 0; k < 4 * quads; ++k) {
        const int8_t v = col && k < kc ? col[k * k_stride] : 0;
        panel[(k / 4) * 4 * kGemmNR + 4 * c + k % 4] = v;
        sum += v;
      }
      if (start) start[j0 + c] = -128 * sum;
    }
  }
}

}  // namespace

void pack_a_block(const void* a, int64_t lda, DType a_type, int64_t m0, int64_t mc, int64_t k0,
                  int64_t kc, void* dst) {
  uint32_t* out = static_cast<uint32_t*>(dst);
  switch (a_type) {
    case DType::bf16:
      return pack_a_pairs(static_cast<const uint16_t*>(a), lda, m0, mc, k0, kc, out, SameBits{});
    case DType::f8e4m3:
      return pack_a_pairs(static_cast<const uint8_t*>(a), lda, m0, mc, k0, kc, out, E4m3ToBf16{});
    case DType::i8: return pack_a_quads(static_cast<const uint8_t*>(a), lda, m0, mc, k0, kc, out, 0x80);
    case DType::u8: return pack_a_quads(static_cast<const uint8_t*>(a), lda, m0, mc, k0, kc, out, 0);
    default: return pack_a_f32(static_cast<const uint32_t*>(a), lda, m0, mc, k0, kc, out);
  }
}

// Rows stay rows for the AMX tiles: each row's kc values (bf16, fp8 widened to bf16, or
// int8 bytes as they are) then zeros to row_bytes; rows past mc up to a multiple of 16 are
// zero, so a 16-row tile load never reads past the block.
void pack_a_rows(const void* a, int64_t lda, DType a_type, int64_t m0, int64_t mc, int64_t k0,
                 int64_t kc, void* dst, int64_t row_bytes) {
  const int64_t rows = (mc + 15) / 16 * 16;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* out = static_cast<uint8_t*>(dst) + r * row_bytes;
    int64_t used = 0;
    if (r < mc) {
      const int64_t first = (m0 + r) * lda + k0;
      if (a_type == DType::f8e4m3) {
        const uint8_t* src = static_cast<const uint8_t*>(a) + first;
        uint16_t* wide = reinterpret_cast<uint16_t*>(out);
        for (int64_t k = 0; k < kc; ++k) wide[k] = E4m3ToBf16{}(src[k]);
        used = 2 * kc;
      } else {
        const int64_t es = int64_t(dtype_size(a_type));
        std::memcpy(out, static_cast<const uint8_t*>(a) + first * es, size_t(kc * es));
        used = kc * es;
      }
    }
    std::memset(out + used, 0, size_t(row_bytes - used));
  }
}

void pack_b_block(const PlainB& b, DType b_type, int64_t n_total, int64_t k0, int64_t kc,
                  int64_t n0, int64_t nc, void* dst, int64_t panel_elems, int32_t* start) {
  switch (b_type) {
    case DType::bf16:
      return pack_b_pairs<uint16_t, uint16_t>(b, n_total, k0, kc, n0, nc, static_cast<uint16_t*>(dst), panel_elems,
                                    SameBits{});
    case DType::f8e4m3:
      return pack_b_pairs<uint8_t, uint16_t>(b, n_total, k0, kc, n0, nc, static_cast<uint16_t*>(dst), panel_elems,
                                   E4m3ToBf16{});
    case DType::i8:
      return pack_b_quads(b, n_total, k0, kc, n0, nc, static_cast<int8_t*>(dst), panel_elems, start);
    default:
      return pack_b_f32(b, n_total, k0, kc, n0, nc, static_cast<uint32_t*>(dst), panel_elems);
  }
}

void pack_b_fp8_pairs(const PlainB& b, int64_t n_total, int64_t k0, int64_t kc, int64_t n0,
                      int64_t nc, uint8_t* dst, int64_t panel_elems) {
  pack_b_pairs<uint8_t, uint8_t>(b, n_total, k0, kc, n0, nc, dst, panel_elems, SameByte{});
}

}  // namespace sol::gemm_detail
