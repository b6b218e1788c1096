// The Engram hash, 8 tokens per vector: 64-bit products (vpmullq), XOR, and `mod p` without a
// vector divide. The remainder comes in two exact steps:
//   q1 = trunc(double(mix) * (1/p)),  r1 = mix - q1*p      (64-bit wrapping, read as signed)
// The quotient estimate carries at most three roundings of 2^-53 relative to mix/p < 2^64/p,
// so |q1 - mix/p| < 1 + 3.01 * 2^11 / p and |r1| < p + 6200: exact as a double when p < 2^40.
//   q2 = floor(double(r1) * (1/p)),   r2 = r1 - q2*p  in [-p, 2p), then one correction each way.
// The result is the exact remainder, so this path is bit-identical to the scalar `%`.
#include <immintrin.h>

#include "kernels/engram_hash.h"

namespace sol::engram::detail {

namespace {

// Masked-zero forms throughout: GCC 12 warns on the unmasked ones' undefined pass-through.
constexpr __mmask8 kAll = 0xFF;

inline __m512i mod_exact(__m512i mix, __m512i p, __m512d inv_p) {
  const __m512d qd = _mm512_mul_pd(_mm512_maskz_cvtepu64_pd(kAll, mix), inv_p);
  const __m512i q1 = _mm512_maskz_cvttpd_epu64(kAll, qd);
  const __m512i r1 = _mm512_sub_epi64(mix, _mm512_mullo_epi64(q1, p));
  const __m512d q2d = _mm512_maskz_roundscale_pd(kAll, _mm512_mul_pd(_mm512_maskz_cvtepi64_pd(kAll, r1), inv_p),
                                           _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512i r = _mm512_sub_epi64(r1, _mm512_mullo_epi64(_mm512_maskz_cvtpd_epi64(kAll, q2d), p));
  r = _mm512_mask_add_epi64(r, _mm512_cmplt_epi64_mask(r, _mm512_setzero_si512()), r, p);
  r = _mm512_mask_sub_epi64(r, _mm512_cmpge_epi64_mask(r, p), r, p);
  return r;
}

}  // namespace

void hash_row_avx512(const HashParams& p, const int32_t* ids, int64_t begin, int64_t end, int32_t* out) {
  const int heads = p.heads();
  // Tokens with fewer than N-1 predecessors read padding: scalar.
  int64_t t = begin;
  for (; t < end && t < p.max_ngram - 1; ++t) hash_token(p, ids, t, out + t * heads);
  __m512i mult[kMaxNgram];
  for (int k = 0; k < p.max_ngram; ++k) mult[k] = _mm512_set1_epi64(int64_t(p.multipliers[k]));
  // Heads of 8 tokens land in a [head][token] tile, then go out token-major: plain stores beat
  // a scatter (vpscatterqd) per head.
  alignas(64) int32_t tile[kMaxHeads][8];
  for (; t + 8 <= end; t += 8) {
    __m512i mix = _mm512_setzero_si512();
    int head = 0;
    int32_t* base = out + t * heads;
    for (int k = 0; k < p.max_ngram; ++k) {
      const __m512i token = _mm512_maskz_cvtepu32_epi64(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ids + t - k)));
      mix = _mm512_xor_si512(mix, _mm512_mullo_epi64(token, mult[k]));
      if (k == 0) continue;
      for (int j = 0; j < p.heads_per_ngram; ++j, ++head) {
        const __m512i r = mod_exact(mix, _mm512_set1_epi64(int64_t(p.moduli[head])), _mm512_set1_pd(p.inverse_moduli[head]));
        const __m256i row = _mm512_maskz_cvtepi64_epi32(kAll, _mm512_add_epi64(r, _mm512_set1_epi64(int64_t(p.offsets[head]))));
        _mm256_store_si256(reinterpret_cast<__m256i*>(tile[head]), row);
      }
    }
    for (int i = 0; i < 8; ++i)
      for (int h = 0; h < heads; ++h) base[i * heads + h] = tile[h][i];
  }
  for (; t < end; ++t) hash_token(p, ids, t, out + t * heads);
}

}  // namespace sol::engram::detail
