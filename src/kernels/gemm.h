#pragma once
// GEMM micro-kernels: one register tile of D = A * B over one block of K, on packed panels.
// Blocking, packing and threading live in src/ops/gemm; a kernel only multiplies.
//
// Packed layouts (built by src/ops/gemm/packing.cc):
//   A panel: up to kGemmMR rows, K-major, row stride kGemmMR:   f32  a[k][kGemmMR]
//                                                                bf16 a[k/2][kGemmMR][2]
//     or, for a set whose bf16 tile multiplies by f32 FMAs (pack_a_panel_f32_pairs set), a
//     panel of m rows (the tile's m) as f32 pairs:         bf16 a[k/2][2][m] as f32
//   B panel: kGemmNR columns (zero beyond N), K-major:          f32  b[k][kGemmNR]
//                                                                bf16 b[k/2][kGemmNR][2]
//   int8 A panel: u8 quads                                      a[k/4][kGemmMR][4]
//   int8 B panel: s8 quads                                      b[k/4][kGemmNR][4]
//   bf16 pairs (k, k+1) are what vdpbf16ps multiplies, u8 x s8 quads what vpdpbusd does; a K
//   that is not a multiple of 2 (4) is padded with zeros. An s8 A is packed as a + 128 (u8),
//   and the tile then starts from -128 * (column sums of B) so the sums stay exact.
#include <cstdint>

#include "core/kernel_table.h"

