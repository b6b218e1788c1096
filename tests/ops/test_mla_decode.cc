#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "ops/attention/mla_reference.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/common/splitmix.h"
#include "ops/isa_paths.h"
#include "sol/error.h"
#include "sol/mla.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_paths::for_each_bf16_path;

constexpr float kScale = 0.0721687836f;  // 1 / sqrt(192), DeepSeek-V3's
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// A paged problem: pages shuffled over a pool with spare pages, block-table slots past each
// sequence pointing nowhere valid, and every cache row past a sequence's end NaN (bf16) or all
// 0xFF bytes (FP8: NaN codes and NaN scales), so any read of them shows in the output.
struct Problem {
  int64_t batch, s_q, heads, max_blocks = 1, pool = 0;
  std::vector<int32_t> lens;
  bool fp8;
  Buffer q, kv16, kv8, table, seqlens, out, lse, ref_out, ref_lse;

  Problem(int64_t s_q_, int64_t heads_, std::vector<int32_t> lens_, bool fp8_, uint64_t seed)
      : batch(int64_t(lens_.size())), s_q(s_q_), heads(heads_), lens(std::move(lens_)), fp8(fp8_) {
    int64_t pages = 0;
    for (int32_t l : lens) {
      pages += (l + 63) / 64;
      max_blocks = std::max<int64_t>(max_blocks, (l + 63) / 64 + 1);
    }
    pool = pages + 3;
    kv16 = Buffer(DType::bf16, {pool, 64, 1, 576});
    fill_random(kv16, seed, 1.0);
    // The four 128-wide groups of the latent at different magnitudes (powers of two, exact), so
    // that FP8's per-group scales differ and reading one group with another's scale shows.
    for (int64_t row = 0; row < pool * 64; ++row)
      for (int64_t d = 0; d < 512; ++d) {
        const size_t i = size_t(row * 576 + d);
        const double factor[] = {1.0, 4.0, 0.25, 2.0};
        store_from_double(kv16.data(), DType::bf16, i, load_as_double(kv16.data(), DType::bf16, i) * factor[d / 128]);
      }
    kv8 = Buffer(DType::f8e4m3, {pool, 64, 1, 656});
    table = Buffer(DType::i32, {batch, max_blocks});
    seqlens = Buffer(DType::i32, {batch});
    std::vector<int32_t> ids(static_cast<size_t>(pool));
    std::iota(ids.begin(), ids.end(), 0);
    for (size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[splitmix64(seed + i) % i]);
    size_t next = 0;
    for (int64_t b = 0; b < batch; ++b) {
      seqlens.tensor().data_as<int32_t>()[b] = lens[size_t(b)];
      for (int64_t j = 0; j < max_blocks; ++j) {
        const bool used = j * 64 < lens[size_t(b)];
        table.tensor().data_as<int32_t>()[b * max_blocks + j] = used ? ids[next++] : 1 << 30;
        if (!used) continue;
        uint16_t* page = kv16.tensor().data_as<uint16_t>() + int64_t(ids[next - 1]) * 64 * 576;
        for (int64_t t = lens[size_t(b)] - j * 64; t < 64; ++t)
          std::fill(page + t * 576, page + (t + 1) * 576, uint16_t(0x7FC0));
      }
    }
    mla_quantize_kv_cache_fp8(kv16, kv8);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t pos = lens[size_t(b)]; pos % 64 != 0; ++pos) {
        const int32_t id = table.tensor().data_as<int32_t>()[b * max_blocks + pos / 64];
        std::memset(kv8.tensor().data_as<uint8_t>() + (int64_t(id) * 64 + pos % 64) * 656, 0xFF, 656);
      }
    q = Buffer(DType::bf16, {batch, s_q, heads, 576});
    fill_random(q, seed + 1, 4.0);
    out = Buffer(DType::bf16, {batch, s_q, heads, 512});
    lse = Buffer(DType::f32, {batch, heads, s_q});
    ref_out = Buffer(DType::f32, {batch, s_q, heads, 512});
    ref_lse = Buffer(DType::f32, {batch, heads, s_q});
  }
  const Buffer& cache() const { return fp8 ? kv8 : kv16; }
  void run(bool causal, int threads = 0) {
    poison(out);
    poison(lse);
    const MlaMetadata meta = get_mla_metadata(seqlens, int(s_q * heads), threads);
    mla_decode_with_kvcache(q, cache(), table, seqlens, 512, kScale, causal, meta, out, lse);
  }
  void reference(bool causal) {
    reference::mla_decode(q, cache(), table, seqlens, kScale, causal, ref_out, ref_lse);
  }
  float out_at(int64_t b, int64_t i, int64_t h, int d) const {
    return bf16_to_f32(out.tensor().data_as<uint16_t>()[((b * s_q + i) * heads + h) * 512 + d]);
  }
  float lse_at(int64_t b, int64_t i, int64_t h) const { return lse.tensor().data_as<float>()[(b * heads + h) * s_q + i]; }
  float ref_lse_at(int64_t b, int64_t i, int64_t h) const {
    return ref_lse.tensor().data_as<float>()[(b * heads + h) * s_q + i];
  }
};

