// The blocked AVX-512 GEMM: threads own disjoint blocks of D; inside one, BLIS loops
// NC -> KC -> MC -> NR -> MR around the micro-kernel. K is never split across threads and its
// blocks always start at multiples of KC, so every element of D sees the same sequence of
// operations whatever the thread count, partition or packing of B.
#include <algorithm>

#include "kernels/convert.h"
#include "core/parallel.h"
#include "ops/gemm/block_parts.h"
#include "ops/gemm/blocking.h"
#include "ops/gemm/packing.h"
#include "sol/hw.h"
#include "sol/tensor.h"
#include "sol/threads.h"

namespace sol::gemm_detail {

namespace {

// The source bytes of a plain B block, as rows of contiguous lines: columns [n0, n0 + nc) x K
// [k0, k0 + kc) is nc rows of kc values (nt) or kc rows of nc values (nn).
struct SourceRows {
  const char* base = nullptr;
  int64_t rows = 0, row_stride = 0, lines = 0;
  bool contiguous = false;  // the rows follow each other: one run of rows x row_stride bytes
};
SourceRows plain_b_rows(const GemmProblem& p, int64_t k0, int64_t kc, int64_t n0, int64_t nc) {
  const int64_t es = int64_t(dtype_size(p.b_type));
  const bool nt = p.b.layout == Layout::nt;
  SourceRows s;
  s.base = static_cast<const char*>(p.b.data) + p.b.offset(k0, n0) * es;
  s.rows = nt ? nc : kc;
  s.row_stride = p.b.ld * es;
  s.lines = ((nt ? kc : nc) * es + 63) / 64 + 1;  // +1: a row need not start on a line
  s.contiguous = s.row_stride == (nt ? kc : nc) * es;
  return s;
}

// The tile's side stream (kernels/gemm.h): `rows` rows row_stride bytes apart, `lines`
// consecutive lines of each; null for none.
void set_side(kernels::GemmTile& t, const char* base, int64_t rows, int64_t row_stride, int64_t lines, bool l2) {
  t.side = base;
  t.side_rows = rows;
  t.side_row_stride = row_stride;
  t.side_lines = lines;
  t.side_l2 = l2;
}

// Panels (of a_panel_rows) in a block of mc rows.
int64_t a_panel_count(int64_t mc) {
  int64_t n = 0;
  for (int64_t r = 0; r < mc; r += a_panel_rows(mc, r)) ++n;
  return n;
}

using kernels::GemmEpilogue;
using kernels::GemmTile;
using kernels::kGemmMR;
using kernels::kGemmNR;

// D rows [m0, m1) x columns [n0, n1); n0 is a multiple of kGemmNR.
void run_block(const GemmProblem& p, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const bool partial_in_d = !p.d_bf16 && !p.c_is_d();
  const Blocking blk = choose_blocking(*p.tune, p.in, p.m, m1 - m0, n1 - n0, p.k, !partial_in_d,
                                       a_step_bytes(*p.kern, p.in, kGemmMR) / kGemmMR);
  // Bytes of one packed B element in the compute type (every K step is 32 bits per column).
  const int64_t es_in = 4 / k_group(p.in);
  const auto tile_kernel = p.in == DType::bf16 ? p.kern->tile_bf16
                           : p.in == DType::i8 ? p.kern->tile_s8
                                               : p.kern->tile_f32;
  // A packed fp8 B stays fp8 until used. Skinny M reads each panel once: the kernel widens it in
  // registers as it streams. Otherwise each (NC, KC) block is widened once into the B
  // workspace and reused by every A panel.
  const bool fp8_packed = p.packed && p.packed->dtype == DType::f8e4m3;
  const bool fp8_in_kernel = fp8_packed && p.m <= 16;
  const bool widen_packed = fp8_packed && !fp8_in_kernel;
  const int64_t b_elem_bytes = fp8_in_kernel ? 1 : es_in;
  // s8 A rides vpdpbusd as a + 128; the tile starts from -128 * column sums to undo it.
  const bool s8_correction = p.in == DType::i8 && p.a_type == DType::i8;
  // The first A panel's tiles read each B panel first, from DRAM when B is larger than the
  // caches, in one sequential stream, requested gemm_b_prefetch_bytes ahead (sol/tuning.h;
  // docs/perf/gemm.md has the measurements). A widened fp8 B was just written into the
  // workspace, in cache.
  const int64_t b_prefetch = !widen_packed ? p.tune->gemm_b_prefetch_bytes : 0;

  Workspace& ws = thread_workspace();
  const int64_t kc_max = std::min(blk.kc, std::max<int64_t>(p.k, 1));
  const int64_t steps_max = k_steps(p.in, kc_max);
  // A K step of an A panel of `rows` rows.
  const auto a_step = [&](int64_t rows) { return a_step_bytes(*p.kern, p.in, rows); };
  // Panels of up to kGemmMR rows (a_panel_rows may split the last 13..23 rows in two).
  void* a_pack = Workspace::reserve(ws.a, (blk.mc / kGemmMR + 2) * steps_max * a_step(kGemmMR));
  void* b_pack = p.packed && !widen_packed ? nullptr : Workspace::reserve(ws.b, blk.nc * steps_max * 4);
  int32_t* start = s8_correction && !p.packed
                       ? static_cast<int32_t*>(Workspace::reserve(ws.start, blk.nc * 4))
                       : nullptr;
  // Decode runs each 32-column panel in K chunks of kDecodeChunkSteps, both A panels' tiles
  // chunk by chunk: with K = all of K in one tile, a panel larger than ~256 KiB (K > 4096 in
  // bf16) was read by the first tile from DRAM and by the second from L3, since it and the
  // next panel requested into L2 do not both fit there (16 x 7168 x 16384 bf16 at 75% of
  // dot_bf16). Every skinny call chunks the same way, so M = 1 and M = 16 sum in one order.
  const bool chunked = p.m <= 16 && steps_max > kDecodeChunkSteps;
  float* partial = partial_workspace(ws, p, blk, partial_in_d, m1 - m0, chunked);

  const bool skinny_plain = p.m <= 16 && !p.packed;
  int64_t packed_ic = -1, packed_pc = -1;  // which A block a_pack holds
  for (int64_t jc = n0; jc < n1; jc += blk.nc) {
    const int64_t nc = std::min(blk.nc, n1 - jc);
    // K = 0 still runs one (empty) block so that the epilogue writes beta * C + bias.
    for (int64_t pc = 0; pc == 0 || pc < p.k; pc += blk.kc) {
      const int64_t kc = std::min(blk.kc, p.k - pc), steps = k_steps(p.in, kc);
      int64_t panel_elems;
      const void* b_base = b_block(p, widen_packed, pc, kc, jc, nc, b_pack, start, panel_elems);
      const bool first = pc == 0, last = pc + kc >= p.k;

      for (int64_t ic = m0; ic < m1; ic += blk.mc) {
        const int64_t mc = std::min(blk.mc, m1 - ic);
        // The packed A block depends only on (ic, pc): with one K block and one M block (skinny
        // M, short K) every NC block would pack the same rows again, 112 times for M = 16,
        // N = 7168 (NC = 64).
        const bool pack_a = ic != packed_ic || pc != packed_pc;
        packed_ic = ic;
        packed_pc = pc;
        const int64_t a_es = int64_t(dtype_size(p.a_type));
        const int64_t panels = a_panel_count(mc);
        const int64_t step_bytes = kGemmNR * (fp8_in_kernel ? 2 : 4);  // a K step of a B panel
        const int64_t b_panel_bytes = steps * step_bytes;
        // Decode with a plain B: the next column block's source, shared out among this block's
        // tiles, so that packing it reads L2 instead of waiting on DRAM after the arithmetic.
        const SourceRows next_src = skinny_plain && jc + nc < n1
                                        ? plain_b_rows(p, pc, kc, jc + nc, std::min(blk.nc, n1 - jc - nc))
                                        : SourceRows{};
        const int64_t next_src_lines = next_src.rows * next_src.row_stride / 64 + 1;  // as one run
        const int64_t tiles = (nc + kGemmNR - 1) / kGemmNR * panels;
        // The next B panel is requested in slices when a column has a few tiles to spread over
        // (a widened fp8 B was just written into the workspace, in cache).
        const bool slice_b = panels >= 4 && !widen_packed;
        const bool split_decode = p.m <= 16 && panels == 2 && p.packed && !widen_packed;
        // Equal chunks of at most kDecodeChunkSteps, whole 64-step scale groups.
        const int64_t chunk =
            chunked && steps > kDecodeChunkSteps
                ? (steps / ((steps + kDecodeChunkSteps - 1) / kDecodeChunkSteps) + 63) / 64 * 64
                : std::max<int64_t>(steps, 1);
        const int64_t chunks = (std::max<int64_t>(steps, 1) + chunk - 1) / chunk;
        // fp8 decode with two A panels: the first tile widens each chunk of a B panel and keeps
        // it as a bf16 panel chunk (at most 256 KiB, so it stays in L2), which the second reads
        // instead of widening it again (the widening, not DRAM, bounds fp8 decode;
        // docs/perf/gemm.md).
        char* kept = fp8_in_kernel && panels == 2
                         ? static_cast<char*>(Workspace::reserve(ws.b, std::min(steps, chunk) * 4 * kGemmNR))
                         : nullptr;

        // The fields every tile of column jr, chunk ci and rows [row, row + m) sets alike.
        auto place_chunk = [&](GemmTile& t, GemmEpilogue& e, int64_t jr, int64_t ci, int64_t row, int m,
                               const char* a_panel) {
          const int64_t col = jc + jr, c0 = ci * chunk;
          t.m = m;
          t.n = int(std::min<int64_t>(kGemmNR, nc - jr));
          t.k_steps = std::min(chunk, steps - c0);
          t.a = a_panel + c0 * a_step(m);
          t.b = static_cast<const char*>(b_base) + (jr / kGemmNR) * panel_elems * b_elem_bytes + c0 * step_bytes;
          t.b_fp8 = fp8_in_kernel;
          t.first = first && ci == 0;
          // 128-wide scale groups: c0 steps are c0 * k_group K values.
          const int64_t c0_groups = c0 * k_group(p.in) / kFp8ScaleBlock;
          if (p.b_scales) t.sb = p.b_scales + (col / kFp8ScaleBlock) * p.lds_b + pc / kFp8ScaleBlock + c0_groups;
          if (s8_correction && ci == 0) {
            if (!p.packed) t.start = start + jr;
            else if (first) t.start = static_cast<const int32_t*>(p.packed->start.data()) + col;
          }
          place_tile(p, row, col, pc, last && ci + 1 == chunks, partial_in_d, partial, m0, jc, blk.nc, t, e);
          if (t.sa) t.sa += c0_groups;
        };
        // Decode with few rows over a pre-packed bf16, fp8 or int8 B: two column panels per
        // call, so that B streams from two places at once and one panel's arithmetic overlaps
        // the other's loads (these tiles have no side stream: one A panel, B pre-packed).
        const auto pair_kernel = p.in == DType::i8                              ? p.kern->tile_s8_pair
                                 : p.in == DType::bf16 && (fp8_in_kernel || !p.b_scales) ? p.kern->tile_bf16_pair
                                                                                          : nullptr;
        const bool pair_panels = p.packed && !widen_packed && panels == 1 && mc <= kernels::kGemmPairMaxRows &&
                                 pair_kernel && nc > kGemmNR;
        int64_t jr_single = 0;
        if (pair_panels) {
          if (pack_a) pack_a_panel(*p.kern, p.a, p.lda, p.a_type, ic, int(mc), pc, kc, static_cast<char*>(a_pack));
          for (; jr_single + kGemmNR < nc; jr_single += 2 * kGemmNR)
            for (int64_t ci = 0; ci < chunks; ++ci) {
              GemmTile t0, t1;
              GemmEpilogue e0, e1;
              place_chunk(t0, e0, jr_single, ci, ic, int(mc), static_cast<const char*>(a_pack));
              place_chunk(t1, e1, jr_single + kGemmNR, ci, ic, int(mc), static_cast<const char*>(a_pack));
              t0.prefetch_b = t1.prefetch_b = b_prefetch / 2 / 64 * 64;  // the look-ahead's L1 budget, shared
              pair_kernel(t0, t1);
            }
        }
        for (int64_t jr = jr_single; jr < nc; jr += kGemmNR) {
          const int64_t col = jc + jr;
          const char* panel_b = static_cast<const char*>(b_base) + (jr / kGemmNR) * panel_elems * b_elem_bytes;
          const char* next_in_block = jr + kGemmNR < nc ? panel_b + panel_elems * b_elem_bytes : nullptr;
          const char* next_b = slice_b ? next_in_block : nullptr;
          // Whether the previous column's tiles already requested this panel, slice by slice
          // (not while they were requesting A's rows); else its first tile prefetches ahead.
          const bool sliced_here = jr > 0 && slice_b && !(pack_a && jr == kGemmNR);
          // Decode with a pre-packed B and two A panels (13-16 rows): the first panel's tile
          // read this B panel from DRAM and the second read it again from L2, with no DRAM
          // traffic of its own. Instead both tiles request the next panel into L2, half each
          // (one line a step), so the next column's tiles compute from L2 and the DRAM stream
          // runs through both at an even rate.
          const char* next_panel_l2 = nullptr;
          if (split_decode && next_in_block) next_panel_l2 = next_in_block;
          else if (split_decode && col + kGemmNR < n1) next_panel_l2 = static_cast<const char*>(p.packed->at(pc, col + kGemmNR));
          for (int64_t ci = 0; ci < chunks; ++ci) {
            const int64_t c0 = ci * chunk;
            const char* next_chunk = nullptr;
            int64_t next_chunk_bytes = 0;
            if (ci + 1 < chunks) {
              next_chunk = split_decode ? panel_b + (c0 + chunk) * step_bytes : nullptr;
              next_chunk_bytes = std::min(chunk, steps - c0 - chunk) * step_bytes;
            } else {
              next_chunk = next_panel_l2;
              next_chunk_bytes = std::min(chunk, steps) * step_bytes;
            }
            GemmTile t;
            t.b_widened = kept;
            const char* a_panel = static_cast<const char*>(a_pack);
            int64_t panel = 0;
            for (int64_t ir = 0; ir < mc; ir += t.m, a_panel += steps * a_step(t.m), ++panel) {
              const int64_t row = ic + ir;
              GemmEpilogue e;
              place_chunk(t, e, jr, ci, row, int(a_panel_rows(mc, ir)), a_panel);
              // Each A panel is packed just before its first tile, and that tile requests the
              // next panel's rows as it runs: A's first read from memory overlaps arithmetic.
              if (pack_a && jr == 0 && ci == 0) {
                if (ir == 0) pack_a_panel(*p.kern, p.a, p.lda, p.a_type, row, t.m, pc, kc, const_cast<char*>(a_panel));
                const bool more = ir + t.m < mc;
                set_side(t, more ? static_cast<const char*>(p.a) + ((row + t.m) * p.lda + pc) * a_es : nullptr, kGemmMR,
                         p.lda * a_es, (kc * a_es + 63) / 64 + 1, false);
              } else if (next_src.base) {
                const int64_t all = tiles * chunks, ti = ((jr / kGemmNR) * chunks + ci) * panels + panel;
                if (next_src.contiguous && next_src_lines <= all * (chunk + 1)) {
                  // One run of bytes that the tiles can cover at one line a step: each takes its
                  // share in order (a single stream) instead of a line from every row in turn,
                  // which decode ran faster. Longer runs keep the interleaved rows, cut at the
                  // tile's steps: the run at two lines a step, or cut the same way, made M = 1
                  // slower.
                  const int64_t l0 = next_src_lines * ti / all, l1 = next_src_lines * (ti + 1) / all;
                  set_side(t, next_src.base + l0 * 64, 1, 0, l1 - l0, true);
                } else {
                  const int64_t r0 = next_src.rows * ti / all, r1 = next_src.rows * (ti + 1) / all;
                  set_side(t, next_src.base + r0 * next_src.row_stride, r1 - r0, next_src.row_stride, next_src.lines, true);
                }
              } else if (next_chunk) {
                // Half of what the stream reads next (this panel's next chunk, or the next
                // panel's first) per tile: the L2 then holds only this chunk and the next.
                const int64_t lines = (next_chunk_bytes + 63) / 64, half = lines / 2;
                set_side(t, next_chunk + panel * half * 64, 1, 0, panel == 0 ? half : lines - half, true);
              } else if (next_b && panel > 0) {
                // The next B panel, a slice per tile after the first: its first read from memory
                // is spread over the column's tiles instead of the first tile's 16 KiB prefetch.
                const int64_t lines = (b_panel_bytes + 63) / 64;
                const int64_t begin = lines * (panel - 1) / (panels - 1), end = lines * panel / (panels - 1);
                set_side(t, next_b + begin * 64, 1, 0, end - begin, false);
              } else {
                set_side(t, nullptr, 0, 0, 0, false);
              }
              if (kept && panel == 1) {  // the chunk the first tile kept, already bf16
                t.b = kept;
                t.b_fp8 = false;
                t.b_widened = nullptr;
              }
              t.prefetch_b = ir == 0 && !sliced_here ? b_prefetch : 0;
              tile_kernel(t);
              if (pack_a && jr == 0 && ci == 0 && t.side)
                pack_a_panel(*p.kern, p.a, p.lda, p.a_type, row + t.m, a_panel_rows(mc, ir + t.m), pc, kc,
                             const_cast<char*>(a_panel) + steps * a_step(t.m));
            }
          }
        }
      }
    }
  }
}

// A thread's rows, one MC slab at a time where B is pre-packed (block_parts.h).
void run_rows(const GemmProblem& p, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  run_row_slabs(p, p.tune->gemm_mc, m0, m1, [&](int64_t r0, int64_t r1) { run_block(p, r0, r1, n0, n1); });
}

}  // namespace

void gemm_blocked_tiles(const GemmProblem& p) {
  // Skinny or wide problems split N, so each thread streams its own share of B exactly once;
  // tall ones split M, so each thread packs all of B but only its own rows of A. A pre-packed B
  // that the threads can share from the L3 splits M too: nothing of B is packed, and each
  // thread packs only its own rows of A instead of all of them.
  const bool shared_packed_b = p.packed && p.packed->data.bytes() * 2 <= size_t(cpu_features().l3_bytes) &&
                               p.m >= 2 * kGemmMR * num_threads();
  if (p.m <= 16 || (p.n >= p.m && !shared_packed_b)) {
    parallel_ranges(p.n, kGemmNR, [&](int64_t n0, int64_t n1) { run_rows(p, 0, p.m, n0, n1); });
  } else {
    parallel_ranges(p.m, kGemmMR, [&](int64_t m0, int64_t m1) { run_rows(p, m0, m1, 0, p.n); });
  }
}

}  // namespace sol::gemm_detail
