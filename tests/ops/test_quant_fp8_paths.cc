// The fast paths of FP8 quantization and dequantization against the separate reference, bit for
// bit, on inputs chosen to reach every branch: groups without specials (the 16-bit abs-max and
// the normal-range encoder), results below e4m3's normal range and exact zeros (the exact
// encoder's fallback per 64-element block), products exactly halfway between two e4m3 values
// (UE8M0 scales make every product exact), every e4m3 code on the way back, and tensors large
// enough for streamed stores.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/isa_paths.h"
#include "ops/stream_threshold.h"
#include "ops/quant/reference.h"
#include "sol/quant.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_paths::for_each_isa;

bool same_bytes(const Buffer& a, const Buffer& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.tensor().nbytes()) == 0;
}

// Groups of four kinds: values over 8 binades (the normal-range encoder), over 32 binades (most
// 64-element blocks fall back to the exact encoder), small integers with exact zeros, and
// 7-bit integers times powers of two (halfway cases for UE8M0 scales, whose products are exact).
void fill_wide_range(const Buffer& x, uint64_t seed) {
  const int64_t n = x.tensor().numel();
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    const int64_t group = i / 128;
    double v;
    const double u = double(int64_t(s >> 11 & 0xFFFF) - 0x8000) / 0x8000;
    if (group % 7 == 3) v = (s & 3) == 0 ? 0.0 : std::ldexp(double(int(s >> 40 & 127) - 64), int(s >> 50 & 7) - 4);
    else if (group % 7 == 5) v = std::ldexp(u, -int(s >> 56 & 31));  // most results below 2^-6
    else v = std::ldexp(u, -int(s >> 56 & 7));  // all within e4m3's normal range but rare ones
    if (group % 11 == 4) v = std::ldexp(double(int(s >> 40 & 63) + 64), int(s >> 50 & 3));  // halfway cases
    store_from_double(x.data(), x.tensor().dtype(), size_t(i), v);
  }
}

TEST(QuantFp8Paths, PerTokenFastPathMatchesReference) {
  for_each_isa([] {
    for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0})
      for (auto [rows, cols, group] : {std::tuple<int64_t, int64_t, int64_t>{5, 7168, 128}, {3, 384, 64},
                                       {2, 2048, 128}, {4, 192, 192}}) {
        QuantOptions opt{group, sf};
        Buffer x(DType::bf16, {rows, cols}), q(DType::f8e4m3, {rows, cols}), s(DType::f32, {rows, cols / group});
        Buffer qr(DType::f8e4m3, {rows, cols}), sr(DType::f32, {rows, cols / group});
        fill_wide_range(x, uint64_t(rows * cols + group));
        poison(q);
        poison(s);
        quant_fp8_per_token(x, q, s, opt);
        reference::quant_fp8_per_token(x, qr, sr, opt);
        EXPECT_TRUE(same_bytes(q, qr)) << rows << "x" << cols << " group " << group;
        EXPECT_TRUE(same_bytes(s, sr)) << rows << "x" << cols << " group " << group;
      }
  });
}

TEST(QuantFp8Paths, PerBlockFastPathMatchesReference) {
  for_each_isa([] {
    for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0}) {
      const int64_t rows = 259, cols = 640;  // a partial last block row
      Buffer w(DType::bf16, {rows, cols}), q(DType::f8e4m3, {rows, cols}), s(DType::f32, {3, 5});
      Buffer qr(DType::f8e4m3, {rows, cols}), sr(DType::f32, {3, 5});
      fill_wide_range(w, 5);
      // one block with an inf, one with a NaN
      store_from_double(w.data(), DType::bf16, size_t(3 * cols + 200), INFINITY);
      store_from_double(w.data(), DType::bf16, size_t(130 * cols + 600), NAN);
      poison(q);
      poison(s);
      quant_fp8_per_block(w, q, s, {128, sf});
      reference::quant_fp8_per_block(w, qr, sr, {128, sf});
      EXPECT_TRUE(same_bytes(q, qr));
      EXPECT_TRUE(same_bytes(s, sr));
    }
  });
}