namespace sol::kernels {

// 12 x 32: 24 accumulators hide the FMA latency (4 cycles x 2 pipes needs >= 8; vdpbf16ps ~6
// cycles x 2 pipes needs >= 12) and leave 8 zmm for the two B vectors and the A broadcasts.
// Per K step it does 24 FMAs (12 cycles) for 2 vector loads + 12 broadcasts: well under the
// 2 loads/cycle the core sustains. NR = 32 keeps the B micro-panel KC x 32 small enough for L1
// at a long KC, and wastes at most 31 columns on an N edge.
inline constexpr int kGemmMR = 12;
inline constexpr int kGemmNR = 32;

// The last K block writes D = act(alpha * acc + beta * C + bias); pointers are at the tile.
struct GemmEpilogue {
  float alpha = 1.0f, beta = 0.0f;
  const void* c = nullptr;  // D's dtype; read only when beta != 0
  int64_t ldc = 0;
  const float* bias = nullptr;
  bool silu = false;
  void* d = nullptr;
  int64_t ldd = 0;
  bool d_bf16 = false;  // int8 kernel: D is int32 (and C too), alpha 1, beta 0 or 1
  // AMX tiles only (the vector kernels ignore it): D written by non-temporal stores where the
  // tile's 32 columns are whole aligned lines in every row; the caller fences before D is
  // read. Set where D is too large to stay in the caches (hw/streaming.h).
  bool stream = false;
};

struct GemmTile {
  int m = 0, n = 0;         // valid rows (1..kGemmMR) and columns (1..kGemmNR)
  int64_t k_steps = 0;      // f32: k; bf16: k pairs
  const void* a = nullptr;  // packed A panel
  const void* b = nullptr;  // packed B panel
  float* partial = nullptr;  // running f32 sums between K blocks (row stride ldp)
  int64_t ldp = 0;
  bool first = true;                    // start from zero, not from partial
  const GemmEpilogue* last = nullptr;   // set on the final K block: write D, not partial
  // fp8 block scales (bf16 kernel; k_steps a multiple of kScaleGroupSteps): each group of 128
  // K values is summed on its own, then added to the tile as sum * sa[i * lds_a + g] * sb[g]
  // for row i and group g; a null sa means 1 (weight-only fp8).
  const float* sa = nullptr;
  int64_t lds_a = 0;
  const float* sb = nullptr;
  // int8 kernel: per-column start values of this K block (32 int32), or null for zero.
  const int32_t* start = nullptr;
  // The tile of the first A panel is the first to read each B panel (from DRAM for a B larger
  // than the caches, and for skinny M the only one). A non-zero
  // distance asks the kernel to prefetch B that many bytes ahead of its reads (both lines of
  // every K step), so the stream keeps enough misses in flight to reach DRAM bandwidth.
  int64_t prefetch_b = 0;
  // bf16 kernel with scales only: B is a packed fp8 panel (e4m3 bytes in the bf16 pair order,
  // 64 bytes per K step), widened to bf16 in registers. Used for skinny M, where each panel is
  // read once and widening it into a workspace first was a separate, unoverlapped pass.
  bool b_fp8 = false;
  // Memory the driver reads after this tile (or null), requested one line per K step (two for
  // a single run longer than the tile's steps) so that its first read from DRAM overlaps this
  // tile's arithmetic: side_rows rows side_row_stride bytes apart, side_lines consecutive lines
  // of each, rows interleaved (every row's first lines come early). The rows of A packed next,
  // a slice of the next B panel, a share of decode's next chunk of B, or a share of the plain B
  // block packed next (decode).
  const char* side = nullptr;
  int64_t side_rows = 0;
  int64_t side_row_stride = 0;
  int64_t side_lines = 0;
  bool side_l2 = false;  // into L2 only (a share larger than L1), else into L1 as well
  // fp8 B kernel (b_fp8) only: where it also writes the panel it widened, as a bf16 panel
  // (k_steps x 128 bytes), so that a second tile over the same columns reads that instead of
  // widening again (decode with 13-16 rows); null for none.
  void* b_widened = nullptr;
};

inline constexpr int64_t kScaleGroupSteps = 64;  // 128 K values as bf16 pairs

// AMX tiles (TDPBF16PS, TDPBSSD, TDPBUSD): up to 32 x 32 of D per call, as 2 x 2 accumulator
// tiles of 16 x 16 over two A tiles (16 rows x 64 bytes) and two B tiles (16 K steps x 16
// columns); all eight tile registers in use. B is the same packed panel the AVX-512 kernels
// read (one K step = 128 bytes, loaded with that stride), so packing and PackedMatrix are
// shared. A, unlike the vector kernels' broadcasts, is read as rows: a row-major block.
inline constexpr int kAmxMR = 32;
struct AmxGemmTile {
  GemmTile t;               // t.a: row 0 of the A block; t.m <= kAmxMR; t.start unused
  int64_t a_row_bytes = 0;  // stride between A rows (>= 4 * t.k_steps, a multiple of 64)
  bool a_unsigned = false;  // int8: A is u8 (TDPBUSD), else s8 (TDPBSSD); no +128 shift
};

void gemm_tile_f32_avx512(const GemmTile& t);
void gemm_tile_bf16_avx512(const GemmTile& t);
void gemm_tile_bf16_vbmi(const GemmTile& t);  // the same tile, fp8 B widened by VBMI
// The same tiles with every bf16 product an f32 FMA (A as f32 pairs): for cores whose two FMA
// pipes outrun their bf16 dot product. Other bits than the vdpbf16ps tiles, same contract.
void gemm_tile_bf16_fma_avx512(const GemmTile& t);
void gemm_tile_bf16_fma_vbmi(const GemmTile& t);
// Decode over a packed bf16 or fp8 B (with its scales): two tiles (same m <= kGemmPairMaxRows,
// A, k_steps, sa, b_fp8; no side stream, no kept panel) over two panels, stepped together so
// that B streams from two places at once. Each tile gets the bits gemm_tile_bf16_* gives it.
inline constexpr int kGemmPairMaxRows = 4;  // 4 x 4 accumulators and the widening's tables fill the 32 zmm
void gemm_tile_bf16_pair_avx512(const GemmTile& t0, const GemmTile& t1);
void gemm_tile_bf16_pair_vbmi(const GemmTile& t0, const GemmTile& t1);
void gemm_tile_bf16_pair_fma_avx512(const GemmTile& t0, const GemmTile& t1);
void gemm_tile_bf16_pair_fma_vbmi(const GemmTile& t0, const GemmTile& t1);
void gemm_tile_s8_avx512(const GemmTile& t);  // partial and D hold int32 here
void gemm_tile_s8_pair_avx512(const GemmTile& t0, const GemmTile& t1);  // as the bf16 pair

// kGemmMR rows (a short panel repeats its last row) of `steps` 32-bit K steps into the A-panel
// layout above, panel[s * kGemmMR + i]. Each step is 4 bytes of the row (f32, a bf16 pair, an
// int8 quad, XORed with `flip`: 0x80808080 turns s8 into u8 + 128), or with e4m3 two bytes
// widened to a bf16 pair. next_rows (or null): the next panel's rows, requested ahead.
void pack_a_panel_avx512(const void* const (&rows)[kGemmMR], int64_t steps, uint32_t flip, bool e4m3,
                         uint32_t* panel);
// The first `m` rows of bf16 pairs (or e4m3 widened) as f32 pairs, the FMA tiles' A: step s
// is panel[s * 2 * m + i] = row i's first value as f32, panel[(s * 2 + 1) * m + i] its second.
void pack_a_panel_f32_pairs_avx512(const void* const (&rows)[kGemmMR], int m, int64_t steps, uint32_t flip,
                                   bool e4m3, uint32_t* panel);
// A B panel from a plain [N, K] B ("nt"): cols[c] is column c's first 32-bit K step (an f32, a
// bf16 pair, an s8 quad, or with e4m3 two bytes widened to a bf16 pair); columns from
// valid_cols on are zero. panel[s * kGemmNR + c].
void pack_b_panel_nt_avx512(const void* const (&cols)[kGemmNR], int valid_cols, int64_t steps, bool e4m3,
                            uint32_t* panel);
// The same panel where the CPU has VBMI (the amx level, the avx512 level's VBMI variant): e4m3
// transposed as bytes, then widened by VBMI (x86/avx512/pack_nt_e4m3_vbmi.cc); other types as
// pack_b_panel_nt_avx512.
void pack_b_panel_nt_vbmi(const void* const (&cols)[kGemmNR], int valid_cols, int64_t steps, bool e4m3,
                         uint32_t* panel);
// A bf16 B panel from a plain [K, N] B ("nn") of bf16, or of e4m3 widened to bf16: b points at
// (k0, n0), rows ld elements apart; kc values of K (an odd kc ends in a zero pair half),
// columns from valid_cols on zero.
void pack_b_panel_nn_avx512(const void* b, int64_t ld, int valid_cols, int64_t kc, bool e4m3, uint16_t* panel);

// The AMX kernels, on the matrix unit (needs AMX and the OS's permission, see hw) or on a
// scalar model of the tile registers (AVX-512 only, ~1000x slower). The model checks every
// tile configuration and operand shape the hardware would fault on, so the kernel code and its
// driver are tested on machines without AMX. A thread calls configure() once before its first
// tile and release() before it leaves the op (tile state is per thread and costs the OS a
// large save area while held).
struct AmxKernelSet {
  void (*configure)();
  void (*release)();
  void (*bf16)(const AmxGemmTile& t);  // f32 sums; fp8 block scales as the AVX-512 kernel
  void (*s8)(const AmxGemmTile& t);    // int32 sums; partial and D hold int32
};
extern const AmxKernelSet kAmxHardware;
extern const AmxKernelSet kAmxModel;

// AMX decode (M <= 16 rows of D, kernels/x86/amx/gemm_decode_amx.h): one call is a strip of
// up to 16 rows x 32 columns of D over all of K, ending in the epilogue (t.first, t.last set).
//   bf16_panel / s8_panel: t.b is a 32-column panel in the layout above (bf16 pairs, int8
//     quads, or with t.b_fp8 e4m3 bytes in the pair order, 64 bytes a step); t.a is X as rows
//     a_row_bytes apart, zero-padded to whole chunks of 16 steps (64 bytes).
//   bf16_rows: B as stored, [N, K]: t.n rows of `k` bf16 (or e4m3 with w_fp8) values,
//     w_stride bytes apart; t.a is X as K-pair rows, [ceil(steps / 16) * 16][t.m] 32-bit pairs
//     (zero past K); fp8 A scales as sa_lanes [groups][16] (row i of D in lane i), null for 1.
// Both orientations sum every element of D in one order (bitwise the same results).
struct AmxDecodeTile {
  GemmTile t;
  int64_t a_row_bytes = 0;
  bool a_unsigned = false;  // s8_panel: X is u8 (TDPBUSD), else s8 (TDPBSSD)
  const void* w = nullptr;
  int64_t w_stride = 0;
  int64_t k = 0;
  bool w_fp8 = false;
  const float* sa_lanes = nullptr;
};
struct AmxDecodeSet {
  void (*configure)(int m, bool rows);  // tiles for m rows of D in one orientation
  void (*release)();
  void (*bf16_panel)(const AmxDecodeTile& t);
  void (*s8_panel)(const AmxDecodeTile& t);
  void (*bf16_rows)(const AmxDecodeTile& t);
};
extern const AmxDecodeSet kAmxDecodeHardware;
extern const AmxDecodeSet kAmxDecodeModel;

// The AVX2 + FMA level (x86/avx2/gemm_*_avx2.cc): the same panels and tile contract, each tile
// computed as sub-tiles that fit 16 ymm registers; bf16 and e4m3 products are f32 FMAs (no bf16
// dot product), int8 quads are summed by vpmaddwd on int16 lanes. The level's bf16 tile reads A
// packed as f32 pairs (gemm_tile_bf16_fma_avx2, pack_a_panel_f32_pairs_avx2: the widening done
// once, not per use); gemm_tile_bf16_avx2 reads bf16 pairs and widens them in registers, the
// same bits, for generated code that packs bf16 pairs.
void gemm_tile_f32_avx2(const GemmTile& t);
void gemm_tile_bf16_avx2(const GemmTile& t);
void gemm_tile_bf16_fma_avx2(const GemmTile& t);
void pack_a_panel_f32_pairs_avx2(const void* const (&rows)[kGemmMR], int m, int64_t steps, uint32_t flip, bool e4m3,
                                 uint32_t* panel);
void gemm_tile_s8_avx2(const GemmTile& t);
void pack_a_panel_avx2(const void* const (&rows)[kGemmMR], int64_t steps, uint32_t flip, bool e4m3,
                       uint32_t* panel);
void pack_b_panel_nt_avx2(const void* const (&cols)[kGemmNR], int valid_cols, int64_t steps, bool e4m3,
                          uint32_t* panel);
void pack_b_panel_nn_avx2(const void* b, int64_t ld, int valid_cols, int64_t kc, bool e4m3, uint16_t* panel);
void widen_e4m3_avx2(const void* src, uint16_t* dst, int64_t n);

// e4m3 -> bf16 (exact) by AVX512-VBMI byte tables: widen_e4m3 of the amx level and of the
// avx512 level's VBMI variant. Needs only AVX-512 and VBMI, not the tiles (its test runs
// wherever those two are).
void widen_e4m3_vbmi(const void* src, uint16_t* dst, int64_t n);

// GEMM's kernels at one ISA level: the register-tile kernels and packers of the blocked
// driver (null at the scalar level, where the op runs its plain loops), the AMX tile kernels
// (null below the amx level) and the scalar model of the AMX tiles (tests force it where the
// CPU has AVX-512 but no AMX). widen_e4m3: n e4m3 bytes to bf16 (exact).
struct GemmKernels {
  decltype(&gemm_tile_f32_avx512) tile_f32;
  decltype(&gemm_tile_bf16_avx512) tile_bf16;
  decltype(&gemm_tile_s8_avx512) tile_s8;
  decltype(&pack_a_panel_avx512) pack_a_panel;
  decltype(&pack_b_panel_nt_avx512) pack_b_panel_nt;
  decltype(&pack_b_panel_nn_avx512) pack_b_panel_nn;
  void (*widen_e4m3)(const void* src, uint16_t* dst, int64_t n);
  const AmxKernelSet* amx;
  const AmxKernelSet* amx_model;
  const AmxDecodeSet* amx_decode;        // with amx: the decode kernels on the matrix unit
  const AmxDecodeSet* amx_decode_model;  // with amx_model: the same on the tile model
  decltype(&gemm_tile_bf16_pair_avx512) tile_bf16_pair;  // null where the level has none
  decltype(&gemm_tile_s8_pair_avx512) tile_s8_pair;      // null where the level has none
  // Set where tile_bf16 multiplies by f32 FMAs: bf16 and fp8 A panels are packed by it, as f32
  // pairs (twice the bytes of a bf16 pair panel); null where A stays in bf16 pairs.
  decltype(&pack_a_panel_f32_pairs_avx512) pack_a_panel_f32_pairs;
};
KernelTable<GemmKernels> gemm_kernel_table();

}  // namespace sol::kernels
