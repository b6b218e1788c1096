#pragma once
// Plain fp64 reference of MLA decode (sol/mla.h semantics), for checks and tests: every query
// row on its own, the full score vector, then the softmax and the weighted sum of values.
#include <cstdint>
#include <vector>

#include "sol/tensor.h"

namespace sol::reference {

// Value of latent dim d (< 576) of cache position `pos` of sequence b, either cache format.
double mla_cache_value(const Tensor& kv_cache, const Tensor& block_table, int64_t b, int64_t pos, int d);

// The cached rows of sequence b, dequantized: [cache_seqlens[b]][576].
std::vector<double> mla_sequence_cache(const Tensor& kv_cache, const Tensor& block_table, const Tensor& cache_seqlens,
                                       int64_t b);

// One query row (b, i, h) against its sequence's rows (from mla_sequence_cache): out[0..512) and
// lse (natural log); a row that sees nothing gets out = 0, lse = -inf.
void mla_decode_row(const Tensor& q, const std::vector<double>& cache, double softmax_scale, bool causal, int64_t b,
                    int64_t i, int64_t h, double* out, double* lse);

// Every row, into out [B, s_q, h_q, 512] (any float dtype) and lse [B, h_q, s_q] f32.
void mla_decode(const Tensor& q, const Tensor& kv_cache, const Tensor& block_table, const Tensor& cache_seqlens,
                double softmax_scale, bool causal, const Tensor& out, const Tensor& lse);

}  // namespace sol::reference
