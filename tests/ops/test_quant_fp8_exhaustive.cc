// Every finite bf16 input through the FP8 quantizers, against the separate reference bit for bit:
// for each of ~90 group maxima (exponents swept from the 1e-4 floor to bf16's largest finite
// value, powers of two times 448 whose multipliers make every product exact and so reach every
// e4m3 tie, and the neighbours of 448 * 2^6, where the multiplier crosses 2^-6), groups of 128
// whose first element is +-amax and whose other 127 take every bf16 value of magnitude <= amax
// in turn (zeros, subnormals, results below e4m3's normal range, exact midpoints, 448 itself).
// Per-token (f32 and UE8M0 scales), per-block 128 x 128, and rmsnorm fused with the per-token
// quantizer (x = 1 and eps = 0 make the normalised row equal to the weight exactly, so the
// weight carries the sweep). An encoder that rounds, saturates, flags or falls back differently
// on any one of these inputs fails here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/isa_paths.h"
#include "ops/quant/reference.h"
#include "sol/norm.h"
#include "sol/quant.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_paths::for_each_isa;

float bf16_value(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The maxima: bf16 bit patterns.
std::vector<uint16_t> group_maxima() {
  std::vector<uint16_t> a;
  for (int e = 1; e < 255; e += 7)  // every 7th exponent, two mantissas each
    for (uint16_t m : {0x00, 0x5B}) a.push_back(uint16_t(e << 7 | m));
  for (int k = -24; k <= 24; k += 3) {  // 448 * 2^k: power-of-two multipliers
    const float v = std::ldexp(448.0f, k);
    uint32_t u;
    std::memcpy(&u, &v, 4);
    a.push_back(uint16_t(u >> 16));
  }
  a.push_back(0x46E0);                        // 28672 = 448 * 2^6: multiplier exactly 2^-6
  a.push_back(0x46DF), a.push_back(0x46E1);   // its neighbours
  a.push_back(0x7F7F);                        // the largest finite bf16
  a.push_back(0x38D1), a.push_back(0x0001);   // ~1e-4 (just below the floor), the smallest subnormal
  a.push_back(0x3F80), a.push_back(0x43E0);   // 1, 448
  return a;
}

// Every finite bf16 of magnitude <= amax, both signs, zeros and subnormals included.
std::vector<uint16_t> values_up_to(uint16_t amax) {
  std::vector<uint16_t> v;
  for (uint32_t mag = 0; mag <= amax; ++mag) v.push_back(uint16_t(mag)), v.push_back(uint16_t(mag | 0x8000));
  return v;
}

// Rows of `cols` bf16: groups of 128 as the header says, the last group padded with zeros.
Buffer sweep_rows(uint16_t amax, int64_t cols) {
  const std::vector<uint16_t> v = values_up_to(amax);
  const int64_t groups_per_row = cols / 128;
  const int64_t groups = (int64_t(v.size()) + 126) / 127;
  const int64_t rows = (groups + groups_per_row - 1) / groups_per_row;
  Buffer x(DType::bf16, {rows, cols});
  auto* d = static_cast<uint16_t*>(x.data());
  std::memset(d, 0, size_t(rows * cols) * 2);
  size_t next = 0;
  for (int64_t g = 0; g < groups; ++g) {
    d[g * 128] = uint16_t(amax | (g % 2 ? 0x8000 : 0));
    for (int64_t i = 1; i < 128 && next < v.size(); ++i) d[g * 128 + i] = v[next++];
  }
  return x;
}

bool same_bytes(const Buffer& a, const Buffer& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.tensor().nbytes()) == 0;
}

// The first element where q and qr differ, for the failure message.
std::string first_difference(const Buffer& x, const Buffer& q, const Buffer& qr) {
  const auto* a = static_cast<const uint8_t*>(q.data());
  const auto* b = static_cast<const uint8_t*>(qr.data());
  for (int64_t i = 0; i < q.tensor().numel(); ++i)
    if (a[i] != b[i]) {
      const uint16_t xb = static_cast<const uint16_t*>(x.data())[i];
      std::ostringstream o;
      o.precision(9);
      o << "element " << i << ": x = " << bf16_value(xb) << " (bits 0x" << std::hex << xb << "), code 0x" << int(a[i])
        << ", reference 0x" << int(b[i]);
      return o.str();
    }
  return "codes equal (scales differ)";
}

