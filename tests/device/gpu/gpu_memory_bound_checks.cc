// rope, softmax, moe_routing, moe_permute/unpermute and embedding on device tensors against the
// CPU path on the same random inputs: poisoned outputs, odd shapes (1, primes, rows that are not
// whole vectors, misaligned views that take the element path), NaN and infinities. rope,
// routing, permute/unpermute and embedding must give the CPU's bits (NaN compared as NaN: the
// device's NaN has no payload); softmax, whose sum order differs, within f32 rounding.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "gpu_test.h"
#include "ops/common/fill.h"
#include "sol/device.h"
#include "sol/embedding.h"
#include "sol/error.h"
#include "sol/moe_permute.h"
#include "sol/rope.h"
#include "sol/routing.h"
#include "sol/softmax.h"

namespace sol {

namespace {

const Device kDev = Device::cuda(0);

bool small_only() { return std::getenv("SOL_GPU_TEST_SMALL") != nullptr; }

std::vector<int64_t> shape_of(const Tensor& t) { return std::vector<int64_t>(t.shape().begin(), t.shape().end()); }

// A device copy of a contiguous host tensor, `pad` elements in front (pad > 0: a misaligned view).
struct OnDevice {
  DeviceBuffer buffer;
  Tensor view;
};
OnDevice upload(const Tensor& host, int64_t pad = 0) {
  OnDevice d{DeviceBuffer(kDev, host.dtype(), {host.numel() + pad}), {}};
  d.view = Tensor(static_cast<char*>(d.buffer.device_data()) + pad * int64_t(dtype_size(host.dtype())), host.dtype(),
                  shape_of(host))
               .on(kDev);
  transfer(host, d.view);
  return d;
}
// A poisoned (0xFF bytes) device tensor of `like`'s dtype and shape.
OnDevice poisoned(const Tensor& like, int64_t pad = 0) {
  Buffer p(like.dtype(), std::span<const int64_t>(like.shape().begin(), like.shape().end()));
  std::memset(p.data(), 0xFF, p.bytes());
  return upload(p.tensor(), pad);
}
Buffer download(const Tensor& dev) {
  Buffer h(dev.dtype(), std::span<const int64_t>(dev.shape().begin(), dev.shape().end()));
  transfer(dev, h.tensor());
  return h;
}

bool is_nan(const uint8_t* p, DType t) {
  if (t == DType::f32) {
    uint32_t b;
    std::memcpy(&b, p, 4);
    return (b & 0x7fffffffu) > 0x7f800000u;
  }
  if (t == DType::bf16) {
    uint16_t b;
    std::memcpy(&b, p, 2);
    return (b & 0x7fffu) > 0x7f80u;
  }
  return false;
}

// Elements whose bytes differ (float NaNs equal whatever their payload).
int64_t differing(const Tensor& want, const Tensor& got, int64_t* first) {
  const size_t es = dtype_size(want.dtype());
  const auto* a = static_cast<const uint8_t*>(want.data());
  const auto* b = static_cast<const uint8_t*>(got.data());
  int64_t n = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const uint8_t *x = a + size_t(i) * es, *y = b + size_t(i) * es;
    if (std::memcmp(x, y, es) != 0 && !(is_nan(x, want.dtype()) && is_nan(y, want.dtype())) && n++ == 0) *first = i;
  }
  return n;
}

void expect_same(const char* what, const Tensor& want, const Tensor& got) {
  int64_t first = -1;
  const int64_t n = differing(want, got, &first);
  SOL_EXPECT(n == 0, what, ": ", n, " of ", want.numel(), " elements differ from the CPU path, first at ", first);
}

void check_rope(DType dt, RopeLayout layout, bool yarn, int64_t tokens, int64_t heads, int64_t head_dim, int64_t offset,
                int64_t pad) {
  RopeConfig c = yarn ? deepseek_v3_rope() : RopeConfig{};
  c.layout = layout;
  const RopeTable table(c, 4099);
  Buffer x(dt, {tokens, heads, head_dim}), pos(DType::i32, {tokens});
  fill_random_with_specials(x.tensor(), uint64_t(tokens * 31 + heads), 29);
  std::mt19937 rng{uint32_t(tokens)};
  for (int64_t t = 0; t < tokens; ++t) pos.tensor().data_as<int32_t>()[t] = int32_t(rng() % 4099);
  OnDevice dx = upload(x.tensor(), pad), dp = upload(pos.tensor());
  rope(x.tensor(), pos.tensor(), table, offset);
  rope(dx.view, dp.view, table, offset);
  const Buffer got = download(dx.view);
  expect_same("rope", x.tensor(), got.tensor());
}

}  // namespace

