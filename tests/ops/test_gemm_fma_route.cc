// GEMM's FMA variant of the avx512 level (bf16 products as f32 FMAs, kPrefersFmaBf16): it sums
// every pair as the avx2 level does (first value, then second, one FMA each, in the same
// blocks, chunks and scale groups) with the same epilogue, so the two levels give the same
// bits. That pins the variant's A layout, widening, pair order, fp8 promotion and two-panel
// decode to an independent implementation, on any AVX-512 machine (the trait is forced).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hw/kernel_select.h"
#include "ops/gemm_paths.h"
#include "sol/gemm.h"
#include "sol/hw.h"
#include "sol/threads.h"

namespace sol {
namespace {

struct Case {
  int64_t m, n, k;
  const char* kind;  // "bf16", "bf16xfp8" (weight-only), "fp8" (both, A scaled per token)
  bool packed;
  Layout layout;
};

std::string describe(const Case& c, bool bf16_out, int threads) {
  return std::string(c.kind) + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" +
         std::to_string(c.k) + (c.packed ? " packed" : c.layout == Layout::nt ? " nt" : " nn") +
         (bf16_out ? " -> bf16" : " -> f32") + " threads=" + std::to_string(threads);
}

// Random operands (bf16 of both signs over a few binades, e4m3 codes without NaN), D poisoned,
// C and bias set: D = silu(0.5 * A * B + 0.75 * C + bias).
class Operands {
 public:
  Operands(const Case& c, bool bf16_out, uint64_t seed) : c_(c), bf16_out_(bf16_out) {
    std::mt19937_64 rng(seed);
    const bool fp8_a = std::string(c.kind) == "fp8", fp8_b = fp8_a || std::string(c.kind) == "bf16xfp8";
    a_.resize(size_t(c.m * c.k * 2));
    b_.resize(size_t(c.n * c.k * 2));
    for (int64_t i = 0; i < c.m * c.k; ++i) {
      if (fp8_a) a_[size_t(i)] = uint8_t(rng() % 0x7F) | uint8_t(rng() & 0x80);
      else put_bf16(a_, i, rng());
    }
    for (int64_t i = 0; i < c.n * c.k; ++i) {
      if (fp8_b) b_[size_t(i)] = uint8_t(rng() % 0x7F) | uint8_t(rng() & 0x80);
      else put_bf16(b_, i, rng());
    }
    const int64_t groups = std::max<int64_t>(c.k / 128, 1);
    sa_.resize(size_t(c.m * groups));
    sb_.resize(size_t((c.n + 127) / 128 * groups));
    for (float& s : sa_) s = float(1 + rng() % 9) / 64;
    for (float& s : sb_) s = float(1 + rng() % 9) / 32;
    bias_.resize(size_t(c.n));
    for (float& v : bias_) v = float(int(rng() % 200) - 100) / 16;
    c_bits_.resize(size_t(c.m * c.n * 4));
    for (int64_t i = 0; i < c.m * c.n; ++i) {
      if (bf16_out) put_bf16(c_bits_, i, rng());
      else reinterpret_cast<float*>(c_bits_.data())[i] = float(int(rng() % 64) - 32) / 8;
    }
    a_type_ = fp8_a ? DType::f8e4m3 : DType::bf16;
    b_type_ = fp8_b ? DType::f8e4m3 : DType::bf16;
  }

