#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "error_message.h"
#include "isa_paths.h"
#include "ops/attention/mla_absorbed_reference.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/dtype.h"
#include "sol/gemm.h"
#include "sol/mla_absorbed.h"
#include "sol/softmax.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_errors::message_of;
using testing_paths::for_each_isa;

// One layer's operands with odd widths. The cache holds `spare` NaN rows after each sequence's
// len rows and q and out sit inside wider rows (NaN / 0xFF between), so any read past a view
// or write outside one shows.
struct Layer {
  int64_t batch, heads, nope, rope, lat, v, len, spare = 5, pad = 3;
  DType t;
  Buffer q_mem, cache, w_uk, w_uv, out_mem;
  std::vector<PackedMatrix> uk, uv;

  Layer(DType t_, int64_t batch_, int64_t len_, int64_t heads_ = 4, int64_t nope_ = 24, int64_t rope_ = 8,
        int64_t lat_ = 40, int64_t v_ = 20, uint64_t seed = 1)
      : batch(batch_), heads(heads_), nope(nope_), rope(rope_), lat(lat_), v(v_), len(len_), t(t_) {
    q_mem = Buffer(t, {batch, heads, dq() + pad});
    fill_random(q_mem, seed, 1.0);
    cache = Buffer(t, {batch, len + spare, dk()});
    fill_random(cache, seed + 1, 1.0);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t r = len; r < len + spare; ++r)
        for (int64_t c = 0; c < dk(); ++c) set(cache, (b * (len + spare) + r) * dk() + c, NAN);
    w_uk = Buffer(t, {heads, dk(), dq()});
    fill_random(w_uk, seed + 2, 1.0 / std::sqrt(double(dq())));
    w_uv = Buffer(t, {heads, v, lat});
    fill_random(w_uv, seed + 3, 1.0 / std::sqrt(double(lat)));
    for (int64_t h = 0; h < heads; ++h) {
      uk.push_back(pack_b(w_uk.tensor().slice(0, h, h + 1).reshape({dk(), dq()}), Layout::nt));
      uv.push_back(pack_b(w_uv.tensor().slice(0, h, h + 1).reshape({v, lat}), Layout::nt));
    }
    out_mem = Buffer(t, {batch, heads, v + pad});
    poison(out_mem);
  }
  int64_t dq() const { return nope + rope; }
  int64_t dk() const { return lat + rope; }
  static void set(const Buffer& buf, int64_t i, float x) {
    if (buf.tensor().dtype() == DType::f32) buf.tensor().data_as<float>()[i] = x;
    else buf.tensor().data_as<uint16_t>()[i] = f32_to_bf16(x);
  }
  Tensor q() const { return view(q_mem, {batch, heads, dq()}, {heads * (dq() + pad), dq() + pad, 1}); }
  Tensor latent() const { return view(cache, {batch, len, dk()}, {(len + spare) * dk(), dk(), 1}); }
  Tensor out() const { return view(out_mem, {batch, heads, v}, {heads * (v + pad), v + pad, 1}); }
  static Tensor view(const Buffer& b, std::vector<int64_t> shape, std::vector<int64_t> strides) {
    return Tensor(b.data(), b.tensor().dtype(), shape, strides);
  }
  void run(float scale) const { mla_decode_absorbed(q(), uk, latent(), uv, scale, out()); }
  // out as a dense f32 [B, H, v] buffer.
  Buffer got() const {
    Buffer g(DType::f32, {batch, heads, v});
    const Tensor o = out();
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < v; ++d) {
          const int64_t i = b * o.stride(0) + h * o.stride(1) + d;
          g.tensor().data_as<float>()[(b * heads + h) * v + d] =
              t == DType::f32 ? o.data_as<float>()[i] : bf16_to_f32(o.data_as<uint16_t>()[i]);
        }
    return g;
  }
  CheckResult against_reference(float scale) const {
    Buffer ref(DType::f32, {batch, heads, v});
    reference::mla_decode_absorbed(q(), w_uk, latent(), w_uv, scale, ref);
    return compare_relative(got(), ref, t == DType::f32 ? 1e-5 : 1e-2);
  }
  // The bytes between out's rows must still be the poison.
  bool padding_untouched() const {
    const size_t e = dtype_size(t);
    for (int64_t row = 0; row < batch * heads; ++row)
      for (int64_t d = v; d < v + pad; ++d)
        for (size_t k = 0; k < e; ++k)
          if (static_cast<const uint8_t*>(out_mem.data())[(row * (v + pad) + d) * int64_t(e) + int64_t(k)] != 0xFF)
            return false;
    return true;
  }
};