TEST(QuantFp8Paths, PerBlockPipelineOverThreadRangesMatchesReference) {
  // The AVX-512 per-block path takes the abs-max of block row b + 1 while it encodes block row
  // b, within each thread's range of block rows: one thread (every block row in one range, the
  // last one partial) and two threads (ranges of 3 and 2, the partial one alone at the end).
  for_each_isa([] {
    const int64_t rows = 4 * 128 + 37, cols = 384;
    Buffer w(DType::bf16, {rows, cols}), qr(DType::f8e4m3, {rows, cols}), sr(DType::f32, {5, 3});
    fill_wide_range(w, 11);
    store_from_double(w.data(), DType::bf16, size_t(200 * cols + 300), NAN);      // block (1, 2)
    store_from_double(w.data(), DType::bf16, size_t(520 * cols + 10), -INFINITY);  // block (4, 0), partial
    reference::quant_fp8_per_block(w, qr, sr, {128, ScaleFormat::f32});
    for (int threads : {1, 2}) {
      Buffer q(DType::f8e4m3, {rows, cols}), s(DType::f32, {5, 3});
      poison(q);
      poison(s);
      set_num_threads(threads);
      quant_fp8_per_block(w, q, s, {128, ScaleFormat::f32});
      set_num_threads(0);
      EXPECT_TRUE(same_bytes(q, qr)) << threads << " threads";
      EXPECT_TRUE(same_bytes(s, sr)) << threads << " threads";
    }
  });
}

// The AVX-512 per-block path works by column panels of 4 blocks, three in flight (one encoded,
// the next through the abs-max, the one after requested): widths whose last panel is narrower
// than 4 blocks (so the next band's first panel is wider than the panel before it), bands of
// 1 to 129 rows, ranges of one and two threads, and blocks that are all zero, hold one huge
// value among tiny ones, or hold NaN, inf or -inf in the last (narrow) panel of a band.
TEST(QuantFp8Paths, PerBlockPanelsMatchReference) {
  for_each_isa([] {
    for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0})
      for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 128}, {127, 640}, {128, 896}, {129, 1664},
                                {3 * 128 + 1, 640}, {2 * 128 + 77, 1152}, {5 * 128, 512}}) {
        const int64_t br = (rows + 127) / 128, bc = cols / 128;
        Buffer w(DType::bf16, {rows, cols}), q(DType::f8e4m3, {rows, cols}), s(DType::f32, {br, bc});
        Buffer qr(DType::f8e4m3, {rows, cols}), sr(DType::f32, {br, bc});
        fill_wide_range(w, uint64_t(rows * 31 + cols));
        auto put = [&](int64_t r, int64_t c, double v) {
          if (r >= 0 && r < rows && c >= 0 && c < cols) store_from_double(w.data(), DType::bf16, size_t(r * cols + c), v);
        };
        for (int64_t r = 0; r < std::min<int64_t>(rows, 128); ++r)  // block (0, 1) all zero, +-0
          for (int64_t c = 128; c < std::min<int64_t>(cols, 256); ++c) put(r, c, (r + c) % 3 ? 0.0 : -0.0);
        for (int64_t r = 0; r < std::min<int64_t>(rows, 128); ++r)  // block (0, last): one huge value
          for (int64_t c = (bc - 1) * 128; c < cols; ++c) put(r, c, std::ldexp(double((r * 7 + c) % 13) - 6, -20));
        put(std::min<int64_t>(rows, 128) - 1, cols - 1, 3.0e38);
        put(130, cols - 5, NAN);          // band 1, last panel
        put(rows - 1, 200, INFINITY);     // last band (partial or whole)
        put(260, cols - 130, -INFINITY);  // band 2
        for (int threads : {1, 2}) {
          poison(q);
          poison(s);
          set_num_threads(threads);
          quant_fp8_per_block(w, q, s, {128, sf});
          set_num_threads(0);
          reference::quant_fp8_per_block(w, qr, sr, {128, sf});
          EXPECT_TRUE(same_bytes(q, qr)) << rows << "x" << cols << ", " << threads << " threads";
          EXPECT_TRUE(same_bytes(s, sr)) << rows << "x" << cols << ", " << threads << " threads";
        }
      }
  });
}

