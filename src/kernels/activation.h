#pragma once
// Row primitives of the activations, per ISA (internal). f32 or bf16 elements, f32 arithmetic.
#include <cstdint>

#include "sol/dtype.h"

namespace sol::kernels {

// stream: y is not read again soon (the whole output is larger than the cache), so whole
// lines may be written with non-temporal stores; a hint, the values are the same either way.

// y[i] = round_y(silu(g[i]) * u[i]).
void silu_mul_scalar(const void* g, const void* u, DType t, void* y, DType yt, int64_t n, bool stream);
void silu_mul_avx512(const void* g, const void* u, DType t, void* y, DType yt, int64_t n, bool stream);

// y[i] = round_y(gelu(x[i])), tanh form or erf form.
void gelu_scalar(const void* x, DType t, void* y, DType yt, int64_t n, bool erf_form, bool stream);
void gelu_avx512(const void* x, DType t, void* y, DType yt, int64_t n, bool erf_form, bool stream);

}  // namespace sol::kernels
