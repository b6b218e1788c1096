#pragma once
// Packing of A blocks and B panels into the layouts of src/kernels/gemm.h, and the
// PackedMatrix that holds a whole B packed once. Plain C++: packing is O(MK + KN) against the
// O(MNK) of the multiply, and each block is packed once per use of many micro-kernel calls.
#include <algorithm>
#include <cstdint>

#include "kernels/gemm.h"
#include "ops/gemm/problem.h"
#include "sol/gemm.h"
#include "sol/tensor.h"

namespace sol {

struct PackedMatrix::Impl {
  int64_t k = 0, n = 0;
  DType dtype = DType::f32;  // as stored: f32, bf16, i8 (quads) or f8e4m3 (in bf16 pair order)
  int64_t panel_elems = 0;  // elements per 32-column panel: k (rounded up to a whole pair or
                            // quad) * 32
  Buffer data;
  Buffer scales;  // f8e4m3: f32 [ceil(n/128), k/128]
  Buffer start;   // i8: int32 [panels * 32] = -128 * column sums, for an s8 A
  // Panel holding column n (n a multiple of kGemmNR), positioned at row k (even for bf16).
  const void* at(int64_t k_row, int64_t n_col) const {
    const int64_t es = int64_t(dtype_size(dtype));
    return static_cast<const char*>(data.data()) +
           ((n_col / kernels::kGemmNR) * panel_elems + k_row * kernels::kGemmNR) * es;
  }
};

namespace gemm_detail {

// K values per micro-kernel step: f32 1, bf16 a pair, int8 a quad.
inline int64_t k_group(DType in) { return in == DType::bf16 ? 2 : in == DType::i8 ? 4 : 1; }
// K steps a micro-kernel runs over kc elements of K.
inline int64_t k_steps(DType in, int64_t kc) { return (kc + k_group(in) - 1) / k_group(in); }
// The micro-kernel's element type for an operand stored as `stored`.
inline DType compute_type(DType stored) {
  return stored == DType::f8e4m3 ? DType::bf16 : stored == DType::u8 ? DType::i8 : stored;
}

// Bytes per K step of a packed A panel of `rows` rows: kGemmMR 32-bit slots (f32, bf16 pairs,
// int8 quads; a short panel keeps the full height), or for bf16 where the set's tile multiplies
// by f32 FMAs two f32 per row of the panel itself (kernels/gemm.h), so a decode row reads 8
// bytes a step, not 96.
inline bool a_f32_pairs(const kernels::GemmKernels& kern, DType in) {
  return in == DType::bf16 && kern.pack_a_panel_f32_pairs;
}
inline int64_t a_step_bytes(const kernels::GemmKernels& kern, DType in, int64_t rows) {
  return a_f32_pairs(kern, in) ? 8 * rows : 4 * kernels::kGemmMR;
}

// Height of the A panel that starts `done` rows into a block of mc rows. Panels are kGemmMR
// rows, except that 13..23 remaining rows split into two near-equal panels: a 16-row decode
// batch runs as 8 + 8 (16 accumulators each, enough to hide the FMA / vdpbf16ps latency)
// instead of 12 + 4 (the 4-row tile has 8 accumulators and stalls on latency, 44% of peak).
inline int64_t a_panel_rows(int64_t mc, int64_t done) {
  const int64_t left = mc - done;
  return left > kernels::kGemmMR && left < 2 * kernels::kGemmMR ? (left + 1) / 2
                                                               : std::min<int64_t>(left, kernels::kGemmMR);
}

// One A panel: `rows` (<= kGemmMR) rows of A (stored as a_type) from first_row, K [k0, k0 + kc),
// into k_steps(kc) * a_step_bytes (f32, bf16 pairs or f32 pairs, u8 quads). fp8 is
// widened to bf16 exactly; s8 becomes u8 (+128). The blocked driver packs each panel of a block
// just before its first tile.
void pack_a_panel(const kernels::GemmKernels& kern, const void* a, int64_t lda, DType a_type, int64_t first_row, int64_t rows, int64_t k0,
                  int64_t kc, void* dst);

// Rows [m0, m0 + mc) x K [k0, k0 + kc) of A as rows for the AMX kernels, row_bytes apart
// (>= the kc values in the compute type, a multiple of 64): bf16, fp8 widened to bf16, or
// int8 / u8 bytes unshifted; zero padding to row_bytes and to a multiple of 16 rows.
void pack_a_rows(const void* a, int64_t lda, DType a_type, int64_t m0, int64_t mc, int64_t k0,
                 int64_t kc, void* dst, int64_t row_bytes);

// Columns [n0, n0 + nc) x K [k0, k0 + kc) of a plain B (stored as b_type) into 32-column
// panels of the compute type, `panel_elems` elements apart; columns past n_total are zero, and
// so is the pad of a partial pair or quad. k0 must be a multiple of k_group. For int8, when
// `start` is not null, start[c] = -128 * (sum of column c over the block), one per packed
// column (zero past n_total).
void pack_b_block(const kernels::GemmKernels& kern, const PlainB& b, DType b_type, int64_t n_total, int64_t k0, int64_t kc,
                  int64_t n0, int64_t nc, void* dst, int64_t panel_elems, int32_t* start = nullptr);

// As pack_b_block for an f8e4m3 B, but kept as e4m3 bytes in the bf16 pair order (what a
// PackedMatrix stores; widen_fp8_panels turns a block of it into bf16 panels).
void pack_b_fp8_pairs(const PlainB& b, int64_t n_total, int64_t k0, int64_t kc, int64_t n0,
                      int64_t nc, uint8_t* dst, int64_t panel_elems);


}  // namespace gemm_detail
}  // namespace sol