SOL_GPU_TEST(rope_matches_cpu_bit_for_bit) {
  for (DType dt : {DType::f32, DType::bf16})
    for (RopeLayout layout : {RopeLayout::interleaved, RopeLayout::half})
      for (bool yarn : {false, true}) {
        check_rope(dt, layout, yarn, 1, 1, 64, 0, 0);
        check_rope(dt, layout, yarn, 7, 3, 192, 128, 0);  // MLA: the rope slice after 128 nope dims
        check_rope(dt, layout, yarn, 131, 16, 64, 0, 0);
        check_rope(dt, layout, yarn, 33, 112, 64, 0, 0);  // DeepSeek-V3's heads: a thread's last batch part-full
        check_rope(dt, layout, yarn, 13, 5, 70, 3, 1);  // misaligned: the pair-per-thread path
        if (!small_only()) check_rope(dt, layout, yarn, 4099, 128, 64, 0, 0);
      }
}

namespace {

void check_softmax(DType in, DType out, int64_t rows, int64_t n, int64_t pad, bool in_place) {
  Buffer x(in, {rows, n});
  fill_random_with_specials(x.tensor(), uint64_t(rows * 7 + n), 97);
  if (n > 3) {  // masked entries, and whole rows of NaN and +inf
    for (int64_t r = 0; r < rows; ++r) store_from_double(x.data(), in, size_t(r * n + 1), -INFINITY);
  }
  Buffer want(out, {rows, n});
  softmax(x.tensor(), want.tensor());
  OnDevice dx = upload(x.tensor(), pad);
  OnDevice dy = in_place ? OnDevice{} : poisoned(want.tensor(), pad);
  const Tensor& y = in_place ? dx.view : dy.view;
  softmax(dx.view, y);
  const Buffer got = download(y);
  double err = 0, norm = 0;
  int64_t nan_mismatch = 0, mask_wrong = 0;
  for (int64_t i = 0; i < rows * n; ++i) {
    const double a = load_as_double(want.data(), out, size_t(i)), b = load_as_double(got.data(), out, size_t(i));
    if (std::isnan(a) || std::isnan(b)) {
      nan_mismatch += std::isnan(a) != std::isnan(b);
      continue;
    }
    if (n > 3 && i % n == 1 && b != 0.0) ++mask_wrong;
    err += (a - b) * (a - b);
    norm += a * a;
  }
  const double rel = norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
  // f32 outputs: rounding in the exponential and the sum (the CPU's bf16-input rows use a
  // cheaper exponential of their own); bf16 outputs: a last-place difference on a few elements.
  const double tol = out == DType::bf16 ? 4e-3 : in == DType::bf16 ? 1e-5 : 2e-6;
  SOL_EXPECT(nan_mismatch == 0 && mask_wrong == 0 && rel <= tol, dtype_name(in), " -> ", dtype_name(out), " ", rows,
             "x", n, " pad ", pad, in_place ? " in place" : "", ": rel err ", rel, " (tol ", tol, "), ", nan_mismatch,
             " NaN mismatches, ", mask_wrong, " masked entries not 0");
}

}  // namespace

SOL_GPU_TEST(softmax_matches_cpu_within_f32_rounding) {
  for (DType in : {DType::f32, DType::bf16})
    for (DType out : {DType::f32, DType::bf16})
      for (int64_t n : {1, 7, 8, 256, 1000, 7168, 8192, 8200}) {  // 8200: vectors, too long for registers
        check_softmax(in, out, 1, n, 0, false);
        check_softmax(in, out, 37, n, 0, false);
        check_softmax(in, out, 5, n, 1, false);  // misaligned: the element path
        if (in == out) check_softmax(in, out, 11, n, 0, true);
        if (!small_only() && n == 7168) check_softmax(in, out, 4096, n, 0, false);
      }
}

namespace {

void check_routing(DType dt, DType idx_t, int64_t tokens, int64_t e, int64_t groups, int64_t topk_group, int64_t k,
                   int kind, int64_t pad) {
  Buffer logits(dt, {tokens, e}), bias(DType::f32, {e});
  fill_random(logits.tensor(), uint64_t(tokens + e * 3 + kind), 3.0);
  fill_random(bias.tensor(), uint64_t(e), 0.1);
  std::mt19937 rng{uint32_t(kind * 1000 + e)};
  for (int64_t i = 0; i < tokens * e; ++i) {
    if (kind == 1) store_from_double(logits.data(), dt, size_t(i), double(int(rng() % 5) - 2));  // ties
    if (kind == 2 && rng() % 13 == 0) store_from_double(logits.data(), dt, size_t(i), NAN);
    if (kind == 2 && rng() % 19 == 0) store_from_double(logits.data(), dt, size_t(i), rng() % 2 ? INFINITY : -INFINITY);
  }
  if (kind == 1)
    for (int64_t i = 0; i < e; ++i) bias.tensor().data_as<float>()[i] = 0.125f * float(i % 3);
  RoutingOptions o;
  o.top_k = k, o.n_group = groups, o.topk_group = topk_group, o.scaling = 2.5f;
  Buffer idx(idx_t, {tokens, k}), w(DType::f32, {tokens, k});
  o.correction_bias = &bias.tensor();
  moe_routing(logits.tensor(), idx.tensor(), w.tensor(), o);
  OnDevice dl = upload(logits.tensor(), pad), db = upload(bias.tensor()), di = poisoned(idx.tensor()),
           dw = poisoned(w.tensor());
  o.correction_bias = &db.view;
  moe_routing(dl.view, di.view, dw.view, o);
  const Buffer gi = download(di.view), gw = download(dw.view);
  expect_same("moe_routing experts", idx.tensor(), gi.tensor());
  expect_same("moe_routing weights", w.tensor(), gw.tensor());
}

}  // namespace