TEST(QuantFp8Paths, PerBlockStridedAndStreamedMatchReference) {
  for_each_isa([] {
    // Rows of w and q inside wider buffers (q's rows then start off a 64-byte line: plain stores).
    const int64_t rows = 200, cols = 640, pitch = 704;
    Buffer wb(DType::bf16, {rows, pitch}), qb(DType::f8e4m3, {rows, pitch + 8});
    fill_wide_range(wb, 3);
    const int64_t ws[2] = {rows, cols}, wst[2] = {pitch, 1}, qst[2] = {pitch + 8, 1};
    Tensor w(wb.data(), DType::bf16, ws, wst), q(qb.data(), DType::f8e4m3, ws, qst);
    Buffer wd(DType::bf16, {rows, cols}), qr(DType::f8e4m3, {rows, cols}), s(DType::f32, {2, 5}), sr(DType::f32, {2, 5});
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(wd.tensor().data_as<uint16_t>() + r * cols, w.data_as<uint16_t>() + r * pitch, size_t(cols) * 2);
    poison(qb);
    quant_fp8_per_block(w, q, s, {128, ScaleFormat::f32});
    reference::quant_fp8_per_block(wd, qr, sr, {128, ScaleFormat::f32});
    bool same = true;
    for (int64_t r = 0; r < rows; ++r)
      same &= std::memcmp(q.data_as<uint8_t>() + r * (pitch + 8), qr.tensor().data_as<uint8_t>() + r * cols,
                          size_t(cols)) == 0;
    EXPECT_TRUE(same);
    EXPECT_TRUE(same_bytes(s, sr));
  });
  // q of 2304 x 7168 bytes is past the streaming threshold (lowered on machines with a larger
  // LLC: ops/stream_threshold.h): streamed stores, one fence per panel.
  const testing_stream::LowStreamThreshold low;
  const int64_t rows = 2304, cols = 7168;
  Buffer w(DType::bf16, {rows, cols}), q(DType::f8e4m3, {rows, cols}), s(DType::f32, {18, 56});
  Buffer qr(DType::f8e4m3, {rows, cols}), sr(DType::f32, {18, 56});
  fill_wide_range(w, 78);
  poison(q);
  quant_fp8_per_block(w, q, s);
  reference::quant_fp8_per_block(w, qr, sr, {128, ScaleFormat::f32});
  EXPECT_TRUE(same_bytes(q, qr));
  EXPECT_TRUE(same_bytes(s, sr));
}

TEST(QuantFp8Paths, StreamedPerTokenAndDequantMatchReference) {
  // q of 2304 x 7168 bytes is past the (lowered) streaming threshold: the kernels stream their stores.
  const testing_stream::LowStreamThreshold low;
  const int64_t rows = 2304, cols = 7168;
  Buffer x(DType::bf16, {rows, cols}), q(DType::f8e4m3, {rows, cols}), s(DType::f32, {rows, cols / 128});
  Buffer qr(DType::f8e4m3, {rows, cols}), sr(DType::f32, {rows, cols / 128});
  fill_wide_range(x, 77);
  poison(q);
  quant_fp8_per_token(x, q, s);
  reference::quant_fp8_per_token(x, qr, sr, {});
  EXPECT_TRUE(same_bytes(q, qr));
  EXPECT_TRUE(same_bytes(s, sr));
  Buffer y(DType::bf16, {rows, cols}), yr(DType::bf16, {rows, cols});
  poison(y);
  dequant_fp8_per_token(q, s, y);
  reference::dequant_fp8_per_token(q, s, yr, {});
  EXPECT_TRUE(same_bytes(y, yr));
}