void expect_matches_reference(Problem& p, bool causal, double tol = 1e-2) {
  p.run(causal);
  p.reference(causal);
  Buffer got(DType::f32, {p.batch, p.s_q, p.heads, 512});
  for (int64_t i = 0; i < got.tensor().numel(); ++i)
    got.tensor().data_as<float>()[i] = bf16_to_f32(p.out.tensor().data_as<uint16_t>()[i]);
  CheckResult r = compare_relative(got, p.ref_out, tol);
  EXPECT_TRUE(r.pass) << r.detail << " (error " << r.error << ")";
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.s_q; ++i)
      for (int64_t h = 0; h < p.heads; ++h) {
        const float ref = p.ref_lse_at(b, i, h), l = p.lse_at(b, i, h);
        if (std::isinf(ref)) EXPECT_EQ(l, ref) << "b=" << b << " i=" << i << " h=" << h;
        else EXPECT_NEAR(l, ref, 1e-4 * std::max(1.0f, std::fabs(ref))) << "b=" << b << " i=" << i << " h=" << h;
      }
}

TEST(MlaDecode, Bf16CacheMatchesFp64Reference) {
  for_each_bf16_path([] {
    Problem one(1, 16, {1000}, false, 3);
    expect_matches_reference(one, true);
    // Mixed lengths (1, below a page, page + 1, several chunks), s_q = 2 causal, odd head count.
    Problem mixed(2, 5, {1, 63, 65, 600}, false, 4);
    expect_matches_reference(mixed, true);
    Problem plain(3, 17, {300, 2}, false, 5);
    expect_matches_reference(plain, false);
    // Row counts that take every tile shape: 128 (two groups of 4 row vectors), 40 (3 vectors).
    Problem wide(1, 128, {150}, false, 14);
    expect_matches_reference(wide, true);
    Problem three(2, 20, {70, 3}, false, 15);
    expect_matches_reference(three, true);
  });
}

TEST(MlaDecode, StridedQueryAndOutputViews) {
  for_each_bf16_path([] {
    Problem p(2, 3, {90, 200}, false, 16);
    p.run(true);
    p.reference(true);
    // The same problem with q and out as head slices of wider tensors, lse transposed in memory.
    Buffer q_wide(DType::bf16, {2, 2, 5, 576}), out_wide(DType::bf16, {2, 2, 5, 512}), lse_t(DType::f32, {2, 2, 3});
    fill_random(q_wide, 99);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < 2; ++i)
        std::memcpy(q_wide.tensor().ptr({b, i, 1, 0}), p.q.tensor().ptr({b, i, 0, 0}), 3 * 576 * 2);
    poison(out_wide);
    Tensor q = q_wide.tensor().slice(2, 1, 4), out = out_wide.tensor().slice(2, 1, 4);
    Tensor lse(lse_t.data(), DType::f32, std::vector<int64_t>{2, 3, 2}, std::vector<int64_t>{6, 1, 3});
    mla_decode_with_kvcache(q, p.kv16, p.table, p.seqlens, 512, kScale, true, get_mla_metadata(p.seqlens, 6), out, lse);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t h = 0; h < 3; ++h) {
          EXPECT_EQ(std::memcmp(out.ptr({b, i, h, 0}), p.out.tensor().ptr({b, i, h, 0}), 1024), 0) << b << i << h;
          EXPECT_EQ(*static_cast<float*>(lse.ptr({b, h, i})), p.lse_at(b, i, h));
        }
    EXPECT_TRUE(std::isnan(bf16_to_f32(*static_cast<uint16_t*>(out_wide.tensor().ptr({0, 0, 0, 0})))));  // untouched
  });
}

