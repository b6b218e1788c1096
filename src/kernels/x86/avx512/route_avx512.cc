// AVX-512 pieces of MoE routing (kernels/route.h): order keys, group top-2, top-k candidates.
#include <climits>

#include "kernels/x86/avx512/route16_avx512.h"

namespace sol::kernels {

void route_keys_avx512(const float* scores, const float* bias, int64_t e, int64_t n_group, int64_t topk_group,
                       bool top2, int32_t* key, uint8_t* group_ok) {
  for (int64_t i = 0; i < e; i += 16) {
    const __mmask16 m = tail_mask(e - i);
    __m512 s = _mm512_maskz_loadu_ps(m, scores + i);
    if (bias) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(m, bias + i));
    _mm512_mask_storeu_epi32(key + i, m, key16(s));
  }
  if (n_group <= 1) return;
  const int64_t per = e / n_group;
  alignas(64) float group_score[16];
  for (int64_t g = 0; g < n_group; ++g) {
    // Per lane the largest and second largest key seen; then across lanes: the largest, and as
    // the second either the largest again (when two lanes hold it) or the best of the rest.
    const int32_t* p = key + g * per;
    __m512i hi = _mm512_loadu_si512(p), lo = _mm512_set1_epi32(INT_MIN);
    for (int64_t i = 16; i < per; i += 16) {
      const __m512i x = _mm512_loadu_si512(p + i);
      lo = _mm512_max_epi32(lo, _mm512_min_epi32(hi, x));
      hi = _mm512_max_epi32(hi, x);
    }
    const int32_t first = _mm512_reduce_max_epi32(hi);
    float gs = route_key_score(first);
    if (top2) {
      const __mmask16 at_max = _mm512_cmpeq_epi32_mask(hi, _mm512_set1_epi32(first));
      const int32_t second = __builtin_popcount(at_max) >= 2
                                 ? first
                                 : _mm512_reduce_max_epi32(_mm512_max_epi32(lo, _mm512_mask_mov_epi32(hi, at_max, lo)));
      gs += route_key_score(second);
    }
    group_score[g] = gs;
  }
  // The group scores ranked like expert scores; absent lanes rank last.
  const __mmask16 present = tail_mask(n_group);
  const __m512i gk = _mm512_mask_mov_epi32(_mm512_set1_epi32(INT_MIN), present,
                                           key16(_mm512_maskz_loadu_ps(present, group_score)));
  const __mmask16 chosen = _mm512_cmplt_epi32_mask(ranks16(gk, present), _mm512_set1_epi32(int32_t(topk_group)));
  _mm_mask_storeu_epi8(group_ok, present, _mm_maskz_mov_epi8(chosen, _mm_set1_epi8(1)));
}

int64_t route_topk_avx512(const int32_t* key, int64_t e, int64_t per_group, const uint8_t* group_ok, int64_t k,
                          int32_t* cand_key, int32_t* cand_idx, int32_t* best) {
  const __m512i not_eligible = _mm512_set1_epi32(INT_MIN);
  // The vectors to look at, with their lanes: the tail, and none of the groups not chosen.
  // The list is built without branches (which groups are chosen changes from token to token
  // unpredictably), and the loops below then visit only the eligible vectors.
  const int64_t nv = (e + 15) / 16, per_v = group_ok ? per_group / 16 : nv;
  int32_t small_vec[64];
  __mmask16 small_lanes[64];
  int32_t* vec = nv <= 64 ? small_vec : new int32_t[size_t(nv)];
  __mmask16* lanes = nv <= 64 ? small_lanes : new __mmask16[size_t(nv)];
  int64_t nl = 0;
  for (int64_t g = 0, v = 0; v < nv; ++g)
    for (int64_t j = 0; j < per_v; ++j, ++v) {
      vec[nl] = int32_t(v);
      lanes[nl] = group_ok && !group_ok[g] ? __mmask16(0) : tail_mask(e - 16 * v);
      nl += lanes[nl] != 0;
    }
  // Each lane's best over the eligible vectors: 16 distinct experts, so (k <= 16) the k-th
  // largest of them is <= the k-th best expert, and every expert of the top k has a key >= it.
  int32_t bound = INT_MIN;
  if (k <= 16 && nl > 1) {  // one vector: all of it is ranked anyway
    __m512i col = not_eligible;
    for (int64_t l = 0; l < nl; ++l)
      col = _mm512_max_epi32(col, _mm512_mask_loadu_epi32(not_eligible, lanes[l], key + 16 * vec[l]));
    bound = kth_largest(col, k);
  }
  const __m512i bv = _mm512_set1_epi32(bound);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  // The candidates go to memory (for the caller, when there are more than 16) and, while they
  // fit, into two registers as well: reading them back from memory right after the stores of
  // various sizes and offsets stalled on store forwarding.
  int64_t count = 0;
  __m512i ck = not_eligible, ci = _mm512_setzero_si512();
  for (int64_t l = 0; l < nl; ++l) {
    const __m512i kv = _mm512_maskz_loadu_epi32(lanes[l], key + 16 * vec[l]);
    const __mmask16 hit = _mm512_mask_cmpge_epi32_mask(lanes[l], kv, bv);
    const __m512i hit_key = _mm512_maskz_compress_epi32(hit, kv);
    const __m512i hit_idx = _mm512_maskz_compress_epi32(hit, _mm512_add_epi32(lane, _mm512_set1_epi32(16 * vec[l])));
    _mm512_storeu_si512(cand_key + count, hit_key);
    _mm512_storeu_si512(cand_idx + count, hit_idx);
    if (count < 16) {  // lanes count.. take the hits, in order
      const __mmask16 from = __mmask16(0xFFFFu << count);
      const __m512i shift = _mm512_sub_epi32(lane, _mm512_set1_epi32(int32_t(count)));
      ck = _mm512_mask_permutexvar_epi32(ck, from, shift, hit_key);
      ci = _mm512_mask_permutexvar_epi32(ci, from, shift, hit_idx);
    }
    count += __builtin_popcount(hit);
  }
  if (vec != small_vec) delete[] vec, delete[] lanes;
  if (count > 16) return count;
  // Candidates are in increasing index, so lane order is index order for the ties; empty
  // lanes hold INT_MIN, below every real key, and rank after them.
  const __mmask16 present = tail_mask(count);
  ck = _mm512_mask_mov_epi32(not_eligible, present, ck);
  const __m512i rank = ranks16(ck, present);
  // Ranks of the present lanes are 0 .. count-1, each once: place every candidate at its rank
  // (plain stores; a masked vpscatterdd was slower here) and keep the first k.
  alignas(64) int32_t rank_of[16], idx_of[16], by_rank[16];
  _mm512_store_si512(rank_of, rank);
  _mm512_store_si512(idx_of, ci);
  for (int64_t j = 0; j < count; ++j) by_rank[rank_of[j]] = idx_of[j];
  for (int64_t j = 0; j < k; ++j) best[j] = by_rank[j];
  return count;
}

}  // namespace sol::kernels