TEST(QuantFp8Paths, DequantEveryCodeAndScale) {
  for_each_isa([] {
    // Every code in every group, scales from subnormal-producing to large, NaN and inf.
    const float scales[] = {1.0f, 0x1p-140f, 3.7e-3f, 0x1p100f, 1e30f, NAN, INFINITY, -2.5f};
    const int64_t groups = int64_t(std::size(scales)), cols = groups * 256;
    for (DType yt : {DType::bf16, DType::f32})
      for (int64_t group : {64, 256}) {
        Buffer q(DType::f8e4m3, {1, cols}), s(DType::f32, {1, cols / group}), y(yt, {1, cols}), yr(yt, {1, cols});
        for (int64_t i = 0; i < cols; ++i) q.tensor().data_as<uint8_t>()[i] = uint8_t(i * 37 % 256);
        for (int64_t g = 0; g < cols / group; ++g) s.tensor().data_as<float>()[g] = scales[g % groups];
        QuantOptions opt{group, ScaleFormat::f32};
        poison(y);
        dequant_fp8_per_token(q, s, y, opt);
        reference::dequant_fp8_per_token(q, s, yr, opt);
        EXPECT_TRUE(same_bytes(y, yr)) << dtype_name(yt) << " group " << group;
      }
  });
}

TEST(QuantFp8Paths, DequantNormalCodesEveryScaleKind) {
  // The bf16 fast path decodes normal and zero codes by arithmetic: blocks of 64 codes with
  // none of the subnormal (1..7) or NaN (0x7F) magnitudes, under scales from just above to
  // just below the bound where a product could be an f32 subnormal (2^-119), NaN, +-inf, 0 and
  // negative ones; then the same blocks with one special code at each end (the fallback).
  const float scales[] = {1.0f, 0x1p-119f, 0x1.fffffep-120f, 0x1p-130f, 3.7e-3f, 0x1p100f, 1e30f,
                          NAN, INFINITY, -INFINITY, 0.0f, -0.0f, -2.5f, 0x1p-149f};
  const int64_t groups = int64_t(std::size(scales));
  for_each_isa([&] {
    for (int64_t group : {64, 128})
      for (int special : {0, 1, 2}) {
        const int64_t cols = groups * group;
        Buffer q(DType::f8e4m3, {2, cols}), s(DType::f32, {2, groups}), y(DType::bf16, {2, cols}),
            yr(DType::bf16, {2, cols});
        auto* qs = q.tensor().data_as<uint8_t>();
        for (int64_t i = 0; i < 2 * cols; ++i) {
          // every normal magnitude (8..126) and zero, both signs, in a changing order
          const int64_t k = (i * 53 + i / 7) % 240;
          const int mag = k < 238 ? int(8 + k % 119) : 0;
          qs[i] = uint8_t(mag | (k / 119 % 2) << 7);
        }
        for (int64_t b = 0; b < 2 * cols; b += 64) {
          if (special == 1) qs[b] = uint8_t(1 + b / 64 % 7) | uint8_t(b / 64 % 2 << 7);  // subnormal
          if (special == 2) qs[b + 63] = uint8_t(b / 64 % 2 ? 0xFF : 0x7F);            // NaN
        }
        for (int64_t g = 0; g < 2 * groups; ++g) s.tensor().data_as<float>()[g] = scales[g % groups];
        const QuantOptions opt{group, ScaleFormat::f32};
        poison(y);
        dequant_fp8_per_token(q, s, y, opt);
        reference::dequant_fp8_per_token(q, s, yr, opt);
        EXPECT_TRUE(same_bytes(y, yr)) << "group " << group << " special " << special;
      }
  });
}

}  // namespace
}  // namespace sol
