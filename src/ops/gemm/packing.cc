#include "ops/gemm/packing.h"

#include <algorithm>
#include <cstring>

#include "kernels/e4m3_bf16_table.h"

namespace sol::gemm_detail {

namespace {

using kernels::kGemmMR;
using kernels::kGemmNR;

// Row i of a panel of `rows` rows starting at first_row, at column k0, as bytes. Rows past
// the end of a short panel repeat its last row: the micro-kernel for `rows` rows never reads
// them, and the packer keeps its constant shape.
void row_pointers(const void* a, int64_t lda, int64_t es, int64_t first_row, int64_t rows, int64_t k0,
                  const void* (&out)[kGemmMR]) {
  for (int64_t i = 0; i < kGemmMR; ++i)
    out[i] = static_cast<const char*>(a) + ((first_row + std::min(i, rows - 1)) * lda + k0) * es;
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

// The last, partial K step of a panel (an odd kc for pairs, kc % 4 for quads): its values,
// then zeros, which add nothing (u8 zero for quads).
void pack_partial_step(const void* const (&rows)[kGemmMR], DType a_type, int64_t full, int64_t left,
                       uint32_t* step) {
  for (int i = 0; i < kGemmMR; ++i) {
    uint32_t v = 0;
    if (a_type == DType::bf16) {
      v = static_cast<const uint16_t*>(rows[i])[2 * full];
    } else if (a_type == DType::f8e4m3) {
      v = E4m3ToBf16{}(static_cast<const uint8_t*>(rows[i])[2 * full]);
    } else {
      const uint8_t flip = a_type == DType::i8 ? 0x80 : 0;
      for (int64_t j = 0; j < left; ++j)
        v |= uint32_t(static_cast<const uint8_t*>(rows[i])[4 * full + j] ^ flip) << (8 * j);
    }
    step[i] = v;
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

// Elements are copied as bits: packing never rounds or quiets a NaN. Whole K steps go through
// the level's vector panel packer (its only caller, gemm_blocked_tiles, runs where the set has
// one); a partial last step is filled here.
void pack_a_panel(const kernels::GemmKernels& kern, const void* a, int64_t lda, DType a_type, int64_t first_row, int64_t rows, int64_t k0,
                  int64_t kc, void* dst) {
  if (rows <= 0) return;
  const int64_t group = a_type == DType::f32 ? 1 : a_type == DType::bf16 || a_type == DType::f8e4m3 ? 2 : 4;
  const int64_t steps = (kc + group - 1) / group, full = kc / group;
  const uint32_t flip = a_type == DType::i8 ? 0x80808080u : 0u;  // s8 rides vpdpbusd as u8 + 128
  const void* row[kGemmMR];
  row_pointers(a, lda, int64_t(dtype_size(a_type)), first_row, rows, k0, row);
  uint32_t* panel = static_cast<uint32_t*>(dst);
  const bool e4m3 = a_type == DType::f8e4m3;
  if (a_f32_pairs(kern, compute_type(a_type))) {
    // f32 pairs of `rows` rows: a bf16 is the top half of its f32, so the partial step's pair
    // (v, 0) splits into (v << 16, 0).
    kern.pack_a_panel_f32_pairs(row, int(rows), full, flip, e4m3, panel);
    if (steps > full) {
      uint32_t pair[kGemmMR];
      pack_partial_step(row, a_type, full, kc - full * group, pair);
      for (int64_t i = 0; i < rows; ++i) {
        panel[(full * 2) * rows + i] = pair[i] << 16;
        panel[(full * 2 + 1) * rows + i] = pair[i] & 0xFFFF0000u;
      }
    }
    return;
  }
  kern.pack_a_panel(row, full, flip, e4m3, panel);
  if (steps > full) pack_partial_step(row, a_type, full, kc - full * group, panel + full * kGemmMR);
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

namespace {

// The vector packers (kernels/gemm.h) for the cases they cover: any type of an nt B (each
// column a contiguous row of [N, K]) and a bf16 or fp8 nn B. Returns false for the rest (f32
// and int8 nn), which the plain loops pack. Bit-identical to them.
bool pack_b_block_vector(const kernels::GemmKernels& kern, const PlainB& b, DType b_type, int64_t n_total, int64_t k0, int64_t kc, int64_t n0,
                         int64_t nc, void* dst, int64_t panel_elems, int32_t* start) {
  const bool nt = b.layout == Layout::nt;
  if (!nt && b_type != DType::bf16 && b_type != DType::f8e4m3) return false;
  const int64_t group = b_type == DType::f32 ? 1 : b_type == DType::i8 ? 4 : 2;
  const int64_t es = int64_t(dtype_size(b_type)), full = kc / group, left = kc - full * group;
  const int64_t out_es = b_type == DType::f8e4m3 ? 2 : es;  // fp8 is widened to bf16
  for (int64_t j0 = 0; j0 < nc; j0 += kGemmNR) {
    char* panel = static_cast<char*>(dst) + (j0 / kGemmNR) * panel_elems * out_es;
    const int cols = int(std::clamp<int64_t>(n_total - (n0 + j0), 0, kGemmNR));
    if (!nt) {
      const char* src = static_cast<const char*>(b.data) + b.offset(k0, n0 + j0) * es;
      kern.pack_b_panel_nn(src, b.ld, cols, kc, b_type == DType::f8e4m3, reinterpret_cast<uint16_t*>(panel));
      continue;
    }
    const void* col[kGemmNR];
    for (int c = 0; c < kGemmNR; ++c)
      col[c] = static_cast<const char*>(b.data) + b.offset(k0, n0 + j0 + std::min(c, std::max(cols - 1, 0))) * es;
    uint32_t* steps = reinterpret_cast<uint32_t*>(panel);
    kern.pack_b_panel_nt(col, cols, full, b_type == DType::f8e4m3, steps);
    if (left) {  // the partial last step: its values, then zeros (which add nothing)
      uint32_t* step = steps + full * kGemmNR;
      for (int c = 0; c < kGemmNR; ++c) {
        uint32_t v = 0;
        const uint8_t* bytes = static_cast<const uint8_t*>(col[c]) + full * group * es;
        if (c < cols) {
          if (b_type == DType::bf16) v = *reinterpret_cast<const uint16_t*>(bytes);
          else if (b_type == DType::f8e4m3) v = E4m3ToBf16{}(bytes[0]);
          else for (int64_t j = 0; j < left; ++j) v |= uint32_t(bytes[j]) << (8 * j);
        }
        step[c] = v;
      }
    }
    if (start)  // s8 x s8: -128 * column sums undo the +128 on A
      for (int c = 0; c < kGemmNR; ++c) {
        int32_t sum = 0;
        if (c < cols) {
          const int8_t* v = static_cast<const int8_t*>(col[c]);
          for (int64_t k = 0; k < kc; ++k) sum += v[k];
        }
        start[j0 + c] = -128 * sum;
      }
  }
  return true;
}

}  // namespace

void pack_b_block(const kernels::GemmKernels& kern, const PlainB& b, DType b_type, int64_t n_total, int64_t k0, int64_t kc,
                  int64_t n0, int64_t nc, void* dst, int64_t panel_elems, int32_t* start) {
  if (kern.pack_b_panel_nt && pack_b_block_vector(kern, b, b_type, n_total, k0, kc, n0, nc, dst, panel_elems, start))
    return;
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
