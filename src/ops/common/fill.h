#pragma once
// Test and benchmark inputs: deterministic pseudo-random fills of any dtype, and poison.
#include <cstdint>

#include "sol/tensor.h"

namespace sol {

// Values drawn uniformly from [-scale, scale] (integers: the full range clipped to scale),
// converted to t with Sol's exact conversions (bf16 by way of f32). Same seed, same bits.
void fill_random(const Tensor& t, uint64_t seed, double scale = 4.0);
// Like fill_random, then sprinkles special values (±0, ±inf, NaN, subnormals, the format's
// largest finite values) over about one element in `every`.
void fill_random_with_specials(const Tensor& t, uint64_t seed, int every = 16);
// Every byte 0xFF: NaN for every float dtype, -1 for integers — never a plausible result.
void poison(const Tensor& t);
// Contiguous tensors only: throws otherwise.

}  // namespace sol
