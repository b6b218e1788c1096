#pragma once
// Row primitives of the activations, per ISA (internal). f32 or bf16 elements, f32 arithmetic.
#include <cstdint>

#include "sol/dtype.h"

namespace sol::kernels {

// stream: y is not read again soon (the whole output is larger than the cache), so whole
// lines may be written with non-temporal stores; a hint, the values are the same either way.

// y[i] = round_y(silu(g[i]) * u[i]). next_u: the u row of the next call, or null: a kernel that
// prefetches ahead turns to it when g's row runs out (the prefetches past the end of u already
// reach the next row's g in gate_up's [g | u] layout).
void silu_mul_scalar(const void* g, const void* u, DType t, void* y, DType yt, int64_t n, bool stream,
                     const void* next_u);
void silu_mul_avx512(const void* g, const void* u, DType t, void* y, DType yt, int64_t n, bool stream,
                     const void* next_u);

// y[i] = round_y(gelu(x[i])), tanh form or erf form.
void gelu_scalar(const void* x, DType t, void* y, DType yt, int64_t n, bool erf_form, bool stream);
void gelu_avx512(const void* x, DType t, void* y, DType yt, int64_t n, bool erf_form, bool stream);

}  // namespace sol::kernels