TEST(MlaDecode, Fp8CacheMatchesReferenceOnDequantisedCache) {
  for_each_bf16_path([] {
    Problem one(1, 16, {700}, true, 6);
    expect_matches_reference(one, true);
    Problem mixed(2, 7, {2, 129, 513}, true, 7);
    expect_matches_reference(mixed, true);
    Problem wide(1, 80, {190}, true, 17);
    expect_matches_reference(wide, false);
  });
}

TEST(MlaDecode, EmptyRowsGiveZeroAndMinusInfinity) {
  for_each_bf16_path([] {
    // Length 0: nothing to see. Length 1, s_q = 2, causal: query 0 sees nothing, query 1 sees 1.
    Problem p(2, 4, {0, 1, 0}, false, 8);
    expect_matches_reference(p, true);
    for (int64_t h = 0; h < 4; ++h) {
      for (int64_t i = 0; i < 2; ++i) {
        EXPECT_EQ(p.lse_at(0, i, h), -std::numeric_limits<float>::infinity());
        EXPECT_EQ(p.out_at(0, i, h, 17), 0.0f);
      }
      EXPECT_EQ(p.lse_at(1, 0, h), -std::numeric_limits<float>::infinity());
      EXPECT_EQ(p.out_at(1, 0, h, 0), 0.0f);
      EXPECT_TRUE(std::isfinite(p.lse_at(1, 1, h)));
      // One visible position: the output is that row's values, the lse its score.
      const float v = float(reference::mla_cache_value(p.kv16, p.table, 1, 0, 5));
      EXPECT_NEAR(p.out_at(1, 1, h, 5), v, 1e-2 * std::fabs(v) + 1e-6);
    }
  });
}

TEST(MlaDecode, NanInCacheReachesExactlyTheRowsThatSeeIt) {
  for_each_bf16_path([] {
    for (bool fp8 : {false, true}) {
      for (int d : {3, 530}) {  // a value (latent) dim and a rope dim
        Problem p(2, 3, {100, 90}, fp8, 9);
        // The last position of sequence 0: only its query 1 sees it (causal, s_q = 2).
        const int32_t id = p.table.tensor().data_as<int32_t>()[1];
        const int64_t token = int64_t(id) * 64 + 99 % 64;
        if (fp8) {
          uint8_t* row = p.kv8.tensor().data_as<uint8_t>() + token * 656;
          if (d < 512) row[d] = 0x7F;
          else std::memcpy(row + 528 + 2 * (d - 512), "\xC0\x7F", 2);
        } else {
          p.kv16.tensor().data_as<uint16_t>()[token * 576 + d] = 0x7FC0;
        }
        p.run(true);
        for (int64_t h = 0; h < 3; ++h) {
          bool nan0 = false, nan1 = false, nan_other = false;
          for (int c = 0; c < 512; ++c) {
            nan0 |= std::isnan(p.out_at(0, 0, h, c));
            nan1 |= std::isnan(p.out_at(0, 1, h, c));
            nan_other |= std::isnan(p.out_at(1, 0, h, c)) || std::isnan(p.out_at(1, 1, h, c));
          }
          EXPECT_FALSE(nan0) << "fp8=" << fp8 << " d=" << d << " h=" << h;
          EXPECT_TRUE(nan1) << "fp8=" << fp8 << " d=" << d << " h=" << h;
          EXPECT_FALSE(nan_other) << "fp8=" << fp8 << " d=" << d << " h=" << h;
          EXPECT_TRUE(std::isfinite(p.lse_at(0, 0, h)));
          EXPECT_TRUE(std::isnan(p.lse_at(0, 1, h)));  // its score is NaN too (the key row holds it)
        }
      }
    }
  });
}

TEST(MlaDecode, NanInQueryStaysInItsRow) {
  Problem p(1, 4, {200}, false, 10);
  p.q.tensor().data_as<uint16_t>()[2 * 576 + 100] = 0x7FC0;  // head 2
  p.run(false);
  for (int64_t h = 0; h < 4; ++h) EXPECT_EQ(std::isnan(p.out_at(0, 0, h, 0)), h == 2) << h;
}

TEST(MlaDecode, ThreadCountDoesNotChangeBits) {
  for (bool fp8 : {false, true}) {
    Problem p(2, 16, {1500, 700, 5, 2100}, fp8, 11);
    set_num_threads(1);
    p.run(true, 1);
    Buffer first(DType::bf16, {p.batch, 2, 16, 512}), first_lse(DType::f32, {p.batch, 16, 2});
    std::memcpy(first.data(), p.out.data(), first.bytes());
    std::memcpy(first_lse.data(), p.lse.data(), first_lse.bytes());
    for (int threads : {2, 3, 7}) {
      set_num_threads(2);
      p.run(true, threads);
      EXPECT_EQ(std::memcmp(first.data(), p.out.data(), first.bytes()), 0) << threads << " parts";
      EXPECT_EQ(std::memcmp(first_lse.data(), p.lse.data(), first_lse.bytes()), 0) << threads << " parts";
    }
    set_num_threads(0);
  }
}

