#pragma once
// The runtime of generated CPU kernels: the ABI between a kernel compiled by Sol's tile JIT and
// the Sol that loads it, plus the small routines the generated code calls (packing into the
// micro-kernel's panels, masked tile loads and stores, bf16 rounding). Self-contained on
// purpose: a kernel includes this one header and nothing else of Sol, and reaches the
// micro-kernels (src/kernels/gemm.h) through function pointers the host passes in, so the
// shared object needs no symbols from the executable that loads it. The host checks at build
// time (src/compiler/jit/runtime_table.cc) that GemmTile here matches kernels::GemmTile field
// for field. Any change here changes every JIT cache key (the header's text is hashed).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>
#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace sol_rt {

// 3: GemmTile gained the side stream; 4: and b_widened; 5: Runtime.gemm_tile_bf16_widened
inline constexpr int kAbiVersion = 5;
inline constexpr int64_t kPanelRows = 12, kPanelCols = 32;  // kernels::kGemmMR, kGemmNR

struct GemmTile {  // mirror of sol::kernels::GemmTile
  int m = 0, n = 0;
  int64_t k_steps = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  float* partial = nullptr;
  int64_t ldp = 0;
  bool first = true;
  const void* last = nullptr;
  const float* sa = nullptr;
  int64_t lds_a = 0;
  const float* sb = nullptr;
  const int32_t* start = nullptr;
  int64_t prefetch_b = 0;
  bool b_fp8 = false;
  const char* side = nullptr;  // read next, prefetched (kernels/gemm.h)
  int64_t side_rows = 0;
  int64_t side_row_stride = 0;
  int64_t side_lines = 0;
  bool side_l2 = false;
  void* b_widened = nullptr;
};

struct Runtime {
  int abi = kAbiVersion;
  void (*gemm_tile_f32)(const GemmTile&) = nullptr;
  void (*gemm_tile_bf16)(const GemmTile&) = nullptr;
  // The bf16 tile kernel that reads A widened to f32 (pack_a_widened); null where the ISA level
  // in force has none (the host then refuses to launch a kernel that calls it).
  void (*gemm_tile_bf16_widened)(const GemmTile&) = nullptr;
};

struct TensorArg {
  void* data;
  int64_t shape[8];
  int64_t stride[8];  // elements
};

struct Launch {
  const TensorArg* args;
  int nargs;
  const Runtime* rt;
  int threads;
  // Scratch arenas, one per OpenMP thread of the launch (thread t uses scratch + t * stride),
  // owned by the host and kept between launches: a fresh arena per launch let glibc map new
  // pages (a MiB or more is above its mmap threshold) and fault them in on every call, 5-8% of
  // a 1024^3 GEMM and more or less with what else the process had allocated.
  char* scratch;
  int64_t scratch_stride;
};

using KernelEntry = void (*)(const Launch*);

// ---- scalars ----
inline float bf16_to_f32(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {  // round to nearest even; NaN stays a (quiet) NaN
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
inline float ld(const float* p, int64_t i) { return p[i]; }
inline float ld(const uint16_t* p, int64_t i) { return bf16_to_f32(p[i]); }
inline void st(float* p, int64_t i, float v) { p[i] = v; }
inline void st(uint16_t* p, int64_t i, float v) { p[i] = f32_to_bf16(v); }
inline int64_t ceildiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline float max_nan(float a, float b) { return a != a || b != b ? NAN : (a > b ? a : b); }
inline float min_nan(float a, float b) { return a != a || b != b ? NAN : (a < b ? a : b); }
// Valid extent of a tile dim at offset `off` of a tensor dim of size `size`.
inline int64_t valid(int64_t off, int64_t tile, int64_t size) { return std::clamp<int64_t>(size - off, 0, tile); }


// ---- tensor region <-> row-major tile ----
// src points at the region's origin; rows x cols valid, the rest of the tile is zero.
template <class S, class D>
void load_rows(const S* src, int64_t ld_src, int64_t rows, int64_t cols, int64_t tile_rows, int64_t tile_cols, D* dst) {
  for (int64_t r = 0; r < tile_rows; ++r) {
    D* out = dst + r * tile_cols;
    int64_t c = 0;
    if (r < rows)
      for (; c < cols; ++c) st(out, c, ld(src + r * ld_src, c));
    for (; c < tile_cols; ++c) st(out, c, 0.0f);
  }
}
template <>
inline void load_rows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, int64_t tile_rows,
                      int64_t tile_cols, float* dst) {
  for (int64_t r = 0; r < tile_rows; ++r) {
    const int64_t n = r < rows ? cols : 0;
    if (n) std::memcpy(dst + r * tile_cols, src + r * ld_src, size_t(n) * 4);
    std::memset(dst + r * tile_cols + n, 0, size_t(tile_cols - n) * 4);
  }
}

template <class S, class D>
void store_rows(const S* src, int64_t tile_cols, int64_t rows, int64_t cols, D* dst, int64_t ld_dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) st(dst + r * ld_dst, c, ld(src + r * tile_cols, c));
}