TEST(MlaDecodeAbsorbed, MatchesFp64ReferenceOnOddShapes) {
  for_each_isa([] {
    for (DType t : {DType::bf16, DType::f32})
      for (int64_t batch : {1, 2, 3})
        for (int64_t len : {1, 17, 37}) {
          SCOPED_TRACE(std::string(dtype_name(t)) + " batch " + std::to_string(batch) + " len " + std::to_string(len));
          Layer l(t, batch, len, 3, 5 + batch, 3, 7 + len % 5, 6, uint64_t(batch * 100 + len));
          l.run(0.3f);
          const CheckResult r = l.against_reference(0.3f);
          EXPECT_TRUE(r.pass) << r.detail;
          EXPECT_TRUE(l.padding_untouched());
        }
  });
}

TEST(MlaDecodeAbsorbed, DeepSeekV3WidthsMatchReference) {
  Layer l(DType::bf16, 2, 70, 16, 128, 64, 512, 128, 9);
  l.run(1.0f / std::sqrt(192.0f));
  const CheckResult r = l.against_reference(1.0f / std::sqrt(192.0f));
  EXPECT_TRUE(r.pass) << r.detail;
}

// A [rows, cols] view of t's memory `offset` elements in, rows `row_stride` apart.
Tensor mat(const Tensor& t, int64_t offset, int64_t rows, int64_t cols, int64_t row_stride) {
  char* base = static_cast<char*>(t.data()) + offset * int64_t(dtype_size(t.dtype()));
  const int64_t shape[2] = {rows, cols}, strides[2] = {row_stride, 1};
  return Tensor(base, t.dtype(), shape, strides);
}

// The op is the composition of gemm and softmax its header states, bit for bit.
TEST(MlaDecodeAbsorbed, EqualsTheStepByStepComposition) {
  for (DType t : {DType::bf16, DType::f32}) {
    Layer l(t, 3, 19, 4, 24, 8, 40, 20, 5);
    const float scale = 0.25f;
    l.run(scale);
    const int64_t B = l.batch, H = l.heads, L = l.len, dq = l.dq(), dk = l.dk(), dl = l.lat, dv = l.v;
    Buffer q_lat(t, {B, H, dk}), scores(DType::f32, {B * H, L}), p(t, {B * H, L}), o_lat(t, {B, H, dl}),
        want(t, {B, H, dv});
    const Tensor q = l.q(), latent = l.latent();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        gemm(mat(q, b * q.stride(0) + h * q.stride(1), 1, dq, dq), l.uk[size_t(h)], mat(q_lat, (b * H + h) * dk, 1, dk, dk));
        GemmOptions nt;
        nt.layout = Layout::nt;
        nt.alpha = scale;
        gemm(mat(q_lat, (b * H + h) * dk, 1, dk, dk), mat(latent, b * latent.stride(0), L, dk, dk),
             mat(scores, (b * H + h) * L, 1, L, L), nt);
      }
    softmax(scores, p);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        gemm(mat(p, (b * H + h) * L, 1, L, L), mat(latent, b * latent.stride(0), L, dl, dk),
             mat(o_lat, (b * H + h) * dl, 1, dl, dl));
        gemm(mat(o_lat, (b * H + h) * dl, 1, dl, dl), l.uv[size_t(h)], mat(want, (b * H + h) * dv, 1, dv, dv));
      }
    Buffer want_f32(DType::f32, {B, H, dv});
    for (int64_t i = 0; i < B * H * dv; ++i)
      want_f32.tensor().data_as<float>()[i] =
          t == DType::f32 ? want.tensor().data_as<float>()[i] : bf16_to_f32(want.tensor().data_as<uint16_t>()[i]);
    const CheckResult r = compare_bitwise(l.got(), want_f32);
    EXPECT_TRUE(r.pass) << dtype_name(t) << ": " << r.detail;
  }
}

TEST(MlaDecodeAbsorbed, ThreadCountDoesNotChangeBits) {
  Layer l(DType::bf16, 3, 200, 8, 64, 32, 256, 64, 3);
  const int before = num_threads();
  set_num_threads(1);
  l.run(0.125f);
  Buffer one = l.got();
  set_num_threads(2);
  poison(l.out_mem);
  l.run(0.125f);
  Buffer two = l.got();
  set_num_threads(before);
  EXPECT_TRUE(compare_bitwise(two, one).pass);
}

TEST(MlaDecodeAbsorbed, NanInALatentRowReachesExactlyItsSequence) {
  Layer l(DType::bf16, 3, 17, 2, 8, 4, 16, 8, 4);
  Layer::set(l.cache, (1 * (l.len + l.spare) + 6) * l.dk() + 2, NAN);  // sequence 1, row 6
  l.run(0.5f);
  Buffer g = l.got();
  for (int64_t b = 0; b < l.batch; ++b)
    for (int64_t i = 0; i < l.heads * l.v; ++i) {
      const float x = g.tensor().data_as<float>()[b * l.heads * l.v + i];
      EXPECT_EQ(std::isnan(x), b == 1) << "sequence " << b << " element " << i;
    }
}

