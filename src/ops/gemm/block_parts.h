#pragma once
// Pieces both blocked drivers (gemm_blocked.cc on the vector kernels, gemm_amx_blocked.cc on
// the AMX tiles) take the same way: which rows run together, where one (NC, KC) block of B
// comes from, and what a tile starting at (row, col) of D is told about its partial sums and
// its epilogue.
#include <algorithm>
#include <cstdint>

#include "kernels/gemm.h"
#include "ops/gemm/blocking.h"
#include "ops/gemm/packing.h"
#include "sol/tensor.h"

namespace sol::gemm_detail {

// Per-thread scratch of the blocked drivers, kept between calls: growing it is the only
// allocation on the hot path. `start` holds int8 column sums (vector path only).
struct Workspace {
  Buffer a, b, partial, start;
  static void* reserve(Buffer& buf, int64_t bytes) {
    if (int64_t(buf.bytes()) < bytes) buf = Buffer(size_t(bytes));
    return buf.data();
  }
};

inline Workspace& thread_workspace() {
  thread_local Workspace ws;
  return ws;
}

// The running sums between K blocks (or decode's K chunks), when they cannot live in D itself
// (bf16 D, or C = D): rows x NC f32 of the workspace; none when D holds them or K fits one
// block and is not chunked.
inline float* partial_workspace(Workspace& ws, const GemmProblem& p, const Blocking& blk, bool partial_in_d,
                                int64_t rows, bool chunked = false) {
  if (partial_in_d || (p.k <= blk.kc && !chunked)) return nullptr;
  return static_cast<float*>(Workspace::reserve(ws.partial, rows * blk.nc * 4));
}

// Runs a thread's rows [m0, m1) through run_block(r0, r1), one MC slab at a time where B is
// pre-packed bf16 or int8 (nothing for the thread to make of it). Over all of its rows at once,
// K past one block makes choose_blocking narrow NC to keep every row's running sums within
// 4 MiB, and the driver then packs the same A block again for each NC block (at M = 4096,
// K = 7168, A is read and copied ~9 times a call). A slab's sums are MC rows wide, NC spans N
// and each A block is packed once; B streams past each slab as it streams past each M block of
// the wide order. Plain and fp8 B keep the wide order, where a B block packed or widened once
// serves every M block. Slabs start at multiples of MC from m0, where the wide order's M blocks
// start, and K blocks at the same multiples of KC: the bits are the wide order's.
template <class RunBlock>
void run_row_slabs(const GemmProblem& p, int64_t mc, int64_t m0, int64_t m1, RunBlock&& run_block) {
  const bool prepacked = p.packed && p.packed->dtype != DType::f8e4m3;
  if (!prepacked || m1 - m0 <= mc) return run_block(m0, m1);
  for (int64_t s = m0; s < m1; s += mc) run_block(s, std::min(m1, s + mc));
}

// Columns [jc, jc + nc) x K [pc, pc + kc) of B as 32-column panels of the compute type,
// `panel_elems` elements apart: a PackedMatrix's own panels, or a packed fp8 B widened into
// `b_pack` (widen_packed), or a plain B packed into `b_pack` (and, for int8 with `start`, its
// -128 * column sums).
inline const void* b_block(const GemmProblem& p, bool widen_packed, int64_t pc, int64_t kc, int64_t jc,
                           int64_t nc, void* b_pack, int32_t* start, int64_t& panel_elems) {
  using kernels::kGemmNR;
  const int64_t steps = k_steps(p.in, kc);
  if (widen_packed) {
    panel_elems = steps * k_group(p.in) * kGemmNR;
    for (int64_t jr = 0; jr < nc; jr += kGemmNR)
      p.kern->widen_e4m3(p.packed->at(pc, jc + jr), static_cast<uint16_t*>(b_pack) + (jr / kGemmNR) * panel_elems,
                         panel_elems);
    return b_pack;
  }
  if (p.packed) {
    panel_elems = p.packed->panel_elems;
    return p.packed->at(pc, jc);
  }
  panel_elems = steps * k_group(p.in) * kGemmNR;
  pack_b_block(*p.kern, p.b, p.b_type, p.n, pc, kc, jc, nc, b_pack, panel_elems, start);
  return b_pack;
}

// The row-dependent fields of a tile at (row, col) of D: fp8 A scales, where its partial sums
// live (in D itself, or in the thread's M x NC workspace whose first row is m0 and first
// column jc), and on the last K block the epilogue `e` it writes D through.
inline void place_tile(const GemmProblem& p, int64_t row, int64_t col, int64_t pc, bool last, bool partial_in_d,
                       float* partial, int64_t m0, int64_t jc, int64_t partial_ld, kernels::GemmTile& t,
                       kernels::GemmEpilogue& e) {
  if (p.a_scales) {
    t.sa = p.a_scales + row * p.lds_a + pc / kFp8ScaleBlock;
    t.lds_a = p.lds_a;
  }
  if (partial_in_d) {
    t.partial = static_cast<float*>(p.d) + row * p.ldd + col;
    t.ldp = p.ldd;
  } else if (partial) {
    t.partial = partial + (row - m0) * partial_ld + (col - jc);
    t.ldp = partial_ld;
  }
  t.last = nullptr;
  if (!last) return;
  const int64_t es_d = p.d_bf16 ? 2 : 4;
  e.alpha = p.alpha;
  e.beta = p.beta;
  e.c = p.beta != 0.0f ? static_cast<const char*>(p.c) + (row * p.ldc + col) * es_d : nullptr;
  e.ldc = p.ldc;
  e.bias = p.bias ? p.bias + col : nullptr;
  e.silu = p.silu;
  e.d = static_cast<char*>(p.d) + (row * p.ldd + col) * es_d;
  e.ldd = p.ldd;
  e.d_bf16 = p.d_bf16;
  t.last = &e;
}

}  // namespace sol::gemm_detail
