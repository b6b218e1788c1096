#pragma once
// Sampling next tokens from logits, reproducibly.
//
// Per row r of logits [B, V] (f32 or bf16): probabilities softmax(logits / temperature) in
// double; candidates ordered by probability, ties to the lower id; keep the top_k best (0: all),
// then the shortest prefix whose probability reaches top_p (at least one); draw u in [0, 1)
// from a counter-based generator of (seed, r) and return the first candidate whose cumulative
// probability exceeds u times the kept total. temperature 0 is greedy (the top candidate).
// A NaN logit counts as -inf (never drawn); a row with no finite logit is an error (ids are
// written for the other rows, -1 for that one), as are
// temperature < 0, top_p outside (0, 1] and top_k < 0. ids: [B] i32.
#include <cstdint>

#include "sol/tensor.h"

namespace sol {

struct SamplingOptions {
  float temperature = 1.0f;
  int64_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
};

void sample(const Tensor& logits, const Tensor& ids, const SamplingOptions& opt = {});

// The uniform draw of row r, exposed so references and tests can reproduce it.
double sampling_uniform(uint64_t seed, int64_t row);

}  // namespace sol