TEST(MlaDecode, MetadataCoversEveryChunkExactlyOnce) {
  const std::vector<std::vector<int32_t>> cases = {{0}, {1}, {256}, {257, 0, 8192, 1000}, {4096}, {5, 5, 5, 5, 5}};
  for (const auto& lens : cases)
    for (int threads : {1, 2, 3, 8}) {
      Buffer s(DType::i32, {int64_t(lens.size())});
      std::copy(lens.begin(), lens.end(), s.tensor().data_as<int32_t>());
      const MlaMetadata m = get_mla_metadata(s, 32, threads);
      ASSERT_EQ(m.threads, threads);
      ASSERT_EQ(m.batch_chunks.size(), lens.size() + 1);
      int64_t total = 0, costliest = 0;
      for (size_t b = 0; b < lens.size(); ++b) {
        const int64_t chunks = std::max<int64_t>(1, (lens[b] + 255) / 256);
        EXPECT_EQ(m.batch_chunks[b + 1] - m.batch_chunks[b], chunks);
        for (int64_t k = 0; k < chunks; ++k) {
          const int64_t cost = (std::clamp<int64_t>(lens[b] - 256 * k, 0, 256) + 63) / 64 + 1;
          total += cost;
          costliest = std::max(costliest, cost);
        }
      }
      ASSERT_EQ(m.thread_chunks.size(), size_t(threads) + 1);
      EXPECT_EQ(m.thread_chunks.front(), 0);
      EXPECT_EQ(m.thread_chunks.back(), m.batch_chunks.back());
      for (int t = 0; t < threads; ++t) {
        EXPECT_LE(m.thread_chunks[size_t(t)], m.thread_chunks[size_t(t) + 1]);
        int64_t part = 0;
        for (int64_t c = m.thread_chunks[size_t(t)]; c < m.thread_chunks[size_t(t) + 1]; ++c) {
          const size_t b = size_t(std::upper_bound(m.batch_chunks.begin(), m.batch_chunks.end(), c) -
                                  m.batch_chunks.begin() - 1);
          part += (std::clamp<int64_t>(lens[b] - 256 * (c - m.batch_chunks[b]), 0, 256) + 63) / 64 + 1;
        }
        // Even: no part exceeds its share by more than one chunk.
        EXPECT_LE(double(part), double(total) / threads + costliest) << "part " << t;
      }
    }
}

TEST(MlaDecode, QuantizedCacheHoldsScaledCodesAndExactRope) {
  Problem p(1, 1, {64}, false, 12);
  const uint16_t* src = p.kv16.tensor().data_as<uint16_t>() + int64_t(p.table.tensor().data_as<int32_t>()[0]) * 64 * 576;
  const uint8_t* dst = p.kv8.tensor().data_as<uint8_t>() + int64_t(p.table.tensor().data_as<int32_t>()[0]) * 64 * 656;
  for (int t = 0; t < 64; ++t) {
    for (int g = 0; g < 4; ++g) {
      float scale;
      std::memcpy(&scale, dst + t * 656 + 512 + 4 * g, 4);
      int e = 0;
      EXPECT_EQ(std::frexp(scale, &e), 0.5f) << "scale " << scale << " is not a power of two";
      for (int d = 128 * g; d < 128 * (g + 1); ++d) {
        const float x = bf16_to_f32(src[t * 576 + d]), y = e4m3_to_f32(dst[t * 656 + d]) * scale;
        EXPECT_LE(std::fabs(x - y), std::fabs(x) * 0.0625f + scale * 0x1p-9f) << t << " " << d;
      }
    }
    EXPECT_EQ(std::memcmp(dst + t * 656 + 528, src + t * 576 + 512, 128), 0);
  }
}

TEST(MlaDecode, RegistryChecksPassOnEveryPath) { testing_paths::expect_registry_checks_pass("mla-decode"); }

