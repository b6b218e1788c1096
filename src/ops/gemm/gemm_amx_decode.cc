// The AMX decode GEMM (M <= 16): threads split N into 32-column strips, and each strip is one
// kernel call over all of K (kernels/x86/amx/gemm_decode_amx.h), so every element of D sees
// the same operations whatever the thread count. A plain [N, K] bf16 or fp8 B is read where it
// is stored (the rows kernel, X packed once as K pairs); a PackedMatrix's panels feed the panel
// kernel directly, and any other plain B (nn, int8) is packed one strip at a time for it.
#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "ops/gemm/block_parts.h"
#include "ops/gemm/packing.h"
#include "sol/hw.h"
#include "sol/tensor.h"

namespace sol::gemm_detail {

namespace {

using kernels::AmxDecodeSet;
using kernels::AmxDecodeTile;
using kernels::GemmEpilogue;
using kernels::kGemmNR;

// Tile state from a thread's first strip to its last, exceptions included.
struct DecodeSession {
  const AmxDecodeSet& k;
  DecodeSession(const AmxDecodeSet& kernels, int m, bool rows) : k(kernels) { k.configure(m, rows); }
  ~DecodeSession() { k.release(); }
};

// The rows kernel's X: [steps_pad][m] 32-bit K pairs (zero past K), from bf16 or e4m3 rows.
void pack_x_pairs(const GemmProblem& p, int64_t steps_pad, uint32_t* dst, Workspace& ws) {
  const int64_t m = p.m, k = p.k;
  std::memset(dst, 0, size_t(steps_pad * m * 4));
  uint16_t* widened =
      p.a_type == DType::f8e4m3 ? static_cast<uint16_t*>(Workspace::reserve(ws.partial, (k + 1) * 2)) : nullptr;
  for (int64_t i = 0; i < m; ++i) {
    const uint16_t* row;
    if (widened) {
      p.kern->widen_e4m3(static_cast<const uint8_t*>(p.a) + i * p.lda, widened, k);
      row = widened;
    } else {
      row = static_cast<const uint16_t*>(p.a) + i * p.lda;
    }
    for (int64_t s = 0; 2 * s < k; ++s) {
      const uint32_t hi = 2 * s + 1 < k ? row[2 * s + 1] : 0;
      dst[s * m + i] = uint32_t(row[2 * s]) | hi << 16;
    }
  }
}

// The next strip's B, requested into L2 by this strip's call: one run when its bytes follow
// each other, else its rows interleaved.
void set_next(kernels::GemmTile& t, const char* base, int64_t rows, int64_t row_bytes, int64_t stride) {
  t.side = base;
  t.side_l2 = true;
  if (!base) return;
  if (rows == 1 || stride == row_bytes) {
    t.side_rows = 1;
    t.side_lines = (rows * row_bytes + 63) / 64 + 1;
  } else {
    t.side_rows = rows;
    t.side_row_stride = stride;
    t.side_lines = (row_bytes + 63) / 64 + 1;
  }
}

struct Shared {
  const AmxDecodeSet* kernels = nullptr;
  bool rows = false;          // the rows kernel (plain nt bf16 / fp8 B), else the panel kernel
  const void* x = nullptr;    // X as the kernel takes it
  int64_t a_row_bytes = 0;    // panel kernel: X's row stride
  const float* sa_lanes = nullptr;
};

void run_strips(const GemmProblem& p, const Shared& sh, int64_t n0, int64_t n1) {
  const int64_t steps = k_steps(p.in, p.k);
  const int64_t b_es = int64_t(dtype_size(p.b_type));
  const bool plain_panels = !sh.rows && !p.packed;
  void* b_pack = plain_panels ? Workspace::reserve(thread_workspace().b, std::max<int64_t>(steps, 1) * 4 * kGemmNR)
                              : nullptr;
  // The next strip's B is requested into L2 only while it, this strip's and X's rows fit there
  // together: a longer K (a 1 MiB panel at K = 16384) pushed out the strip being read.
  const int64_t strip_bytes = p.packed ? p.packed->panel_elems * int64_t(dtype_size(p.packed->dtype))
                                       : kGemmNR * p.k * b_es;
  const bool stream_next = 2 * strip_bytes + p.m * steps * 4 <= cpu_features().l2_bytes;
  DecodeSession session(*sh.kernels, int(p.m), sh.rows);
  for (int64_t col = n0; col < n1; col += kGemmNR) {
    const int64_t next = col + kGemmNR < n1 && stream_next ? col + kGemmNR : -1;
    AmxDecodeTile at;
    kernels::GemmTile& t = at.t;
    t.n = int(std::min<int64_t>(kGemmNR, n1 - col));
    t.k_steps = steps;
    t.a = sh.x;
    at.a_row_bytes = sh.a_row_bytes;
    at.a_unsigned = p.a_type == DType::u8;
    if (p.b_scales) t.sb = p.b_scales + (col / kFp8ScaleBlock) * p.lds_b;
    if (sh.rows) {
      const int64_t stride = p.b.ld * b_es;
      at.w = static_cast<const char*>(p.b.data) + col * stride;
      at.w_stride = stride;
      at.k = p.k;
      at.w_fp8 = p.b_type == DType::f8e4m3;
      at.sa_lanes = sh.sa_lanes;
      // fp8 W: each of the strip's 32 rows runs its own look-ahead, the budget shared among
      // them (bf16 W, read by the tiles directly, ran 5-7% slower with one).
      if (at.w_fp8) t.prefetch_b = std::max<int64_t>(64, p.tune->gemm_b_prefetch_bytes / kGemmNR / 64 * 64);
      if (next >= 0)
        set_next(t, static_cast<const char*>(p.b.data) + next * stride, std::min<int64_t>(kGemmNR, n1 - next), p.k * b_es, stride);
    } else if (p.packed) {
      const int64_t es = int64_t(dtype_size(p.packed->dtype));
      t.b = p.packed->at(0, col);
      t.b_fp8 = p.packed->dtype == DType::f8e4m3;
      t.prefetch_b = p.tune->gemm_b_prefetch_bytes;
      if (next >= 0) set_next(t, static_cast<const char*>(p.packed->at(0, next)), 1, p.packed->panel_elems * es, 0);
    } else {
      pack_b_block(*p.kern, p.b, p.b_type, p.n, 0, p.k, col, kGemmNR, b_pack, steps * k_group(p.in) * kGemmNR);
      t.b = b_pack;
    }
    t.first = true;
    GemmEpilogue e;
    place_tile(p, 0, col, 0, true, false, nullptr, 0, col, 0, t, e);
    t.m = int(p.m);
    if (p.in == DType::i8) sh.kernels->s8_panel(at);
    else if (sh.rows) sh.kernels->bf16_rows(at);
    else sh.kernels->bf16_panel(at);
  }
}

}  // namespace

void gemm_amx_decode(const GemmProblem& p) {
  Shared sh;
  // The matrix unit where the level has it; the tile model where tests force it (no AMX).
  sh.kernels = p.kern->amx ? p.kern->amx_decode : p.kern->amx_decode_model;
  sh.rows = !p.packed && p.b.layout == Layout::nt && p.in == DType::bf16;
  const int64_t steps = k_steps(p.in, p.k), chunks = (steps + 15) / 16;
  Workspace& ws = thread_workspace();
  if (sh.rows) {
    const int64_t steps_pad = chunks * 16;
    auto* x = static_cast<uint32_t*>(Workspace::reserve(ws.a, std::max<int64_t>(steps_pad * p.m * 4, 64)));
    pack_x_pairs(p, steps_pad, x, ws);
    sh.x = x;
    if (p.a_scales) {
      const int64_t groups = p.k / kFp8ScaleBlock;
      auto* lanes = static_cast<float*>(Workspace::reserve(ws.start, std::max<int64_t>(groups, 1) * 16 * 4));
      for (int64_t g = 0; g < groups; ++g)
        for (int64_t i = 0; i < 16; ++i) lanes[g * 16 + i] = i < p.m ? p.a_scales[i * p.lds_a + g] : 0.0f;
      sh.sa_lanes = lanes;
    }
  } else {
    // X as rows, whole 64-byte chunks; rows a multiple of 1 KiB apart would share L1 sets.
    int64_t row_bytes = std::max<int64_t>(chunks, 1) * 64;
    if (row_bytes % 1024 == 0) row_bytes += 64;
    void* x = Workspace::reserve(ws.a, 16 * row_bytes);
    pack_a_rows(p.a, p.lda, p.a_type, 0, p.m, 0, p.k, x, row_bytes);
    sh.x = x;
    sh.a_row_bytes = row_bytes;
  }
  parallel_ranges(p.n, kGemmNR, [&](int64_t n0, int64_t n1) { run_strips(p, sh, n0, n1); });
}

}  // namespace sol::gemm_detail