SOL_GPU_TEST(routing_matches_cpu_bit_for_bit) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int kind = 0; kind < 3; ++kind) {
      for (int64_t tokens : {1, 5, 97}) check_routing(dt, DType::i32, tokens, 256, 8, 4, 8, kind, 0);
      check_routing(dt, DType::i64, 33, 256, 8, 4, 8, kind, 0);
      check_routing(dt, DType::i32, 33, 256, 8, 4, 8, kind, 1);  // misaligned logits: element loads
      check_routing(dt, DType::i32, 17, 64, 4, 2, 6, kind, 0);
      check_routing(dt, DType::i32, 17, 96, 3, 2, 5, kind, 0);  // 3 experts per lane of 4: padded slots
      check_routing(dt, DType::i32, 17, 160, 32, 32, 32, kind, 0);
      check_routing(dt, DType::i32, 17, 7, 1, 1, 3, kind, 0);
      if (!small_only()) check_routing(dt, DType::i32, 4099, 256, 8, 4, 8, kind, 0);
    }
}

namespace {

void check_moe(DType dt, DType out_t, int64_t tokens, int64_t k, int64_t experts, int64_t hidden, int64_t alignment,
               int64_t pad) {
  Buffer idx(DType::i32, {tokens, k}), x(dt, {tokens, hidden}), w(DType::f32, {tokens, k});
  std::mt19937 rng{uint32_t(tokens * 7 + hidden)};
  for (int64_t i = 0; i < tokens * k; ++i)
    idx.tensor().data_as<int32_t>()[i] = rng() % 9 == 0 ? -1 : int32_t(rng() % uint32_t(experts));
  fill_random_with_specials(x.tensor(), uint64_t(hidden), 61);
  fill_random(w.tensor(), 5, 1.0);
  const int64_t rows = moe_permuted_rows(idx.tensor(), experts, alignment);
  Buffer perm(dt, {rows, hidden}), layout(DType::i32, {rows}), row_of(DType::i32, {tokens, k}),
      out(out_t, {tokens, hidden});
  moe_permute(x.tensor(), idx.tensor(), experts, alignment, perm.tensor(), layout.tensor(), row_of.tensor());
  moe_unpermute(perm.tensor(), row_of.tensor(), w.tensor(), out.tensor());
  OnDevice di = upload(idx.tensor()), dx = upload(x.tensor(), pad), dw = upload(w.tensor());
  SOL_EXPECT(moe_permuted_rows(di.view, experts, alignment) == rows, "moe_permuted_rows of device routing");
  OnDevice dperm = poisoned(perm.tensor(), pad), dlayout = poisoned(layout.tensor()), drow = poisoned(row_of.tensor()),
           dout = poisoned(out.tensor(), pad);
  moe_permute(dx.view, di.view, experts, alignment, dperm.view, dlayout.view, drow.view);
  moe_unpermute(dperm.view, drow.view, dw.view, dout.view);
  expect_same("moe_permute x_perm", perm.tensor(), download(dperm.view).tensor());
  expect_same("moe_permute grouped_layout", layout.tensor(), download(dlayout.view).tensor());
  expect_same("moe_permute row_of", row_of.tensor(), download(drow.view).tensor());
  expect_same("moe_unpermute", out.tensor(), download(dout.view).tensor());
}

}  // namespace

SOL_GPU_TEST(moe_permute_unpermute_match_cpu_bit_for_bit) {
  for (DType dt : {DType::f32, DType::bf16})
    for (DType out : {DType::f32, DType::bf16}) {
      check_moe(dt, out, 1, 1, 1, 8, 1, 0);
      check_moe(dt, out, 37, 8, 16, 7168, 128, 0);
      check_moe(dt, out, 13, 3, 5, 7, 4, 0);     // rows of 7 elements: the element path
      check_moe(dt, out, 29, 6, 11, 256, 1, 1);  // misaligned views
      check_moe(dt, out, 19, 10, 32, 64, 8, 0);  // k past one batch of unpermute's row loads
      if (!small_only()) check_moe(dt, out, 4096, 8, 256, 7168, 128, 0);
    }
}

