#pragma once
// Rotary position embedding, applied in place to the rope slice of every head.
//
// Frequencies: inv_freq[i] = theta^(-2i / rope_dim), i < rope_dim / 2. With YaRN (factor > 1,
// DeepSeek-V3: factor 40, original_max_position 4096, beta_fast 32, beta_slow 1, mscale 1,
// mscale_all_dim 1) each frequency blends its original and its interpolated (divided by
// factor) value: dimensions that turn fewer than beta_slow times over the original context keep
// the interpolated frequency, those that turn more than beta_fast times keep the original, a
// linear ramp in between; cos and sin are multiplied by
//   m(factor, mscale) / m(factor, mscale_all_dim),  m(s, k) = 0.1 k ln(s) + 1 (1 when s <= 1).
// YaRN is applied whenever factor > 1 (as Hugging Face's DeepseekV3YarnRotaryEmbedding does;
// DeepSeek's own inference code switches it on only past the original context).
// Layouts: interleaved (GPT-J; pairs (x[2i], x[2i+1]), DeepSeek's reference code) and half
// (NeoX; pairs (x[i], x[i + d/2]), Hugging Face). A pair (a, b) at angle p * inv_freq[i]
// becomes (a cos - b sin, a sin + b cos), computed in f32 from an f32 table.
#include <cstdint>
#include <vector>

#include "sol/tensor.h"

namespace sol {

enum class RopeLayout { interleaved, half };

struct RopeConfig {
  int64_t rope_dim = 64;
  double theta = 10000.0;
  double factor = 1.0;  // YaRN scaling; 1 = plain RoPE
  double original_max_position = 4096;
  double beta_fast = 32, beta_slow = 1;
  double mscale = 1.0, mscale_all_dim = 0.0;
  RopeLayout layout = RopeLayout::interleaved;
};

RopeConfig deepseek_v3_rope();  // rope_dim 64, YaRN as in DeepSeek-V3's config, interleaved

// The per-frequency angles (double) — exposed for tests and references.
std::vector<double> rope_inv_freq(const RopeConfig& c);
double rope_attention_factor(const RopeConfig& c);  // the cos/sin multiplier above

// cos/sin for positions [0, max_positions), laid out per position in the order the kernel
// applies them (both layouts), built once (an object with a clear owner, like packed weights).
class RopeTable {
 public:
  RopeTable(const RopeConfig& c, int64_t max_positions);
  const RopeConfig& config() const { return config_; }
  int64_t max_positions() const { return max_positions_; }
  const float* cos_row(int64_t p) const { return cos_.data() + p * config_.rope_dim; }
  const float* sin_row(int64_t p) const { return sin_.data() + p * config_.rope_dim; }

 private:
  RopeConfig config_;
  int64_t max_positions_;
  std::vector<float> cos_, sin_;  // sin_ carries the sign: -sin on a pair's first element
};

// x [T, heads, head_dim] f32 or bf16, rotated in place on dims [rope_offset, rope_offset +
// rope_dim) of every head (MLA: the 64 rope dims after 128 nope dims); positions [T] i32.
void rope(const Tensor& x, const Tensor& positions, const RopeTable& table, int64_t rope_offset = 0);

}  // namespace sol
