#pragma once
// The plain attention reference: every score, softmax and product in fp64 from the exact input
// values, with the mask written out literally. One head of one sequence at a time (its rows
// gathered into fp64 matrices first). Slow; for checks and tests only.
#include <cstdint>
#include <vector>

#include "sol/attention.h"
#include "sol/tensor.h"

namespace sol::reference {

// Inputs as flash_attention takes them (fixed length or varlen).
struct AttentionInputs {
  const Tensor *q, *k, *v;
  AttentionOptions opt;
  int64_t batch() const;
  int64_t sq(int64_t b) const;
  int64_t skv(int64_t b) const;
  int64_t hq() const { return q->shape(-2); }
  int64_t hkv() const { return k->shape(-2); }
  int64_t dqk() const { return q->shape(-1); }
  int64_t dv() const { return v->shape(-1); }
  double scale() const;
  bool sees(int64_t b, int64_t i, int64_t j) const;  // query i sees key j in sequence b
  // Row of token `token` of sequence b in the batched ([B, S, ...]: b * S + token) or packed
  // (varlen: cu[b] + token) token order; kv: k/v side.
  int64_t token_row(bool kv, int64_t b, int64_t token) const;
  // The [tokens x D] matrix of one head of sequence b of t (q-, k- or v-shaped), in fp64.
  std::vector<double> head(const Tensor& t, bool kv, int64_t b, int64_t head) const;
};

// Output rows `rows` of head h of sequence b: o [rows.size() x dv], lse [rows.size()]
// (-inf and a zero row where the query sees no key).
void attention_rows(const AttentionInputs& in, int64_t b, int64_t h, const std::vector<int64_t>& rows,
                    std::vector<double>& o, std::vector<double>& lse);

// Whole outputs into contiguous f32 tensors shaped like o and lse.
void attention_forward(const AttentionInputs& in, const Tensor& o, const Tensor& lse);

// Gradients of sum(o * d_o) into contiguous f32 tensors shaped like q, k, v.
void attention_backward(const AttentionInputs& in, const Tensor& d_o, const Tensor& dq, const Tensor& dk,
                        const Tensor& dv);

// Rows `rows` of dq for head h of sequence b (dq needs only its own query row), [rows x dqk].
void attention_dq_rows(const AttentionInputs& in, const Tensor& d_o, int64_t b, int64_t h,
                       const std::vector<int64_t>& rows, std::vector<double>& dq);

}  // namespace sol::reference
