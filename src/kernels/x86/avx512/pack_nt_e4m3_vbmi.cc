// The B panel packer for a plain [N, K] B (GemmKernels::pack_b_panel_nt) of the amx level and
// of the avx512 level's VBMI variant (it needs VBMI, not the tiles). An e4m3
// panel is transposed as bytes first and widened after: 32 columns x 32 K pairs (one 64-byte
// line of each column) become 32 steps by a 16-bit transpose, and each step's 64 bytes are one
// VBMI widening (e4m3x64_avx512.h) into the step's 32 bf16 pairs. The AVX-512 packer widens each
// column's 32 bytes by the word tables first and transposes 32-bit pairs after, about twice the
// shuffle-port work per value. Other types go to the AVX-512 packer. Same panel, same bits.
#include "kernels/x86/avx512/e4m3x64_avx512.h"  // first: see its include of e4m3_avx512.h
#include "kernels/gemm.h"

namespace sol::kernels {
namespace {

// One stage of the transpose swaps the off-diagonal d x d blocks of each pair of rows a (row
// i) and b (row i + d): a keeps its words whose index has bit d clear and takes b's there; b
// the reverse. Each stage is the cheapest shuffle for its distance (the general two-source
// word permute costs several uops here): lanes of 256 and 128 bits and qwords on the shuffle
// port, dwords and words by shifts and masked moves.
template <int D>
[[gnu::always_inline]] inline void swap_blocks(__m512i& a, __m512i& b) {
  const __m512i x = a, y = b;
  if constexpr (D == 16) {
    a = _mm512_shuffle_i64x2(x, y, 0x44);  // a's low half, b's low half
    b = _mm512_shuffle_i64x2(x, y, 0xEE);  // a's high half, b's high half
  } else if constexpr (D == 8) {
    a = _mm512_mask_shuffle_i64x2(x, 0xCC, y, y, 0x80);  // lanes a0 b0 a2 b2
    b = _mm512_mask_shuffle_i64x2(y, 0x33, x, x, 0x31);  // lanes a1 b1 a3 b3
  } else if constexpr (D == 4) {
    a = _mm512_unpacklo_epi64(x, y);
    b = _mm512_unpackhi_epi64(x, y);
  } else if constexpr (D == 2) {
    a = _mm512_mask_mov_epi32(x, 0xAAAA, _mm512_slli_epi64(y, 32));
    b = _mm512_mask_mov_epi32(y, 0x5555, _mm512_srli_epi64(x, 32));
  } else {
    a = _mm512_mask_mov_epi16(x, 0xAAAAAAAA, _mm512_slli_epi32(y, 16));
    b = _mm512_mask_mov_epi16(y, 0x55555555, _mm512_srli_epi32(x, 16));
  }
}

template <int D>
[[gnu::always_inline]] inline void transpose_stage(__m512i (&r)[16]) {
  for (int i = 0; i < 16; ++i)
    if (!(i & D)) swap_blocks<D>(r[i], r[i + D]);
}

// 16 rows after the first stage (d = 16) -> steps: r[j] word s -> r[s] word j within each of
// the two 16 x 16 halves.
[[gnu::always_inline]] inline void transpose_half(__m512i (&r)[16]) {
  transpose_stage<8>(r);
  transpose_stage<4>(r);
  transpose_stage<2>(r);
  transpose_stage<1>(r);
}

// The half's first `count` steps, widened into the panel from step `first` on.
[[gnu::always_inline]] inline void store_half(const __m512i (&r)[16], int64_t first, int64_t count, uint32_t* panel) {
  for (int64_t s = 0; s < count; ++s) {
    __m512i wide[2];
    e4m3x64_to_bf16(r[s], wide);
    _mm512_storeu_si512(panel + (first + s) * kGemmNR, wide[0]);
    _mm512_storeu_si512(panel + (first + s) * kGemmNR + 16, wide[1]);
  }
}

}  // namespace

void pack_b_panel_nt_vbmi(const void* const (&cols)[kGemmNR], int valid_cols, int64_t steps, bool e4m3,
                         uint32_t* panel) {
  static_assert(kGemmNR == 32);
  if (!e4m3) return pack_b_panel_nt_avx512(cols, valid_cols, steps, e4m3, panel);
  // 32 columns x 32 steps at a time; the first stage splits them into two 16 x 16 halves that
  // transpose on their own, one in registers while the other waits in L1 (32 live rows and the
  // shuffles' temporaries would not fit the 32 vector registers).
  alignas(64) __m512i parked[16];
  for (int64_t s0 = 0; s0 < steps; s0 += 32) {
    const int64_t n = steps - s0 < 32 ? steps - s0 : 32;  // steps in this block, 2 bytes each
    const __mmask64 bytes = n == 32 ? ~__mmask64(0) : (__mmask64(1) << (2 * n)) - 1;
    const auto row = [&](int c) {
      const char* line = static_cast<const char*>(cols[c]) + 2 * s0;
      if (s0 + 64 < steps && c < valid_cols) _mm_prefetch(line + 128, _MM_HINT_T0);
      return c < valid_cols ? _mm512_maskz_loadu_epi8(bytes, line) : _mm512_setzero_si512();
    };
    __m512i r[16];
    for (int i = 0; i < 16; ++i) {
      __m512i a = row(i), b = row(i + 16);
      swap_blocks<16>(a, b);
      r[i] = a;
      _mm512_store_si512(&parked[i], b);
    }
    transpose_half(r);
    store_half(r, s0, n < 16 ? n : 16, panel);
    if (n <= 16) continue;
    for (int i = 0; i < 16; ++i) r[i] = _mm512_load_si512(&parked[i]);
    transpose_half(r);
    store_half(r, s0 + 16, n - 16, panel);
  }
}

}  // namespace sol::kernels
