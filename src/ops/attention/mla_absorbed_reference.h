#pragma once
// Plain fp64 reference of MLA decode with absorbed up-projections (sol/mla_absorbed.h), from
// the unpacked weights and with no intermediate rounding: each (sequence, head) on its own.
#include "sol/tensor.h"

namespace sol::reference {

// q [B, H, Dq], w_uk [H, Dk, Dq] (head h's map stored as [n, k]), latent [B, L, Dk],
// w_uv [H, Dv, Dl] (Dl <= Dk), all bf16 or f32 with dense last dimensions; writes
// out [B, H, Dv] f32 (contiguous). L = 0 gives zeros.
void mla_decode_absorbed(const Tensor& q, const Tensor& w_uk, const Tensor& latent, const Tensor& w_uv,
                         double softmax_scale, const Tensor& out);

}  // namespace sol::reference
