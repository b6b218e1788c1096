// The activations fused with per-token FP8 quantization (gelu_quant_fp8, silu_mul_quant_fp8)
// must give, bit for bit, quant_fp8_per_token of the op's own bf16 output. The AVX-512 path
// produces and encodes each group in one pass with an encoder of its own
// (kernels/x86/avx512/e4m3_encode_avx512.h) that takes e4m3 subnormal results on its main
// path: these tests aim at its edges — every bf16 value through gelu, products that round to
// +-0 and to every subnormal code, ties (UE8M0 scales make x * m exact), groups with NaN / inf,
// group sizes it does not handle (the unfused path), f32 inputs, strided and streamed outputs,
// and FTZ / DAZ set in MXCSR.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "ops/common/fill.h"
#include "ops/isa_paths.h"
#include "ops/stream_threshold.h"
#include "sol/activation.h"
#include "sol/hw.h"
#include "sol/quant.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_paths::for_each_isa;

struct Act {
  const char* name;
  int64_t in_cols;  // columns of x per output column
  std::function<void(const Tensor& x, const Tensor& y)> plain;
  std::function<void(const Tensor& x, const Tensor& q, const Tensor& s, const QuantOptions&)> fused;
};

std::vector<Act> acts() {
  return {
      {"gelu tanh", 1, [](const Tensor& x, const Tensor& y) { gelu(x, y, GeluForm::tanh); },
       [](const Tensor& x, const Tensor& q, const Tensor& s, const QuantOptions& o) {
         gelu_quant_fp8(x, q, s, GeluForm::tanh, o);
       }},
      {"gelu erf", 1, [](const Tensor& x, const Tensor& y) { gelu(x, y, GeluForm::erf); },
       [](const Tensor& x, const Tensor& q, const Tensor& s, const QuantOptions& o) {
         gelu_quant_fp8(x, q, s, GeluForm::erf, o);
       }},
      {"silu_mul", 2, [](const Tensor& x, const Tensor& y) { silu_mul(x, y); },
       [](const Tensor& x, const Tensor& q, const Tensor& s, const QuantOptions& o) { silu_mul_quant_fp8(x, q, s, o); }},
  };
}

const char* scale_name(ScaleFormat f) { return f == ScaleFormat::ue8m0 ? "ue8m0" : "f32"; }

// The fused op on x against quant_fp8_per_token of the plain op's bf16 output. q_pad / s_pad:
// extra elements per row of q and scales (views into wider buffers: row strides larger than
// the rows).
void expect_fused_equals_composition(const Act& a, const Tensor& x, const QuantOptions& o, int64_t q_pad = 0,
                                     int64_t s_pad = 0) {
  const int64_t rows = x.shape(0), h = x.shape(1) / a.in_cols, groups = h / o.group;
  SCOPED_TRACE(std::string(a.name) + " x " + std::string(dtype_name(x.dtype())) + " [" + std::to_string(rows) + ", " +
               std::to_string(h) + "] group " + std::to_string(o.group) + " " + scale_name(o.scale) + " q_pad " +
               std::to_string(q_pad) + " s_pad " + std::to_string(s_pad));
  Buffer y(DType::bf16, {rows, h}), q_ref(DType::f8e4m3, {rows, h}), s_ref(DType::f32, {rows, groups});
  a.plain(x, y);
  quant_fp8_per_token(y, q_ref, s_ref, o);
  Buffer qb(DType::f8e4m3, {rows, h + q_pad}), sb(DType::f32, {rows, groups + s_pad});
  poison(qb);
  poison(sb);
  const Tensor q = qb.tensor().slice(1, 0, h), s = sb.tensor().slice(1, 0, groups);
  a.fused(x, q, s, o);
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float want = s_ref.tensor().data_as<float>()[r * groups + g], got = s.data_as<float>()[r * s.stride(0) + g];
      if (!(want == got || (std::isnan(want) && std::isnan(got))) && bad++ < 5)
        ADD_FAILURE() << "scale[" << r << "][" << g << "] = " << got << ", expected " << want;
    }
    for (int64_t c = 0; c < h; ++c) {
      const uint8_t want = q_ref.tensor().data_as<uint8_t>()[r * h + c], got = q.data_as<uint8_t>()[r * q.stride(0) + c];
      if (want != got && bad++ < 5) {
        uint32_t bits = uint32_t(y.tensor().data_as<uint16_t>()[r * h + c]) << 16;
        float v;
        std::memcpy(&v, &bits, 4);
        ADD_FAILURE() << "q[" << r << "][" << c << "] = 0x" << std::hex << int(got) << ", expected 0x" << int(want)
                      << std::dec << " (bf16 output " << v << ", scale " << s_ref.tensor().data_as<float>()[r * groups + c / o.group]
                      << ")";
      }
    }
    // The padding past each row is untouched (still the poison).
    for (int64_t c = h; c < h + q_pad; ++c)
      if (qb.tensor().data_as<uint8_t>()[r * (h + q_pad) + c] != 0xFF && bad++ < 5) ADD_FAILURE() << "q pad written";
  }
  EXPECT_EQ(bad, 0);
}