SOL_GPU_TEST(embedding_matches_cpu_bit_for_bit) {
  for (DType dt : {DType::f32, DType::bf16, DType::f8e4m3})
    for (int64_t hidden : {1, 7, 8, 4104, 7168})  // 4104 f32: 1026 vectors, past one 4-per-thread batch
      for (int64_t pad : {0, 1}) {
        const int64_t vocab = 1009, tokens = hidden == 7168 && !small_only() ? 4096 : 131;
        Buffer table(dt, {vocab, hidden}), ids(DType::i32, {tokens}), out(dt, {tokens, hidden});
        fill_random(table.tensor(), uint64_t(hidden), 4.0);
        std::mt19937 rng(7);
        for (int64_t t = 0; t < tokens; ++t) ids.tensor().data_as<int32_t>()[t] = int32_t(rng() % vocab);
        embedding(table.tensor(), ids.tensor(), out.tensor());
        OnDevice dt_ = upload(table.tensor(), pad), di = upload(ids.tensor()), dout = poisoned(out.tensor());
        embedding(dt_.view, di.view, dout.view);
        expect_same("embedding", out.tensor(), download(dout.view).tensor());
      }
}

SOL_GPU_TEST(memory_bound_ops_reject_bad_device_input) {
  const auto throws = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error&) {
      return true;
    }
    return false;
  };
  // An id outside the vocabulary is a sol::Error from the call (checked on the host while the
  // gather runs) and the gather never follows it: its row keeps the poison, the others are the
  // table's rows.
  Buffer table(DType::f32, {10, 8}), ids(DType::i32, {3});
  fill_random(table.tensor(), 1);
  ids.tensor().data_as<int32_t>()[0] = 2, ids.tensor().data_as<int32_t>()[1] = 10, ids.tensor().data_as<int32_t>()[2] = 0;
  OnDevice dt_ = upload(table.tensor()), di = upload(ids.tensor());
  Buffer like(DType::f32, {3, 8});
  OnDevice dout = poisoned(like.tensor());
  SOL_EXPECT(throws([&] { embedding(dt_.view, di.view, dout.view); }), "id 10 of a 10-row table");
  const Buffer after = download(dout.view);
  const auto* got = static_cast<const uint8_t*>(after.data());
  const auto* rows = static_cast<const uint8_t*>(table.data());
  bool poison_kept = true;
  for (size_t i = 32; i < 64; ++i) poison_kept &= got[i] == 0xFF;
  SOL_EXPECT(poison_kept, "embedding wrote the row of an out-of-range id");
  SOL_EXPECT(std::memcmp(got, rows + 2 * 32, 32) == 0 && std::memcmp(got + 64, rows, 32) == 0,
             "embedding's in-range rows beside an out-of-range id");
  // Positions outside the table: that token is left as it was.
  const RopeTable rt(RopeConfig{}, 16);
  Buffer x(DType::f32, {2, 1, 64}), pos(DType::i32, {2});
  fill_random(x.tensor(), 2);
  pos.tensor().data_as<int32_t>()[0] = 3, pos.tensor().data_as<int32_t>()[1] = 16;
  OnDevice dx = upload(x.tensor()), dp = upload(pos.tensor());
  SOL_EXPECT(throws([&] { rope(dx.view, dp.view, rt, 0); }), "position 16 of a 16-position table");
  const Buffer x_after = download(dx.view);
  SOL_EXPECT(std::memcmp(static_cast<const char*>(x_after.data()) + 256, static_cast<const char*>(x.data()) + 256,
                         256) == 0,
             "rope rotated a token whose position is outside the table");
  // Mixed devices.
  SOL_EXPECT(throws([&] { rope(dx.view, pos.tensor(), rt, 0); }), "rope x on cuda, positions on cpu");
  SOL_EXPECT(throws([&] { embedding(table.tensor(), di.view, dout.view); }), "embedding table on cpu");
  // row_of outside y_perm.
  Buffer y(DType::f32, {4, 8}), ro(DType::i32, {1, 2}), w(DType::f32, {1, 2}), o(DType::f32, {1, 8});
  ro.tensor().data_as<int32_t>()[0] = 0, ro.tensor().data_as<int32_t>()[1] = 4;
  OnDevice dy = upload(y.tensor()), dro = upload(ro.tensor()), dw = upload(w.tensor()), dov = upload(o.tensor());
  SOL_EXPECT(throws([&] { moe_unpermute(dy.view, dro.view, dw.view, dov.view); }), "row_of 4 of 4 rows");
}

}  // namespace sol