inline void prefetch_rows(const void* src, int64_t ld_bytes, int64_t rows, int64_t row_bytes) {
  const char* p = static_cast<const char*>(src);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(p + r * ld_bytes + b, 0, 2);
}

// ---- packing into micro-kernel panels (layouts: src/kernels/gemm.h) ----
// Element (row, k) of op(tile) sits at src[k * ld + row] when k_major, else src[row * ld + k];
// rows x k are valid, the panels cover tile_rows x tile_k. panel = 12 (A) or 32 (B).
// Only the panels and K steps that hold data are written (padding rows and columns inside them
// are zero): the generated gemm clips K to the filled depth and skips register tiles past the
// filled rows and columns, so it never reads the rest.
template <class S, class D>
void pack_panels(const S* src, int64_t ld_src, bool k_major, int64_t rows, int64_t k, int64_t tile_rows,
                 int64_t tile_k, int64_t panel, D* dst) {
  constexpr int64_t group = sizeof(D) == 2 ? 2 : 1;  // bf16 pairs
  const int64_t steps = (tile_k + group - 1) / group;
  const int64_t used_steps = std::min(steps, (std::max<int64_t>(k, 0) + group - 1) / group);
  const int64_t used_panels = (std::clamp<int64_t>(rows, 0, tile_rows) + panel - 1) / panel;
  for (int64_t p = 0; p < used_panels; ++p) {
    D* out = dst + p * panel * steps * group;
    for (int64_t s = 0; s < used_steps; ++s)
      for (int64_t r = 0; r < panel; ++r)
        for (int64_t g = 0; g < group; ++g) {
          const int64_t row = p * panel + r, kk = s * group + g;
          const bool inside = row < rows && kk < k;
          st(out, (s * panel + r) * group + g,
             inside ? ld(src, k_major ? kk * ld_src + row : row * ld_src + kk) : 0.0f);
        }
  }
}

