// Ring attention with every K/V shard read in place (RingAttentionOptions::kv_window, one node).
//
// Each rank packs its K/V shard (k then v) into its region of the caller's comm::Window and
// fences; from then on a step's "shard of rank src" is src's region itself, so no bytes travel
// and nothing has to be hidden behind compute. The steps and blocks are the ring's (same
// order, whole blocks: with nothing in flight there is nothing to poll between pieces). A
// closing fence keeps every rank from repacking its region (the next call) while a peer still
// reads it. Backward: dk/dv shares for every owner are summed in f32 here and delivered with
// one reduce_scatter, instead of accumulators passed around the ring.
#include <cstring>
#include <limits>
#include <vector>

#include "cp/ring_plan.h"
#include "cp/variants.h"
#include "sol/attention.h"
#include "sol/error.h"

namespace sol::cp::detail {

namespace {

// The window must be over this group and hold a K/V shard in every region; every rank sees
// every region's size, so a bad window fails on every rank alike, before any fence.
void check_window(const char* op, const comm::Window& w, const comm::Group& group, size_t kv_bytes) {
  check(&w.group().state() == &group.state(), op, "kv_window was built over another group");
  for (int r = 0; r < group.size(); ++r)
    check(w.bytes(r) >= kv_bytes, op, "kv_window holds ", w.bytes(r), " bytes for rank ", r, " but a K/V shard needs ",
          kv_bytes);
}

void publish_shard(const comm::Window& w, const Tensor& k, const Tensor& v) {
  std::memcpy(w.local(), k.data(), size_t(k.nbytes()));
  std::memcpy(w.local() + k.nbytes(), v.data(), size_t(v.nbytes()));
  w.fence();
}

}  // namespace

void ring_forward_in_place(const Forward& t, const ShardDims& d, const comm::Group& group,
                           const RingAttentionOptions& opt) {
  const comm::Window& w = *opt.kv_window;
  const int n = group.size(), me = group.rank();
  const int64_t k_bytes = t.k.nbytes();
  check_window("ring_attention", w, group, size_t(k_bytes + t.v.nbytes()));
  timed(opt.stats, kComm, [&] { publish_shard(w, t.k, t.v); });
  Buffer o_acc(DType::f32, {d.B, d.S2, d.H, d.Dv}), lse_acc(DType::f32, {d.B, d.H, d.S2});
  Buffer o_part(d.dtype, {d.B, d.S2, d.H, d.Dv}), lse_part(DType::f32, {d.B, d.H, d.S2});
  std::memset(o_acc.data(), 0, o_acc.bytes());
  std::fill_n(lse_acc.tensor().data_as<float>(), d.B * d.H * d.S2, -std::numeric_limits<float>::infinity());
  for (int step = 0; step < n; ++step) {
    const int src = ((me - step) % n + n) % n;
    const Tensor k_src(w.peer(src), d.dtype, t.k.shape()), v_src(w.peer(src) + k_bytes, d.dtype, t.v.shape());
    for (const RingBlock& blk : ring_blocks(me, src, d.C, opt.causal)) {
      const int64_t rows = blk.q1 - blk.q0;
      const Tensor o_rows(o_part.data(), d.dtype, {d.B, rows, d.H, d.Dv});
      const Tensor lse_rows(lse_part.data(), DType::f32, {d.B, d.H, rows});
      timed(opt.stats, kCompute, [&] {
        flash_attention(t.q.slice(1, blk.q0, blk.q1), k_src.slice(1, blk.k0, blk.k1), v_src.slice(1, blk.k0, blk.k1),
                        o_rows, lse_rows, block_options(opt, blk.causal));
        merge_partial(o_acc.tensor().data_as<float>(), lse_acc.tensor().data_as<float>(), o_rows,
                      lse_rows.data_as<float>(), d, blk.q0);
      });
    }
  }
  timed(opt.stats, kComm, [&] { w.fence(); });
  timed(opt.stats, kCompute, [&] {
    store_f32(o_acc.tensor().data_as<float>(), t.o);
    if (d.has_lse) std::memcpy(t.lse.data(), lse_acc.data(), lse_acc.bytes());
  });
}

void ring_backward_in_place(const Backward& t, const ShardDims& d, const comm::Group& group,
                            const RingAttentionOptions& opt) {
  const comm::Window& w = *opt.kv_window;
  const int n = group.size(), me = group.rank();
  const int64_t k_bytes = t.k.nbytes(), k_numel = t.k.numel(), kv_numel = k_numel + t.v.numel();
  check_window("ring_attention_backward", w, group, size_t(k_bytes + t.v.nbytes()));
  timed(opt.stats, kComm, [&] { publish_shard(w, t.k, t.v); });
  // Block r: this rank's share of dk then dv of rank r's shard, f32.
  Buffer dkv(DType::f32, {kv_numel * n}), mine(DType::f32, {kv_numel});
  Buffer dq_acc(DType::f32, {d.B, d.S2, d.H, d.D});
  std::memset(dkv.data(), 0, dkv.bytes());
  std::memset(dq_acc.data(), 0, dq_acc.bytes());
  Buffer dq_part(d.dtype, {d.B, d.S2, d.H, d.D}), dk_part(d.dtype, {d.B, d.S2, d.Hkv, d.D}),
      dv_part(d.dtype, {d.B, d.S2, d.Hkv, d.Dv});
  for (int step = 0; step < n; ++step) {
    const int src = ((me - step) % n + n) % n;
    const Tensor k_src(w.peer(src), d.dtype, t.k.shape()), v_src(w.peer(src) + k_bytes, d.dtype, t.v.shape());
    float* acc = dkv.tensor().data_as<float>() + kv_numel * src;
    for (const RingBlock& blk : ring_blocks(me, src, d.C, opt.causal)) {
      timed(opt.stats, kCompute, [&] {
        const BlockGrads g = block_backward(t, d, k_src, v_src, blk, opt, dq_part, dk_part, dv_part);
        accumulate_rows(dq_acc.tensor().data_as<float>(), d.S2, blk.q0, g.dq);
        accumulate_rows(acc, d.S2, blk.k0, g.dk);
        accumulate_rows(acc + k_numel, d.S2, blk.k0, g.dv);
      });
    }
  }
  timed(opt.stats, kComm, [&] {
    w.fence();
    group.reduce_scatter(dkv, mine);
  });
  timed(opt.stats, kCompute, [&] {
    store_f32(dq_acc.tensor().data_as<float>(), t.dq);
    store_f32(mine.tensor().data_as<float>(), t.dk);
    store_f32(mine.tensor().data_as<float>() + k_numel, t.dv);
  });
}

}  // namespace sol::cp::detail