// Per-token quantization of the sweep under amax, bit for bit against the reference (computed
// first, under the caller's MXCSR); run_op runs the op (e.g. under another MXCSR).
template <class RunOp>
::testing::AssertionResult per_token_matches_reference(uint16_t amax, ScaleFormat sf, RunOp&& run_op) {
  const Buffer x = sweep_rows(amax, 7168);
  const int64_t rows = x.tensor().shape(0), cols = 7168;
  const QuantOptions opt{128, sf};
  Buffer q(DType::f8e4m3, {rows, cols}), s(DType::f32, {rows, cols / 128});
  Buffer qr(DType::f8e4m3, {rows, cols}), sr(DType::f32, {rows, cols / 128});
  reference::quant_fp8_per_token(x, qr, sr, opt);
  poison(q);
  poison(s);
  run_op([&] { quant_fp8_per_token(x, q, s, opt); });
  if (same_bytes(q, qr) && same_bytes(s, sr)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "amax " << bf16_value(amax) << (sf == ScaleFormat::ue8m0 ? " ue8m0" : " f32")
                                       << ": " << first_difference(x, q, qr);
}

TEST(QuantFp8Exhaustive, PerTokenEveryBf16UnderManyScales) {
  for_each_isa([] {
    for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0})
      for (uint16_t amax : group_maxima())
        ASSERT_TRUE(per_token_matches_reference(amax, sf, [](auto&& op) { op(); }));
  });
}

#if defined(__x86_64__)
// Blocks holding an e4m3 subnormal or zero take a branch-free encoder that passes through f32
// subnormals, which flush-to-zero would break: with FTZ / DAZ set, the op must take its exact
// encoder instead and still give the reference's bits (computed under the default MXCSR).
// One thread: MXCSR belongs to the thread.
TEST(QuantFp8Exhaustive, PerTokenUnderFlushToZeroModes) {
  const int threads = num_threads();
  set_num_threads(1);
  const unsigned saved = _mm_getcsr();
  for (unsigned mode : {0x8000u, 0x8040u})  // FTZ, FTZ + DAZ
    for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0})
      for (uint16_t amax : group_maxima())
        ASSERT_TRUE(per_token_matches_reference(amax, sf, [&](auto&& op) {
          _mm_setcsr(saved | mode);
          op();
          _mm_setcsr(saved);
        })) << "mxcsr mode " << mode;
  set_num_threads(threads);
}
#endif

TEST(QuantFp8Exhaustive, PerBlockEveryBf16UnderManyScales) {
  for_each_isa([] {
    for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0})
      for (uint16_t amax : group_maxima()) {
        const Buffer x = sweep_rows(amax, 1024);
        const int64_t rows = x.tensor().shape(0), cols = 1024, brows = (rows + 127) / 128;
        const QuantOptions opt{128, sf};
        Buffer q(DType::f8e4m3, {rows, cols}), s(DType::f32, {brows, cols / 128});
        Buffer qr(DType::f8e4m3, {rows, cols}), sr(DType::f32, {brows, cols / 128});
        poison(q);
        poison(s);
        quant_fp8_per_block(x, q, s, opt);
        reference::quant_fp8_per_block(x, qr, sr, opt);
        ASSERT_TRUE(same_bytes(q, qr) && same_bytes(s, sr))
            << "amax " << bf16_value(amax) << (sf == ScaleFormat::ue8m0 ? " ue8m0" : " f32") << ": "
            << first_difference(x, q, qr);
      }
  });
}

TEST(QuantFp8Exhaustive, RmsnormFusedEveryBf16UnderManyScales) {
  for_each_isa([] {
    for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0})
      for (int64_t group : {128, 64})
        for (uint16_t amax : group_maxima()) {
          // One row: the sweep as the weight (groups of 128, so for group 64 every other group
          // has no +-amax of its own and a smaller scale), x = 1, eps = 0: y = w exactly.
          const Buffer sweep = sweep_rows(amax, 1024);
          const int64_t h = sweep.tensor().numel();
          Buffer w(DType::bf16, {h}), x(DType::bf16, {1, h}), y(DType::bf16, {1, h});
          std::memcpy(w.data(), sweep.data(), size_t(h) * 2);
          std::memcpy(y.data(), sweep.data(), size_t(h) * 2);
          for (int64_t i = 0; i < h; ++i) static_cast<uint16_t*>(x.data())[i] = 0x3F80;
          const QuantOptions opt{group, sf};
          Buffer q(DType::f8e4m3, {1, h}), s(DType::f32, {1, h / group});
          Buffer qr(DType::f8e4m3, {1, h}), sr(DType::f32, {1, h / group});
          poison(q);
          poison(s);
          rmsnorm_quant_fp8(x, w, q, s, NormOptions{0.0f}, opt);
          reference::quant_fp8_per_token(y, qr, sr, opt);
          ASSERT_TRUE(same_bytes(q, qr) && same_bytes(s, sr))
              << "amax " << bf16_value(amax) << " group " << group
              << (sf == ScaleFormat::ue8m0 ? " ue8m0" : " f32") << ": " << first_difference(y, q, qr);
        }
  });
}

}  // namespace
}  // namespace sol