  std::vector<uint8_t> run() const {
    const int64_t groups = std::max<int64_t>(c_.k / 128, 1);
    const bool nt = c_.packed || c_.layout == Layout::nt;
    Tensor a(const_cast<uint8_t*>(a_.data()), a_type_, {c_.m, c_.k});
    Tensor b(const_cast<uint8_t*>(b_.data()), b_type_, nt ? std::vector<int64_t>{c_.n, c_.k} : std::vector<int64_t>{c_.k, c_.n});
    Tensor sa(const_cast<float*>(sa_.data()), DType::f32, {c_.m, groups});
    Tensor sb(const_cast<float*>(sb_.data()), DType::f32, {(c_.n + 127) / 128, groups});
    Tensor bias(const_cast<float*>(bias_.data()), DType::f32, {c_.n});
    const DType out = bf16_out_ ? DType::bf16 : DType::f32;
    Tensor cm(const_cast<uint8_t*>(c_bits_.data()), out, {c_.m, c_.n});
    std::vector<uint8_t> d(size_t(c_.m * c_.n * 4), 0xCD);
    Tensor dt(d.data(), out, {c_.m, c_.n});
    GemmOptions o;
    o.layout = nt ? Layout::nt : Layout::nn;
    o.alpha = 0.5f;
    o.beta = 0.75f;
    o.c = &cm;
    o.bias = &bias;
    o.activation = Activation::silu;
    if (a_type_ == DType::f8e4m3) o.a_scales = &sa;
    if (c_.packed) {
      const PackedMatrix p = pack_b(b, Layout::nt, b_type_ == DType::f8e4m3 ? &sb : nullptr);
      gemm(a, p, dt, o);
    } else {
      if (b_type_ == DType::f8e4m3) o.b_scales = &sb;
      gemm(a, b, dt, o);
    }
    d.resize(size_t(c_.m * c_.n * int64_t(dtype_size(out))));
    return d;
  }

 private:
  // A bf16 in [2^-3, 2^4) of either sign: products and sums stay normal.
  static void put_bf16(std::vector<uint8_t>& v, int64_t i, uint64_t r) {
    const uint16_t bits = uint16_t(((0x7C + r % 7) << 7) | ((r >> 8) & 0x7F) | ((r >> 20) & 1) << 15);
    std::memcpy(&v[size_t(i) * 2], &bits, 2);
  }
  Case c_;
  bool bf16_out_;
  std::vector<uint8_t> a_, b_, c_bits_;
  std::vector<float> sa_, sb_, bias_;
  DType a_type_ = DType::bf16, b_type_ = DType::bf16;
};

// The avx512 level with the FMA variant, whatever this core prefers.
class FmaVariant {
 public:
  FmaVariant() {
    if ((kernel_needs_met() & kPrefersFmaBf16) == 0) other_.emplace();
    setenv("SOL_ISA", "avx512", 1);
  }
  ~FmaVariant() { unsetenv("SOL_ISA"); }

 private:
  std::optional<testing_paths::OtherBf16Route> other_;
};

TEST(GemmFmaRoute, GivesTheAvx2LevelsBits) {
  if (cpu_features().best_isa < Isa::avx512) GTEST_SKIP() << "no AVX-512";
  // Decode 1-4 rows (the two-panel kernels over a packed B), 5-16 (one or two A panels; fp8
  // keeps a widened panel for the second), blocked M with a partial panel; K odd, one group,
  // past a decode chunk (4096 steps), past a KC block (2048) with a tail.
  const Case cases[] = {
      {1, 70, 384, "bf16", true, Layout::nt},        {3, 100, 256, "bf16xfp8", true, Layout::nt},
      {4, 64, 1152, "fp8", true, Layout::nt},        {5, 33, 1152, "bf16xfp8", false, Layout::nt},
      {13, 300, 8320, "bf16", true, Layout::nt},     {16, 64, 256, "fp8", false, Layout::nt},
      {16, 97, 640, "bf16xfp8", true, Layout::nt},   {37, 100, 640, "bf16", false, Layout::nn},
      {37, 45, 129, "bf16", false, Layout::nt},      {200, 130, 2100, "bf16", true, Layout::nt},
      {29, 160, 2304, "fp8", false, Layout::nt},     {40, 96, 2304, "bf16xfp8", true, Layout::nt},
  };
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& c : cases)
      for (bool bf16_out : {false, true}) {
        const Operands o(c, bf16_out, uint64_t(c.m * 1009 + c.n * 31 + c.k + bf16_out));
        std::vector<uint8_t> fma, avx2;
        {
          FmaVariant v;
          fma = o.run();
        }
        setenv("SOL_ISA", "avx2", 1);
        avx2 = o.run();
        unsetenv("SOL_ISA");
        EXPECT_EQ(std::memcmp(fma.data(), avx2.data(), fma.size()), 0) << describe(c, bf16_out, threads);
      }
  }
  set_num_threads(0);
}

}  // namespace
}  // namespace sol
