#pragma once
// Row kernels of the Engram n-gram hash (include/sol/engram.h has the definition). One call
// hashes tokens [begin, end) of one row of compressed ids; the kernels know no shapes beyond
// that and never allocate.
#include <cstdint>

namespace sol::engram::detail {

inline constexpr int kMaxNgram = 8;
inline constexpr int kMaxHeads = 64;
// Hashes are i32; the vector path's two-step reduction would stay exact up to 2^40.
inline constexpr int64_t kMaxModulus = int64_t(1) << 31;

struct HashParams {
  int max_ngram = 0, heads_per_ngram = 0;
  uint64_t multipliers[kMaxNgram] = {};
  uint64_t moduli[kMaxHeads] = {};
  double inverse_moduli[kMaxHeads] = {};  // 1.0 / moduli, rounded to nearest
  uint64_t offsets[kMaxHeads] = {};       // added to each head's hash (zeros: per-head hashes)
  uint64_t pad_id = 0;
  int heads() const { return (max_ngram - 1) * heads_per_ngram; }
};

// ids: the whole row (tokens before `begin` are read as history); out: [tokens, heads] of the
// row, written for tokens [begin, end).
void hash_row_scalar(const HashParams& p, const int32_t* ids, int64_t begin, int64_t end, int32_t* out);
void hash_row_avx512(const HashParams& p, const int32_t* ids, int64_t begin, int64_t end, int32_t* out);

// One token, any position: the scalar path and the vector path's edges.
inline void hash_token(const HashParams& p, const int32_t* ids, int64_t t, int32_t* out_token) {
  uint64_t mix = 0;
  int head = 0;
  for (int k = 0; k < p.max_ngram; ++k) {
    const uint64_t token = t >= k ? uint64_t(ids[t - k]) : p.pad_id;
    mix ^= token * p.multipliers[k];
    if (k == 0) continue;
    for (int j = 0; j < p.heads_per_ngram; ++j, ++head)
      out_token[head] = int32_t(mix % p.moduli[head] + p.offsets[head]);
  }
}

}  // namespace sol::engram::detail
