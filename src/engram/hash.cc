// The Engram hash: configuration (multipliers and primes as DeepSeek draws them), validation,
// dispatch between the AVX-512 and scalar row kernels, and the plain reference.
#include <algorithm>
#include <limits>
#include <set>

#include "hw/kernel_select.h"
#include "kernels/engram.h"
#include "core/parallel.h"
#include "sol/engram.h"
#include "sol/error.h"
#include "sol/hw.h"

namespace sol::engram {

namespace {

uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t m) { return uint64_t((unsigned __int128)a * b % m); }

uint64_t pow_mod(uint64_t a, uint64_t e, uint64_t m) {
  uint64_t r = 1;
  for (a %= m; e; e >>= 1, a = mul_mod(a, a, m))
    if (e & 1) r = mul_mod(r, a, m);
  return r;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) by rejection (no modulo bias).
uint64_t uniform_below(uint64_t& state, uint64_t bound) {
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
  for (;;) {
    const uint64_t x = splitmix64(state);
    if (x < limit) return x % bound;
  }
}

void validate(const HashConfig& c) {
  check(c.max_ngram >= 2 && c.max_ngram <= detail::kMaxNgram, "engram hash", "max_ngram = ", c.max_ngram,
        " but must be in 2..", detail::kMaxNgram);
  check(c.heads_per_ngram >= 1 && c.heads() <= detail::kMaxHeads, "engram hash", "heads_per_ngram = ",
        c.heads_per_ngram, " gives ", c.heads(), " heads; at most ", detail::kMaxHeads, " are supported");
  check(int(c.multipliers.size()) == c.max_ngram, "engram hash", "multipliers has ", c.multipliers.size(),
        " entries but max_ngram = ", c.max_ngram);
  for (uint64_t m : c.multipliers) check(m % 2 == 1, "engram hash", "multiplier ", m, " is even; they must be odd");
  check(int(c.moduli.size()) == c.heads(), "engram hash", "moduli has ", c.moduli.size(), " entries but ",
        c.heads(), " heads need one each");
  for (int64_t p : c.moduli)
    check(p >= 2 && p < detail::kMaxModulus, "engram hash", "modulus ", p, " is outside 2..2^31-1 (hashes are i32)");
  check(c.pad_id >= 0 && c.pad_id <= std::numeric_limits<int32_t>::max(), "engram hash", "pad_id = ", c.pad_id,
        " is not a compressed token id");
}

detail::HashParams params_of(const HashConfig& c, bool with_offsets) {
  detail::HashParams p;
  p.max_ngram = c.max_ngram;
  p.heads_per_ngram = c.heads_per_ngram;
  p.pad_id = uint64_t(c.pad_id);
  for (int k = 0; k < c.max_ngram; ++k) p.multipliers[k] = c.multipliers[size_t(k)];
  // Per-head hashes need no offsets (and their tables may exceed i32 rows together).
  const std::vector<int64_t> offsets = with_offsets ? table_offsets(c) : std::vector<int64_t>(size_t(c.heads()), 0);
  for (int h = 0; h < c.heads(); ++h) {
    p.moduli[h] = uint64_t(c.moduli[size_t(h)]);
    p.inverse_moduli[h] = 1.0 / double(c.moduli[size_t(h)]);
    p.offsets[h] = uint64_t(offsets[size_t(h)]);
  }
  return p;
}

void check_tensors(const Tensor& ids, const Tensor& out, const HashConfig& c) {
  check(ids.dtype() == DType::i32 && ids.ndim() == 2 && ids.is_contiguous(), "engram hash",
        "ids must be a contiguous [B, T] i32 tensor, got ", describe_text(ids));
  check(out.dtype() == DType::i32 && out.ndim() == 3 && out.is_contiguous(), "engram hash",
        "out must be a contiguous [B, T, heads] i32 tensor, got ", describe_text(out));
  check(out.shape(0) == ids.shape(0) && out.shape(1) == ids.shape(1) && out.shape(2) == c.heads(), "engram hash",
        "out is ", shape_text(out), " but ids ", shape_text(ids), " with ", c.heads(), " heads need [",
        ids.shape(0), ", ", ids.shape(1), ", ", c.heads(), "]");
  const int32_t* x = ids.data_as<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    if (x[i] < 0) fail("engram hash", "ids[", i / ids.shape(1), ", ", i % ids.shape(1), "] = ", x[i], " is negative");
}

}  // namespace

bool is_prime(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t p : {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37})
    if (n % p == 0) return n == p;
  uint64_t d = n - 1;
  int s = 0;
  for (; d % 2 == 0; d /= 2) ++s;
  // These twelve bases decide every n < 2^64 (Sorenson and Webster).
  for (uint64_t a : {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37}) {
    uint64_t x = pow_mod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int r = 1; r < s && composite; ++r) {
      x = mul_mod(x, x, n);
      composite = x != n - 1;
    }
    if (composite) return false;
  }
  return true;
}

