// The blocked AMX GEMM: the AVX-512 driver's loops (NC -> KC -> MC -> NR) with 32-row tiles
// instead of 12-row panels and A packed as rows. MC is its own (gemm_amx_mc): the A block
// shares L2 with the B panel the tiles read and the one requested next. Threads own disjoint
// blocks of D and K blocks start at multiples of KC, so results do not depend on the thread
// count; packing order, MC and row slabs (block_parts.h, run_row_slabs) move no bits.
// A D too large for the caches is written by non-temporal stores (GemmEpilogue::stream).
// M <= 16 takes the decode kernels instead (gemm_amx_decode.cc): one strip over all of K.
#include <xmmintrin.h>

#include <algorithm>
#include <atomic>

#include "hw/streaming.h"
#include "kernels/convert.h"
#include "core/parallel.h"
#include "ops/gemm/block_parts.h"
#include "ops/gemm/blocking.h"
#include "ops/gemm/packing.h"
#include "sol/hw.h"
#include "sol/tensor.h"

namespace sol::gemm_detail {

namespace {

using kernels::AmxGemmTile;
using kernels::AmxKernelSet;
using kernels::GemmEpilogue;
using kernels::GemmTile;
using kernels::kAmxMR;
using kernels::kGemmNR;

std::atomic<bool> g_force_model{false};

// Tile state lives from the first tile of a thread's block to its end, exceptions included.
struct TileSession {
  const AmxKernelSet& k;
  explicit TileSession(const AmxKernelSet& kernels) : k(kernels) { k.configure(); }
  ~TileSession() { k.release(); }
};

// D that cannot stay in the caches (should_stream's rule, hw/streaming.h, on the call's tuning
// context) is written around them: each line of it is written once, whole, by one tile, so
// reading it first (the stores' RFO) is wasted traffic.
bool stream_d(const GemmProblem& p) { return should_stream(p.m * p.n * (p.d_bf16 ? 2 : 4), *p.tune); }

// The lines of [p, p + bytes) requested into L2.
void request_lines(const void* p, int64_t bytes) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(63);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + uintptr_t(bytes);
  for (uintptr_t line = first; line < end; line += 64) _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
}

// What the tile at (row, col) of D reads and writes after its K loop, requested into L2 one
// tile ahead, while the tile before it runs: its running sums (after the first K block) and,
// on the last, its rows of C and D (not a streamed D, which is never read). The tile's own
// request at its start (gemm_tile_amx.h) gave a cold line of D only its own K loop, ~0.4 us
// at K = 512, to arrive in, and the stores after it waited.
void request_tile_end(const GemmProblem& p, int64_t row, int64_t col, int64_t rows, int64_t cols, int64_t pc,
                      bool last, bool partial_in_d, float* partial, int64_t m0, int64_t jc, int64_t partial_ld,
                      bool stream) {
  GemmTile t;
  GemmEpilogue e;
  t.first = pc == 0;
  place_tile(p, row, col, pc, last, partial_in_d, partial, m0, jc, partial_ld, t, e);
  const int64_t es = p.d_bf16 ? 2 : 4;
  for (int64_t i = 0; i < rows; ++i) {
    if (!t.first && t.partial) request_lines(t.partial + i * t.ldp, cols * 4);
    if (!t.last) continue;
    if (!stream) request_lines(static_cast<const char*>(e.d) + i * e.ldd * es, cols * es);
    if (e.c) request_lines(static_cast<const char*>(e.c) + i * e.ldc * es, cols * es);
  }
}

// What a B panel's tiles read for the next panel, requested into L2 while their TDPs run:
// `rows` rows row_stride bytes apart, `lines` lines of each (kernels/gemm.h, GemmTile::side).
struct NextPanel {
  const char* base = nullptr;
  int64_t rows = 0, row_stride = 0, lines = 0;
};

// The source of plain B's columns [n0, n0 + 32) x K [k0, k0 + kc), which the next panel's
// packing reads: 32 rows of kc values (nt) or kc rows of 32 values (nn).
NextPanel plain_panel_source(const GemmProblem& p, int64_t k0, int64_t kc, int64_t n0) {
  const int64_t es = int64_t(dtype_size(p.b_type));
  const bool nt = p.b.layout == Layout::nt;
  const int64_t cols = std::min<int64_t>(kGemmNR, p.n - n0);
  NextPanel r;
  r.base = static_cast<const char*>(p.b.data) + p.b.offset(k0, n0) * es;
  r.rows = nt ? cols : kc;
  r.row_stride = p.b.ld * es;
  r.lines = ((nt ? kc : cols) * es + 63) / 64 + 1;  // +1: a row need not start on a line
  return r;
}

// Tile `i` of `tiles` over one panel takes an equal share of the next panel's bytes: whole
// rows of a plain source, or a run of lines of a packed panel (one row).
void share_next(const NextPanel& next, int64_t i, int64_t tiles, GemmTile& t) {
  t.side = nullptr;
  t.side_l2 = true;
  if (!next.base) return;
  if (next.rows > 1) {
    const int64_t r0 = next.rows * i / tiles, r1 = next.rows * (i + 1) / tiles;
    t.side = next.base + r0 * next.row_stride;
    t.side_rows = r1 - r0;
    t.side_row_stride = next.row_stride;
    t.side_lines = next.lines;
  } else {
    const int64_t l0 = next.lines * i / tiles, l1 = next.lines * (i + 1) / tiles;
    t.side = next.base + l0 * 64;
    t.side_rows = 1;
    t.side_row_stride = 0;
    t.side_lines = l1 - l0;
  }
}

void run_block(const GemmProblem& p, const AmxKernelSet& kernels, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const bool partial_in_d = !p.d_bf16 && !p.c_is_d();
  Blocking blk = choose_blocking(*p.tune, p.in, p.m, m1 - m0, n1 - n0, p.k, !partial_in_d, 4);
  blk.mc = p.tune->gemm_amx_mc;
  const auto tile_kernel = p.in == DType::i8 ? kernels.s8 : kernels.bf16;
  // A packed fp8 B is widened to bf16 once per (NC, KC) block into the workspace, where every
  // M block reads it (with one M block, a panel at a time: one_panel below).
  const bool widen_packed = p.packed && p.packed->dtype == DType::f8e4m3;
  // A plain B is packed a panel at a time, just before the first M block's tiles over it, while
  // the previous panel's tiles request its source: reading B from memory overlaps the TDPs
  // instead of running as one pass over the whole block before them.
  const bool pack_lazily = !p.packed;
  // With one M block each B panel the driver makes (packed from a plain B, or widened from fp8)
  // is read by one run of tiles, so every panel is made just before them into the same one-panel
  // workspace, which stays in L2: a slot each (up to NC x KC, 16 MiB) put every store on a line
  // that first came in from memory, and the panels went out to memory and back for a few tiles.
  const bool one_panel = (pack_lazily || widen_packed) && m1 - m0 <= blk.mc;
  const bool widen_lazily = widen_packed && one_panel;

  Workspace& ws = thread_workspace();
  const int64_t kc_max = std::min(blk.kc, std::max<int64_t>(p.k, 1));
  const int64_t steps_max = k_steps(p.in, kc_max);
  // A rows a multiple of 1 KiB apart (4 KiB at KC = 2048) would put a tile's 16 rows in one
  // L1 set (64 sets of 64 bytes); one spare line per row spreads them over 16 sets.
  int64_t a_row_bytes = (4 * steps_max + 63) / 64 * 64;
  if (a_row_bytes % 1024 == 0) a_row_bytes += 64;
  const int64_t mc_max = std::min(blk.mc, m1 - m0);
  void* a_pack = Workspace::reserve(ws.a, (mc_max + 15) / 16 * 16 * a_row_bytes);
  const int64_t b_pack_cols = one_panel ? kGemmNR : blk.nc;
  void* b_pack = p.packed && !widen_packed ? nullptr : Workspace::reserve(ws.b, b_pack_cols * steps_max * 4);
  float* partial = partial_workspace(ws, p, blk, partial_in_d, m1 - m0);
  const int64_t b_elem_bytes = 4 / k_group(p.in);  // B panels in the compute type

  const bool stream = stream_d(p);
  TileSession session(kernels);
  int64_t packed_ic = -1, packed_pc = -1;
  for (int64_t jc = n0; jc < n1; jc += blk.nc) {
    const int64_t nc = std::min(blk.nc, n1 - jc);
    for (int64_t pc = 0; pc == 0 || pc < p.k; pc += blk.kc) {
      const int64_t kc = std::min(blk.kc, p.k - pc), steps = k_steps(p.in, kc);
      int64_t panel_elems = steps * k_group(p.in) * kGemmNR;
      const void* b_base = pack_lazily || widen_lazily
                               ? b_pack
                               : b_block(p, widen_packed, pc, kc, jc, nc, b_pack, nullptr, panel_elems);
      const int64_t panel_bytes = panel_elems * b_elem_bytes;
      const bool first = pc == 0, last = pc + kc >= p.k;

      for (int64_t ic = m0; ic < m1; ic += blk.mc) {
        const int64_t mc = std::min(blk.mc, m1 - ic);
        if (ic != packed_ic || pc != packed_pc) {
          pack_a_rows(p.a, p.lda, p.a_type, ic, mc, pc, kc, a_pack, a_row_bytes);
          packed_ic = ic;
          packed_pc = pc;
        }
        const bool packing_b = pack_lazily && ic == m0;
        const int64_t tiles = (mc + kAmxMR - 1) / kAmxMR;
        for (int64_t jr = 0; jr < nc; jr += kGemmNR) {
          const int64_t col = jc + jr;
          char* panel = const_cast<char*>(static_cast<const char*>(b_base)) +
                        (one_panel ? 0 : (jr / kGemmNR) * panel_bytes);
          if (packing_b)
            pack_b_block(*p.kern, p.b, p.b_type, p.n, pc, kc, col, std::min<int64_t>(kGemmNR, nc - jr), panel,
                         panel_elems, nullptr);
          if (widen_lazily) p.kern->widen_e4m3(p.packed->at(pc, col), reinterpret_cast<uint16_t*>(panel), panel_elems);
          NextPanel next;
          if (jr + kGemmNR < nc) {
            if (packing_b) {
              next = plain_panel_source(p, pc, kc, col + kGemmNR);
            } else if (widen_lazily) {
              next.base = static_cast<const char*>(p.packed->at(pc, col + kGemmNR));  // fp8: a byte per element
              next.rows = 1;
              next.lines = (panel_elems + 63) / 64;
            } else {
              next.base = panel + panel_bytes;
              next.rows = 1;
              next.lines = (steps * kGemmNR * 4 + 63) / 64;
            }
          }
          AmxGemmTile at;
          at.a_row_bytes = a_row_bytes;
          at.a_unsigned = p.a_type == DType::u8;
          GemmTile& t = at.t;
          t.n = int(std::min<int64_t>(kGemmNR, nc - jr));
          t.k_steps = steps;
          t.b = panel;
          t.first = first;
          if (p.b_scales) t.sb = p.b_scales + (col / kFp8ScaleBlock) * p.lds_b + pc / kFp8ScaleBlock;
          for (int64_t ir = 0; ir < mc; ir += kAmxMR) {
            const int64_t row = ic + ir;
            t.m = int(std::min<int64_t>(kAmxMR, mc - ir));
            t.a = static_cast<const char*>(a_pack) + ir * a_row_bytes;
            share_next(next, ir / kAmxMR, tiles, t);
            GemmEpilogue e;
            place_tile(p, row, col, pc, last, partial_in_d, partial, m0, jc, blk.nc, t, e);
            e.stream = stream;
            // The next tile of this block: down the panel, then the next panel's first.
            const bool down = ir + kAmxMR < mc;
            const int64_t next_ir = down ? ir + kAmxMR : 0, next_jr = down ? jr : jr + kGemmNR;
            if (next_jr < nc)
              request_tile_end(p, ic + next_ir, jc + next_jr, std::min<int64_t>(kAmxMR, mc - next_ir),
                               std::min<int64_t>(kGemmNR, nc - next_jr), pc, last, partial_in_d, partial, m0, jc,
                               blk.nc, stream);
            tile_kernel(at);
          }
        }
      }
    }
  }
  if (stream) _mm_sfence();  // the streamed lines of D reach memory before the join
}

// A thread's rows, one MC slab at a time where B is pre-packed (block_parts.h).
void run_rows(const GemmProblem& p, const AmxKernelSet& kernels, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  run_row_slabs(p, p.tune->gemm_amx_mc, m0, m1, [&](int64_t r0, int64_t r1) { run_block(p, kernels, r0, r1, n0, n1); });
}

}  // namespace

bool force_amx_model(bool on) { return g_force_model.exchange(on); }

bool amx_runs(const kernels::GemmKernels& k, int64_t m, DType in) {
  if (m < 1 || in == DType::f32) return false;
  return k.amx || (g_force_model.load() && k.amx_model);
}

void gemm_amx_blocked(const GemmProblem& p) {
  const AmxKernelSet& kernels = p.kern->amx && !g_force_model.load() ? *p.kern->amx : *p.kern->amx_model;
  if (p.n >= p.m) {
    parallel_ranges(p.n, kGemmNR, [&](int64_t n0, int64_t n1) { run_rows(p, kernels, 0, p.m, n0, n1); });
  } else {
    parallel_ranges(p.m, kAmxMR, [&](int64_t m0, int64_t m1) { run_rows(p, kernels, m0, m1, 0, p.n); });
  }
}

}  // namespace sol::gemm_detail
