#include <algorithm>
#include <cmath>
#include <numbers>

#include "sol/error.h"
#include "sol/rope.h"

namespace sol {

namespace {

double yarn_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

// The dimension index at which a frequency turns `rotations` times over the original context.
double correction_dim(double rotations, const RopeConfig& c) {
  return double(c.rope_dim) * std::log(c.original_max_position / (rotations * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(c.theta));
}

void validate(const RopeConfig& c) {
  check(c.rope_dim >= 2 && c.rope_dim % 2 == 0 && c.rope_dim <= 512, "rope", "rope_dim = ", c.rope_dim,
        " but must be even and in [2, 512]");
  check(c.theta > 1.0 && std::isfinite(c.theta), "rope", "theta = ", c.theta, " but must be > 1");
  check(c.factor >= 1.0 && std::isfinite(c.factor), "rope", "factor = ", c.factor, " but must be >= 1");
  if (c.factor > 1.0) {
    check(c.original_max_position > 0, "rope", "original_max_position = ", c.original_max_position, " but must be > 0");
    check(c.beta_fast > c.beta_slow && c.beta_slow > 0, "rope", "beta_fast = ", c.beta_fast, ", beta_slow = ",
          c.beta_slow, " but YaRN needs beta_fast > beta_slow > 0");
  }
}

}  // namespace

RopeConfig deepseek_v3_rope() {
  RopeConfig c;
  c.rope_dim = 64;
  c.theta = 10000.0;
  c.factor = 40.0;
  c.original_max_position = 4096;
  c.beta_fast = 32;
  c.beta_slow = 1;
  c.mscale = 1.0;
  c.mscale_all_dim = 1.0;
  c.layout = RopeLayout::interleaved;
  return c;
}

std::vector<double> rope_inv_freq(const RopeConfig& c) {
  validate(c);
  const int64_t half = c.rope_dim / 2;
  std::vector<double> f(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) f[size_t(i)] = std::pow(c.theta, -2.0 * double(i) / double(c.rope_dim));
  if (c.factor <= 1.0) return f;
  double low = std::floor(correction_dim(c.beta_fast, c)), high = std::ceil(correction_dim(c.beta_slow, c));
  low = std::max(low, 0.0);
  high = std::min(high, double(c.rope_dim - 1));
  if (high == low) high += 0.001;  // a ramp of zero width would divide by zero
  for (int64_t i = 0; i < half; ++i) {
    double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);  // 0: keep original, 1: interpolate
    double keep = 1.0 - ramp;
    f[size_t(i)] = f[size_t(i)] / c.factor * ramp + f[size_t(i)] * keep;
  }
  return f;
}

double rope_attention_factor(const RopeConfig& c) {
  return yarn_mscale(c.factor, c.mscale) / yarn_mscale(c.factor, c.mscale_all_dim);
}

RopeTable::RopeTable(const RopeConfig& c, int64_t max_positions) : config_(c), max_positions_(max_positions) {
  check(max_positions >= 1, "RopeTable", "max_positions = ", max_positions, " but must be >= 1");
  const std::vector<double> f = rope_inv_freq(c);
  const double m = rope_attention_factor(c);
  // Finite tables are part of the kernels' contract: the AVX2 rounding of rotated bf16 pairs is
  // exact only for NaNs that come from the slice itself (kernels/x86/avx2/pair_avx2.h).
  check(std::isfinite(float(m)), "RopeTable", "the attention factor (mscale = ", c.mscale, ", mscale_all_dim = ",
        c.mscale_all_dim, ", factor = ", c.factor, ") is ", m, " but must be finite in f32");
  const int64_t d = c.rope_dim, half = d / 2;
  cos_.resize(size_t(max_positions * d));
  sin_.resize(size_t(max_positions * d));
  for (int64_t p = 0; p < max_positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = double(p) * f[size_t(i)];
      const float cs = float(std::cos(a) * m), sn = float(std::sin(a) * m);
      // The element that is a pair's first gets -sin (a cos - b sin), its partner +sin.
      const int64_t first = c.layout == RopeLayout::interleaved ? 2 * i : i;
      const int64_t second = c.layout == RopeLayout::interleaved ? 2 * i + 1 : i + half;
      cos_[size_t(p * d + first)] = cs;
      cos_[size_t(p * d + second)] = cs;
      sin_[size_t(p * d + first)] = -sn;
      sin_[size_t(p * d + second)] = sn;
    }
}

}  // namespace sol