TEST(MlaDecodeAbsorbed, EmptyCacheAndEmptyBatch) {
  Layer empty(DType::bf16, 2, 0, 2, 8, 4, 16, 8, 6);
  empty.run(0.5f);
  Buffer g = empty.got();
  for (int64_t i = 0; i < 2 * 2 * 8; ++i) EXPECT_EQ(g.tensor().data_as<float>()[i], 0.0f);
  EXPECT_TRUE(empty.padding_untouched());
  Layer none(DType::f32, 0, 5, 2, 8, 4, 16, 8, 7);
  none.run(0.5f);  // nothing to do, nothing read
}

TEST(MlaDecodeAbsorbed, RegistryChecksPassOnEveryPath) {
  testing_paths::expect_registry_checks_pass("mla-decode-absorbed");
}

TEST(MlaDecodeAbsorbed, BadInputIsAClearError) {
  Layer l(DType::bf16, 2, 9, 3, 8, 4, 16, 8, 8);
  auto run = [&](const Tensor& q, std::span<const PackedMatrix> uk, const Tensor& latent,
                 std::span<const PackedMatrix> uv, float scale, const Tensor& out) {
    return message_of([&] { mla_decode_absorbed(q, uk, latent, uv, scale, out); });
  };
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find("mla_decode_absorbed") != std::string::npos && msg.find(part) != std::string::npos;
  };
  const Tensor q = l.q(), lat = l.latent(), out = l.out();
  Buffer q2(DType::bf16, {2, 3}), q16(DType::f16, {2, 3, 12}), lat32(DType::f32, {2, 9, 20});
  Buffer out_wide(DType::bf16, {2, 3, 9}), lat_wide(DType::bf16, {2, 9, 21}), lat_b3(DType::bf16, {3, 9, 20});
  EXPECT_TRUE(has(run(q2, l.uk, lat, l.uv, 1, out), "q must be 3-d")) << run(q2, l.uk, lat, l.uv, 1, out);
  EXPECT_TRUE(has(run(q16, l.uk, lat, l.uv, 1, out), "q.dtype = f16"));
  EXPECT_TRUE(has(run(q, l.uk, lat32, l.uv, 1, out), "latent.dtype = f32"));
  EXPECT_TRUE(has(run(q, l.uk, lat_wide, l.uv, 1, out), "latent.shape = [2, 9, 21]"));
  EXPECT_TRUE(has(run(q, l.uk, lat_b3, l.uv, 1, out), "expected [2, L, 20]"));
  EXPECT_TRUE(has(run(q, l.uk, lat, l.uv, 1, out_wide), "out.shape = [2, 3, 9]"));
  EXPECT_TRUE(has(run(q, std::span(l.uk).first(2), lat, l.uv, 1, out), "w_uk holds 2 packed matrices"));
  EXPECT_TRUE(has(run(q, l.uk, lat, std::span(l.uv).first(1), 1, out), "w_uv holds 1 packed matrices"));
  // Packs of the wrong widths or dtype.
  Buffer other(DType::bf16, {20, 13});
  std::vector<PackedMatrix> wrong_k;
  for (int i = 0; i < 3; ++i) wrong_k.push_back(pack_b(other, Layout::nt));
  EXPECT_TRUE(has(run(q, wrong_k, lat, l.uv, 1, out), "w_uk has k = 13"));
  Buffer w32(DType::f32, {20, 12});
  std::vector<PackedMatrix> wrong_t;
  for (int i = 0; i < 3; ++i) wrong_t.push_back(pack_b(w32, Layout::nt));
  EXPECT_TRUE(has(run(q, wrong_t, lat, l.uv, 1, out), "w_uk[0].dtype = f32"));
  std::vector<PackedMatrix> mixed;
  mixed.push_back(pack_b(l.w_uk.tensor().slice(0, 0, 1).reshape({20, 12}), Layout::nt));
  mixed.push_back(pack_b(other, Layout::nt));
  mixed.push_back(pack_b(other, Layout::nt));
  EXPECT_TRUE(has(run(q, mixed, lat, l.uv, 1, out), "w_uk[1] is k = 13"));
  Buffer uv_wide(DType::bf16, {8, 21});
  std::vector<PackedMatrix> too_wide;
  for (int i = 0; i < 3; ++i) too_wide.push_back(pack_b(uv_wide, Layout::nt));
  EXPECT_TRUE(has(run(q, l.uk, lat, too_wide, 1, out), "w_uv has k = 21"));
  // Strided last dimension, a non-finite scale, an output over an input.
  const int64_t shape[3] = {2, 3, 12}, strides[3] = {0, 0, 2};
  Tensor q_strided(l.q_mem.data(), DType::bf16, shape, strides);
  EXPECT_TRUE(has(run(q_strided, l.uk, lat, l.uv, 1, out), "q rows must be dense"));
  EXPECT_TRUE(has(run(q, l.uk, lat, l.uv, NAN, out), "softmax_scale"));
  Tensor out_on_cache(l.cache.data(), DType::bf16, {2, 3, 8});
  EXPECT_TRUE(has(run(q, l.uk, lat, l.uv, 1, out_on_cache), "overlap"));
}

}  // namespace
}  // namespace sol