// Every one of the 65536 bf16 values as gelu's input, shuffled so each group mixes magnitudes
// (its maximum sets the scale; the small ones land on e4m3 subnormals and zeros): [512, 128].
// Groups holding NaN or inf (most of them, shuffled) take the special path; a second pass
// without the non-finite values makes every group a plain one.
TEST(ActivationQuant, GeluOfEveryBf16Value) {
  std::vector<uint16_t> all(65536), finite;
  for (int i = 0; i < 65536; ++i) all[size_t(i)] = uint16_t(i);
  std::mt19937 rng(7);
  std::shuffle(all.begin(), all.end(), rng);
  for (uint16_t b : all)
    if ((b & 0x7F80) != 0x7F80) finite.push_back(b);
  finite.resize(finite.size() / 1024 * 1024);
  for (const std::vector<uint16_t>* values : {&all, &finite}) {
    const int64_t n = int64_t(values->size()), h = 1024;
    Buffer x(DType::bf16, {n / h, h});
    std::memcpy(x.tensor().data(), values->data(), size_t(n) * 2);
    for_each_isa([&] {
      for (const Act& a : acts()) {
        if (a.in_cols != 1) continue;
        for (ScaleFormat f : {ScaleFormat::f32, ScaleFormat::ue8m0})
          for (int64_t group : {64, 128, 256}) expect_fused_equals_composition(a, x, {group, f});
      }
    });
  }
}

// Random inputs at several scales (outputs from ~1e-30 to ~1e4 relative to the group maxima),
// a few special values, each input dtype, groups the fused kernel takes (multiples of 64) and
// groups it leaves to the unfused path (16, 32, 48, 80).
TEST(ActivationQuant, RandomInputsEveryGroupAndDtype) {
  for_each_isa([] {
    for (const Act& a : acts())
      for (DType in : {DType::bf16, DType::f32})
        for (double scale : {6.0, 0.01, 60.0}) {
          const int64_t h = 1920;  // a multiple of every group below
          Buffer x(in, {5, a.in_cols * h});
          fill_random(x, uint64_t(scale * 100) + uint64_t(in), scale);
          for (int64_t group : {64, 128, 192, 16, 32, 48, 80})
            for (ScaleFormat f : {ScaleFormat::f32, ScaleFormat::ue8m0}) expect_fused_equals_composition(a, x, {group, f});
        }
  });
}