std::vector<HashConfig> make_hash_configs(std::span<const int64_t> vocab_per_ngram, int max_ngram, int heads_per_ngram,
                                          std::span<const int> layer_ids, int64_t compressed_vocab, uint64_t seed,
                                          int64_t pad_id) {
  check(max_ngram >= 2 && int(vocab_per_ngram.size()) == max_ngram - 1, "engram config", "vocab_per_ngram has ",
        vocab_per_ngram.size(), " entries but orders 2..", max_ngram, " need ", max_ngram - 1);
  check(compressed_vocab >= 1, "engram config", "compressed_vocab = ", compressed_vocab, " but must be >= 1");
  const uint64_t half_bound = std::max<uint64_t>(1, uint64_t(std::numeric_limits<int64_t>::max() / compressed_vocab) / 2);
  std::set<int64_t> taken;
  std::vector<HashConfig> configs;
  for (int layer : layer_ids) {
    HashConfig c;
    c.max_ngram = max_ngram;
    c.heads_per_ngram = heads_per_ngram;
    c.pad_id = pad_id;
    uint64_t state = seed + 10007ull * uint64_t(layer);
    for (int k = 0; k < max_ngram; ++k) c.multipliers.push_back(uniform_below(state, half_bound) * 2 + 1);
    for (int n = 2; n <= max_ngram; ++n) {
      int64_t start = vocab_per_ngram[size_t(n - 2)] - 1;
      for (int j = 0; j < heads_per_ngram; ++j) {
        int64_t candidate = start + 1;
        while (!is_prime(uint64_t(candidate)) || taken.count(candidate)) ++candidate;
        taken.insert(candidate);
        c.moduli.push_back(candidate);
        start = candidate;
      }
    }
    validate(c);
    configs.push_back(std::move(c));
  }
  return configs;
}

std::vector<int64_t> table_offsets(const HashConfig& c) {
  std::vector<int64_t> offsets;
  int64_t sum = 0;
  for (int64_t p : c.moduli) {
    offsets.push_back(sum);
    sum += p;
    check(sum <= std::numeric_limits<int32_t>::max(), "engram hash", "the heads' tables hold ", sum,
          "+ rows, beyond the i32 row index");
  }
  return offsets;
}

int64_t total_rows(const HashConfig& c) {
  const std::vector<int64_t> offsets = table_offsets(c);
  return offsets.empty() ? 0 : offsets.back() + c.moduli.back();
}

void ngram_hash(const Tensor& ids, const Tensor& out, const HashConfig& config, bool with_offsets) {
  validate(config);
  check_tensors(ids, out, config);
  const detail::HashParams p = params_of(config, with_offsets);
  const auto kernel = select_kernels(kernels::engram_kernel_table(), "engram_hash").hash_row;
  const int64_t rows = ids.shape(0), tokens = ids.shape(1), heads = config.heads();
  const int32_t* x = ids.data_as<int32_t>();
  int32_t* y = out.data_as<int32_t>();
  // Threads split the flattened (row, token) range; a piece crossing rows is cut at each row.
  parallel_ranges(rows * tokens, 64, [&](int64_t begin, int64_t end) {
    while (begin < end) {
      const int64_t row = begin / tokens, t0 = begin % tokens, t1 = std::min(tokens, t0 + (end - begin));
      kernel(p, x + row * tokens, t0, t1, y + row * tokens * heads);
      begin += t1 - t0;
    }
  });
}

// One token at a time, straight from the definition in engram.h.
void ngram_hash_reference(const Tensor& ids, const Tensor& out, const HashConfig& c, bool with_offsets) {
  validate(c);
  check_tensors(ids, out, c);
  const std::vector<int64_t> offsets = with_offsets ? table_offsets(c) : std::vector<int64_t>(size_t(c.heads()), 0);
  const int64_t rows = ids.shape(0), tokens = ids.shape(1);
  const int32_t* x = ids.data_as<int32_t>();
  int32_t* y = out.data_as<int32_t>();
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t t = 0; t < tokens; ++t) {
      int h = 0;
      for (int n = 2; n <= c.max_ngram; ++n) {
        uint64_t mix = 0;
        for (int k = 0; k < n; ++k) {
          const uint64_t token = t - k >= 0 ? uint64_t(x[b * tokens + t - k]) : uint64_t(c.pad_id);
          mix ^= token * c.multipliers[size_t(k)];
        }
        for (int j = 0; j < c.heads_per_ngram; ++j, ++h) {
          const uint64_t hash = mix % uint64_t(c.moduli[size_t(h)]);
          y[(b * tokens + t) * c.heads() + h] = int32_t(hash + uint64_t(offsets[size_t(h)]));
        }
      }
    }
}

}  // namespace sol::engram
