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
  DType dtype = DType::f32;
  int64_t panel_elems = 0;  // elements per 32-column panel: k (rounded up to even for bf16) * 32
  Buffer data;
  // Panel holding column n (n a multiple of kGemmNR), positioned at row k (even for bf16).
  const void* at(int64_t k_row, int64_t n_col) const {
    const int64_t es = int64_t(dtype_size(dtype));
    return static_cast<const char*>(data.data()) +
           ((n_col / kernels::kGemmNR) * panel_elems + k_row * kernels::kGemmNR) * es;
  }
};

namespace gemm_detail {

// K steps a micro-kernel runs over kc elements of K: bf16 pairs them.
inline int64_t k_steps(DType in, int64_t kc) { return in == DType::bf16 ? (kc + 1) / 2 : kc; }

// Height of the A panel that starts `done` rows into a block of mc rows. Panels are kGemmMR
// rows, except that 13..23 remaining rows split into two near-equal panels: a 16-row decode
// batch runs as 8 + 8 (16 accumulators each, enough to hide the FMA / vdpbf16ps latency)
// instead of 12 + 4 (the 4-row tile has 8 accumulators and stalls on latency, 44% of peak).
inline int64_t a_panel_rows(int64_t mc, int64_t done) {
  const int64_t left = mc - done;
  return left > kernels::kGemmMR && left < 2 * kernels::kGemmMR ? (left + 1) / 2
                                                               : std::min<int64_t>(left, kernels::kGemmMR);
}

// Rows [m0, m0 + mc) x K [k0, k0 + kc) of A into panels of a_panel_rows rows, panel after
// panel; each panel takes k_steps(kc) * kGemmMR slots (f32 or bf16 pairs).
void pack_a_block(const void* a, int64_t lda, DType in, int64_t m0, int64_t mc, int64_t k0,
                  int64_t kc, void* dst);

// Columns [n0, n0 + nc) x K [k0, k0 + kc) of a plain B into 32-column panels, `panel_elems`
// elements apart; columns past n_total are zero, and so is the pad of an odd kc for bf16.
// k0 must be even for bf16.
void pack_b_block(const PlainB& b, DType in, int64_t n_total, int64_t k0, int64_t kc,
                  int64_t n0, int64_t nc, void* dst, int64_t panel_elems);

}  // namespace gemm_detail
}  // namespace sol