TEST(ActivationQuant, SpecialValuesAndZeroGroups) {
  for_each_isa([] {
    for (const Act& a : acts()) {
      const int64_t h = 1024;
      Buffer x(DType::bf16, {4, a.in_cols * h});
      fill_random_with_specials(x, 3, 97);  // NaN, inf, +-0, subnormals, huge values here and there
      // Row 1: all zeros (amax floored at 1e-4); row 2: one group of -0 and tiny values.
      uint16_t* p = x.tensor().data_as<uint16_t>();
      for (int64_t c = 0; c < a.in_cols * h; ++c) p[a.in_cols * h + c] = 0;
      for (int64_t c = 0; c < 128; ++c) p[2 * a.in_cols * h + c] = uint16_t(c % 2 ? 0x8000 : 0x0001 + c);
      for (ScaleFormat f : {ScaleFormat::f32, ScaleFormat::ue8m0}) {
        expect_fused_equals_composition(a, x, {128, f});
        expect_fused_equals_composition(a, x, {64, f}, 7, 3);
      }
    }
  });
}

// q rows a line apart or not (q_pad), so the fused kernel streams its lines or stores them
// plainly; outputs past half the LLC stream.
TEST(ActivationQuant, StridedAndStreamedOutputs) {
  for (const Act& a : acts()) {
    Buffer x(DType::bf16, {9, a.in_cols * 768});
    fill_random(x, 11, 6.0);
    for (int64_t q_pad : {0, 64, 5}) expect_fused_equals_composition(a, x, {128, ScaleFormat::f32}, q_pad, 2);
  }
  if (cpu_features().best_isa < Isa::avx512) return;
  const testing_stream::LowStreamThreshold low;
  const int64_t h = 2048, rows = testing_stream::kStreamBytes / h + 3;
  Buffer x(DType::bf16, {rows, h});
  fill_random(x, 12, 6.0);
  for (const Act& a : acts())
    if (a.in_cols == 1) expect_fused_equals_composition(a, x, {128, ScaleFormat::f32});
  Buffer gu(DType::bf16, {rows, 2 * h});
  fill_random(gu, 13, 6.0);
  expect_fused_equals_composition(acts()[2], gu, {128, ScaleFormat::ue8m0});
}

#if defined(__x86_64__)
// The fused encoder relies on f32 subnormal results; with FTZ / DAZ set the op must still give
// the composition's bits (computed under the same MXCSR). One thread: MXCSR is per thread.
TEST(ActivationQuant, FlushToZeroModes) {
  const int threads = num_threads();
  set_num_threads(1);
  const unsigned saved = _mm_getcsr();
  for (unsigned mode : {0x8000u, 0x0040u, 0x8040u}) {  // FTZ, DAZ, both
    _mm_setcsr(saved | mode);
    for (const Act& a : acts()) {
      Buffer x(DType::bf16, {3, a.in_cols * 512});
      fill_random(x, 21, 6.0);
      expect_fused_equals_composition(a, x, {128, ScaleFormat::f32});
    }
    _mm_setcsr(saved);
  }
  set_num_threads(threads);
}

// gelu's fused rows flush subnormals inside (kernels/x86/flush_subnormals.h): the caller's
// MXCSR modes must come back as they were, on every thread count (its sticky exception flags
// may gain what the arithmetic raised, as after any float code).
TEST(ActivationQuant, LeavesTheCallersMxcsr) {
  const int threads = num_threads();
  const unsigned saved = _mm_getcsr();
  Buffer x(DType::bf16, {4, 1024});
  fill_random(x, 22, 12.0);
  Buffer q(DType::f8e4m3, {4, 1024}), s(DType::f32, {4, 8});
  for (int t : {1, 2})
    for (unsigned mode : {0u, 0x8000u, 0x0040u}) {
      set_num_threads(t);
      _mm_setcsr(saved | mode);
      for (GeluForm form : {GeluForm::tanh, GeluForm::erf}) {
        gelu_quant_fp8(x, q, s, form);
        EXPECT_EQ(_mm_getcsr() & ~0x3Fu, (saved | mode) & ~0x3Fu) << "threads " << t;  // modes, not flags
      }
      _mm_setcsr(saved);
    }
  set_num_threads(threads);
}
#endif

}  // namespace
}  // namespace sol
