#pragma once
// Flash attention on CPU: forward (online softmax, the score matrix is never materialised) and
// backward (P recomputed from the saved log-sum-exp), FlashAttention-2 semantics.
//
// Shapes (D = head dim; the last dim of every tensor must be dense, other strides are free):
//   fixed length:  q [B, Sq, Hq, Dqk]   k [B, Skv, Hkv, Dqk]   v [B, Skv, Hkv, Dv]
//                  o [B, Sq, Hq, Dv]    lse f32 [B, Hq, Sq]
//   varlen:        q [total_q, Hq, Dqk] k [total_k, Hkv, Dqk]  v [total_k, Hkv, Dv]
//                  o [total_q, Hq, Dv]  lse f32 [Hq, total_q]
//                  with cu_seqlens_q / cu_seqlens_k i32 [B + 1]: sequence b owns tokens
//                  [cu[b], cu[b+1]); cu[0] = 0, non-decreasing, cu[B] = total. Sequences may be
//                  empty.
//   GQA / MQA: Hq % Hkv == 0; q head h reads kv head h / (Hq / Hkv).
//   Head dims: Dqk and Dv multiples of 8 up to 256 (the models' 64, 128, 192 = 128 nope + 64
//   rope, 256). dtypes: q, k, v, o (and do, dq, dk, dv) all f32 or all bf16; lse f32.
//
// Scores s_ij = scale * q_i . k_j, scale = 1/sqrt(Dqk) unless softmax_scale is given (> 0).
// Masks (per sequence, Sq queries against Skv keys, FlashAttention >= 2.1): query i is aligned
// with key i + Skv - Sq (bottom-right), and sees key j iff
//     j >= i + Skv - Sq - window_left    (when window_left >= 0)
//     j <= i + Skv - Sq + window_right   (when window_right >= 0; causal forces window_right = 0)
// so causal is window (-1, 0) and a sliding window of w keys back is (w, 0) with causal. -1 means
// unbounded on that side (flash-attn's window_size).
// A query row that sees no key (causal with Sq > Skv, a window beyond the keys, Skv = 0) gets
// o = 0 and lse = -inf; its gradients are 0.
// lse_i = log(sum_j exp(s_ij)) (natural log, scaled scores), as flash-attn returns it.
//
// NaN or Inf inputs propagate to the rows that see them. Within one 32-key panel a masked key's
// v is still multiplied by its zero probability, so a non-finite v at a masked key may also
// reach a row of the same tile (as in FlashAttention on GPUs).
//
// Paths: SOL_ISA=avx512 runs both GEMMs of each block on vdpbf16ps (bf16) or vfmadd231ps (f32)
// with f32 accumulation and P rounded to bf16 before the PV product (bf16 inputs); lower paths
// run the same blocked algorithm in plain C++ (slow). Results are bitwise identical for any
// thread count, forward and backward (see flash_attention_backward).
#include <cstdint>
#include <optional>

#include "sol/tensor.h"

namespace sol {

struct AttentionOptions {
  bool causal = false;
  int64_t window_left = -1;   // -1: unbounded
  int64_t window_right = -1;  // -1: unbounded; ignored (0) when causal
  std::optional<float> softmax_scale;  // default 1/sqrt(Dqk)
  const Tensor* cu_seqlens_q = nullptr;  // i32 [B + 1]: varlen (both or neither)
  const Tensor* cu_seqlens_k = nullptr;
};

// o and lse are written (lse may be an empty Tensor() when not wanted).
void flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                     const AttentionOptions& opt = {});

// Gradients of flash_attention: d_o has o's shape; dq, dk, dv have q's, k's and v's shapes and
// dtype (GQA: dk and dv sum over the q heads of each group). o and lse must be the forward's
// outputs for the same options. Deterministic: every gradient element is owned by one task that
// sums in a fixed order, independent of the thread count. dk and dv are produced by a pass over
// key blocks (each owns its 128 keys of one kv head and walks the group's q heads and query
// blocks in order); dq by a second pass over query blocks (each owns its rows and walks the key
// blocks in order), which recomputes S and dP rather than adding into dq from many threads.
//
// Both keep packed copies of K and V (the backward also of Q and dO) in a workspace owned by the
// calling thread, reused by later calls and grown to the largest one (about the size of the
// inputs).
void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                              const Tensor& lse, const Tensor& d_o, const Tensor& dq, const Tensor& dk,
                              const Tensor& dv, const AttentionOptions& opt = {});

}  // namespace sol
