#pragma once
// MLA decode with the up-projections absorbed, over a dense latent cache of any widths: one
// layer's attention for one new token per sequence, from its query to the per-head values.
//
//   q       [B, H, Dq]   bf16 or f32   per head: [q_nope | q_rope], rope already applied
//   w_uk    H packed B matrices, k = Dq, n = Dk: head h's q -> latent map (W_UK^T with an
//           identity block carrying q_rope into the rope columns, as the caller builds it)
//   latent  [B, L, Dk]   q's dtype      the cached rows [c_kv | k_rope] of each sequence
//   w_uv    H packed B matrices, k = Dl (<= Dk), n = Dv: head h's latent -> value map (W_UV^T)
//   out     [B, H, Dv]   q's dtype      written
//
// Per sequence b and head h (c_kv = the first Dl columns of latent[b]):
//   q_lat  = q[b, h] . w_uk[h]                                  rounded to q's dtype
//   p      = softmax(softmax_scale * q_lat . latent[b]^T)       scores in f32, p rounded to q's dtype
//   o_lat  = p . c_kv                                           rounded to q's dtype
//   out[b, h] = o_lat . w_uv[h]
// Every product is Sol's gemm (f32 accumulation, fixed summation order: the same bits for any
// thread count); the result equals composing gemm and softmax on these operands step by step.
// Unlike mla_decode_with_kvcache (FlashMLA's fixed 576/512 widths over 64-token pages), the
// widths are the model's (DeepSeek-V3: Dq 192, Dk 576, Dl 512, Dv 128) and each sequence's rows
// are one strided block, as a per-layer cache buffer holds them; every sequence has L rows.
//
// Strides: any for the leading dimensions of q, latent and out; the last dimension dense.
// L = 0 gives out = 0 (a row that sees nothing). NaN or inf in q or in a row of latent makes the
// whole head's (or sequence's) output NaN, as the formula does. Scratch memory is kept per
// calling thread between calls (grown on demand).
#include <span>

#include "sol/gemm.h"
#include "sol/tensor.h"

namespace sol {

void mla_decode_absorbed(const Tensor& q, std::span<const PackedMatrix> w_uk, const Tensor& latent,
                         std::span<const PackedMatrix> w_uv, float softmax_scale, const Tensor& out);

}  // namespace sol