template <class Fn>
void expect_error(Fn&& fn, const std::string& phrase) {
  try {
    fn();
    ADD_FAILURE() << "no sol::Error; expected one mentioning '" << phrase << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

TEST(MlaDecode, BadInputIsAClearError) {
  Problem p(1, 2, {130, 64}, false, 13);
  const MlaMetadata meta = get_mla_metadata(p.seqlens, 2);
  auto decode = [&](const Tensor& q, const Tensor& kv, const Tensor& table, int dv, const MlaMetadata& m,
                    const Tensor& out, const Tensor& lse) {
    mla_decode_with_kvcache(q, kv, table, p.seqlens, dv, kScale, true, m, out, lse);
  };
  // A block table too short for the sequence.
  Tensor short_table = p.table.tensor().slice(1, 0, 2);
  expect_error([&] { decode(p.q, p.kv16, short_table, 512, meta, p.out, p.lse); }, "needs 3 pages");
  // Page size 32.
  Tensor pages32(p.kv16.data(), DType::bf16, {p.pool * 2, 32, 1, 576});
  expect_error([&] { decode(p.q, pages32, p.table, 512, meta, p.out, p.lse); }, "page size");
  // Wrong dtypes.
  Buffer q32(DType::f32, {2, 1, 2, 576}), kv16f(DType::f16, {p.pool, 64, 1, 576}), table_f(DType::f32, {2, p.max_blocks});
  expect_error([&] { decode(q32, p.kv16, p.table, 512, meta, p.out, p.lse); }, "q.dtype");
  expect_error([&] { decode(p.q, kv16f, p.table, 512, meta, p.out, p.lse); }, "kv_cache.dtype");
  expect_error([&] { decode(p.q, p.kv16, table_f, 512, meta, p.out, p.lse); }, "block_table");
  // Wrong last dims and head_dim_v.
  Buffer q512(DType::bf16, {2, 1, 2, 512});
  expect_error([&] { decode(q512, p.kv16, p.table, 512, meta, p.out, p.lse); }, "q.shape[3] = 512");
  Tensor kv575(p.kv16.data(), DType::bf16, std::vector<int64_t>{p.pool, 64, 1, 575},
               std::vector<int64_t>{64 * 576, 576, 576, 1});
  expect_error([&] { decode(p.q, kv575, p.table, 512, meta, p.out, p.lse); }, "kv_cache.shape[3] = 575");
  Tensor fp8_as_576(p.kv8.data(), DType::f8e4m3, std::vector<int64_t>{p.pool, 64, 1, 576},
                    std::vector<int64_t>{64 * 656, 656, 656, 1});
  expect_error([&] { decode(p.q, fp8_as_576, p.table, 512, meta, p.out, p.lse); }, "656");
  expect_error([&] { decode(p.q, p.kv16, p.table, 256, meta, p.out, p.lse); }, "head_dim_v = 256");
  // A block id outside the cache.
  p.table.tensor().data_as<int32_t>()[1] = int32_t(p.pool);
  expect_error([&] { decode(p.q, p.kv16, p.table, 512, meta, p.out, p.lse); }, "block_table[0][1]");
  p.table.tensor().data_as<int32_t>()[1] = 0;
  // Metadata for other lengths or another head count.
  Buffer other(DType::i32, {2});
  other.tensor().data_as<int32_t>()[0] = 1;
  other.tensor().data_as<int32_t>()[1] = 1;
  expect_error([&] { decode(p.q, p.kv16, p.table, 512, get_mla_metadata(other, 2), p.out, p.lse); },
               "other cache_seqlens");
  expect_error([&] { decode(p.q, p.kv16, p.table, 512, get_mla_metadata(p.seqlens, 4), p.out, p.lse); },
               "s_q * h_q = 2");
  // Outputs of the wrong shape or type, and one that overlaps q.
  Buffer lse_bad(DType::f32, {2, 1, 2}), out_f32(DType::f32, {2, 1, 2, 512});
  expect_error([&] { decode(p.q, p.kv16, p.table, 512, meta, p.out, lse_bad); }, "lse.shape");
  expect_error([&] { decode(p.q, p.kv16, p.table, 512, meta, out_f32, p.lse); }, "out.dtype");
  Tensor out_on_q(p.q.data(), DType::bf16, {2, 1, 2, 512});
  expect_error([&] { decode(p.q, p.kv16, p.table, 512, meta, out_on_q, p.lse); }, "overlap");
  // Negative lengths.
  p.seqlens.tensor().data_as<int32_t>()[0] = -1;
  expect_error([&] { get_mla_metadata(p.seqlens, 2); }, "cache_seqlens[0] = -1");
}

}  // namespace
}  // namespace sol