#if defined(__AVX512F__)
// v[r] holds row r of a 16 x 16 matrix of 32-bit elements; afterwards v[c] holds column c.
// 32-bit, then 64-bit interleaves inside each 128-bit lane, then two rounds of 128-bit lane
// shuffles.
inline void transpose_16x16_u32(__m512i (&v)[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    v[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(v[i], v[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(v[i], v[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_i32x4(v[i + 8], v[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(v[i + 8], v[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    v[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    v[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
  }
}
#endif

// Row-major [rows][k] into pair panels of `Panel` rows (A panels: 12 rows; B panels of a
// transposed B stored [N][K]: 32 columns): one 32-bit (k, k+1) pair per (step, row), the
// panel's rows read side by side so the panel is written sequentially. bf16 sources are moved
// as pairs; f32 sources (a tile computed element-wise, e.g. attention probabilities) are first
// rounded to bf16 a row at a time (a vector loop), then moved the same way.
template <int64_t Panel, class S>
void pack_pairs_bf16(const S* src, int64_t ld_src, int64_t rows, int64_t k, int64_t tile_rows, int64_t tile_k,
                     uint16_t* dst) {
  const int64_t steps = (tile_k + 1) / 2, full = k / 2;
  const int64_t used_steps = std::min(steps, (std::max<int64_t>(k, 0) + 1) / 2);
  const int64_t panels = (std::clamp<int64_t>(rows, 0, tile_rows) + Panel - 1) / Panel;  // with data
  thread_local std::vector<uint16_t> rounded;
  for (int64_t p = 0; p < panels; ++p) {
    uint32_t* out = reinterpret_cast<uint32_t*>(dst) + p * Panel * steps;
    const uint16_t* row_ptr[Panel];
    const int64_t live = std::clamp<int64_t>(rows - p * Panel, 0, Panel);
    if (live == 0 || k <= 0) continue;
    // Rows past the tensor's edge read the last real row and store zeros: no branch per load.
    if constexpr (sizeof(S) == 2) {
      for (int64_t r = 0; r < Panel; ++r) row_ptr[r] = src + (p * Panel + std::min(r, live - 1)) * ld_src;
    } else {
      rounded.resize(size_t(live * k));
      for (int64_t r = 0; r < live; ++r) {
        const float* in = src + (p * Panel + r) * ld_src;
        uint16_t* o = rounded.data() + r * k;
        for (int64_t c = 0; c < k; ++c) o[c] = f32_to_bf16(in[c]);
      }
      for (int64_t r = 0; r < Panel; ++r) row_ptr[r] = rounded.data() + std::min(r, live - 1) * k;
    }
    int64_t done = 0;  // steps packed by the vector path
#if defined(__AVX512F__)
    // 16 steps at a time: the 32-bit pairs of up to 16 rows, transposed in registers and
    // stored as 16 runs of the panel's rows (the scalar path below stored one pair per
    // iteration, 12 to 32 of them per step, and was the larger part of the generated GEMM's
    // own time after B packing).
    for (; done + 16 <= full; done += 16)
      for (int64_t g = 0; g < Panel; g += 16) {
        __m512i v[16];
        for (int64_t r = 0; r < 16; ++r)
          v[r] = g + r < live ? _mm512_loadu_si512(row_ptr[g + r] + 2 * done) : _mm512_setzero_si512();
        transpose_16x16_u32(v);
        const __mmask16 keep = __mmask16((1u << std::min<int64_t>(16, Panel - g)) - 1u);
        for (int64_t j = 0; j < 16; ++j) _mm512_mask_storeu_epi32(out + (done + j) * Panel + g, keep, v[j]);
      }
#endif
    // A row at a time: sequential reads, stores strided by the panel (they stay in L1).
    for (int64_t r = 0; r < Panel; ++r) {
      const uint16_t* in = row_ptr[r];
      if (r < live) {
        for (int64_t s = done; s < full; ++s) {
          uint32_t w;
          std::memcpy(&w, in + 2 * s, 4);
          out[s * Panel + r] = w;
        }
      } else {
        for (int64_t s = done; s < full; ++s) out[s * Panel + r] = 0u;
      }
    }
    for (int64_t s = full; s < used_steps; ++s)
      for (int64_t r = 0; r < Panel; ++r) {
        const uint32_t lo = r < live && 2 * s < k ? row_ptr[r][2 * s] : 0u;
        out[s * Panel + r] = lo;
      }
  }
}

inline void pack_a_bf16(const uint16_t* src, int64_t ld_src, int64_t rows, int64_t k, int64_t tile_rows,
                        int64_t tile_k, uint16_t* dst) {
  pack_pairs_bf16<kPanelRows>(src, ld_src, rows, k, tile_rows, tile_k, dst);
}
inline void pack_a_f32_bf16(const float* src, int64_t ld_src, int64_t rows, int64_t k, int64_t tile_rows,
                            int64_t tile_k, uint16_t* dst) {
  pack_pairs_bf16<kPanelRows>(src, ld_src, rows, k, tile_rows, tile_k, dst);
}
// bf16 A into widened A panels (compiler/layout.h): per K pair step the panel's first values as
// f32, then its second ones; the last panel holds only the tile's remaining rows. Element
// (row, k) of op(A) is src[k * ld + row] when k_major (A stored [K, M]), else src[row * ld + k].
// An f32 source is rounded to bf16 first (as pack_a_f32_bf16 does), a row at a time.
template <class S>
void pack_a_widened(const S* src, int64_t ld_src, bool k_major, int64_t rows, int64_t k, int64_t tile_rows,
                    int64_t tile_k, float* dst) {
  const int64_t live_rows = std::clamp<int64_t>(rows, 0, tile_rows);
  if (live_rows == 0 || k <= 0) return;
  if constexpr (sizeof(S) == 4) {
    thread_local std::vector<uint16_t> rounded;
    const int64_t outer = k_major ? k : live_rows, inner = k_major ? live_rows : k;
    rounded.resize(size_t(outer * inner));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) rounded[size_t(o * inner + i)] = f32_to_bf16(src[o * ld_src + i]);
    pack_a_widened(rounded.data(), inner, k_major, live_rows, k, tile_rows, tile_k, dst);
  } else {
    const int64_t steps = (tile_k + 1) / 2, used_steps = std::min(steps, (k + 1) / 2), full = std::min(k, tile_k) / 2;
    const int64_t panels = (live_rows + kPanelRows - 1) / kPanelRows;  // with data
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t first = p * kPanelRows, width = std::min(kPanelRows, tile_rows - first);
      const int64_t live = std::min(width, live_rows - first);
      float* out = dst + first * steps * 2;
      auto at = [&](int64_t r, int64_t kk) { return k_major ? src + kk * ld_src + first + r : src + (first + r) * ld_src + kk; };
      int64_t done = 0;  // steps packed by the vector path
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
      const __mmask16 lanes = __mmask16((1u << width) - 1u), loaded = __mmask16((1u << live) - 1u);
      const __m512i high = _mm512_set1_epi32(int(0xffff0000u));
      if (k_major) {
        // A step's first values are one run of the source row 2s, its second ones of row 2s+1.
        for (; done < full; ++done)
          for (int g = 0; g < 2; ++g) {
            const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(loaded, at(0, 2 * done + g)));
            _mm512_mask_storeu_ps(out + done * 2 * width + g * width, lanes, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
          }
      } else {
        // 16 steps of 16 rows' pairs, transposed in registers: v[j] holds step j's pairs by row.
        for (; done + 16 <= full; done += 16) {
          __m512i v[16];
          for (int64_t r = 0; r < 16; ++r)
            v[r] = r < live ? _mm512_loadu_si512(at(r, 2 * done)) : _mm512_setzero_si512();
          transpose_16x16_u32(v);
          for (int64_t j = 0; j < 16; ++j) {
            float* o = out + (done + j) * 2 * width;
            _mm512_mask_storeu_ps(o, lanes, _mm512_castsi512_ps(_mm512_slli_epi32(v[j], 16)));
            _mm512_mask_storeu_ps(o + width, lanes, _mm512_castsi512_ps(_mm512_and_si512(v[j], high)));
          }
        }
      }
#endif
      for (int64_t s = done; s < used_steps; ++s)
        for (int64_t g = 0; g < 2; ++g)
          for (int64_t r = 0; r < width; ++r) {
            const int64_t kk = 2 * s + g;
            out[s * 2 * width + g * width + r] = r < live && kk < k ? bf16_to_f32(*at(r, kk)) : 0.0f;
          }
    }
  }
}

// B stored [N][K] (gemm trans_b) into B panels: the columns of op(B) are rows here.
inline void pack_bt_bf16(const uint16_t* src, int64_t ld_src, int64_t cols, int64_t k, int64_t tile_cols,
                         int64_t tile_k, uint16_t* dst) {
  pack_pairs_bf16<kPanelCols>(src, ld_src, cols, k, tile_cols, tile_k, dst);
}

// 2^x for the element-wise loops: branch-free so `omp simd` vectorizes it. x = n + f with n =
// round(x), |f| <= 1/2; 2^f by its Taylor series to degree 7 (relative error < 1e-8 there,
// so the result is within ~2 ulp of exp2f); 2^n by building the exponent. x <= -127 gives 0,
// x >= 128 gives inf, NaN stays NaN.
inline float exp2_fast(float x) {
  const float xc = x < -127.0f ? -127.0f : (x > 128.0f ? 128.0f : x);
  // round(xc) by truncating a positive number: GCC 12 does not vectorize floorf here.
  const int32_t ni = int32_t(xc + 127.5f) - 127;
  const float f = xc - float(ni);
  float p = 1.5252734e-05f;
  p = p * f + 1.5403530e-04f;
  p = p * f + 1.3333558e-03f;
  p = p * f + 9.6181291e-03f;
  p = p * f + 5.5504109e-02f;
  p = p * f + 2.4022651e-01f;
  p = p * f + 6.9314718e-01f;
  p = p * f + 1.0f;
  const float scale = __builtin_bit_cast(float, (ni + 127) << 23);
  return x != x ? x : p * scale;
}

// bf16 [k][cols] row-major (k-major B) into B panels (32 columns, k pairs): rows 2s and 2s+1
// interleaved, 32 columns at a time. Row pairs outermost: each step reads two rows of the
// region from left to right (sequential runs the hardware prefetcher follows) and writes one
// 128-byte piece into every panel. Panel-outermost read each row 64 bytes at a time with the
// tensor's row stride between loads, and stalled on them (60% of the generated GEMM's own time
// at 1000 x 3000 x 700, where B comes from L3).
inline void pack_b_bf16(const uint16_t* src, int64_t ld_src, int64_t cols, int64_t k, int64_t tile_cols,
                        int64_t tile_k, uint16_t* dst) {
  const int64_t steps = (tile_k + 1) / 2;
  const int64_t used_steps = std::min(steps, (std::max<int64_t>(k, 0) + 1) / 2);
  const int64_t live_cols = std::clamp<int64_t>(cols, 0, tile_cols);
  const int64_t panels = (live_cols + kPanelCols - 1) / kPanelCols;  // with data
  int64_t full_panels = 0;
#if defined(__AVX512BW__)
  full_panels = live_cols / kPanelCols;
  if (full_panels > 0) {
    const __m512i lo_idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38,
                                            6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi_idx = _mm512_add_epi16(lo_idx, _mm512_set1_epi16(16));
    const int64_t panel_elems = kPanelCols * steps * 2;
    for (int64_t s = 0; s < used_steps; ++s) {
      const uint16_t* r0 = src + 2 * s * ld_src;
      const uint16_t* r1 = r0 + ld_src;
      const bool pair = 2 * s + 1 < k;
      uint16_t* out = dst + s * 64;
      for (int64_t p = 0; p < full_panels; ++p, out += panel_elems) {
        const __m512i a = _mm512_loadu_si512(r0 + p * kPanelCols);
        const __m512i b = pair ? _mm512_loadu_si512(r1 + p * kPanelCols) : _mm512_setzero_si512();
        _mm512_storeu_si512(out, _mm512_permutex2var_epi16(a, lo_idx, b));
        _mm512_storeu_si512(out + 32, _mm512_permutex2var_epi16(a, hi_idx, b));
      }
    }
  }
#endif
  for (int64_t p = full_panels; p < panels; ++p) {
    uint16_t* out = dst + p * kPanelCols * steps * 2;
    const int64_t live = std::clamp<int64_t>(cols - p * kPanelCols, 0, kPanelCols);
    for (int64_t s = 0; s < used_steps; ++s)
      for (int64_t c = 0; c < kPanelCols; ++c)
        for (int64_t g = 0; g < 2; ++g) {
          const int64_t kk = 2 * s + g;
          out[(s * kPanelCols + c) * 2 + g] = c < live && kk < k ? src[kk * ld_src + p * kPanelCols + c] : uint16_t(0);
        }
  }
}

}  // namespace sol_rt
